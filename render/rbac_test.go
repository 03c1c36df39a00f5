package render

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func TestRefusedPermissions(t *testing.T) {
	rule := func(groups, resources, verbs []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
	}
	cases := map[string]struct {
		reason   string
		allowed  []rbacv1.PolicyRule
		requests []rbacv1.PolicyRule
		want     []RefusedPermission
	}{
		"NothingAllowedRefusesEverything": {
			reason:   "Without an allow list every request is refused, like Crossplane v1.x without --provider-clusterrole.",
			requests: []rbacv1.PolicyRule{rule([]string{""}, []string{"secrets"}, []string{"get"})},
			want:     []RefusedPermission{{Index: 0, Resource: "secrets", ResourceName: "*", Verb: "get"}},
		},
		"ExactlyAllowed": {
			reason:   "A request within the allow list passes.",
			allowed:  []rbacv1.PolicyRule{rule([]string{""}, []string{"secrets", "configmaps"}, []string{"get", "list"})},
			requests: []rbacv1.PolicyRule{rule([]string{""}, []string{"configmaps"}, []string{"list"})},
		},
		"WildcardsAllow": {
			reason:   "An allowed * covers any group, resource or verb.",
			allowed:  []rbacv1.PolicyRule{rule([]string{"*"}, []string{"*"}, []string{"get"})},
			requests: []rbacv1.PolicyRule{rule([]string{"apps"}, []string{"deployments"}, []string{"get"})},
		},
		"OneVerbRefused": {
			reason:   "Each verb is checked on its own; only the refused one is reported, with its rule index.",
			allowed:  []rbacv1.PolicyRule{rule([]string{"apps"}, []string{"deployments"}, []string{"get"})},
			requests: []rbacv1.PolicyRule{rule([]string{""}, []string{}, nil), rule([]string{"apps"}, []string{"deployments"}, []string{"get", "delete"})},
			want:     []RefusedPermission{{Index: 1, APIGroup: "apps", Resource: "deployments", ResourceName: "*", Verb: "delete"}},
		},
		"NamedResourcesDoNotCoverAll": {
			reason:   "An allow list with resource names does not cover a request for every name.",
			allowed:  []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"leader"}, Verbs: []string{"get"}}},
			requests: []rbacv1.PolicyRule{rule([]string{""}, []string{"configmaps"}, []string{"get"})},
			want:     []RefusedPermission{{Index: 0, Resource: "configmaps", ResourceName: "*", Verb: "get"}},
		},
		"NonResourceURLs": {
			reason:   "Non-resource URLs are matched on their own.",
			allowed:  []rbacv1.PolicyRule{{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}}},
			requests: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/healthz", "/metrics"}, Verbs: []string{"get"}}},
			want:     []RefusedPermission{{Index: 0, NonResourceURL: "/metrics", Verb: "get"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := refusedPermissions(tc.allowed, tc.requests)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nrefusedPermissions(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestOrgDiffers(t *testing.T) {
	cases := map[string]struct {
		a, b string
		want bool
	}{
		"SameOrg":       {"xpkg.upbound.io/upbound/provider-aws-s3", "xpkg.upbound.io/upbound/provider-family-aws", false},
		"OtherOrg":      {"xpkg.upbound.io/upbound/provider-aws-s3", "xpkg.upbound.io/evil/provider-family-aws", true},
		"OtherRegistry": {"xpkg.upbound.io/upbound/provider-aws-s3", "xpkg.crossplane.io/upbound/provider-family-aws", true},
		"Unparsable":    {"xpkg.upbound.io/upbound/provider-aws-s3", "UPPER/case", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := orgDiffers(tc.a, tc.b); got != tc.want {
				t.Errorf("orgDiffers(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func TestCapabilityMatch(t *testing.T) {
	for _, c := range []string{"safe-start", "SafeStart", "safe_start", "SAFE START"} {
		if !capabilityMatch([]string{"composition", c}, "safe-start") {
			t.Errorf("capabilityMatch(%q, safe-start) = false; Crossplane compares letters and digits only, case-insensitively", c)
		}
	}
	if capabilityMatch([]string{"safe-starter"}, "safe-start") {
		t.Errorf("capabilityMatch(safe-starter, safe-start) = true, want false")
	}
}

const familyStream = `
apiVersion: meta.pkg.crossplane.io/v1
kind: Provider
metadata:
  name: %s
  labels:
    pkg.crossplane.io/provider-family: test-family
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %s.test.lockstep.io
spec:
  group: test.lockstep.io
  names: {kind: Thing, plural: %s}
  scope: Cluster
  versions: [{name: v1, served: true, storage: true}]
`

func TestFamilyRBAC(t *testing.T) {
	stream := func(name, plural string) string { return fmt.Sprintf(familyStream, name, plural, plural) }
	a := Package{Kind: crossplane.KindProvider, Name: "family", Source: "registry.lockstep.example/org/family", Digest: digestA, Contents: parsed(t, stream("family", "configs"))}
	b := Package{Kind: crossplane.KindProvider, Name: "member", Source: "registry.lockstep.example/org/member", Digest: digestB, Contents: parsed(t, stream("member", "buckets"))}
	evil := Package{Kind: crossplane.KindProvider, Name: "impostor", Source: "registry.lockstep.example/evil/impostor", Digest: digestB, Contents: parsed(t, stream("impostor", "secrets"))}
	out, err := Render(testInput(a, b, evil))
	if err != nil {
		t.Fatal(err)
	}
	resources := func(po *PackageOutput) string {
		for _, o := range po.Revision.RBAC {
			if strings.HasSuffix(o.Name, ":aggregate-to-view") {
				return string(o.JSON())
			}
		}
		return ""
	}
	for _, tc := range []struct {
		pkg        string
		want, skip []string
	}{
		{"family", []string{`"buckets"`, `"configs"`}, []string{`"secrets"`}},
		{"member", []string{`"buckets"`, `"configs"`}, []string{`"secrets"`}},
		{"impostor", []string{`"secrets"`}, []string{`"buckets"`, `"configs"`}},
	} {
		got := resources(out.Package(crossplane.KindProvider, tc.pkg))
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the roles cover the family's resources in the same registry and org; %s missing from %s", tc.pkg, w, got)
			}
		}
		for _, s := range tc.skip {
			if strings.Contains(got, s) {
				t.Errorf("%s: a provider of another org is not in the family (OrgDiffer); %s found in %s", tc.pkg, s, got)
			}
		}
	}
}

func TestNoResourcesNoRBAC(t *testing.T) {
	const legacy = "apiVersion: meta.pkg.crossplane.io/v1alpha1\nkind: Provider\nmetadata:\n  name: provider-empty\nspec:\n  controller:\n    permissionRequests:\n    - apiGroups: [\"\"]\n      resources: [configmaps]\n      verbs: [get]\n"
	cases := map[string]struct {
		reason       string
		stream       string
		wantWarnings []string
	}{
		"NoRequests": {
			reason: "A provider without CRDs gets no ClusterRoles, like Crossplane's RenderClusterRoles, and nothing is lost.",
			stream: "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-empty\n",
		},
		"RequestsNotGranted": {
			reason: "The permissionRequests of a provider without CRDs have no role to go into; the revision says so instead of dropping them silently.",
			stream: legacy,
			wantWarnings: []string{"Provider provider-empty: revision provider-empty-" + digestA[7:19] +
				": spec.controller.permissionRequests (1 rule) are not granted: the provider defines no CRDs or MRDs, so, as in Crossplane, no ClusterRoles are rendered to hold them (docs/crossplane-behaviour.md#provider-rbac)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := Package{Kind: crossplane.KindProvider, Name: "provider-empty", Source: "registry.lockstep.example/test/provider-empty", Digest: digestA,
				Contents: parsed(t, tc.stream)}
			in := testInput(p)
			in.AllowedProviderPermissions = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}
			out, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(out.Packages[0].Revision.RBAC); n != 0 {
				t.Errorf("%s\ngot %d RBAC objects, want none", tc.reason, n)
			}
			if diff := cmp.Diff(tc.wantWarnings, out.Warnings()); diff != "" {
				t.Errorf("%s\nWarnings(): -want +got:\n%s", tc.reason, diff)
			}
			if err := out.Err(); err != nil {
				t.Errorf("%s\nErr() = %v, want nil: a warning is not a problem", tc.reason, err)
			}
		})
	}
}

func TestPermissionProblemDoesNotFailRender(t *testing.T) {
	stream := `
apiVersion: meta.pkg.crossplane.io/v1alpha1
kind: Provider
metadata:
  name: provider-greedy
spec:
  controller:
    permissionRequests:
    - apiGroups: ["*"]
      resources: ["*"]
      verbs: ["*"]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.greedy.lockstep.io
spec:
  group: greedy.lockstep.io
  names: {kind: Thing, plural: things}
  scope: Cluster
  versions: [{name: v1, served: true, storage: true}]
`
	greedy := Package{Kind: crossplane.KindProvider, Name: "provider-greedy", Source: "registry.lockstep.example/test/provider-greedy", Digest: digestA, Contents: parsed(t, stream)}
	other := Package{Kind: crossplane.KindProvider, Name: "provider-test", Source: "registry.lockstep.example/test/provider-test", Digest: digestB, Contents: parsed(t, providerStream)}
	out, err := Render(testInput(greedy, other))
	if err != nil {
		t.Fatalf("a refused permission request is a problem of its revision, not a Render error: %v", err)
	}
	var perr *PermissionError
	if !errors.As(out.Err(), &perr) || perr.Package != "provider-greedy" {
		t.Fatalf("Err() = %v, want a *PermissionError for provider-greedy", out.Err())
	}
	if !strings.Contains(perr.Error(), `permissionRequests[0] {apiGroup: "*", resource: "*", resourceName: "*", verb: "*"}`) {
		t.Errorf("the error names the refused rule: %v", perr)
	}
	if n := len(out.Package(crossplane.KindProvider, "provider-greedy").Revision.RBAC); n != 0 {
		t.Errorf("no RBAC for the refused revision, got %d objects", n)
	}
	if len(out.Package(crossplane.KindProvider, "provider-greedy").Revision.Payload) != 1 || len(out.Package(crossplane.KindProvider, "provider-test").Revision.RBAC) != 4 {
		t.Errorf("the refused revision keeps its payload and runtime, and other packages their RBAC")
	}
}
