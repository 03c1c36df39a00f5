package declarations_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

const overlayBases = "apiVersion: lockstep.io/v1alpha1\nkind: Overlay\nbases:\n- ../../bases/platform\n"

func provider(name, pkg string) string {
	return "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: " + name + "\nspec:\n  package: " + pkg + "\n"
}

// repoFS is a repository with a base (a provider on a runtime config, a
// policy and a ProviderConfig) and three clusters: dev takes it as it is,
// prod overrides the provider's version and the policy, staging adds a
// provider that uses the base's runtime config.
func repoFS() fstest.MapFS {
	return fstest.MapFS{
		"bases/platform/ec2.yaml":            {Data: []byte(provider("provider-aws-ec2", "xpkg.upbound.io/upbound/provider-aws-ec2:v2.6.0"))},
		"bases/platform/runtime.yaml":        {Data: []byte("apiVersion: pkg.crossplane.io/v1beta1\nkind: DeploymentRuntimeConfig\nmetadata:\n  name: small\nspec: {}\n")},
		"bases/platform/activation.yaml":     {Data: []byte("apiVersion: apiextensions.crossplane.io/v1alpha1\nkind: ManagedResourceActivationPolicy\nmetadata:\n  name: ec2\nspec:\n  activate: [\"*.ec2.aws.upbound.io\"]\n")},
		"bases/platform/providerconfig.yaml": {Data: []byte("apiVersion: aws.upbound.io/v1beta1\nkind: ProviderConfig\nmetadata:\n  name: default\nspec:\n  credentials: {source: IRSA}\n")},
		"clusters/dev/lockstep.yaml":         {Data: []byte(overlayBases)},
		"clusters/prod/lockstep.yaml":        {Data: []byte(overlayBases)},
		"clusters/prod/ec2.yaml":             {Data: []byte(provider("provider-aws-ec2", "xpkg.upbound.io/upbound/provider-aws-ec2:v1.23.0"))},
		"clusters/prod/activation.yaml":      {Data: []byte("apiVersion: apiextensions.crossplane.io/v1alpha1\nkind: ManagedResourceActivationPolicy\nmetadata:\n  name: ec2\nspec:\n  activate: [vpcs.ec2.aws.upbound.io, subnets.ec2.aws.upbound.io]\n")},
		"clusters/staging/lockstep.yaml":     {Data: []byte(overlayBases)},
		"clusters/staging/s3.yaml":           {Data: []byte("apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-aws-s3\nspec:\n  package: xpkg.upbound.io/upbound/provider-aws-s3:v2.6.0\n  runtimeConfigRef:\n    name: small\n")},
	}
}

// TestLoadTree reads the clusters of repoFS: each gets the base's
// declarations, prod's overrides replace the base's whole, and a
// reference from a cluster to a base's runtime config resolves.
func TestLoadTree(t *testing.T) {
	cases := map[string]struct {
		reason    string
		dir       string
		packages  []string
		policy    string
		overrides []string
	}{
		"Dev": {
			reason:   "a cluster that overrides nothing renders the base",
			dir:      "clusters/dev",
			packages: []string{"provider-aws-ec2 xpkg.upbound.io/upbound/provider-aws-ec2:v2.6.0 at ../../bases/platform/ec2.yaml:1"},
			policy:   "*.ec2.aws.upbound.io",
		},
		"Prod": {
			reason:    "prod overrides the provider's version and the activation policy; both overrides are recorded with both files",
			dir:       "clusters/prod",
			packages:  []string{"provider-aws-ec2 xpkg.upbound.io/upbound/provider-aws-ec2:v1.23.0 at ec2.yaml:1"},
			policy:    "vpcs.ec2.aws.upbound.io,subnets.ec2.aws.upbound.io",
			overrides: []string{"ManagedResourceActivationPolicy ec2: ../../bases/platform/activation.yaml:4 -> activation.yaml:4", "Provider provider-aws-ec2: ../../bases/platform/ec2.yaml:4 -> ec2.yaml:4"},
		},
		"Staging": {
			reason: "staging adds a provider on the base's runtime config",
			dir:    "clusters/staging",
			packages: []string{
				"provider-aws-ec2 xpkg.upbound.io/upbound/provider-aws-ec2:v2.6.0 at ../../bases/platform/ec2.yaml:1",
				"provider-aws-s3 xpkg.upbound.io/upbound/provider-aws-s3:v2.6.0 at s3.yaml:1",
			},
			policy: "*.ec2.aws.upbound.io",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			set, err := declarations.LoadTree(repoFS(), c.dir)
			if err != nil {
				t.Fatalf("%s: %v", c.reason, err)
			}
			var pkgs []string
			for _, d := range set.Packages {
				pkgs = append(pkgs, d.Name+" "+d.Spec.Package+" at "+d.Location.String())
			}
			if diff := cmp.Diff(c.packages, pkgs); diff != "" {
				t.Errorf("%s: packages -want +got\n%s", c.reason, diff)
			}
			if len(set.ActivationPolicies) != 1 || strings.Join(set.ActivationPolicies[0].Patterns(), ",") != c.policy {
				t.Errorf("%s: activation policies %+v, want one activating %s", c.reason, set.ActivationPolicies, c.policy)
			}
			if len(set.Manifests) != 1 || set.Manifests[0].Location.File != "../../bases/platform/providerconfig.yaml" {
				t.Errorf("%s: manifests %+v, want the base's ProviderConfig", c.reason, set.Manifests)
			}
			var overrides []string
			for _, o := range set.Overrides {
				overrides = append(overrides, o.Object+": "+o.Base.String()+" -> "+o.Overlay.String())
			}
			if diff := cmp.Diff(c.overrides, overrides); diff != "" {
				t.Errorf("%s: overrides -want +got\n%s", c.reason, diff)
			}
		})
	}
}

// TestLoadTreeErrors: what an overlay may not do, each error naming the
// file (and for a conflict, both sides).
func TestLoadTreeErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		edit   func(fstest.MapFS)
		dir    string
		want   string
	}{
		"TwoBasesConflict": {
			reason: "two bases declaring one provider: an error naming both files and lines",
			edit: func(m fstest.MapFS) {
				m["bases/extra/ec2.yaml"] = &fstest.MapFile{Data: []byte(provider("provider-aws-ec2", "xpkg.upbound.io/upbound/provider-aws-ec2:v2.5.0"))}
				m["clusters/dev/lockstep.yaml"] = &fstest.MapFile{Data: []byte(overlayBases + "- ../../bases/extra\n")}
			},
			dir:  "clusters/dev",
			want: "../../bases/extra/ec2.yaml:4: Provider provider-aws-ec2: metadata.name: Provider provider-aws-ec2 is declared twice: first at ../../bases/platform/ec2.yaml:4",
		},
		"OutsideRepository": {
			reason: "a base outside the repository",
			edit: func(m fstest.MapFS) {
				m["clusters/dev/lockstep.yaml"] = &fstest.MapFile{Data: []byte(overlayBases + "- ../../../elsewhere\n")}
			},
			dir:  "clusters/dev",
			want: `lockstep.yaml: base "../../../elsewhere" is outside the tree lockstep reads`,
		},
		"Inside": {
			reason: "a base inside the directory is read with it",
			edit: func(m fstest.MapFS) {
				m["clusters/dev/sub/x.yaml"] = &fstest.MapFile{Data: []byte("")}
				m["clusters/dev/lockstep.yaml"] = &fstest.MapFile{Data: []byte(overlayBases + "- sub\n")}
			},
			dir:  "clusters/dev",
			want: `base "sub" is inside the directory`,
		},
		"Nested": {
			reason: "bases are one level deep",
			edit: func(m fstest.MapFS) {
				m["bases/platform/lockstep.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: lockstep.io/v1alpha1\nkind: Overlay\nbases: [../other]\n")}
			},
			dir:  "clusters/dev",
			want: "bases are one level deep",
		},
		"Missing": {
			reason: "a base that does not exist",
			edit: func(m fstest.MapFS) {
				m["clusters/dev/lockstep.yaml"] = &fstest.MapFile{Data: []byte(overlayBases + "- ../../bases/nowhere\n")}
			},
			dir:  "clusters/dev",
			want: `base "../../bases/nowhere" is not a directory of the repository`,
		},
		"NotAnOverlay": {
			reason: "lockstep.yaml of another kind",
			edit: func(m fstest.MapFS) {
				m["clusters/dev/lockstep.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: lockstep.io/v1alpha1\nkind: Lock\n")}
			},
			dir:  "clusters/dev",
			want: `lockstep.yaml: apiVersion "lockstep.io/v1alpha1" kind "Lock": want lockstep.io/v1alpha1 Overlay`,
		},
		"UnknownField": {
			reason: "a misspelt field is an error, not ignored",
			edit: func(m fstest.MapFS) {
				m["clusters/dev/lockstep.yaml"] = &fstest.MapFile{Data: []byte("apiVersion: lockstep.io/v1alpha1\nkind: Overlay\nbase: [../../bases/platform]\n")}
			},
			dir:  "clusters/dev",
			want: `unknown field "base"`,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := repoFS()
			c.edit(m)
			_, err := declarations.LoadTree(m, c.dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want an error with %q", c.reason, err, c.want)
			}
		})
	}
}
