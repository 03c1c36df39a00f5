package crossplane

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func TestKindFor(t *testing.T) {
	type want struct {
		ok                    bool
		kind                  Kind
		revisionKind          string
		revisionGVK           schema.GroupVersionKind
		hasRuntime, installs  bool
		tlsClient, endpoint   bool
		labelKey              string
		rank                  int
		revisionLookupMatches bool
	}
	cases := map[string]struct {
		reason string
		kind   string
		want   want
	}{
		"Provider": {
			reason: "A provider runs a Deployment with a TLS client Secret and installs its payload.",
			kind:   "Provider",
			want: want{ok: true, kind: KindProvider, revisionKind: "ProviderRevision",
				revisionGVK: schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "ProviderRevision"},
				hasRuntime:  true, installs: true, tlsClient: true, labelKey: "pkg.crossplane.io/provider", rank: 0, revisionLookupMatches: true},
		},
		"Function": {
			reason: "A function runs a Deployment, publishes an endpoint and installs none of its CRDs.",
			kind:   "Function",
			want: want{ok: true, kind: KindFunction, revisionKind: "FunctionRevision",
				revisionGVK: schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "FunctionRevision"},
				hasRuntime:  true, endpoint: true, labelKey: "pkg.crossplane.io/function", rank: 1, revisionLookupMatches: true},
		},
		"Configuration": {
			reason: "A configuration has no runtime and installs its payload.",
			kind:   "Configuration",
			want: want{ok: true, kind: KindConfiguration, revisionKind: "ConfigurationRevision",
				revisionGVK: schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "ConfigurationRevision"},
				installs:    true, labelKey: "pkg.crossplane.io/configuration", rank: 2, revisionLookupMatches: true},
		},
		"LowerCase": {
			reason: "Kind names are case-sensitive, as in Kubernetes.",
			kind:   "provider",
			want:   want{rank: 3, labelKey: "pkg.crossplane.io/"},
		},
		"RevisionKind": {
			reason: "A revision kind is not a package kind.",
			kind:   "ProviderRevision",
			want:   want{rank: 3, labelKey: "pkg.crossplane.io/"},
		},
		"Empty": {
			reason: "The empty kind is not a package kind.",
			kind:   "",
			want:   want{rank: 3, labelKey: "pkg.crossplane.io/"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, ok := KindFor(tc.kind)
			r, rok := RevisionKindFor(d.RevisionKind)
			got := want{
				ok: ok, kind: d.Kind, revisionKind: d.RevisionKind, hasRuntime: d.HasRuntime, installs: d.InstallsPayload,
				tlsClient: d.TLSClient, endpoint: d.Endpoint, labelKey: d.LabelKey(), rank: Kind(tc.kind).Rank(),
				revisionLookupMatches: rok && r.Kind == d.Kind,
			}
			if ok {
				got.revisionGVK = d.RevisionGroupVersionKind()
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nKindFor(%q): -want, +got:\n%s", tc.reason, tc.kind, diff)
			}
			if Kind(tc.kind).Valid() != ok {
				t.Errorf("%s\nKind(%q).Valid() = %t, KindFor says %t", tc.reason, tc.kind, !ok, ok)
			}
		})
	}
}

func TestAllowsPayload(t *testing.T) {
	cases := map[string]struct {
		reason string
		kind   Kind
		gk     schema.GroupKind
		want   bool
	}{
		"ProviderCRD":           {reason: "Providers ship CRDs.", kind: KindProvider, gk: GroupKindCRD, want: true},
		"ProviderMRD":           {reason: "Crossplane v2 providers ship MRDs.", kind: KindProvider, gk: GroupKindMRD, want: true},
		"ProviderWebhook":       {reason: "Providers ship webhook configurations.", kind: KindProvider, gk: GroupKindValidatingWebhookConfiguration, want: true},
		"ProviderXRD":           {reason: "XRDs belong in configurations.", kind: KindProvider, gk: GroupKindXRD, want: false},
		"ConfigurationXRD":      {reason: "Configurations ship XRDs.", kind: KindConfiguration, gk: GroupKindXRD, want: true},
		"ConfigurationCronOp":   {reason: "Configurations ship Operations (Crossplane v2).", kind: KindConfiguration, gk: GroupKindCronOperation, want: true},
		"ConfigurationCRD":      {reason: "Configurations may not ship CRDs.", kind: KindConfiguration, gk: GroupKindCRD, want: false},
		"FunctionCRD":           {reason: "Functions ship input CRDs.", kind: KindFunction, gk: GroupKindCRD, want: true},
		"FunctionComposition":   {reason: "Functions ship nothing else.", kind: KindFunction, gk: GroupKindComposition, want: false},
		"UnknownKindAllowsNone": {reason: "An unknown kind allows nothing.", kind: "Widget", gk: GroupKindCRD, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.kind.Descriptor().AllowsPayload(tc.gk); got != tc.want {
				t.Errorf("%s\n%s.AllowsPayload(%s) = %t, want %t", tc.reason, tc.kind, tc.gk, got, tc.want)
			}
		})
	}
}

func TestPackageRefString(t *testing.T) {
	cases := map[string]struct {
		reason string
		ref    PackageRef
		want   string
	}{
		"Provider": {reason: "Kind and name are joined by a slash.", ref: Ref(KindProvider, "provider-nop"), want: "Provider/provider-nop"},
		"NoName":   {reason: "An empty name keeps the slash.", ref: Ref(KindFunction, ""), want: "Function/"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.ref.String()); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestDescriptorsAgreeWithCrossplane checks the descriptors against what a
// real Crossplane v2.3.4 created ($LOCKSTEP_TESTDATA/crossplane-installed,
// see its README.md): the revision kinds and their owners, which revisions
// run a Deployment, which payload kinds each revision controls, the TLS
// client Secret, the endpoint, and the condition types and reasons.
func TestDescriptorsAgreeWithCrossplane(t *testing.T) {
	root := os.Getenv("LOCKSTEP_TESTDATA")
	if root == "" {
		t.Skip("LOCKSTEP_TESTDATA is unset; set it to the shared testdata directory (../shared/testdata) to compare with captured Crossplane objects")
	}
	knownConds := map[string]bool{string(ConditionInstalled): true, string(ConditionHealthy): true, string(ConditionRevisionHealthy): true, string(ConditionRuntimeHealthy): true}
	knownReasons := map[string]bool{string(ReasonActive): true, string(ReasonInactive): true, string(ReasonHealthy): true, string(ReasonUnhealthy): true, string(ReasonUnknownHealth): true}
	cases := map[string]struct {
		reason string
		file   string
		// kinds are the package kinds the scenario installs.
		kinds []Kind
	}{
		"S1": {reason: "A provider and a function.", file: "S1.yaml", kinds: []Kind{KindProvider, KindFunction}},
		"S2": {reason: "A provider and a function after an upgrade, with inactive revisions.", file: "S2-after-upgrade.yaml", kinds: []Kind{KindProvider, KindFunction}},
		"S4": {reason: "A configuration and its dependencies.", file: "S4.yaml", kinds: []Kind{KindProvider, KindFunction, KindConfiguration}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := readObjects(t, filepath.Join(root, "crossplane-installed", tc.file))
			seen := map[Kind]bool{}
			// Kinds of the objects each revision (by name) controls.
			controls := map[string]map[string]bool{}
			for _, o := range objs {
				for _, ref := range o.GetOwnerReferences() {
					if _, ok := RevisionKindFor(ref.Kind); ok && ref.APIVersion == PackageAPIVersion && ref.Controller != nil && *ref.Controller {
						if controls[ref.Name] == nil {
							controls[ref.Name] = map[string]bool{}
						}
						controls[ref.Name][o.GetKind()] = true
						if o.GetKind() == "Secret" && strings.HasSuffix(o.GetName(), "-tls-client") {
							controls[ref.Name]["tls-client"] = true
						}
					}
				}
			}
			for _, o := range objs {
				gvk := o.GroupVersionKind()
				if gvk.Group != Group {
					continue
				}
				if d, ok := KindFor(gvk.Kind); ok {
					seen[d.Kind] = true
					if diff := cmp.Diff(d.GroupVersionKind(), gvk); diff != "" {
						t.Errorf("%s\n%s %s: GVK -want, +got:\n%s", tc.reason, gvk.Kind, o.GetName(), diff)
					}
					checkConditions(t, tc.reason, o, knownConds, knownReasons)
					continue
				}
				d, ok := RevisionKindFor(gvk.Kind)
				if !ok {
					continue
				}
				what := gvk.Kind + " " + o.GetName()
				if diff := cmp.Diff(d.RevisionGroupVersionKind(), gvk); diff != "" {
					t.Errorf("%s\n%s: GVK -want, +got:\n%s", tc.reason, what, diff)
				}
				var owner string
				for _, ref := range o.GetOwnerReferences() {
					if ref.Controller != nil && *ref.Controller {
						owner = ref.Kind
					}
				}
				if owner != string(d.Kind) {
					t.Errorf("%s\n%s: controlled by a %s, the descriptor says %s", tc.reason, what, owner, d.Kind)
				}
				state, _, _ := unstructured.NestedString(o.Object, "spec", "desiredState")
				owns := controls[o.GetName()]
				if state == DesiredStateActive && owns["Deployment"] != d.HasRuntime {
					t.Errorf("%s\n%s: controls a Deployment: %t, HasRuntime: %t", tc.reason, what, owns["Deployment"], d.HasRuntime)
				}
				if state == DesiredStateActive && owns["ClusterRole"] != d.RBAC {
					t.Errorf("%s\n%s: controls a ClusterRole: %t, RBAC: %t", tc.reason, what, owns["ClusterRole"], d.RBAC)
				}
				if state == DesiredStateActive && owns["tls-client"] != d.TLSClient {
					t.Errorf("%s\n%s: controls a TLS client Secret: %t, TLSClient: %t", tc.reason, what, owns["tls-client"], d.TLSClient)
				}
				client, _, _ := unstructured.NestedString(o.Object, "spec", "tlsClientSecretName")
				if (client != "") != d.TLSClient {
					t.Errorf("%s\n%s: spec.tlsClientSecretName %q, TLSClient: %t", tc.reason, what, client, d.TLSClient)
				}
				endpoint, _, _ := unstructured.NestedString(o.Object, "status", "endpoint")
				if (endpoint != "") != d.Endpoint {
					t.Errorf("%s\n%s: status.endpoint %q, Endpoint: %t", tc.reason, what, endpoint, d.Endpoint)
				}
				refs, _, _ := unstructured.NestedSlice(o.Object, "status", "objectRefs")
				if len(refs) > 0 && !d.InstallsPayload {
					t.Errorf("%s\n%s: controls %d payload objects, InstallsPayload is false", tc.reason, what, len(refs))
				}
				for _, r := range refs {
					m, _ := r.(map[string]any)
					av, _ := m["apiVersion"].(string)
					k, _ := m["kind"].(string)
					gv, _ := schema.ParseGroupVersion(av)
					if gk := gv.WithKind(k).GroupKind(); !d.AllowsPayload(gk) {
						t.Errorf("%s\n%s: controls a %s, which AllowedPayload lacks", tc.reason, what, gk)
					}
				}
				checkConditions(t, tc.reason, o, knownConds, knownReasons)
			}
			for _, k := range tc.kinds {
				if !seen[k] {
					t.Errorf("%s\nno %s in %s", tc.reason, k, tc.file)
				}
			}
		})
	}
}

// checkConditions reports condition types and reasons on o that are not
// among the known constants.
func checkConditions(t *testing.T, reason string, o *unstructured.Unstructured, types, reasons map[string]bool) {
	t.Helper()
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	if len(conds) == 0 {
		t.Errorf("%s\n%s %s: no status.conditions", reason, o.GetKind(), o.GetName())
	}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		ty, _ := m["type"].(string)
		re, _ := m["reason"].(string)
		if !types[ty] || !reasons[re] {
			t.Errorf("%s\n%s %s: condition %s reason %s is not among the package condition constants", reason, o.GetKind(), o.GetName(), ty, re)
		}
	}
}

// readObjects reads a multi-document YAML file of Kubernetes objects.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("cannot read captured objects: %v", err)
	}
	var out []*unstructured.Unstructured
	for i, doc := range bytes.Split(b, []byte("\n---\n")) {
		m := map[string]any{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// TestVersionsAgreeWithCRDs checks the descriptors' served versions, the
// runtime kinds' version and CoreGroups against Crossplane's own CRDs
// ($LOCKSTEP_TESTDATA/crossplane-crds, crossplane/crossplane cluster/crds).
func TestVersionsAgreeWithCRDs(t *testing.T) {
	root := os.Getenv("LOCKSTEP_TESTDATA")
	if root == "" {
		t.Skip("LOCKSTEP_TESTDATA is unset; set it to the shared testdata directory (../shared/testdata) to compare with Crossplane's CRDs")
	}
	files, err := filepath.Glob(filepath.Join(root, "crossplane-crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s/crossplane-crds: %v", root, err)
	}
	type crd struct {
		served  []string
		storage string
	}
	crds := map[schema.GroupKind]crd{}
	groups := map[string]bool{}
	var pkgKinds []string
	for _, f := range files {
		for _, o := range readObjects(t, f) {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
			var c crd
			for _, v := range versions {
				m, _ := v.(map[string]any)
				if served, _ := m["served"].(bool); served {
					c.served = append(c.served, m["name"].(string))
				}
				if storage, _ := m["storage"].(bool); storage {
					c.storage = m["name"].(string)
				}
			}
			crds[schema.GroupKind{Group: group, Kind: kind}] = c
			groups[group] = true
			if group == Group {
				pkgKinds = append(pkgKinds, kind)
			}
		}
	}
	sorted := func(s []string) []string { out := append([]string(nil), s...); slices.Sort(out); return out }
	type versionCase struct {
		reason  string
		gk      schema.GroupKind
		served  []string
		storage string
	}
	cases := map[string]versionCase{}
	for _, k := range PackageKinds() {
		cases[string(k.Kind)] = versionCase{reason: "Versions are the versions the package CRD serves, PackageVersion the stored one.", gk: k.GroupVersionKind().GroupKind(), served: k.Versions, storage: PackageVersion}
	}
	for _, k := range []string{KindDeploymentRuntimeConfig, KindImageConfig, KindLock} {
		cases[k] = versionCase{reason: "The runtime kinds are stored at RuntimeVersion.", gk: schema.GroupKind{Group: Group, Kind: k}, storage: RuntimeVersion}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := crds[tc.gk]
			if !ok {
				t.Fatalf("%s\nno CRD for %s", tc.reason, tc.gk)
			}
			if tc.served != nil {
				if diff := cmp.Diff(sorted(tc.served), sorted(got.served)); diff != "" {
					t.Errorf("%s\n%s served versions: -want, +got:\n%s", tc.reason, tc.gk, diff)
				}
			}
			if got.storage != tc.storage {
				t.Errorf("%s\n%s storage version: want %s, got %s", tc.reason, tc.gk, tc.storage, got.storage)
			}
		})
	}
	var got []string
	for g := range groups {
		got = append(got, g)
		if ProtectedGroup(g) == "" {
			t.Errorf("group %s of Crossplane's CRDs is not a ProtectedGroup: a package could ship its CRDs", g)
		}
	}
	if diff := cmp.Diff(CoreGroups(), sorted(got)); diff != "" {
		t.Errorf("CoreGroups are the groups of Crossplane's CRDs: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(sorted(ServedKinds()), sorted(pkgKinds)); diff != "" {
		t.Errorf("ServedKinds are the kinds of Crossplane's %s CRDs: -want, +got:\n%s", Group, diff)
	}
}

func TestRecordAccessors(t *testing.T) {
	obj := func(y string) *unstructured.Unstructured {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(y), &m); err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	type fields struct{ source, policy, current, state string }
	cases := map[string]struct {
		reason string
		obj    string
		want   fields
	}{
		"Package": {
			reason: "A package's spec.package, spec.revisionActivationPolicy and status.currentRevision are read.",
			obj:    "spec: {package: 'xpkg.example.com/p@sha256:00', revisionActivationPolicy: Manual}\nstatus: {currentRevision: p-1}\n",
			want:   fields{source: "xpkg.example.com/p@sha256:00", policy: "Manual", current: "p-1"},
		},
		"Revision": {
			reason: "A revision's spec.desiredState is read.",
			obj:    "spec: {desiredState: Inactive}\n",
			want:   fields{state: DesiredStateInactive},
		},
		"WrongType": {
			reason: "A field of another type reads as unset.",
			obj:    "spec: {desiredState: 3, package: [a]}\n",
			want:   fields{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := obj(tc.obj)
			got := fields{source: PackageSource(u), policy: ActivationPolicy(u), current: CurrentRevision(u), state: DesiredState(u)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(fields{})); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDefinesAPI(t *testing.T) {
	cases := map[string]struct {
		reason string
		gk     schema.GroupKind
		want   bool
	}{
		"CRD":         {reason: "A CRD defines an API.", gk: GroupKindCRD, want: true},
		"MRD":         {reason: "An MRD defines a managed resource API.", gk: GroupKindMRD, want: true},
		"XRD":         {reason: "An XRD defines a composite resource API.", gk: GroupKindXRD, want: true},
		"Composition": {reason: "A Composition implements an API but defines none.", gk: GroupKindComposition, want: false},
		"Webhook":     {reason: "A webhook configuration defines no API.", gk: GroupKindValidatingWebhookConfiguration, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := DefinesAPI(tc.gk); got != tc.want {
				t.Errorf("%s\nDefinesAPI(%s) = %t, want %t", tc.reason, tc.gk, got, tc.want)
			}
		})
	}
}
