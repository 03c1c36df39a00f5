package health_test

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/rendered"
)

// renderDemo renders the example provider-demo v0.1.0, with MRDs for a
// Crossplane version that has them.
func renderDemo(tb testing.TB, crossplaneVersion string) *render.PackageOutput {
	tb.Helper()
	return rendered.ProviderDemo(tb, "v0.1.0", "health", crossplaneVersion)
}

// names returns the "Kind namespace/name" of each of t's Objects.
func names(t health.Target) []string {
	var out []string
	for _, r := range t.Objects {
		out = append(out, r.GroupVersionKind.Kind+" "+r.Namespace+"/"+r.Name)
	}
	return out
}

// TestTargetOf: a rendered package's health is decided by its record,
// its current revision and the runtime Deployment; a paused package's by
// what is installed.
func TestTargetOf(t *testing.T) {
	po := renderDemo(t, "v2.3.4")
	rev := po.Revision.Name
	type summary struct {
		Version, Digest, Revision string
		ActiveMRDs                int
		Objects                   []string
	}
	cases := map[string]struct {
		reason string
		got    health.Target
		want   summary
	}{
		"Rendered": {
			reason: "the lock's version and digest, the revision render names, its Active MRDs and the runtime Deployment",
			got:    health.TargetOf(po),
			want: summary{Version: "v0.1.0", Digest: po.Digest, Revision: rev, ActiveMRDs: 2,
				Objects: []string{"Provider /provider-demo", "ProviderRevision /" + rev, "Deployment crossplane-system/" + rev}},
		},
		"KeptAsInstalled": {
			reason: "a paused package is judged by the installed version and its Active revision, whose Deployment has the revision's name",
			got:    health.KeptTargetOf(po, "v0.0.9", "sha256:installed", "provider-demo-installed"),
			want: summary{Version: "v0.0.9", Digest: "sha256:installed", Revision: "provider-demo-installed",
				Objects: []string{"Provider /provider-demo", "ProviderRevision /provider-demo-installed", "Deployment crossplane-system/provider-demo-installed"}},
		},
		"KeptWithoutActiveRevision": {
			reason: "a paused package with no Active revision is judged by its record alone",
			got:    health.KeptTargetOf(po, "v0.0.9", "sha256:installed", ""),
			want:   summary{Version: "v0.0.9", Digest: "sha256:installed", Objects: []string{"Provider /provider-demo"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := summary{Version: tc.got.Version, Digest: tc.got.Digest, Revision: tc.got.Revision, ActiveMRDs: tc.got.ActiveMRDs, Objects: names(tc.got)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nTarget (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRuntimeActive: the RuntimeActive condition of a revision with MRDs.
func TestRuntimeActive(t *testing.T) {
	withMRDs := renderDemo(t, "v2.3.4").Revision
	awaiting := *withMRDs
	awaiting.AwaitingActivation, awaiting.ManagedCRDs = true, nil
	awaiting.MRDs = append([]render.MRDActivation(nil), withMRDs.MRDs...)
	for i := range awaiting.MRDs {
		awaiting.MRDs[i].Active = false
	}
	cond := func(c *xpv2.Condition) string {
		if c == nil {
			return "none"
		}
		return string(c.Type) + " " + string(c.Status) + " " + string(c.Reason)
	}
	cases := map[string]struct {
		reason string
		rev    *render.RevisionOutput
		want   string
	}{
		"Active":      {reason: "a provider with an Active MRD runs", rev: withMRDs, want: "RuntimeActive True " + string(health.ReasonMRDsActive)},
		"Awaiting":    {reason: "a safe-start provider without an Active MRD waits at 0 replicas", rev: &awaiting, want: "RuntimeActive False " + string(crossplane.ReasonAwaitingActivation)},
		"WithoutMRDs": {reason: "a revision rendered without MRDs has no such condition", rev: renderDemo(t, "").Revision, want: "none"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := cond(health.RuntimeActive(tc.rev)); got != tc.want {
				t.Errorf("%s\nRuntimeActive = %s, want %s", tc.reason, got, tc.want)
			}
		})
	}
}
