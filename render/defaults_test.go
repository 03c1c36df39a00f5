package render

import (
	"fmt"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// legacyProviderStream is v1-style provider metadata (meta v1alpha1) whose
// spec.controller is filled in by the test.
const legacyProviderStream = `
apiVersion: meta.pkg.crossplane.io/v1alpha1
kind: Provider
metadata:
  name: provider-test
spec:
  controller:
%s
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.test.lockstep.io
spec:
  group: test.lockstep.io
  names: {kind: Thing, plural: things}
  scope: Cluster
  versions: [{name: v1, served: true, storage: true}]
`

// TestFromDefaults: Object.FromDefaults is true only on the runtime and
// RBAC objects that nothing but lockstep's defaults shaped; any user or
// package input that could be invalid keeps the object's dry-run
// (docs/design/apply.md#preflight-modes).
func TestFromDefaults(t *testing.T) {
	const (
		source = "registry.lockstep.example/test/provider-test"
		name   = "provider-test"
	)
	rev := RevisionName(name, digestA)
	sys := "ClusterRole/" + SystemClusterRoleName(rev)
	binding := "ClusterRoleBinding/" + SystemClusterRoleName(rev)
	const ns = "crossplane-system"
	deployment, sa, svc := "Deployment/"+ns+"/"+rev, "ServiceAccount/"+ns+"/"+rev, "Service/"+ns+"/"+name
	provider := func(stream string) Package {
		return Package{Kind: crossplane.KindProvider, Name: name, Source: source, Version: "v1.0.0", Digest: digestA, Contents: parsed(t, stream)}
	}
	withDecl := func(p Package, mutate func(*declarations.Declaration)) Package {
		p.Declaration = decl(t, p.Kind, p.Name, p.Source, p.Version, mutate)
		return p
	}
	drc := func(spec declarations.DeploymentRuntimeConfigSpec) declarations.DeploymentRuntimeConfig {
		c := declarations.DeploymentRuntimeConfig{Spec: spec}
		c.Name = declarations.DefaultRuntimeConfigName
		return c
	}
	cases := map[string]struct {
		reason string
		in     Input
		// notDefault are the runtime and RBAC objects ("Kind/ns/name")
		// without FromDefaults; every other one has it.
		notDefault []string
	}{
		"Defaults": {
			reason: "A provider with nothing but lockstep's defaults: every runtime and RBAC object is from defaults.",
			in:     testInput(withDecl(provider(providerStream), nil)),
		},
		"EmptyDefaultRuntimeConfig": {
			reason: "A declared default DeploymentRuntimeConfig without templates shapes nothing.",
			in:     Input{Namespace: ns, Instance: "test", Packages: []Package{provider(providerStream)}, RuntimeConfigs: []declarations.DeploymentRuntimeConfig{drc(declarations.DeploymentRuntimeConfigSpec{})}},
		},
		"DeploymentRuntimeConfig": {
			reason: "A runtime config's template may shape the Service, the ServiceAccount, the Deployment and the binding's subject.",
			in: Input{Namespace: ns, Instance: "test", Packages: []Package{provider(providerStream)}, RuntimeConfigs: []declarations.DeploymentRuntimeConfig{drc(declarations.DeploymentRuntimeConfigSpec{
				DeploymentTemplate: &declarations.DeploymentTemplate{Metadata: &declarations.TemplateMeta{Labels: map[string]string{"team": "a"}}},
			})}},
			notDefault: []string{binding, deployment, sa, svc},
		},
		"ServiceAccountNamedByRuntimeConfig": {
			reason: "A ServiceAccount named by the runtime config changes the binding's subject and the Deployment's serviceAccountName.",
			in: Input{Namespace: ns, Instance: "test", Packages: []Package{provider(providerStream)}, RuntimeConfigs: []declarations.DeploymentRuntimeConfig{drc(declarations.DeploymentRuntimeConfigSpec{
				ServiceAccountTemplate: &declarations.ServiceAccountTemplate{Metadata: &declarations.TemplateMeta{Name: ptr.To("runner")}},
			})}},
			notDefault: []string{binding, deployment, "ServiceAccount/" + ns + "/runner", svc},
		},
		"ImageConfigRewrite": {
			reason: "An ImageConfig that rewrites the image leaves the Deployment from defaults: the rewritten image is a parsed image reference, which the API server accepts.",
			in: Input{Namespace: ns, Instance: "test", Packages: []Package{provider(providerStream)}, ImageConfigs: []declarations.ImageConfig{
				withRewrite(imageConfig("mirror", "registry.lockstep.example/"), "mirror.lockstep.example/"),
			}},
		},
		"ImageConfigPullSecret": {
			reason: "An ImageConfig's pull secret shapes the Deployment.",
			in: Input{Namespace: ns, Instance: "test", Packages: []Package{provider(providerStream)}, ImageConfigs: []declarations.ImageConfig{
				withPullSecret(imageConfig("auth", "registry.lockstep.example/"), "registry-auth"),
			}},
			notDefault: []string{deployment},
		},
		"PackagePullSecrets": {
			reason: "The declaration's packagePullSecrets go into the ServiceAccount and the Deployment.",
			in: testInput(withDecl(provider(providerStream), func(d *declarations.Declaration) {
				d.Spec.PackagePullSecrets = []corev1.LocalObjectReference{{Name: "registry-auth"}}
			})),
			notDefault: []string{deployment, sa},
		},
		"CrossplanePullSecrets": {
			reason: "The pull secrets of Crossplane's ServiceAccount shape the runtime's ServiceAccount, not the Deployment.",
			in: func() Input {
				in := testInput(withDecl(provider(providerStream), nil))
				in.CrossplanePullSecrets = []corev1.LocalObjectReference{{Name: "xp-pull"}}
				return in
			}(),
			notDefault: []string{sa},
		},
		"ControllerImage": {
			reason:     "v1-style metadata's spec.controller.image runs instead of the package image.",
			in:         testInput(provider(fmt.Sprintf(legacyProviderStream, "    image: registry.lockstep.example/test/provider-test-controller:v1"))),
			notDefault: []string{deployment},
		},
		"PermissionRequests": {
			reason: "Permissions the package requests go into the system ClusterRole.",
			in: Input{Namespace: ns, Instance: "test", Packages: []Package{provider(fmt.Sprintf(legacyProviderStream, "    permissionRequests:\n    - apiGroups: [\"\"]\n      resources: [configmaps]\n      verbs: [get]"))},
				AllowedProviderPermissions: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}},
			notDefault: []string{sys},
		},
		"ServiceNameNotADNS1035Label": {
			reason:     "A package name that is a DNS subdomain but not a DNS-1035 label cannot name a Service: the Service keeps its dry-run.",
			in:         testInput(Package{Kind: crossplane.KindProvider, Name: "1provider", Source: source, Version: "v1.0.0", Digest: digestA, Contents: parsed(t, providerStream)}),
			notDefault: []string{"Service/" + ns + "/1provider"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := Render(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			rev := out.Packages[0].Revision
			var got []string
			n := 0
			for _, o := range append(append([]*Object(nil), rev.Runtime...), rev.RBAC...) {
				n++
				if !o.FromDefaults {
					got = append(got, o.String())
				}
			}
			if n == 0 {
				t.Fatalf("%s: no runtime objects rendered", tc.reason)
			}
			for _, o := range append(append(append([]*Object(nil), rev.Payload...), out.Packages[0].Record), rev.Record) {
				if o.FromDefaults {
					t.Errorf("%s: payload or record %s is marked FromDefaults", tc.reason, o)
				}
			}
			sort.Strings(got)
			want := append([]string(nil), tc.notDefault...)
			sort.Strings(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nobjects not from defaults: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRuntimeServiceAccountPullSecrets: the runtime's ServiceAccount gets
// the package's packagePullSecrets, then those of Crossplane's own
// ServiceAccount, as Crossplane's runtime builder appends them
// (crossplane/crossplane internal/controller/pkg/runtime/runtime.go,
// ServiceAccount); the Deployment gets the package's alone.
func TestRuntimeServiceAccountPullSecrets(t *testing.T) {
	cases := map[string]struct {
		reason          string
		pkg, xp         []string
		wantSA, wantDep []string
	}{
		"None":       {reason: "No pull secret anywhere: none on either object."},
		"Package":    {reason: "The package's pull secrets go to both.", pkg: []string{"pkg"}, wantSA: []string{"pkg"}, wantDep: []string{"pkg"}},
		"Crossplane": {reason: "Crossplane's go to the ServiceAccount only.", xp: []string{"xp"}, wantSA: []string{"xp"}},
		"Both": {
			reason: "The package's come first, then Crossplane's, a name in both kept twice as Crossplane keeps it.",
			pkg:    []string{"pkg", "shared"}, xp: []string{"shared", "xp"},
			wantSA: []string{"pkg", "shared", "shared", "xp"}, wantDep: []string{"pkg", "shared"},
		},
	}
	refs := func(names []string) []corev1.LocalObjectReference {
		var out []corev1.LocalObjectReference
		for _, n := range names {
			out = append(out, corev1.LocalObjectReference{Name: n})
		}
		return out
	}
	names := func(u map[string]any, fields ...string) []string {
		l, _, _ := unstructured.NestedSlice(u, fields...)
		var out []string
		for _, e := range l {
			out = append(out, e.(map[string]any)["name"].(string))
		}
		return out
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := Package{Kind: crossplane.KindProvider, Name: "provider-test", Source: "registry.lockstep.example/test/provider-test", Version: "v1.0.0", Digest: digestA, Contents: parsed(t, providerStream)}
			p.Declaration = decl(t, p.Kind, p.Name, p.Source, p.Version, func(d *declarations.Declaration) {
				d.Spec.PackagePullSecrets = refs(tc.pkg)
			})
			in := testInput(p)
			in.CrossplanePullSecrets = refs(tc.xp)
			out, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			var sa, dep []string
			for _, o := range out.Packages[0].Revision.Runtime {
				u, err := o.Unstructured()
				if err != nil {
					t.Fatal(err)
				}
				switch o.Kind {
				case "ServiceAccount":
					sa = names(u.Object, "imagePullSecrets")
				case "Deployment":
					dep = names(u.Object, "spec", "template", "spec", "imagePullSecrets")
				}
			}
			if diff := cmp.Diff(tc.wantSA, sa); diff != "" {
				t.Errorf("%s\nServiceAccount imagePullSecrets: -want +got\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantDep, dep); diff != "" {
				t.Errorf("%s\nDeployment imagePullSecrets: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
