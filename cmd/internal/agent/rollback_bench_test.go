package agent_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// BenchmarkRollbackToHealthy measures, with the agent on a real API server
// with pods (kwok), the time from a commit to every package healthy for an
// upgrade of provider-aws-ec2 from v1.23.0 to v2.6.0 (its family provider
// v2.6.0, every kind activated as Crossplane's default policy "*" does),
// then for the rollback commit that restores v1.23.0's declaration and
// lock, as `lockstep rollback` writes it. The upgrade pulls v2.6.0 and
// writes its 208 definitions; the rollback finds v1.23.0 in the agent's
// cache and its revision still in the cluster, Inactive, and reactivates
// it: it reports upgrade-s and rollback-s, and fails when the rollback
// pulled a blob. Each iteration starts a control plane; run it once:
//
//	LOCKSTEP_TESTDATA=../shared/testdata go test ./cmd/internal/agent -run '^$' -bench RollbackToHealthy -benchtime 1x
func BenchmarkRollbackToHealthy(b *testing.B) {
	td := os.Getenv("LOCKSTEP_TESTDATA")
	if td == "" {
		b.Skip("LOCKSTEP_TESTDATA is unset: the upstream packages come from $LOCKSTEP_TESTDATA/packages")
	}
	ec2 := func(version string) string {
		return "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-aws-ec2\nspec:\n  package: xpkg.upbound.io/upbound/provider-aws-ec2:" + version + "\n"
	}
	var upgrade, rollback time.Duration
	for b.Loop() {
		b.StopTimer()
		f := newEmptyFixture(b, "rollback-bench")
		for folder, repoTag := range map[string]string{
			"provider-aws-ec2-v1.23.0":   "upbound/provider-aws-ec2:v1.23.0",
			"provider-aws-ec2-v2.6.0":    "upbound/provider-aws-ec2:v2.6.0",
			"provider-family-aws-v2.6.0": "upbound/provider-family-aws:v2.6.0",
		} {
			f.pushDir(b, filepath.Join(td, "packages", folder), repoTag)
		}
		f.mirror(b, "xpkg.upbound.io/")
		f.write(b, "activation.yaml", "apiVersion: apiextensions.crossplane.io/v1alpha1\nkind: "+crossplane.GroupKindMRAP.Kind+"\nmetadata:\n  name: default\nspec:\n  activate: [\"*\"]\n")
		f.write(b, "ec2.yaml", ec2("v1.23.0"))
		f.lock(b)
		oldLock, err := os.ReadFile(filepath.Join(f.dir, "lockstep.lock"))
		if err != nil {
			b.Fatal(err)
		}
		f.commit(b, "provider-aws-ec2 v1.23.0")
		r := f.reconciler(b)
		reconcileUntilHealthy(b, r)

		f.write(b, "ec2.yaml", ec2("v2.6.0"))
		f.lock(b)
		f.commit(b, "provider-aws-ec2 v2.6.0")
		b.StartTimer()
		start := time.Now()
		reconcileUntilHealthy(b, r)
		upgrade += time.Since(start)
		b.StopTimer()

		f.write(b, "ec2.yaml", ec2("v1.23.0"))
		f.write(b, "lockstep.lock", string(oldLock))
		f.commit(b, "roll back to provider-aws-ec2 v1.23.0")
		f.reg.Reset()
		b.StartTimer()
		start = time.Now()
		out := reconcileUntilHealthy(b, r)
		rollback += time.Since(start)
		b.StopTimer()
		if n := f.reg.Count("GET", "/blobs/"); n != 0 {
			b.Errorf("the rollback pulled %d blobs; v1.23.0 is in the agent's cache", n)
		}
		for _, p := range out.Packages {
			if p.Name == "provider-aws-ec2" && p.Version != "v1.23.0" {
				b.Errorf("after the rollback provider-aws-ec2 is at %s, want v1.23.0", p.Version)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(upgrade.Seconds()/float64(b.N), "upgrade-s")
	b.ReportMetric(rollback.Seconds()/float64(b.N), "rollback-s")
}
