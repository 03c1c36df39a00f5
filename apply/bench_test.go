package apply_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// BenchmarkNoOpApplyMonolith installs the provider-aws monolith (2,043
// CRDs), then measures an apply with nothing to change: its time and its
// API requests per object, which should stay below 1/50. It needs
// $LOCKSTEP_TESTDATA; run it with `go test -run '^$' -bench NoOp ./apply/`.
// The monolith stays installed until the test control plane stops (the
// benchmark function runs more than once, and later runs find it
// installed); deleting 2,043 CRDs would take longer than the benchmark.
func BenchmarkNoOpApplyMonolith(b *testing.B) {
	td := testdata(b)
	env := envtest.Shared(b)
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		b.Fatal(err)
	}
	reqs := &requests{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, r: reqs} })
	c, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		b.Fatal(err)
	}
	ns, instance := "xp-bench", "bench"
	_ = env.Client.Create(context.Background(), namespaceObject(ns))
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance, opts.WaitTimeout = ns, instance, 10*time.Minute
	m, err := apply.NewManager(c, opts, apply.WithRESTConfig(cfg))
	if err != nil {
		b.Fatal(err)
	}
	mono := build(b, pkgSpec{kind: crossplane.KindProvider, name: "provider-aws", dir: filepath.Join(td, "packages", "provider-aws-v2.6.0-monolith-allcrds"),
		source: "xpkg.upbound.io/upbound/provider-aws", tag: "v2.6.0", declared: true})
	out, err := render.Render(render.Input{Namespace: ns, Instance: instance, Packages: []render.Package{mono}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if res, err := m.Apply(ctx, out, apply.Origin{}); err != nil || res.Err() != nil {
		b.Fatalf("install: %v %v", err, res.Err())
	}
	b.Logf("install (or re-apply) of %d objects: %s", len(out.Objects()), time.Since(start))

	b.ResetTimer()
	var all, mutating int
	for i := 0; i < b.N; i++ {
		reqs.reset()
		res, err := m.Apply(ctx, out, apply.Origin{})
		if err != nil || res.Err() != nil {
			b.Fatalf("no-op apply: %v %v", err, res.Err())
		}
		a, mu := reqs.snapshot()
		all, mutating = all+len(a), mutating+len(mu)
	}
	b.StopTimer()
	objects := float64(len(out.Objects()))
	b.ReportMetric(float64(all)/float64(b.N), "requests/op")
	b.ReportMetric(float64(mutating)/float64(b.N), "mutating/op")
	b.ReportMetric(float64(all)/float64(b.N)/objects, "requests/object")
	if mutating != 0 {
		b.Errorf("the no-op apply sent %d mutating requests", mutating)
	}
}

// BenchmarkSchemaUpgrade installs provider-aws-ec2 v2.6.0 (208 CRDs),
// then measures upgrades that change every CRD's schema (a description)
// and nothing the API server serves: the kind of upgrade a patch release
// of a provider makes. Each op is one such upgrade, alternating between
// two builds; server-ms/op is the CPU the control plane's kube-apiserver
// and etcd spent per upgrade. It needs $LOCKSTEP_TESTDATA; run it with
// `go test -run '^$' -bench SchemaUpgrade -benchtime 4x ./apply/`.
func BenchmarkSchemaUpgrade(b *testing.B) {
	td := testdata(b)
	env := envtest.Shared(b)
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		b.Fatal(err)
	}
	ns, instance := "xp-schema-bench", "schema-bench"
	_ = env.Client.Create(context.Background(), namespaceObject(ns))
	opts := apply.DefaultOptions()
	opts.Namespace, opts.Instance, opts.WaitTimeout = ns, instance, 10*time.Minute
	m, err := apply.NewManager(env.Client, opts, apply.WithRESTConfig(env.Config))
	if err != nil {
		b.Fatal(err)
	}
	variant := func(n int) *render.Output {
		s := pkgSpec{kind: crossplane.KindProvider, name: "provider-aws-ec2", dir: filepath.Join(td, "packages", "provider-aws-ec2-v2.6.0"),
			source: "xpkg.upbound.io/upbound/provider-aws-ec2", tag: fmt.Sprintf("v2.6.%d", n), declared: true}
		s.edit = func(files map[string]string) {
			for name, c := range files {
				if strings.HasPrefix(name, "crds/") {
					files[name] = firstDescription.ReplaceAllString(c, fmt.Sprintf("${1}Build %d. ${2}", n))
				}
			}
		}
		out, err := render.Render(render.Input{Namespace: ns, Instance: instance, Packages: []render.Package{build(b, s)}})
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	builds := []*render.Output{variant(0), variant(1), variant(2)}
	ctx := context.Background()
	if res, err := m.Apply(ctx, builds[0], apply.Origin{}); err != nil || res.Err() != nil {
		b.Fatalf("install: %v %v", err, res.Err())
	}
	b.ResetTimer()
	cpu := envtest.ChildCPU(b)
	for i := 0; i < b.N; i++ {
		res, err := m.Apply(ctx, builds[1+i%2], apply.Origin{})
		if err != nil || res.Err() != nil {
			b.Fatalf("upgrade: %v %v", err, res.Err())
		}
	}
	b.ReportMetric(float64((envtest.ChildCPU(b)-cpu).Milliseconds())/float64(b.N), "server-ms/op")
}

// firstDescription matches the start of the text of a description at the
// indentation of a CRD version's openAPIV3Schema.description.
var firstDescription = regexp.MustCompile(`(?m)^(        description: \|-\n          )(\S)`)
