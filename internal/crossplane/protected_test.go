package crossplane_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func TestProtectedGroup(t *testing.T) {
	cases := map[string]struct {
		reason    string
		group     string
		protected bool
	}{
		"pkg":                 {reason: "Crossplane's package API is Crossplane's (providers.pkg.crossplane.io, evilthings.pkg.crossplane.io)", group: "pkg.crossplane.io", protected: true},
		"apiextensions":       {reason: "XRDs and Compositions are Crossplane's", group: "apiextensions.crossplane.io", protected: true},
		"ops":                 {reason: "Operations are Crossplane's", group: "ops.crossplane.io", protected: true},
		"protection":          {reason: "Usages are Crossplane's", group: "protection.crossplane.io", protected: true},
		"meta":                {reason: "package metadata is Crossplane's", group: "meta.pkg.crossplane.io", protected: true},
		"subdomain of core":   {reason: "a subdomain of a Crossplane group is Crossplane's", group: "evil.apiextensions.crossplane.io", protected: true},
		"core":                {reason: "the Kubernetes core group", group: "", protected: true},
		"apps":                {reason: "a built-in group without a dot", group: "apps", protected: true},
		"policy":              {reason: "a built-in group without a dot", group: "policy", protected: true},
		"k8s.io subdomain":    {reason: "*.k8s.io is reserved for Kubernetes", group: "apiextensions.k8s.io", protected: true},
		"k8s.io":              {reason: "k8s.io itself is reserved", group: "k8s.io", protected: true},
		"lockstep.io":         {reason: "lockstep.io is lockstep's own group (the Sync)", group: "lockstep.io", protected: true},
		"lockstep subdomain":  {reason: "subdomains of lockstep.io (the examples' demo.lockstep.io) are packages'", group: "demo.lockstep.io"},
		"kubernetes.io":       {reason: "*.kubernetes.io is reserved for Kubernetes", group: "storage.kubernetes.io", protected: true},
		"provider-helm":       {reason: "other crossplane.io groups belong to packages", group: "helm.crossplane.io"},
		"provider-nop":        {reason: "other crossplane.io groups belong to packages", group: "nop.crossplane.io"},
		"upbound":             {reason: "a provider's own group", group: "ec2.aws.upbound.io"},
		"x-k8s.io":            {reason: "x-k8s.io is for SIG projects outside Kubernetes, not reserved", group: "cluster.x-k8s.io"},
		"look-alike suffix":   {reason: "only whole labels match: notpkg.crossplane.io is not a subdomain of pkg.crossplane.io", group: "notpkg.crossplane.io"},
		"look-alike k8s":      {reason: "notk8s.io is not k8s.io", group: "notk8s.io"},
		"lockstep demo group": {reason: "the examples' groups are fine", group: "demo.lockstep.io"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			why := crossplane.ProtectedGroup(tc.group)
			if got := why != ""; got != tc.protected {
				t.Errorf("%s\nProtectedGroup(%q) = %q, want protected %v", tc.reason, tc.group, why, tc.protected)
			}
		})
	}
}

func TestCheckDefinition(t *testing.T) {
	cases := map[string]struct {
		reason string
		gk     schema.GroupKind
		name   string
		raw    string
		want   *crossplane.ProtectedGroupError
	}{
		"loosened Provider CRD": {
			reason: "a copy of Crossplane's Provider CRD is refused",
			gk:     crossplane.GroupKindCRD, name: "providers.pkg.crossplane.io",
			raw:  `{"spec":{"group":"pkg.crossplane.io"}}`,
			want: &crossplane.ProtectedGroupError{Kind: "CustomResourceDefinition", Name: "providers.pkg.crossplane.io", Group: "pkg.crossplane.io", Reason: crossplane.ProtectedGroup("pkg.crossplane.io")},
		},
		"XRD in a Kubernetes group": {
			reason: "an XRD's spec.group is the group of the CRD Crossplane generates for it",
			gk:     crossplane.GroupKindXRD, name: "deployments.apps",
			raw:  `{"spec":{"group":"apps"}}`,
			want: &crossplane.ProtectedGroupError{Kind: "CompositeResourceDefinition", Name: "deployments.apps", Group: "apps", Reason: crossplane.ProtectedGroup("apps")},
		},
		"own group": {
			reason: "a provider's CRD in its own group passes",
			gk:     crossplane.GroupKindCRD, name: "buckets.demo.lockstep.io",
			raw: `{"spec":{"group":"demo.lockstep.io"}}`,
		},
		"not a definition": {
			reason: "a Composition defines no types, whatever its fields say",
			gk:     crossplane.GroupKindComposition, name: "c",
			raw: `{"spec":{"group":"pkg.crossplane.io"}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := crossplane.CheckDefinition(tc.gk, tc.name, []byte(tc.raw))
			var got *crossplane.ProtectedGroupError
			if err != nil && !errors.As(err, &got) {
				t.Fatalf("%s\nCheckDefinition: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nCheckDefinition: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
