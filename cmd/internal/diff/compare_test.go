package diff

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/test/testdata"
)

// example returns the folder of one of lockstep's example packages, which
// the tests below use so they run without $LOCKSTEP_TESTDATA.
func example(tb testing.TB, pkg, version string) string {
	tb.Helper()
	return testdata.Examples(tb, "packages", pkg, version)
}

const examples = "lockstep.example/lockstep-examples/"

// exampleSpecs are the example configuration at version with its two
// dependencies at depVersion.
func exampleSpecs(t *testing.T, version, depVersion string) []spec {
	return []spec{
		{kind: crossplane.KindConfiguration, name: "configuration-demo", source: examples + "configuration-demo", tag: version, dir: example(t, "configuration-demo", version)},
		{kind: crossplane.KindProvider, source: examples + "provider-demo", tag: depVersion, dir: example(t, "provider-demo", depVersion)},
		{kind: crossplane.KindFunction, source: examples + "function-demo", tag: depVersion, dir: example(t, "function-demo", depVersion)},
	}
}

// TestCompareExamples upgrades the example configuration and its
// dependencies, removes a provider and adds an ImageConfig, and checks each
// part of the report.
func TestCompareExamples(t *testing.T) {
	extra := spec{kind: crossplane.KindProvider, name: "provider-extra", source: "xpkg.example.org/acme/provider-extra", tag: "v1.0.0", dir: example(t, "provider-demo", "v0.1.0")}
	base := testState(t, "base", append(exampleSpecs(t, "v0.1.0", "v0.1.0"), extra), nil)
	head := testState(t, "head", exampleSpecs(t, "v0.2.0", "v0.2.0"), map[string]string{"mirror.yaml": `apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: mirror
spec:
  matchImages:
  - prefix: lockstep.example/
  rewriteImage:
    prefix: mirror.example.org/
`})
	head.Lock.CrossplaneVersion = "v2.2.0"

	r, err := Compare(base, head, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.Upgraded != 3 || r.Summary.Removed != 1 || r.Summary.Verdict != VerdictChanges {
		t.Errorf("summary %+v: want 3 upgraded, 1 removed, changes", r.Summary)
	}
	if len(r.Lock) != 1 || r.Lock[0] != (FieldChange{Field: "crossplaneVersion", Base: "v2.1.0", Head: "v2.2.0"}) {
		t.Errorf("lock changes %+v, want crossplaneVersion v2.1.0 → v2.2.0", r.Lock)
	}
	if len(r.ImageConfigs) != 1 || r.ImageConfigs[0].Name != "mirror" || r.ImageConfigs[0].Change != ChangeAdded {
		t.Errorf("image configs %+v, want mirror added", r.ImageConfigs)
	}

	// Packages are listed Providers, Functions, Configurations.
	var order []string
	for _, p := range r.Packages {
		order = append(order, p.Name)
	}
	if want := []string{"lockstep-examples-provider-demo", "provider-extra", "lockstep-examples-function-demo", "configuration-demo"}; !slices.Equal(order, want) {
		t.Errorf("package order %v, want %v", order, want)
	}

	prov := mustPackage(t, r, "lockstep-examples-provider-demo")
	var added []string
	for _, a := range prov.Payload.Added {
		added = append(added, a.Name)
	}
	if want := []string{"topics.demo.lockstep.io", "buckets.demo.m.lockstep.io"}; !slices.Equal(added, want) {
		t.Errorf("provider-demo added CRDs %v, want %v (sorted by group)", added, want)
	}
	if prov.Runtime == nil || prov.Runtime.Image == nil || !strings.HasPrefix(prov.Runtime.Image.Head, "mirror.example.org/lockstep-examples/provider-demo@sha256:") {
		t.Errorf("provider-demo runtime %+v: want the image rewritten by the new ImageConfig", prov.Runtime)
	}
	sys := mustRole(t, prov, "ClusterRole", "crossplane:provider:<revision>:system")
	wantTopics := []ResourceGrant{
		{Group: "demo.lockstep.io", Resource: "topics", Verbs: []string{"create", "get", "list", "patch", "update", "watch"}},
		{Group: "demo.lockstep.io", Resource: "topics/status", Verbs: []string{"create", "get", "list", "patch", "update", "watch"}},
	}
	if len(sys.Rules.APIGroupsAdded) != 1 || sys.Rules.APIGroupsAdded[0].Group != "demo.m.lockstep.io" || !cmp.Equal(sys.Rules.ResourcesAdded, wantTopics) || sys.Rules.VerbsAdded != nil {
		t.Errorf("provider-demo system role %+v: want the new group demo.m.lockstep.io and topics in demo.lockstep.io", sys.Rules)
	}

	fn := mustPackage(t, r, "lockstep-examples-function-demo")
	if fn.Payload == nil || fn.Payload.Installed || !hasSchemaChange(&fn.Payload.Definitions[0], "v1alpha1", "tier", FieldAdded) {
		t.Errorf("function-demo: %+v, want the input schema's new tier field, not installed", fn.Payload)
	}
	if len(fn.Settings) != 0 {
		t.Errorf("function-demo settings %+v: declaring the capability a Function gets by default changes nothing", fn.Settings)
	}

	gone := mustPackage(t, r, "provider-extra")
	if gone.Change != Removed || gone.Payload == nil || len(gone.Payload.Removed) != 2 {
		t.Fatalf("provider-extra: %+v, want removed with its 2 CRDs", gone)
	}
	for _, d := range gone.Payload.Removed {
		if d.Action != ActionPruneCRD || d.Breaking || !strings.Contains(d.Note, "--prune-crds=unused") {
			t.Errorf("removed CRD %+v: want prune-crd under --prune-crds=unused, not breaking", d)
		}
	}
	if gone.Breaking {
		t.Errorf("removing a provider under --prune-crds=unused is reported breaking")
	}

	always, err := Compare(base, head, Options{PruneCRDs: plan.PruneAlways})
	if err != nil {
		t.Fatal(err)
	}
	if p := mustPackage(t, always, "provider-extra"); !p.Breaking || always.Summary.Breaking != 2 || always.Summary.Verdict != VerdictBreaking {
		t.Errorf("--prune-crds=always: provider-extra breaking %v, summary %+v; want its 2 CRDs deleted as breaking", p.Breaking, always.Summary)
	}
	if _, err := Compare(base, head, Options{PruneCRDs: "sometimes"}); err == nil {
		t.Errorf("an unknown --prune-crds mode is accepted")
	}
}

// TestCompareUnchanged: a state compared with itself has no changes.
func TestCompareUnchanged(t *testing.T) {
	s := testState(t, "same", exampleSpecs(t, "v0.2.0", "v0.2.0"), nil)
	r, err := Compare(s, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.Verdict != VerdictNone || len(r.Packages) != 0 || r.Summary.Unchanged != 3 || r.Failed(FailOnAny) {
		t.Errorf("self comparison: %+v, want no changes and 3 unchanged", r.Summary)
	}
}

// TestCompareFromNothing: adopting lockstep (no lock at the base) adds
// every package, with the permissions a new provider is granted.
func TestCompareFromNothing(t *testing.T) {
	empty, err := NewState(nil, StateOptions{Name: "empty"})
	if err != nil {
		t.Fatal(err)
	}
	head := testState(t, "head", exampleSpecs(t, "v0.2.0", "v0.2.0"), nil)
	r, err := Compare(empty, head, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary.Added != 3 || r.Base.Packages != 0 || r.Head.Packages != 3 {
		t.Errorf("summary %+v, sides %+v %+v: want 3 added", r.Summary, r.Base, r.Head)
	}
	p := mustPackage(t, r, "lockstep-examples-provider-demo")
	if p.Head == nil || p.Head.Declared || p.Payload == nil || len(p.Payload.Added) != 4 {
		t.Errorf("added provider-demo: %+v, want a dependency with 4 CRDs added", p)
	}
	if r.Summary.PermissionsGained == 0 {
		t.Errorf("a new provider's ClusterRoles are not counted as permissions gained")
	}
	back, err := Compare(head, empty, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if back.Summary.Removed != 3 {
		t.Errorf("removing everything: summary %+v, want 3 removed", back.Summary)
	}
}

// TestMissingFunctionWarning: a Composition that calls a function no
// Function in the head lock is named after is reported.
func TestMissingFunctionWarning(t *testing.T) {
	base := testState(t, "base", exampleSpecs(t, "v0.1.0", "v0.2.0"), nil)
	head := testState(t, "head", exampleSpecs(t, "v0.2.0", "v0.2.0")[:2], nil)
	r, err := Compare(base, head, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `Configuration configuration-demo: Composition xnetworks.platform.lockstep.io step "compose" calls function lockstep-examples-function-demo, which no Function in the head lock is named`
	if !slices.Contains(r.Warnings, want) {
		t.Errorf("warnings %q lack %q", r.Warnings, want)
	}
	if !slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.HasPrefix(w, "head: lockstep.lock is stale") }) {
		t.Errorf("warnings %q do not say the head lock misses the function dependency", r.Warnings)
	}
}

// TestPinChange classifies pin changes.
func TestPinChange(t *testing.T) {
	e := func(v, d string) *lockfile.Entry { return &lockfile.Entry{Version: v, Digest: d} }
	for _, c := range []struct {
		a, b *lockfile.Entry
		want PackageChangeType
	}{
		{e("v1.0.0", "sha256:a"), e("v1.1.0", "sha256:b"), Upgraded},
		{e("v1.10.0", "sha256:a"), e("v1.9.0", "sha256:b"), Downgraded},
		{e("v1.0.0", "sha256:a"), e("v1.0.0", "sha256:b"), Repinned},
		{e("", "sha256:a"), e("v1.0.0", "sha256:b"), Replaced},
		{e("latest", "sha256:a"), e("main", "sha256:b"), Replaced},
		{e("v1.0.0", "sha256:a"), e("v2.0.0", "sha256:a"), ""},
	} {
		if got := pinChange(c.a, c.b); got != c.want {
			t.Errorf("pinChange(%s@%s, %s@%s) = %q, want %q", c.a.Version, c.a.Digest, c.b.Version, c.b.Digest, got, c.want)
		}
	}
}

// TestCompareVerification: the lock's record of how a package's signature
// was verified is a setting; losing it (verified at base, not at head) is
// breaking, gaining it is not.
func TestCompareVerification(t *testing.T) {
	const provider = "lockstep-examples-provider-demo"
	verified := &lockfile.Verification{ImageConfig: "signed", Authority: "release-key", Signature: "sha256:" + strings.Repeat("a", 64)}
	cases := map[string]struct {
		reason       string
		base, head   *lockfile.Verification
		want         []FieldChange
		wantBreaking bool
	}{
		"Lost": {
			reason: "a package that was verified and now is not is breaking",
			base:   verified,
			want:   []FieldChange{{Field: "verification", Base: "ImageConfig signed authority release-key"}},

			wantBreaking: true,
		},
		"Gained": {
			reason: "a package now verified is a change, not a breaking one",
			head:   verified,
			want:   []FieldChange{{Field: "verification", Head: "ImageConfig signed authority release-key"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			base := testState(t, "base", exampleSpecs(t, "v0.2.0", "v0.2.0"), nil)
			head := testState(t, "head", exampleSpecs(t, "v0.2.0", "v0.2.0"), nil)
			for _, s := range []struct {
				st *State
				v  *lockfile.Verification
			}{{base, tc.base}, {head, tc.head}} {
				for i := range s.st.Lock.Packages {
					if s.st.Lock.Packages[i].Name == provider {
						s.st.Lock.Packages[i].Verification = s.v
					}
				}
			}
			r, err := Compare(base, head, Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := mustPackage(t, r, provider)
			if diff := cmp.Diff(tc.want, p.Settings); diff != "" {
				t.Errorf("%s\nsettings: -want +got:\n%s", tc.reason, diff)
			}
			if p.Breaking != tc.wantBreaking || r.Failed(FailOnBreaking) != tc.wantBreaking {
				t.Errorf("%s\nbreaking %v, --fail-on breaking fails %v, want %v", tc.reason, p.Breaking, r.Failed(FailOnBreaking), tc.wantBreaking)
			}
		})
	}
}
