package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/diff"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/gitrepo"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// ec2Group is the API group of provider-aws-ec2's cluster-scoped kinds.
const ec2Group = "ec2.aws.upbound.io"

// ec2Names returns the MRD names of kinds (plurals) in ec2Group.
func ec2Names(kinds ...string) []string {
	out := make([]string, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k+"."+ec2Group)
	}
	slices.Sort(out)
	return out
}

// activationFiles declares provider-aws-ec2 v2.6.0 (its family provider
// comes as a dependency) from reg with a ManagedResourceActivationPolicy
// activating names.
func activationFiles(reg *registry.Registry, names []string) map[string][]byte {
	var policy strings.Builder
	policy.WriteString("apiVersion: apiextensions.crossplane.io/v1alpha1\nkind: ManagedResourceActivationPolicy\nmetadata:\n  name: ec2\nspec:\n  activate:\n")
	for _, n := range names {
		fmt.Fprintf(&policy, "  - %s\n", n)
	}
	return map[string][]byte{
		"clusters/prod/ec2.yaml": []byte(`apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-aws-ec2
spec:
  package: xpkg.upbound.io/upbound/provider-aws-ec2:v2.6.0
`),
		"clusters/prod/mirror.yaml":     []byte(mirrorTo("xpkg.upbound.io", reg)),
		"clusters/prod/activation.yaml": []byte(policy.String()),
	}
}

// crdsNamed returns the CRDs on env whose name ends in "."+group, sorted.
func crdsNamed(t *testing.T, env *envtest.Env, group string) []string {
	t.Helper()
	l := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := env.Client.List(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range l.Items {
		if strings.HasSuffix(c.Name, "."+group) {
			out = append(out, c.Name)
		}
	}
	slices.Sort(out)
	return out
}

// TestDiffMRDActivationOnCluster: real-API-server check of
// managed resource activation through the CLI, with a Git repository, the
// in-process registry and provider-aws-ec2 v2.6.0 (safe-start) with its
// family provider:
//   - commit 1 activates 5 ec2 kinds and is applied;
//   - `diff` from commit 1 to commit 2 (15 kinds) lists exactly the 10 added
//     CRDs, and applying commit 2 leaves exactly 15 ec2 CRDs plus the
//     family's ProviderConfig-type CRDs;
//   - with custom resources in two of them, commit 3 deactivates three
//     kinds: `diff --cluster` says "−3 CRDs, 3 custom resources would be
//     orphaned" (offline diff counts nothing), and applying commit 3 keeps
//     all three CRDs and says why.
func TestDiffMRDActivationOnCluster(t *testing.T) {
	reg := registry.New(t)
	pushUpstream(t, reg, "provider-aws-ec2-v2.6.0", "upbound/provider-aws-ec2", "v2.6.0")
	pushUpstream(t, reg, "provider-family-aws-v2.6.0", "upbound/provider-family-aws", "v2.6.0")
	repo := gitrepo.New(t, "main")
	dir := filepath.Join(repo.Dir, "clusters", "prod")
	cache := t.TempDir()
	regFlags := []string{"--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host}
	const conversion = "--enable-custom-to-managed-resource-conversion"
	env, kubeconfig := cluster(t, "xp-mrd")
	clusterFlags := []string{"--kubeconfig", kubeconfig, "--namespace", "xp-mrd"}
	apply := func(step string) string {
		t.Helper()
		out, err := run(t, append(append([]string{"apply", "--instance", "mrd", conversion}, regFlags...), clusterFlags...)...)
		if err != nil {
			t.Fatalf("%s: apply: %v\n%s", step, err, out)
		}
		return out
	}

	five := ec2Names("instances", "internetgateways", "securitygroups", "subnets", "vpcs")
	fifteen := ec2Names("instances", "internetgateways", "securitygroups", "subnets", "vpcs",
		"eips", "natgateways", "routes", "routetables", "routetableassociations",
		"keypairs", "launchtemplates", "networkinterfaces", "vpcendpoints", "flowlogs")
	repo.WriteFiles(t, "ec2 with 5 kinds", activationFiles(reg, five))
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, regFlags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	first := repo.WriteFiles(t, "lock", nil)
	apply("5 kinds")
	if diff := cmp.Diff(five, crdsNamed(t, env, ec2Group)); diff != "" {
		t.Fatalf("ec2 CRDs after the 5-kind apply: -want +got\n%s", diff)
	}

	// Commit 2: 15 kinds. The policy changes no version: the lock stays.
	second := repo.WriteFiles(t, "ec2 with 15 kinds", activationFiles(reg, fifteen))
	diffFlags := []string{"--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host, conversion}
	r, err := diffReport(t, append(diffFlags, "--base", first.String(), "--head", second.String())...)
	if err != nil {
		t.Fatalf("diff 5 → 15 kinds: %v", err)
	}
	p := findPackage(r, "provider-aws-ec2")
	if p == nil || p.Activation == nil {
		t.Fatalf("diff 5 → 15 kinds: no activation change for provider-aws-ec2: %+v", r.Packages)
	}
	added := slices.DeleteFunc(slices.Clone(fifteen), func(n string) bool { return slices.Contains(five, n) })
	if diff := cmp.Diff(added, p.Activation.Activated); diff != "" {
		t.Errorf("diff 5 → 15 kinds, activated CRDs: -want +got\n%s", diff)
	}
	if len(p.Activation.Deactivated) != 0 || p.Activation.Active != 15 || r.Summary.CRDsActivated != 10 {
		t.Errorf("diff 5 → 15 kinds: %d deactivated, %d active, summary +%d; want 0, 15, +10", len(p.Activation.Deactivated), p.Activation.Active, r.Summary.CRDsActivated)
	}
	apply("15 kinds")
	if diff := cmp.Diff(fifteen, crdsNamed(t, env, ec2Group)); diff != "" {
		t.Errorf("ec2 CRDs after the 15-kind apply: -want +got\n%s", diff)
	}
	for _, pc := range []string{"providerconfigs.aws.upbound.io", "providerconfigusages.aws.upbound.io"} {
		if getObj(t, env, "apiextensions.k8s.io/v1", "CustomResourceDefinition", pc) == nil {
			t.Errorf("ProviderConfig-type CRD %s missing after the 15-kind apply", pc)
		}
	}

	// Custom resources in two kinds the next commit deactivates.
	createEC2Resources(t, env)
	deactivated := ec2Names("flowlogs", "subnets", "vpcs")
	twelve := slices.DeleteFunc(slices.Clone(fifteen), func(n string) bool { return slices.Contains(deactivated, n) })
	third := repo.WriteFiles(t, "ec2 with 12 kinds", activationFiles(reg, twelve))

	cases := []struct {
		name, reason string
		args         []string
		orphaned     *int
		counts       map[string]int
		text         string
	}{
		{
			name:   "Offline",
			reason: "Without --cluster diff reads no cluster and counts nothing.",
			text:   "−3 CRDs: flowlogs.ec2.aws.upbound.io, subnets.ec2.aws.upbound.io, vpcs.ec2.aws.upbound.io; kept",
		},
		{
			name:     "Cluster",
			reason:   "--cluster counts the custom resources of each deactivated CRD on the cluster: 2 VPCs, 1 Subnet, no FlowLog.",
			args:     []string{"--cluster", "--kubeconfig", kubeconfig},
			orphaned: ptr(3),
			counts:   map[string]int{"flowlogs." + ec2Group: 0, "subnets." + ec2Group: 1, "vpcs." + ec2Group: 2},
			text:     "−3 CRDs, 3 custom resources would be orphaned: flowlogs.ec2.aws.upbound.io, subnets.ec2.aws.upbound.io, vpcs.ec2.aws.upbound.io; kept",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sides := append(append(slices.Clone(diffFlags), "--base", second.String(), "--head", third.String()), tc.args...)
			r, err := diffReport(t, sides...)
			if err != nil {
				t.Fatalf("diff 15 → 12 kinds: %v", err)
			}
			p := findPackage(r, "provider-aws-ec2")
			if p == nil || p.Activation == nil {
				t.Fatalf("diff 15 → 12 kinds: no activation change: %+v", r.Packages)
			}
			if diff := cmp.Diff(deactivated, p.Activation.Deactivated); diff != "" {
				t.Errorf("%s\ndeactivated: -want +got\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.orphaned, p.Activation.Orphaned); diff != "" {
				t.Errorf("%s\norphaned: -want +got\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.counts, p.Activation.CustomResources); diff != "" {
				t.Errorf("%s\ncustom resources per CRD: -want +got\n%s", tc.reason, diff)
			}
			out, err := run(t, append(append([]string{"diff", "--color", "never"}, sides...), tc.args...)...)
			if err != nil {
				t.Fatalf("diff --format text: %v\n%s", err, out)
			}
			if !strings.Contains(out, tc.text) {
				t.Errorf("%s\ntext output lacks %q:\n%s", tc.reason, tc.text, out)
			}
		})
	}
	if _, err := run(t, append([]string{"diff"}, append(slices.Clone(diffFlags), "--kubeconfig", kubeconfig)...)...); err == nil || !strings.Contains(err.Error(), "--kubeconfig is read only with --cluster") {
		t.Errorf("diff --kubeconfig without --cluster: got %v, want it refused", err)
	}

	// Applying commit 3 succeeds and keeps the three MRDs Active (the API
	// server refuses Active → Inactive) and their CRDs in place, the two
	// holding custom resources and the empty one, with a warning each.
	out := apply("12 kinds")
	if diff := cmp.Diff(fifteen, crdsNamed(t, env, ec2Group)); diff != "" {
		t.Errorf("ec2 CRDs after deactivating 3 kinds (all kept): -want +got\n%s", diff)
	}
	for _, n := range deactivated {
		mrd := getObj(t, env, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition", n)
		if st, _, _ := unstructured.NestedString(mrd.Object, "spec", "state"); st != "Active" {
			t.Errorf("MRD %s: state %q after the deactivation, want Active (it cannot go back)", n, st)
		}
	}
	for _, want := range []string{
		"ManagedResourceDefinition vpcs.ec2.aws.upbound.io: no ManagedResourceActivationPolicy activates it any more, but an Active MRD cannot become Inactive (a validation rule of its CRD): it stays Active, and CustomResourceDefinition vpcs.ec2.aws.upbound.io stays in place (custom resources of its kind exist)",
		"CustomResourceDefinition subnets.ec2.aws.upbound.io stays in place (custom resources of its kind exist)",
		"CustomResourceDefinition flowlogs.ec2.aws.upbound.io stays in place (no custom resource of its kind exists)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("apply output lacks %q:\n%s", want, out)
		}
	}
	// The next apply changes nothing.
	if out := apply("12 kinds again"); !strings.Contains(out, "0 mutating requests sent") {
		t.Errorf("the second apply of the deactivation is not a no-op:\n%s", out)
	}
}

func ptr[T any](v T) *T { return &v }

// TestDiffConversionOnCluster: turning the lock's MRD conversion on
// (lockstep lock --enable-custom-to-managed-resource-conversion=true) is a
// reviewed change. On a cluster where provider-aws-ec2 v2.6.0 (safe-start)
// was applied from a lock with conversion off, so every ec2 CRD exists
// plain, custom resources exist in two kinds the policy does not
// activate; `diff --cluster` of the switch says MRD conversion off → on,
// lists the CRDs it deactivates and counts those custom resources as
// orphaned. The flag on diff asserts the head's lock and lock --check
// reports a lock recording another value as stale. On a control plane of
// its own: the test writes cluster-scoped ec2 CRDs.
func TestDiffConversionOnCluster(t *testing.T) {
	reg := registry.New(t)
	pushUpstream(t, reg, "provider-aws-ec2-v2.6.0", "upbound/provider-aws-ec2", "v2.6.0")
	pushUpstream(t, reg, "provider-family-aws-v2.6.0", "upbound/provider-family-aws", "v2.6.0")
	repo := gitrepo.New(t, "main")
	dir := filepath.Join(repo.Dir, "clusters", "prod")
	cache := t.TempDir()
	regFlags := []string{"--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host}
	env, kubeconfig := clusterOn(t, envtest.Dedicated(t), "xp-conv")
	clusterFlags := []string{"--kubeconfig", kubeconfig, "--namespace", "xp-conv"}
	lock := func(step string, args ...string) string {
		t.Helper()
		out, err := run(t, append(append([]string{"lock", "--crossplane-version", "v2.1.0"}, regFlags...), args...)...)
		if err != nil {
			t.Fatalf("%s: lock: %v\n%s", step, err, out)
		}
		return out
	}

	active := ec2Names("instances", "internetgateways", "securitygroups")
	repo.WriteFiles(t, "ec2 with 3 kinds", activationFiles(reg, active))
	lock("off", "--enable-custom-to-managed-resource-conversion=false")
	first := repo.WriteFiles(t, "lock, conversion off", nil)
	if out, err := run(t, append(append([]string{"apply", "--instance", "conv"}, regFlags...), clusterFlags...)...); err != nil {
		t.Fatalf("apply with conversion off: %v\n%s", err, out)
	}
	plain := crdsNamed(t, env, ec2Group)
	for _, n := range ec2Names("vpcs", "subnets", "instances") {
		if !slices.Contains(plain, n) {
			t.Fatalf("CRD %s not installed by the apply with conversion off (%d ec2 CRDs)", n, len(plain))
		}
	}
	createEC2Resources(t, env)

	out := lock("on", "--enable-custom-to-managed-resource-conversion=true")
	if !strings.Contains(out, "~ MRD conversion (customToManagedResourceConversion) off -> on") || !strings.Contains(out, ", MRD conversion on\n") {
		t.Errorf("lock output does not show the switch:\n%s", out)
	}
	second := repo.WriteFiles(t, "lock, conversion on", nil)
	if out, err := run(t, append([]string{"lock", "--check", "--enable-custom-to-managed-resource-conversion=false"}, regFlags...)...); err == nil ||
		!strings.Contains(out, "the lock records customToManagedResourceConversion true (MRD conversion on), not false; run lockstep lock --enable-custom-to-managed-resource-conversion=false") {
		t.Errorf("lock --check with the other value: got %v, want it stale naming the setting\n%s", err, out)
	}

	sides := []string{"--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host, "--base", first.String(), "--head", second.String()}
	r, err := diffReport(t, append(slices.Clone(sides), "--cluster", "--kubeconfig", kubeconfig)...)
	if err != nil {
		t.Fatalf("diff --cluster off → on: %v", err)
	}
	if diff := cmp.Diff([]diff.FieldChange{{Field: "customToManagedResourceConversion", Base: "off", Head: "on"}}, r.Lock); diff != "" {
		t.Errorf("lock changes: -want +got\n%s", diff)
	}
	p := findPackage(r, "provider-aws-ec2")
	if p == nil || p.Activation == nil {
		t.Fatalf("diff off → on: no activation change for provider-aws-ec2: %+v", r.Packages)
	}
	a := p.Activation
	wantDeactivated := slices.DeleteFunc(slices.Clone(plain), func(n string) bool { return slices.Contains(active, n) })
	if len(a.Activated) != 0 || a.Active != len(active) || !containsAll(a.Deactivated, wantDeactivated) {
		t.Errorf("activation: %d activated, %d active, %d deactivated; want 0, %d, and every plain ec2 CRD but the active ones (%d)",
			len(a.Activated), a.Active, len(a.Deactivated), len(active), len(wantDeactivated))
	}
	if a.Orphaned == nil || *a.Orphaned != 3 || a.CustomResources["vpcs."+ec2Group] != 2 || a.CustomResources["subnets."+ec2Group] != 1 || r.Summary.CustomResourcesOrphaned != 3 {
		t.Errorf("orphaned %v, per CRD vpcs %d subnets %d, summary %d; want 3, 2, 1, 3", a.Orphaned,
			a.CustomResources["vpcs."+ec2Group], a.CustomResources["subnets."+ec2Group], r.Summary.CustomResourcesOrphaned)
	}
	text, err := run(t, append(append([]string{"diff", "--color", "never"}, sides...), "--cluster", "--kubeconfig", kubeconfig)...)
	if err != nil {
		t.Fatalf("diff --format text: %v\n%s", err, text)
	}
	for _, want := range []string{
		"~ MRD conversion (customToManagedResourceConversion): off → on",
		fmt.Sprintf("−%d CRDs, 3 custom resources would be orphaned: ", len(a.Deactivated)),
		"kept: installed as a plain CRD before MRD conversion",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
	// The flag asserts the head's lock: false is refused, true agrees
	// (the base, off, is not asserted).
	if _, err := run(t, append(append([]string{"diff"}, sides...), "--enable-custom-to-managed-resource-conversion=false")...); err == nil ||
		!strings.Contains(err.Error(), "--enable-custom-to-managed-resource-conversion=false disagrees with") {
		t.Errorf("diff with a flag that disagrees with the head's lock: got %v, want it refused", err)
	}
	if out, err := run(t, append(append([]string{"diff"}, sides...), "--enable-custom-to-managed-resource-conversion=true")...); err != nil {
		t.Errorf("diff with a flag that agrees with the head's lock: %v\n%s", err, out)
	}

	// Applying the switch keeps every CRD and its custom resources, as the
	// diff said: the inactive kinds' MRDs are Inactive, their CRDs stay.
	if out, err := run(t, append(append([]string{"apply", "--instance", "conv"}, regFlags...), clusterFlags...)...); err != nil {
		t.Fatalf("apply with conversion on: %v\n%s", err, out)
	}
	if diff := cmp.Diff(plain, crdsNamed(t, env, ec2Group)); diff != "" {
		t.Errorf("ec2 CRDs after the switch: -want +got\n%s", diff)
	}
	for name, want := range map[string]string{"vpcs." + ec2Group: "Inactive", "instances." + ec2Group: "Active"} {
		mrd := getObj(t, env, "apiextensions.crossplane.io/v1alpha1", "ManagedResourceDefinition", name)
		if mrd == nil {
			t.Errorf("MRD %s missing after the switch", name)
			continue
		}
		if st, _, _ := unstructured.NestedString(mrd.Object, "spec", "state"); st != want {
			t.Errorf("MRD %s: state %q after the switch, want %s", name, st, want)
		}
	}
	getCtx := envtest.Context(t, 2*time.Minute)
	for _, name := range []string{"a", "b"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(ec2Group + "/v1beta1")
		u.SetKind("VPC")
		if err := env.Client.Get(getCtx, client.ObjectKey{Name: name}, u); err != nil {
			t.Errorf("VPC %s after the switch: %v", name, err)
		}
	}
}

// containsAll reports whether every element of want is in got.
func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

// createEC2Resources creates three custom resources of provider-aws-ec2's
// kinds that the tests' next commit deactivates: VPCs a and b, Subnet c.
func createEC2Resources(t *testing.T, env *envtest.Env) {
	t.Helper()
	ctx := envtest.Context(t, time.Minute)
	for _, cr := range []struct{ kind, name string }{{"VPC", "a"}, {"VPC", "b"}, {"Subnet", "c"}} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": ec2Group + "/v1beta1", "kind": cr.kind,
			"metadata": map[string]any{"name": cr.name},
			"spec":     map[string]any{"forProvider": map[string]any{"region": "eu-west-1"}},
		}}
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", cr.kind, cr.name, err)
		}
	}
}
