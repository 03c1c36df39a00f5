package render

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// definition is the part of an MRD or CRD the golden comparison looks at:
// what Crossplane or lockstep decides, without what the API server assigns
// (uid, resourceVersion, status, the conversion default) and without
// lockstep's own labels.
type definition struct {
	Kind        string
	Labels      map[string]string
	Annotations map[string]string
	Owners      []string // "Kind/name" plus " (controller)", sorted
	Spec        any
}

// capturedRevision stands for the name of a captured ProviderRevision, which
// depends on the digest of the image Crossplane pulled.
const capturedRevision = "<revision>"

// readCaptured streams a crossplane-installed file and returns its MRDs and
// the CRDs made from MRDs (those with an MRD owner), keyed by kind and
// name. Other documents are skipped without being decoded.
func readCaptured(t *testing.T, path string) map[string]definition {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open captured state: %v", err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]definition{}
	r := utilyaml.NewYAMLReader(bufio.NewReaderSize(f, 1<<20))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		mrd := strings.Contains(string(doc[:min(len(doc), 4096)]), "\nkind: ManagedResourceDefinition\n")
		crd := strings.Contains(string(doc), "\nkind: CustomResourceDefinition\n") && strings.Contains(string(doc), "kind: ManagedResourceDefinition\n    name:")
		if !mrd && !crd {
			continue
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("convert %s: %v", path, err)
		}
		var v struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name            string            `json:"name"`
				Labels          map[string]string `json:"labels"`
				Annotations     map[string]string `json:"annotations"`
				OwnerReferences []struct {
					Kind       string `json:"kind"`
					Name       string `json:"name"`
					Controller bool   `json:"controller"`
				} `json:"ownerReferences"`
			} `json:"metadata"`
			Spec map[string]any `json:"spec"`
		}
		if err := json.Unmarshal(js, &v); err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		if c, ok := v.Spec["conversion"].(map[string]any); ok && len(c) == 1 && c["strategy"] == "None" {
			delete(v.Spec, "conversion") // the API server's default for a CRD
		}
		d := definition{Kind: v.Kind, Labels: v.Metadata.Labels, Annotations: v.Metadata.Annotations, Spec: v.Spec}
		for _, o := range v.Metadata.OwnerReferences {
			name := o.Name
			if o.Kind == "ProviderRevision" {
				name = capturedRevision
			}
			d.Owners = append(d.Owners, owner(o.Kind, name, o.Controller))
		}
		sort.Strings(d.Owners)
		out[v.Kind+"/"+v.Metadata.Name] = d
	}
	return out
}

func owner(kind, name string, controller bool) string {
	if controller {
		return kind + "/" + name + " (controller)"
	}
	return kind + "/" + name
}

// renderedDefinitions returns the MRDs of the payload and the managed CRDs
// of the package's revision, keyed like readCaptured.
func renderedDefinitions(t *testing.T, p *PackageOutput) map[string]definition {
	t.Helper()
	out := map[string]definition{}
	objs := append(append([]*Object(nil), p.Revision.Payload...), p.Revision.ManagedCRDs...)
	for _, o := range objs {
		switch gk := o.GroupKind(); {
		case gk == crossplane.GroupKindMRD:
		case gk == crossplane.GroupKindCRD && o.Owners[0].Kind == crossplane.GroupKindMRD.Kind:
		default:
			continue // a plain CRD, not made from an MRD, or a webhook
		}
		u, err := o.Unstructured()
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := u.Object["spec"].(map[string]any)
		// Round-trip through JSON as the captured side does.
		var s any
		b, _ := json.Marshal(spec)
		_ = json.Unmarshal(b, &s)
		if m := s.(map[string]any); o.Kind == crossplane.GroupKindMRD.Kind && m["state"] == nil {
			m["state"] = "Inactive" // the MRD CRD's default
		}
		labels := u.GetLabels()
		delete(labels, LabelManagedBy)
		delete(labels, LabelInstance)
		if len(labels) == 0 {
			labels = nil
		}
		d := definition{Kind: o.Kind, Labels: labels, Annotations: u.GetAnnotations(), Spec: s}
		name := func(r Reference) string {
			if r.Kind == "ProviderRevision" {
				return capturedRevision
			}
			return r.Name
		}
		d.Owners = append(d.Owners, owner(o.Controller.Kind, name(*o.Controller), true))
		for _, r := range o.Owners {
			d.Owners = append(d.Owners, owner(r.Kind, name(r), false))
		}
		sort.Strings(d.Owners)
		out[o.Kind+"/"+o.Name] = d
	}
	return out
}

// TestMRDsMatchCrossplane renders providers the way the captured scenarios
// installed them and compares lockstep's MRDs and the CRDs of active MRDs
// with what a real Crossplane v2.3.4 created
// ($LOCKSTEP_TESTDATA/crossplane-installed, README there).
func TestMRDsMatchCrossplane(t *testing.T) {
	td := testdataDir(t)
	everything := []declarations.ActivationPolicy{declarations.NewActivationPolicy("default", "*")}
	cases := []struct {
		name, reason      string
		captured          string
		folder, pkg, src  string
		policies          []declarations.ActivationPolicy
		wantMRDs, wantCRD int
		awaiting          bool
	}{
		{
			name:     "provider-nop",
			reason:   "S1: a provider without safe-start: its one CRD becomes an Active MRD, and the MRD controller's CRD is owned by the MRD and controlled by the revision.",
			captured: "S1.yaml", folder: "provider-nop-v0.4.0", pkg: "crossplane-contrib-provider-nop", src: "xpkg.upbound.io/crossplane-contrib/provider-nop",
			policies: everything, wantMRDs: 1, wantCRD: 1,
		},
		{
			name:     "provider-aws-ec2-activate-all",
			reason:   "S3: a safe-start provider with the MRAP default activating '*': 208 Active MRDs, each with its CRD.",
			captured: "S3-active.yaml", folder: "provider-aws-ec2-v2.6.0", pkg: "upbound-provider-aws-ec2", src: "xpkg.upbound.io/upbound/provider-aws-ec2",
			policies: everything, wantMRDs: 208, wantCRD: 208,
		},
		{
			name:     "provider-aws-ec2-no-policy",
			reason:   "S3b: the same provider without any policy: 208 MRDs in the default state Inactive, no CRD, and the runtime does not await activation: Crossplane v2.3.4 keeps its replica (the captured Deployment has 1).",
			captured: "S3b-inactive.yaml", folder: "provider-aws-ec2-v2.6.0", pkg: "upbound-provider-aws-ec2", src: "xpkg.upbound.io/upbound/provider-aws-ec2",
			wantMRDs: 208, wantCRD: 0, awaiting: false,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := readCaptured(t, filepath.Join(td, "crossplane-installed", tc.captured))
			for k := range want {
				// The captured file holds every provider of the scenario.
				if !strings.Contains(k, ".") {
					delete(want, k)
				}
			}
			in := Input{
				Namespace: "crossplane-system", Instance: "lockstep", CrossplaneVersion: "v2.3.4",
				Packages:           []Package{pkg(t, crossplane.KindProvider, tc.pkg, tc.src, "v0.0.0", upstream(t, tc.folder), nil)},
				ActivationPolicies: tc.policies,
			}
			out, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			rev := out.Packages[0].Revision
			for _, o := range rev.Payload {
				if o.GroupKind() == crossplane.GroupKindMRD && !o.FromCRD {
					t.Errorf("%s\n%s: not FromCRD, but the converter made it of the package's CRD", tc.reason, o)
				}
			}
			got := renderedDefinitions(t, out.Packages[0])
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nMRDs and CRDs (-captured +lockstep):\n%s", tc.reason, diff)
			}
			active := 0
			for _, m := range rev.MRDs {
				if m.Active {
					active++
				}
			}
			if len(rev.MRDs) != tc.wantMRDs || active != tc.wantCRD || len(rev.ManagedCRDs) != tc.wantCRD || rev.AwaitingActivation != tc.awaiting {
				t.Errorf("%s\nMRDs %d (active %d), CRDs %d, awaiting %v; want %d, %d, %d, %v", tc.reason,
					len(rev.MRDs), active, len(rev.ManagedCRDs), rev.AwaitingActivation, tc.wantMRDs, tc.wantCRD, tc.wantCRD, tc.awaiting)
			}
		})
	}
}

func TestActivates(t *testing.T) {
	cases := []struct {
		name, reason, pattern, mrd string
		want                       bool
	}{
		{"exact", "An exact name activates that MRD.", "vpcs.ec2.aws.upbound.io", "vpcs.ec2.aws.upbound.io", true},
		{"exact-other", "An exact name activates no other MRD.", "vpcs.ec2.aws.upbound.io", "subnets.ec2.aws.upbound.io", false},
		{"exact-is-not-suffix", "Without '*' the name is not a suffix.", "ec2.aws.upbound.io", "vpcs.ec2.aws.upbound.io", false},
		{"group-wildcard", "'*.group' activates every kind of the group.", "*.ec2.aws.upbound.io", "vpcs.ec2.aws.upbound.io", true},
		{"group-wildcard-other-group", "'*.group' does not reach a group that only shares a tail of labels with another.", "*.ec2.aws.upbound.io", "vpcs.ec2.aws.m.upbound.io", false},
		{"all", "'*' activates everything.", "*", "nopresources.nop.crossplane.io", true},
		{"inner-wildcard", "Crossplane matches with filepath.Match: a '*' inside the pattern matches too.", "vpcs.*.aws.upbound.io", "vpcs.ec2.aws.upbound.io", true},
		{"question-mark", "'?' matches one character, as filepath.Match does.", "vpc?.ec2.aws.upbound.io", "vpcs.ec2.aws.upbound.io", true},
		{"bad-pattern", "A pattern filepath.Match cannot parse matches nothing.", "[vpcs.ec2.aws.upbound.io", "vpcs.ec2.aws.upbound.io", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Activates(tc.pattern, tc.mrd); got != tc.want {
				t.Errorf("%s\nActivates(%q, %q) = %v, want %v", tc.reason, tc.pattern, tc.mrd, got, tc.want)
			}
		})
	}
}

// activation is what TestActivation checks of one rendered package.
type activation struct {
	MRDs, Active, ManagedCRDs, PlainCRDs int
	Awaiting                             bool
	Replicas                             int64 // -1 without a Deployment
	CABundles                            int   // definitions asking for a CA bundle
}

func activationOf(t *testing.T, p *PackageOutput) activation {
	t.Helper()
	r := p.Revision
	a := activation{MRDs: len(r.MRDs), ManagedCRDs: len(r.ManagedCRDs), Awaiting: r.AwaitingActivation, Replicas: -1}
	for _, m := range r.MRDs {
		if m.Active {
			a.Active++
		}
	}
	for _, o := range append(append([]*Object(nil), r.Payload...), r.ManagedCRDs...) {
		if o.GroupKind() == crossplane.GroupKindCRD && o.Owners[0].Kind != crossplane.GroupKindMRD.Kind {
			a.PlainCRDs++
		}
		if o.CABundle != nil && (o.GroupKind() == crossplane.GroupKindCRD || o.GroupKind() == crossplane.GroupKindMRD) {
			a.CABundles++
		}
	}
	for _, o := range r.Runtime {
		if o.Kind == "Deployment" {
			u, err := o.Unstructured()
			if err != nil {
				t.Fatal(err)
			}
			a.Replicas, _, _ = unstructuredInt(u.Object, "spec", "replicas")
		}
	}
	return a
}

func unstructuredInt(obj map[string]any, path ...string) (int64, bool, error) {
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		v = m[p]
	}
	switch n := v.(type) {
	case int64:
		return n, true, nil
	case float64:
		return int64(n), true, nil
	}
	return 0, false, nil
}

func policyOf(name string, activate ...string) declarations.ActivationPolicy {
	return declarations.NewActivationPolicy(name, activate...)
}

// TestActivation renders providers under activation policies, conversion
// settings and Crossplane versions, and counts per package the MRDs, the
// active ones, the CRDs the MRD controller would make, the plain CRDs and
// the Deployment's replicas.
func TestActivation(t *testing.T) {
	const (
		ec2    = "upbound-provider-aws-ec2"
		family = "upbound-provider-family-aws"
	)
	aws := func(t *testing.T) []Package {
		return []Package{
			pkg(t, crossplane.KindProvider, ec2, "xpkg.upbound.io/upbound/provider-aws-ec2", "v2.6.0", upstream(t, "provider-aws-ec2-v2.6.0"), nil),
			pkg(t, crossplane.KindProvider, family, "xpkg.upbound.io/upbound/provider-family-aws", "v2.6.0", upstream(t, "provider-family-aws-v2.6.0"), nil),
		}
	}
	namespaced := func(t *testing.T) int {
		m, err := filepath.Glob(filepath.Join(upstream(t, "provider-aws-ec2-v2.6.0"), "crds", "ec2.aws.m.upbound.io_*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		return len(m)
	}
	familyOut := activation{PlainCRDs: 5, Replicas: 1}
	cases := []struct {
		name, reason string
		needs        bool
		input        func(t *testing.T) Input
		want         func(t *testing.T) map[string]activation
	}{
		{
			name:   "five-kinds",
			reason: "A policy naming 5 kinds activates exactly those: 5 CRDs for ec2's 208 MRDs; the family's ProviderConfig kinds stay plain CRDs and make no MRD.",
			needs:  true,
			input: func(t *testing.T) Input {
				return Input{CrossplaneVersion: "v2.1.0", Packages: aws(t), ActivationPolicies: []declarations.ActivationPolicy{policyOf("platform",
					"vpcs.ec2.aws.upbound.io", "subnets.ec2.aws.upbound.io", "securitygroups.ec2.aws.upbound.io", "instances.ec2.aws.m.upbound.io", "routetables.ec2.aws.upbound.io")}}
			},
			want: func(*testing.T) map[string]activation {
				return map[string]activation{ec2: {MRDs: 208, Active: 5, ManagedCRDs: 5, Replicas: 1}, family: familyOut}
			},
		},
		{
			name:   "group-wildcard",
			reason: "'*.ec2.aws.m.upbound.io' activates every namespaced ec2 kind and none of the cluster-scoped ones.",
			needs:  true,
			input: func(t *testing.T) Input {
				return Input{CrossplaneVersion: "v2.0.0-rc.1", Packages: aws(t), ActivationPolicies: []declarations.ActivationPolicy{policyOf("namespaced", "*.ec2.aws.m.upbound.io")}}
			},
			want: func(t *testing.T) map[string]activation {
				n := namespaced(t)
				return map[string]activation{ec2: {MRDs: 208, Active: n, ManagedCRDs: n, Replicas: 1}, family: familyOut}
			},
		},
		{
			name:   "no-policy",
			reason: "Without a policy a safe-start provider's MRDs are all inactive and no CRD is made, but Crossplane v2.3.4 keeps its runtime at 1 replica (captured S3b), and so does lockstep.",
			needs:  true,
			input:  func(t *testing.T) Input { return Input{CrossplaneVersion: "v2.3.4", Packages: aws(t)} },
			want: func(*testing.T) map[string]activation {
				return map[string]activation{ec2: {MRDs: 208, Replicas: 1}, family: familyOut}
			},
		},
		{
			name:   "no-policy-scales-to-zero",
			reason: "Crossplane v2.4.0 scales a safe-start runtime to zero while every MRD is inactive: so does a lock for it; the family provider has no MRD and keeps its replica.",
			needs:  true,
			input:  func(t *testing.T) Input { return Input{CrossplaneVersion: "v2.4.0", Packages: aws(t)} },
			want: func(*testing.T) map[string]activation {
				return map[string]activation{ec2: {MRDs: 208, Awaiting: true, Replicas: 0}, family: familyOut}
			},
		},
		{
			name:   "release-candidate-keeps-replica",
			reason: "v2.4.0's release candidates do not scale to zero (the latch came with v2.4.0).",
			needs:  true,
			input:  func(t *testing.T) Input { return Input{CrossplaneVersion: "v2.4.0-rc.0", Packages: aws(t)} },
			want: func(*testing.T) map[string]activation {
				return map[string]activation{ec2: {MRDs: 208, Replicas: 1}, family: familyOut}
			},
		},
		{
			name:   "cluster-default-policy",
			reason: "Crossplane's default policy in the cluster (the Helm chart's provider.defaultActivations ['*']) activates every MRD, and the runtime runs, even under a v2.4.0 lock.",
			needs:  true,
			input: func(t *testing.T) Input {
				return Input{CrossplaneVersion: "v2.4.0", Packages: aws(t), Cluster: &declarations.ClusterActivation{Policies: []declarations.ActivationPolicy{policyOf("default", "*")}}}
			},
			want: func(*testing.T) map[string]activation {
				return map[string]activation{ec2: {MRDs: 208, Active: 208, ManagedCRDs: 208, Replicas: 1}, family: familyOut}
			},
		},
		{
			name:   "cluster-active-mrd",
			reason: "An MRD Active in the cluster, whoever activated it, stays Active with its CRD, and the runtime of a v2.4.0 lock scales up for good.",
			needs:  true,
			input: func(t *testing.T) Input {
				return Input{CrossplaneVersion: "v2.4.0", Packages: aws(t), Cluster: &declarations.ClusterActivation{ActiveMRDs: map[string]bool{"vpcs.ec2.aws.upbound.io": true}}}
			},
			want: func(*testing.T) map[string]activation {
				return map[string]activation{ec2: {MRDs: 208, Active: 1, ManagedCRDs: 1, Replicas: 1}, family: familyOut}
			},
		},
		{
			name:   "drc-replicas-kept",
			reason: "A DeploymentRuntimeConfig's replicas are kept for a safe-start provider with no active MRD under a lock for a Crossplane without the scale to zero.",
			needs:  true,
			input: func(t *testing.T) Input {
				drc := declarations.DeploymentRuntimeConfig{Spec: declarations.DeploymentRuntimeConfigSpec{DeploymentTemplate: &declarations.DeploymentTemplate{
					Spec: &appsv1.DeploymentSpec{Replicas: new(int32(2))},
				}}}
				drc.Name = "default"
				return Input{CrossplaneVersion: "v2.1.0", Packages: aws(t), RuntimeConfigs: []declarations.DeploymentRuntimeConfig{drc}}
			},
			want: func(*testing.T) map[string]activation {
				return map[string]activation{ec2: {MRDs: 208, Replicas: 2}, family: {PlainCRDs: 5, Replicas: 2}}
			},
		},
		{
			name:   "configuration-ships-policy",
			reason: "A policy in a Configuration's payload activates kinds like a declared one.",
			needs:  true,
			input: func(t *testing.T) Input {
				return Input{CrossplaneVersion: "v2.3.4", Packages: append(aws(t),
					pkg(t, crossplane.KindConfiguration, "configuration-activation", "registry.lockstep.example/tests/configuration-activation", "v0.1.0", filepath.Join(repoRoot(t), "render", "testdata", "packages", "configuration-activation"), nil))}
			},
			want: func(*testing.T) map[string]activation {
				return map[string]activation{ec2: {MRDs: 208, Active: 2, ManagedCRDs: 2, Replicas: 1}, family: familyOut, "configuration-activation": {Replicas: -1}}
			},
		},
		{
			name:   "conversion-off",
			reason: "With conversion off (Crossplane's --enable-custom-to-managed-resource-conversion=false) every CRD stays a plain CRD and policies do nothing.",
			needs:  true,
			input: func(t *testing.T) Input {
				return Input{CrossplaneVersion: "v2.3.4", MRDConversion: MRDConversionOff, Packages: aws(t), ActivationPolicies: []declarations.ActivationPolicy{policyOf("all", "*")}}
			},
			want: func(*testing.T) map[string]activation {
				return map[string]activation{ec2: {PlainCRDs: 208, Replicas: 1}, family: familyOut}
			},
		},
		{
			name:   "crossplane-v1",
			reason: "Crossplane v1.x has no MRDs: a v1 lock keeps plain CRDs.",
			needs:  true,
			input:  func(t *testing.T) Input { return Input{CrossplaneVersion: "v1.20.0", Packages: aws(t)} },
			want: func(*testing.T) map[string]activation {
				return map[string]activation{ec2: {PlainCRDs: 208, Replicas: 1}, family: familyOut}
			},
		},
		{
			name:   "not-safe-start-webhook",
			reason: "A provider without safe-start gets Active MRDs whatever the policies; an MRD with a conversion webhook and its CRD both ask for the CA bundle.",
			input: func(t *testing.T) Input {
				return Input{CrossplaneVersion: "v2.3.4", Packages: []Package{
					pkg(t, crossplane.KindProvider, "provider-legacy-allowed", "registry.lockstep.example/legacy/provider-legacy-allowed", "v0.3.0", filepath.Join(repoRoot(t), "render", "testdata", "packages", "provider-legacy-allowed"), nil),
				}, ActivationPolicies: []declarations.ActivationPolicy{policyOf("none", "nothing.example.org")}, AllowedProviderPermissions: legacyAllowed}
			},
			want: func(*testing.T) map[string]activation {
				return map[string]activation{"provider-legacy-allowed": {MRDs: 1, Active: 1, ManagedCRDs: 1, Replicas: 1, CABundles: 2}}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needs {
				testdataDir(t)
			}
			in := tc.input(t)
			in.Namespace, in.Instance = "crossplane-system", "lockstep"
			out, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]activation{}
			for _, p := range out.Packages {
				got[p.Name] = activationOf(t, p)
			}
			if diff := cmp.Diff(tc.want(t), got); diff != "" {
				t.Errorf("%s\n(-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestConvertsRefusesBadVersion(t *testing.T) {
	cases := []struct {
		name, reason string
		in           Input
		want         bool
		wantErr      string
	}{
		{"v2", "v2.0.0 and later have MRDs.", Input{CrossplaneVersion: "v2.0.0"}, true, ""},
		{"v2-prerelease", "A v2.0.0 prerelease has them too.", Input{CrossplaneVersion: "v2.0.0-rc.1"}, true, ""},
		{"v1", "v1.x has none.", Input{CrossplaneVersion: "v1.20.1"}, false, ""},
		{"unset", "Without a version (no lock) nothing is converted.", Input{}, false, ""},
		{"off", "Off wins over the version.", Input{CrossplaneVersion: "v2.3.4", MRDConversion: MRDConversionOff}, false, ""},
		{"bad-version", "A version that does not parse is named.", Input{CrossplaneVersion: "two"}, false, `crossplane version "two" is not a semantic version`},
		{"bad-setting", "An unknown setting is refused.", Input{CrossplaneVersion: "v2.3.4", MRDConversion: "Sometimes"}, false, `MRD conversion "Sometimes"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.in.Converts()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s\nerror %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("%s\nConverts() = %v, %v; want %v", tc.reason, got, err, tc.want)
			}
		})
	}
}

// TestActivationBy checks that each MRD says why it is Active: the first
// matching policy by name, or "default" for a provider without safe-start.
func TestActivationBy(t *testing.T) {
	in := Input{Namespace: "crossplane-system", Instance: "lockstep", CrossplaneVersion: "v2.3.4",
		Packages: []Package{pkg(t, crossplane.KindProvider, "upbound-provider-aws-ec2", "xpkg.upbound.io/upbound/provider-aws-ec2", "v2.6.0", upstream(t, "provider-aws-ec2-v2.6.0"), nil)},
		ActivationPolicies: []declarations.ActivationPolicy{
			policyOf("z-all", "*"),
			policyOf("a-network", "*.ec2.aws.upbound.io", "vpcs.ec2.aws.upbound.io"),
		},
	}
	out, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range out.Packages[0].Revision.MRDs {
		got[m.Name] = m.By
	}
	want := map[string]string{
		"vpcs.ec2.aws.upbound.io":   "ManagedResourceActivationPolicy a-network: *.ec2.aws.upbound.io",
		"vpcs.ec2.aws.m.upbound.io": "ManagedResourceActivationPolicy z-all: *",
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("MRD %s activated by %q, want %q (policies by name, then patterns in byte order)", name, got[name], w)
		}
	}
}

// TestNativeMRDs: MRDs a provider ships itself keep their state, a policy
// activates one shipped without state (its rendered MRD says Active), and
// each Active one gets its CRD.
func TestNativeMRDs(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "render", "testdata", "packages", "provider-native-mrds")
	cases := []struct {
		name, reason string
		policies     []declarations.ActivationPolicy
		want         []MRDActivation
	}{
		{
			name:   "as-shipped",
			reason: "Without a policy only the MRD shipped Active is active.",
			want: []MRDActivation{
				{Name: "gadgets.native.lockstep.io", Kind: "Gadget", Active: true, By: "package"},
				{Name: "gizmos.native.lockstep.io", Kind: "Gizmo"},
			},
		},
		{
			name:     "policy",
			reason:   "A policy activates the MRD shipped without state.",
			policies: []declarations.ActivationPolicy{policyOf("gizmos", "gizmos.native.lockstep.io")},
			want: []MRDActivation{
				{Name: "gadgets.native.lockstep.io", Kind: "Gadget", Active: true, By: "package"},
				{Name: "gizmos.native.lockstep.io", Kind: "Gizmo", Active: true, By: "ManagedResourceActivationPolicy gizmos: gizmos.native.lockstep.io"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(Input{Namespace: "crossplane-system", Instance: "lockstep", CrossplaneVersion: "v2.3.4",
				Packages:           []Package{pkg(t, crossplane.KindProvider, "provider-native-mrds", "registry.lockstep.example/tests/provider-native-mrds", "v0.1.0", dir, nil)},
				ActivationPolicies: tc.policies})
			if err != nil {
				t.Fatal(err)
			}
			rev := out.Packages[0].Revision
			if diff := cmp.Diff(tc.want, rev.MRDs); diff != "" {
				t.Errorf("%s\nMRDs (-want +got):\n%s", tc.reason, diff)
			}
			active := 0
			for _, o := range rev.Payload {
				if o.GroupKind() == crossplane.GroupKindMRD && strings.Contains(string(o.JSON()), `"state":"Active"`) {
					active++
				}
				if o.FromCRD {
					t.Errorf("%s\n%s: FromCRD, but the package ships it as an MRD", tc.reason, o)
				}
			}
			var crds []string
			for _, o := range rev.ManagedCRDs {
				crds = append(crds, o.Name)
			}
			want := 0
			var wantCRDs []string
			for _, m := range tc.want {
				if m.Active {
					want++
					wantCRDs = append(wantCRDs, m.Name)
				}
			}
			if active != want || !cmp.Equal(crds, wantCRDs) || rev.AwaitingActivation {
				t.Errorf("%s\nrendered MRDs with state Active %d, CRDs %v, awaiting %v; want %d, %v, false", tc.reason, active, crds, rev.AwaitingActivation, want, wantCRDs)
			}
		})
	}
}

// TestKeepActive checks the MRD apply keeps Active when no policy
// activates it any more: spec.state becomes Active and nothing else
// changes; anything but an MRD is refused.
func TestKeepActive(t *testing.T) {
	cases := map[string]struct {
		reason  string
		obj     *Object
		want    map[string]any
		wantErr string
	}{
		"Inactive": {
			reason: "An MRD rendered without state gets state Active, its other fields as they were.",
			obj:    &Object{APIVersion: MRDAPIVersion, Kind: "ManagedResourceDefinition", Name: "vpcs.ec2.aws.upbound.io", raw: []byte(`{"apiVersion":"apiextensions.crossplane.io/v1alpha1","kind":"ManagedResourceDefinition","metadata":{"name":"vpcs.ec2.aws.upbound.io"},"spec":{"group":"ec2.aws.upbound.io","scope":"Cluster"}}`)},
			want: map[string]any{"apiVersion": "apiextensions.crossplane.io/v1alpha1", "kind": "ManagedResourceDefinition", "metadata": map[string]any{"name": "vpcs.ec2.aws.upbound.io"},
				"spec": map[string]any{"group": "ec2.aws.upbound.io", "scope": "Cluster", "state": "Active"}},
		},
		"NotAnMRD": {
			reason:  "A CRD has no state to keep.",
			obj:     &Object{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "vpcs.ec2.aws.upbound.io", raw: []byte(`{}`)},
			wantErr: "CustomResourceDefinition/vpcs.ec2.aws.upbound.io: not a ManagedResourceDefinition",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := KeepActive(tc.obj)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("%s\nKeepActive: got error %v, want %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(got.JSON(), &m); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, m); diff != "" {
				t.Errorf("%s\nKeepActive: -want +got\n%s", tc.reason, diff)
			}
			if strings.Contains(string(tc.obj.JSON()), "state") {
				t.Errorf("%s\nKeepActive changed its input", tc.reason)
			}
		})
	}
}
