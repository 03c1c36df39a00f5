package diff

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with the current reports")

// Sources of the real packages, as their dependents name them.
const (
	upbound    = "xpkg.upbound.io/upbound/"
	contrib    = "xpkg.upbound.io/crossplane-contrib/"
	xpContrib  = "xpkg.crossplane.io/crossplane-contrib/"
	goldenSize = 60000
)

// goldenCase compares two states built from real packages.
type goldenCase struct {
	name   string
	reason string
	base   func(tb testing.TB) *State
	head   func(tb testing.TB) *State
	opts   Options
	// check asserts what the case is about, beyond the golden files.
	check func(t *testing.T, r *Report)
}

func goldenCases() []goldenCase {
	return []goldenCase{
		{
			name:   "provider-aws-ec2",
			reason: "provider-aws-ec2 v1.23.0 → v2.6.0 with its family provider: 101 → 208 CRDs, namespaced *.m groups, v1beta2 storage flips, publishConnectionDetailsTo removed, family RBAC grows.",
			base: func(t testing.TB) *State {
				return testState(t, "v1.23.0", []spec{
					{kind: "Provider", name: "provider-aws-ec2", source: upbound + "provider-aws-ec2", tag: "v1.23.0", dir: upstream(t, "provider-aws-ec2-v1.23.0")},
					{kind: "Provider", source: upbound + "provider-family-aws", tag: "v1.23.0", dir: upstream(t, "provider-family-aws-v1.23.0")},
				}, nil)
			},
			head: func(t testing.TB) *State {
				return testState(t, "v2.6.0", []spec{
					{kind: "Provider", name: "provider-aws-ec2", source: upbound + "provider-aws-ec2", tag: "v2.6.0", dir: upstream(t, "provider-aws-ec2-v2.6.0")},
					{kind: "Provider", source: upbound + "provider-family-aws", tag: "v2.6.0", dir: upstream(t, "provider-family-aws-v2.6.0")},
				}, nil)
			},
			check: func(t *testing.T, r *Report) {
				p := mustPackage(t, r, "provider-aws-ec2")
				if p.Change != Upgraded || !p.Breaking {
					t.Errorf("provider-aws-ec2: change %s breaking %v, want a breaking upgrade", p.Change, p.Breaking)
				}
				pl := p.Payload
				if n := len(pl.Added) + len(pl.Definitions) + pl.Unchanged; n != 208 || len(pl.Added)+len(pl.Removed)+len(pl.Definitions)+pl.Unchanged != 208 {
					t.Errorf("head payload accounts for %d CRDs (added %d, changed %d, unchanged %d), want 208", n, len(pl.Added), len(pl.Definitions), pl.Unchanged)
				}
				if len(pl.Definitions)+pl.Unchanged+len(pl.Removed) != 101 {
					t.Errorf("base payload accounts for %d CRDs, want 101", len(pl.Definitions)+pl.Unchanged+len(pl.Removed))
				}
				inst := mustDefinition(t, pl, "instances.ec2.aws.upbound.io")
				if inst.StorageVersion == nil || inst.StorageVersion.Base != "v1beta1" || inst.StorageVersion.Head != "v1beta2" {
					t.Errorf("instances: storage version change %+v, want v1beta1 → v1beta2", inst.StorageVersion)
				}
				if !hasSchemaChange(inst, "v1beta1", "spec.publishConnectionDetailsTo", FieldRemoved) {
					t.Errorf("instances v1beta1: spec.publishConnectionDetailsTo is not reported removed")
				}
				if r.Summary.StorageMigrations != 13 {
					t.Errorf("storage migrations = %d, want 13 (the CRDs whose storage moves to v1beta2)", r.Summary.StorageMigrations)
				}
				sys := mustRole(t, p, "ClusterRole", "crossplane:provider:<revision>:system")
				if !slices.ContainsFunc(sys.Rules.APIGroupsAdded, func(g GroupGrant) bool { return g.Group == "ec2.aws.m.upbound.io" }) {
					t.Errorf("system role: new API groups %+v lack ec2.aws.m.upbound.io", sys.Rules.APIGroupsAdded)
				}
			},
		},
		{
			name:   "provider-kubernetes",
			reason: "provider-kubernetes v0.18.0 → v1.2.1: namespaced kubernetes.m.crossplane.io CRDs, SafeStart capability (CRD read access), runtime image.",
			base: func(t testing.TB) *State {
				return testState(t, "v0.18.0", []spec{{kind: "Provider", name: "provider-kubernetes", source: xpContrib + "provider-kubernetes", tag: "v0.18.0", dir: upstream(t, "provider-kubernetes-v0.18.0")}}, nil)
			},
			head: func(t testing.TB) *State {
				return testState(t, "v1.2.1", []spec{{kind: "Provider", name: "provider-kubernetes", source: xpContrib + "provider-kubernetes", tag: "v1.2.1", dir: upstream(t, "provider-kubernetes-v1.2.1")}}, nil)
			},
			check: func(t *testing.T, r *Report) {
				p := mustPackage(t, r, "provider-kubernetes")
				if p.Change != Upgraded || p.Runtime == nil || p.Runtime.Image == nil {
					t.Fatalf("provider-kubernetes: %+v, want an upgrade with a new image", p)
				}
				for _, a := range p.Payload.Added {
					if !strings.Contains(a.Name, ".kubernetes.m.crossplane.io") {
						t.Errorf("added CRD %s is not in the namespaced group", a.Name)
					}
				}
				sys := mustRole(t, p, "ClusterRole", "crossplane:provider:<revision>:system")
				if !slices.ContainsFunc(sys.Rules.APIGroupsAdded, func(g GroupGrant) bool {
					return g.Group == "apiextensions.k8s.io" && slices.Equal(g.Verbs, []string{"get", "list", "watch"})
				}) {
					t.Errorf("system role: SafeStart's read access to CRDs is not highlighted: %+v", sys.Rules.APIGroupsAdded)
				}
			},
		},
		{
			name:   "function-patch-and-transform",
			reason: "function-patch-and-transform v0.8.2 → v0.10.8: the input CRD (not installed) gains writeConnectionSecretToRef; only the runtime image changes in the cluster.",
			base: func(t testing.TB) *State {
				return testState(t, "v0.8.2", []spec{{kind: "Function", name: "function-patch-and-transform", source: xpContrib + "function-patch-and-transform", tag: "v0.8.2", dir: upstream(t, "function-patch-and-transform-v0.8.2")}}, nil)
			},
			head: func(t testing.TB) *State {
				return testState(t, "v0.10.8", []spec{{kind: "Function", name: "function-patch-and-transform", source: xpContrib + "function-patch-and-transform", tag: "v0.10.8", dir: upstream(t, "function-patch-and-transform-v0.10.8")}}, nil)
			},
			check: func(t *testing.T, r *Report) {
				p := mustPackage(t, r, "function-patch-and-transform")
				if p.Payload == nil || p.Payload.Installed || len(p.RBAC) != 0 || p.Runtime == nil || p.Runtime.Image == nil {
					t.Fatalf("function: %+v, want an input-schema change that is not installed, a new image and no RBAC", p)
				}
				d := mustDefinition(t, p.Payload, "resources.pt.fn.crossplane.io")
				if !hasSchemaChange(d, "v1beta1", "writeConnectionSecretToRef", FieldAdded) {
					t.Errorf("input CRD: writeConnectionSecretToRef is not reported added: %+v", d.Versions)
				}
			},
		},
		{
			name: "configuration-getting-started",
			reason: "configuration-getting-started v0.2.0 → the untagged main folder (pinned by digest): apiextensions.crossplane.io/v1 XRDs replaced by namespaced v2 XRDs under new names, " +
				"Crossplane >=v2.0.0-0, new dependency versions. provider-nop v0.5.0, which main asks for, is not in the test data; v0.4.0 stands in, so the head lock is stale for it.",
			base: func(t testing.TB) *State {
				return testState(t, "v0.2.0", []spec{
					{kind: "Configuration", name: "configuration-getting-started", source: upbound + "configuration-getting-started", tag: "v0.2.0", dir: upstream(t, "configuration-getting-started-v0.2.0")},
					{kind: "Provider", source: contrib + "provider-nop", tag: "v0.2.1", dir: upstream(t, "provider-nop-v0.2.1")},
					{kind: "Function", source: contrib + "function-kcl", tag: "v0.8.0", dir: upstream(t, "function-kcl-v0.8.0")},
					{kind: "Function", source: contrib + "function-auto-ready", tag: "v0.2.1", dir: upstream(t, "function-auto-ready-v0.2.1")},
				}, nil)
			},
			head: func(t testing.TB) *State {
				return testState(t, "main", []spec{
					{kind: "Configuration", name: "configuration-getting-started", source: upbound + "configuration-getting-started", dir: upstream(t, "configuration-getting-started-main")},
					{kind: "Provider", source: contrib + "provider-nop", tag: "v0.4.0", dir: upstream(t, "provider-nop-v0.4.0")},
					{kind: "Function", source: contrib + "function-kcl", tag: "v0.12.1", dir: upstream(t, "function-kcl-v0.12.1")},
					{kind: "Function", source: contrib + "function-auto-ready", tag: "v0.6.3", dir: upstream(t, "function-auto-ready-v0.6.3")},
				}, nil)
			},
			check: func(t *testing.T, r *Report) {
				p := mustPackage(t, r, "configuration-getting-started")
				if p.Change != Replaced {
					t.Errorf("a tag replaced by a digest-only pin: change %s, want replaced", p.Change)
				}
				var v2, kept int
				for _, a := range p.Payload.Added {
					if a.Category == CategoryXRD && a.APIVersion == "apiextensions.crossplane.io/v2" {
						v2++
					}
				}
				for _, d := range p.Payload.Removed {
					if d.Category == CategoryXRD && d.Action == ActionKept {
						kept++
					}
				}
				if v2 != 8 || kept != 8 {
					t.Errorf("XRDs: %d v2 added, %d v1 dropped and kept; want 8 and 8", v2, kept)
				}
				if !slices.ContainsFunc(p.Settings, func(f FieldChange) bool {
					return f.Field == "crossplaneConstraint" && f.Base == ">=v1.15.2" && f.Head == ">=v2.0.0-0"
				}) {
					t.Errorf("settings %+v lack the Crossplane constraint change", p.Settings)
				}
				if !slices.ContainsFunc(p.Dependencies, func(d DependencyChange) bool {
					return d.Source == contrib+"provider-nop" && d.Base == "v0.2.1" && d.Head == "v0.5.0"
				}) {
					t.Errorf("dependencies %+v lack provider-nop v0.2.1 → v0.5.0", p.Dependencies)
				}
				kcl := mustPackage(t, r, "crossplane-contrib-function-kcl")
				if !slices.ContainsFunc(kcl.Payload.Removed, func(d DroppedObject) bool { return d.Action == ActionNone }) {
					t.Errorf("function-kcl: its renamed input CRD group is not reported: %+v", kcl.Payload)
				}
				if !slices.ContainsFunc(r.Warnings, func(w string) bool {
					return strings.HasPrefix(w, "head: lockstep.lock is stale") && strings.Contains(w, "provider-nop")
				}) {
					t.Errorf("warnings %q do not say the head lock's provider-nop stand-in misses its constraint", r.Warnings)
				}
			},
		},
		{
			name:   "mrd-activation",
			reason: "provider-aws-ec2 v2.6.0 (safe-start) with MRDs: the ManagedResourceActivationPolicy grows from 5 to 15 kinds, so the head makes 10 more CRDs; the package's digest and payload do not change.",
			base: func(t testing.TB) *State {
				return mrdState(t, "5 kinds", ec2Family(t), map[string]string{"policy.yaml": activationPolicy(ec2Kinds[:5])})
			},
			head: func(t testing.TB) *State {
				return mrdState(t, "15 kinds", ec2Family(t), map[string]string{"policy.yaml": activationPolicy(ec2Kinds)})
			},
			check: func(t *testing.T, r *Report) {
				p := mustPackage(t, r, "provider-aws-ec2")
				if p.Change != Configured || p.Payload != nil || p.Activation == nil {
					t.Fatalf("provider-aws-ec2: change %s, payload %+v, activation %+v; want configured with only an activation change", p.Change, p.Payload, p.Activation)
				}
				want := slices.Clone(ec2Kinds[5:])
				slices.Sort(want)
				if diff := cmp.Diff(want, p.Activation.Activated); diff != "" || len(p.Activation.Deactivated) != 0 || p.Activation.Active != 15 || p.Activation.MRDs != 208 {
					t.Errorf("activation %+v; activated (-want +got):\n%s", p.Activation, diff)
				}
				if r.Summary.CRDsActivated != 10 || r.Summary.Breaking != 0 {
					t.Errorf("summary %+v, want 10 CRDs activated and nothing breaking", r.Summary)
				}
			},
		},
		{
			name:   "mrd-deactivation",
			reason: "The policy is removed: the 5 CRDs are reported deactivated (kept, since an MRD once Active stays so); under a lock for Crossplane v2.1.0, which never scales a runtime to zero, the Deployment keeps its replica.",
			base: func(t testing.TB) *State {
				return mrdState(t, "5 kinds", ec2Family(t), map[string]string{"policy.yaml": activationPolicy(ec2Kinds[:5])})
			},
			head: func(t testing.TB) *State {
				return mrdState(t, "no policy", ec2Family(t), nil)
			},
			check: func(t *testing.T, r *Report) {
				p := mustPackage(t, r, "provider-aws-ec2")
				if p.Activation == nil || len(p.Activation.Deactivated) != 5 || len(p.Activation.Activated) != 0 || p.Activation.AwaitingActivation || p.Activation.Note == "" {
					t.Fatalf("activation %+v, want 5 deactivated, not awaiting activation, with a note", p.Activation)
				}
				if p.Runtime != nil {
					t.Errorf("runtime change %+v reported, want the Deployment unchanged", p.Runtime)
				}
				if r.Summary.CRDsDeactivated != 5 {
					t.Errorf("summary %+v, want 5 CRDs deactivated", r.Summary)
				}
			},
		},
		{
			name: "mrd-conversion-on",
			reason: "The lock's customToManagedResourceConversion turns on (lockstep lock --enable-custom-to-managed-resource-conversion=true) for provider-aws-ec2 v2.6.0 (safe-start) with a policy activating 5 kinds: " +
				"the lock change says MRD conversion off → on, the base installs every CRD plain, the head only the 5 active ones, so the other CRDs are reported deactivated and kept.",
			base: func(t testing.TB) *State {
				return testState(t, "off", ec2Family(t), map[string]string{"policy.yaml": activationPolicy(ec2Kinds[:5])})
			},
			head: func(t testing.TB) *State {
				return mrdState(t, "on", ec2Family(t), map[string]string{"policy.yaml": activationPolicy(ec2Kinds[:5])})
			},
			check: func(t *testing.T, r *Report) {
				if diff := cmp.Diff([]FieldChange{{Field: "customToManagedResourceConversion", Base: "off", Head: "on"}}, r.Lock); diff != "" {
					t.Errorf("lock changes: -want +got\n%s", diff)
				}
				p := mustPackage(t, r, "provider-aws-ec2")
				if p.Activation == nil {
					t.Fatalf("provider-aws-ec2: no activation change: %+v", p)
				}
				a := p.Activation
				if len(a.Activated) != 0 || a.Active != 5 || a.MRDs != 208 || len(a.Deactivated) != 203 || a.Note != conversionNote || a.AwaitingActivation {
					t.Errorf("activation: %d activated, %d of %d active, %d deactivated, awaiting %t, note %q; want 0, 5 of 208, 203, false, the conversion note",
						len(a.Activated), a.Active, a.MRDs, len(a.Deactivated), a.AwaitingActivation, a.Note)
				}
				for _, k := range ec2Kinds[:5] {
					if slices.Contains(a.Deactivated, k) {
						t.Errorf("%s is active on the head but reported deactivated", k)
					}
				}
				if r.Summary.CRDsDeactivated != 203 || r.Summary.CRDsActivated != 0 {
					t.Errorf("summary %+v, want 203 CRDs deactivated, none activated", r.Summary)
				}
			},
		},
		{
			name:   "repushed-tag",
			reason: "provider-nop v0.4.0 pushed again with other content: the CRD drops an enum value, stops preserving unknown fields, bounds a field, requires a new one, serves a new version; the webhook configuration is gone.",
			base: func(t testing.TB) *State {
				return testState(t, "v0.4.0", []spec{{kind: "Provider", name: "provider-nop", source: xpContrib + "provider-nop", tag: "v0.4.0", dir: upstream(t, "provider-nop-v0.4.0")}}, nil)
			},
			head: func(t testing.TB) *State {
				return testState(t, "v0.4.0 re-pushed", []spec{{kind: "Provider", name: "provider-nop", source: xpContrib + "provider-nop", tag: "v0.4.0", dir: repushedNop(t)}}, nil)
			},
			check: func(t *testing.T, r *Report) {
				p := mustPackage(t, r, "provider-nop")
				if p.Change != Repinned || !p.Breaking || r.Summary.Repinned != 1 {
					t.Fatalf("provider-nop: change %s breaking %v, want a breaking re-pin", p.Change, p.Breaking)
				}
				d := mustDefinition(t, p.Payload, "nopresources.nop.crossplane.io")
				for _, want := range []struct {
					path string
					typ  SchemaChangeType
				}{
					{"spec.deletionPolicy", EnumValuesRemoved},
					{"spec.forProvider.fields", UnknownFieldsPruned},
					{"spec.forProvider.conditionAfter[*].conditionReason", ValidationTightened},
					{"spec.forProvider.region", RequiredFieldAdded},
				} {
					if !hasSchemaChange(d, "v1alpha1", want.path, want.typ) {
						t.Errorf("v1alpha1: %s %s not reported", want.typ, want.path)
					}
				}
				if !slices.ContainsFunc(d.Versions, func(v VersionChange) bool { return v.Name == "v1beta1" && v.Change == ChangeAdded && !v.Breaking }) {
					t.Errorf("the new served version v1beta1 is not reported as an additive version: %+v", d.Versions)
				}
				if len(p.Payload.Removed) != 1 || p.Payload.Removed[0].Action != ActionKept {
					t.Errorf("dropped webhook configuration: %+v, want it kept, owned by the package", p.Payload.Removed)
				}
			},
		},
		{
			name:   "settings-and-runtime-config",
			reason: "provider-kubernetes v1.2.1 at the same digest, moved to Manual activation, a history limit of 3 and a DeploymentRuntimeConfig with a debug flag and resource limits.",
			base: func(t testing.TB) *State {
				return testState(t, "before", []spec{{kind: "Provider", name: "provider-kubernetes", source: xpContrib + "provider-kubernetes", tag: "v1.2.1", dir: upstream(t, "provider-kubernetes-v1.2.1")}}, nil)
			},
			head: func(t testing.TB) *State {
				return testState(t, "after", []spec{{
					kind: "Provider", name: "provider-kubernetes", source: xpContrib + "provider-kubernetes", tag: "v1.2.1", dir: upstream(t, "provider-kubernetes-v1.2.1"),
					declYAML: "  revisionActivationPolicy: Manual\n  revisionHistoryLimit: 3\n  runtimeConfigRef:\n    name: debug\n",
				}}, map[string]string{"runtime.yaml": `apiVersion: pkg.crossplane.io/v1beta1
kind: DeploymentRuntimeConfig
metadata:
  name: debug
spec:
  deploymentTemplate:
    spec:
      selector: {}
      template:
        spec:
          containers:
          - name: package-runtime
            args: [--debug]
            resources:
              limits: {memory: 512Mi}
`})
			},
			check: func(t *testing.T, r *Report) {
				p := mustPackage(t, r, "provider-kubernetes")
				if p.Change != Configured || p.Payload != nil {
					t.Fatalf("provider-kubernetes: change %s payload %+v, want configured with the same payload", p.Change, p.Payload)
				}
				for _, want := range []FieldChange{
					{Field: "spec.revisionActivationPolicy", Base: "Automatic", Head: "Manual"},
					{Field: "spec.revisionHistoryLimit", Base: "1", Head: "3"},
					{Field: "spec.runtimeConfigRef.name", Base: "default", Head: "debug"},
				} {
					if !slices.Contains(p.Settings, want) {
						t.Errorf("settings %+v lack %+v", p.Settings, want)
					}
				}
				dep := slices.IndexFunc(p.Runtime.Objects, func(o ObjectChange) bool { return o.Kind == "Deployment" })
				if dep < 0 || !slices.ContainsFunc(p.Runtime.Objects[dep].Fields, func(f FieldChange) bool {
					return f.Field == "spec.template.spec.containers[0].args[0]" && f.Head == "--debug"
				}) {
					t.Errorf("runtime objects %+v lack the Deployment's new --debug argument", p.Runtime.Objects)
				}
				if len(r.RuntimeConfigs) != 1 || r.RuntimeConfigs[0].Change != ChangeAdded || !slices.Equal(r.RuntimeConfigs[0].UsedBy, []string{"Provider provider-kubernetes"}) {
					t.Errorf("runtime configs %+v, want debug added, used by provider-kubernetes", r.RuntimeConfigs)
				}
			},
		},
	}
}

// repushedNop is a copy of provider-nop v0.4.0 with the changes of a
// careless re-push.
func repushedNop(t testing.TB) string {
	return copyPackage(t, upstream(t, "provider-nop-v0.4.0"), []string{"webhookconfigurations/manifests.yaml"}, map[string]func(map[string]any){
		"crds/nop.crossplane.io_nopresources.yaml": func(crd map[string]any) {
			s := schemaOf(t, crd, 0)
			spec := at(t, s, "properties", "spec", "properties")
			at(t, spec, "deletionPolicy")["enum"] = []any{"Delete"}
			fp := at(t, spec, "forProvider")
			delete(at(t, fp, "properties", "fields"), "x-kubernetes-preserve-unknown-fields")
			at(t, fp, "properties", "conditionAfter", "items", "properties", "conditionReason")["maxLength"] = 64
			at(t, fp, "properties")["region"] = map[string]any{"type": "string"}
			fp["required"] = []any{"region"}
			versions := at(t, crd, "spec")["versions"].([]any)
			v1 := at(t, versions, 0)
			next := map[string]any{}
			for k, v := range v1 {
				next[k] = v
			}
			next["name"], next["storage"] = "v1beta1", false
			at(t, crd, "spec")["versions"] = append(versions, next)
		},
	})
}

func mustPackage(t *testing.T, r *Report, name string) *PackageChange {
	t.Helper()
	for i := range r.Packages {
		if r.Packages[i].Name == name {
			return &r.Packages[i]
		}
	}
	t.Fatalf("no change reported for package %s", name)
	return nil
}

func mustDefinition(t *testing.T, p *PayloadChange, name string) *DefinitionChange {
	t.Helper()
	if p != nil {
		for i := range p.Definitions {
			if p.Definitions[i].Name == name {
				return &p.Definitions[i]
			}
		}
	}
	t.Fatalf("no change reported for definition %s", name)
	return nil
}

func mustRole(t *testing.T, p *PackageChange, kind, name string) *RoleChange {
	t.Helper()
	for i := range p.RBAC {
		if p.RBAC[i].Kind == kind && p.RBAC[i].Name == name && p.RBAC[i].Rules != nil {
			return &p.RBAC[i]
		}
	}
	t.Fatalf("%s: no rule change reported for %s %s", p.Name, kind, name)
	return nil
}

// hasSchemaChange reports whether version v of d has a change of type typ
// at path (or, when path has no dot, at a path ending in it).
func hasSchemaChange(d *DefinitionChange, v, path string, typ SchemaChangeType) bool {
	for _, vc := range d.Versions {
		if vc.Name != v {
			continue
		}
		for _, s := range vc.Schema {
			if s.Change == typ && (s.Path == path || (!strings.Contains(path, ".") && strings.HasSuffix(s.Path, "."+path))) {
				return true
			}
		}
	}
	return false
}

// TestGolden compares each case's report in text, markdown and JSON with
// testdata/<case>.golden.{txt,md,json}; -update rewrites them.
func TestGolden(t *testing.T) {
	for _, c := range goldenCases() {
		t.Run(c.name, func(t *testing.T) {
			base, head := c.base(t), c.head(t)
			r, err := Compare(base, head, c.opts)
			if err != nil {
				t.Fatalf("%s\nCompare: %v", c.reason, err)
			}
			c.check(t, r)

			var txt, md, js bytes.Buffer
			txt.WriteString("# " + c.reason + "\n")
			if err := r.WriteText(&txt, TextOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := r.WriteMarkdown(&md, MarkdownOptions{MaxBytes: goldenSize, FullReport: "the " + c.name + ".golden.json artifact"}); err != nil {
				t.Fatal(err)
			}
			if md.Len() > goldenSize {
				t.Errorf("markdown is %d bytes, over its bound of %d", md.Len(), goldenSize)
			}
			if err := r.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			back, err := ReadJSON(bytes.NewReader(js.Bytes()))
			if err != nil {
				t.Fatalf("the JSON report does not read back: %v", err)
			}
			if diff := cmp.Diff(r, back); diff != "" {
				t.Errorf("JSON round trip changes the report (-want, +got):\n%s", diff)
			}

			for ext, got := range map[string][]byte{"txt": txt.Bytes(), "md": md.Bytes(), "json": js.Bytes()} {
				path := filepath.Join("testdata", c.name+".golden."+ext)
				if *update {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./diff -run TestGolden -update to create it)", err)
				}
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("%s\n%s differs (-want, +got); run with -update if the change is intended:\n%s", c.reason, path, diff)
				}
			}
		})
	}
}

// TestGoldenDeterministic compares one case twice, the second time with
// the base lock's packages in reverse order: the reports are equal to the
// byte.
func TestGoldenDeterministic(t *testing.T) {
	c := goldenCases()[3]
	r1, err := Compare(c.base(t), c.head(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := c.base(t)
	slices.Reverse(base.Lock.Packages)
	r2, err := Compare(base, c.head(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	j1, _ := json.Marshal(r1)
	j2, _ := json.Marshal(r2)
	if !bytes.Equal(j1, j2) {
		t.Errorf("two comparisons of the same states differ")
	}
}

// ec2Kinds are 15 MRD names of provider-aws-ec2 v2.6.0.
var ec2Kinds = []string{
	"vpcs.ec2.aws.upbound.io", "subnets.ec2.aws.upbound.io", "securitygroups.ec2.aws.upbound.io",
	"routetables.ec2.aws.upbound.io", "instances.ec2.aws.m.upbound.io",
	"internetgateways.ec2.aws.upbound.io", "natgateways.ec2.aws.upbound.io", "eips.ec2.aws.upbound.io",
	"routes.ec2.aws.upbound.io", "routetableassociations.ec2.aws.upbound.io", "securitygrouprules.ec2.aws.upbound.io",
	"vpcendpoints.ec2.aws.upbound.io", "launchtemplates.ec2.aws.upbound.io", "keypairs.ec2.aws.upbound.io",
	"networkinterfaces.ec2.aws.upbound.io",
}

// ec2Family is provider-aws-ec2 v2.6.0 declared, with its family provider.
func ec2Family(t testing.TB) []spec {
	return []spec{
		{kind: "Provider", name: "provider-aws-ec2", source: upbound + "provider-aws-ec2", tag: "v2.6.0", dir: upstream(t, "provider-aws-ec2-v2.6.0")},
		{kind: "Provider", source: upbound + "provider-family-aws", tag: "v2.6.0", dir: upstream(t, "provider-family-aws-v2.6.0")},
	}
}

// activationPolicy is a ManagedResourceActivationPolicy activating names.
func activationPolicy(names []string) string {
	return "apiVersion: apiextensions.crossplane.io/v1alpha1\nkind: ManagedResourceActivationPolicy\nmetadata:\n  name: platform\nspec:\n  activate:\n  - " +
		strings.Join(names, "\n  - ") + "\n"
}
