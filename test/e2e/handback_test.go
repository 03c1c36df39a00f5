package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// TestHandBackOnePackage: lockstep installs provider-nop and
// function-auto-ready beside Crossplane. The Function leaves Git and
// `lockstep handback function/…` hands it to Crossplane: the next apply
// prunes nothing and keeps managing the Provider; the Function and its
// revision are no longer paused nor labelled, Crossplane's package manager
// pulls the package again through the cluster's ImageConfig and reports it
// installed and healthy, and anyone may delete the Function
// (deletion protection no longer covers it).
func TestHandBackOnePackage(t *testing.T) {
	c := newCluster(t, envtest.CrossplaneOptions{})
	c.push(t, "provider-nop-v0.4.0", "crossplane-contrib/provider-nop", "v0.4.0")
	c.push(t, "function-auto-ready-v0.7.0", "crossplane-contrib/function-auto-ready", "v0.7.0")
	c.write(t, "packages.yaml", nopAndAutoReady)
	c.lock(t, envtest.CrossplaneVersion)
	c.apply(t)
	c.settle(t)

	const fn = "crossplane-contrib-function-auto-ready"
	// Crossplane pulls the package again once it owns it: the mirror it
	// pulls through must be in the cluster (lockstep reads Git's
	// ImageConfigs for its own pulls and does not apply them).
	c.create(t, c.reg.MirrorImageConfig("xpkg.upbound.io"))
	c.write(t, "packages.yaml", strings.Split(nopAndAutoReady, "---\n")[0])
	c.lock(t, envtest.CrossplaneVersion)
	out, err := c.lockstep(t, append([]string{"handback", "function/" + fn}, c.clusterFlags()...)...)
	if err != nil || !strings.Contains(out, "Function "+fn+" handed back to Crossplane's package manager") {
		t.Fatalf("handback: %v\n%s", err, out)
	}
	out = c.apply(t)
	if strings.Contains(out, "pruned (gone from Git)") || strings.Contains(out, "Function "+fn) {
		t.Errorf("the apply after the handback touched the Function:\n%s", out)
	}
	if out := c.settle(t); len(warnings(out)) > 0 {
		t.Errorf("the apply after the handback warned:\n%s", out)
	}

	ctx := envtest.Context(t, 3*time.Minute)
	u, err := c.get(ctx, "pkg.crossplane.io/v1", "Function", "", fn)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.GetLabels()[render.LabelInstance]; ok || u.GetAnnotations()[crossplane.AnnotationPaused] != "" {
		t.Errorf("Function %s still labelled %v or paused %v", fn, u.GetLabels(), u.GetAnnotations())
	}
	revs, err := c.revisions(ctx, "FunctionRevision", fn)
	if err != nil {
		t.Fatal(err)
	}
	for n, paused := range revs {
		if paused {
			t.Errorf("FunctionRevision %s is still paused", n)
		}
	}
	c.waitInstalledByCrossplane(t, "Function", fn)
	p, err := c.get(ctx, "pkg.crossplane.io/v1", "Provider", "", "crossplane-contrib-provider-nop")
	if err != nil || p.GetLabels()[render.LabelInstance] != "lockstep" {
		t.Errorf("the Provider is no longer lockstep's: %v %v", err, p.GetLabels())
	}

	// A platform user (not lockstep) may now delete the Function, and
	// Crossplane's garbage collection removes its revision.
	as, err := c.env.ClientAs("platform-user", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	if err := as.Delete(ctx, u); err != nil {
		t.Fatalf("delete the handed-back Function as another user: %v", err)
	}
	waitFor(t, 2*time.Minute, "the Function's revision is gone", func(ctx context.Context) (bool, string) {
		revs, err := c.revisions(ctx, "FunctionRevision", fn)
		if err != nil || len(revs) > 0 {
			return false, "revisions remain"
		}
		return true, ""
	})
}
