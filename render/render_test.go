package render

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// parsed parses a package.yaml stream written in the test.
func parsed(t *testing.T, stream string) *xpkg.Package {
	t.Helper()
	p, err := xpkg.Parse(strings.NewReader(strings.TrimLeft(stream, "\n")))
	if err != nil {
		t.Fatalf("xpkg.Parse: %v", err)
	}
	return p
}

const (
	digestA = "sha256:aaaaaaaaaaaa0000000000000000000000000000000000000000000000000001"
	digestB = "sha256:bbbbbbbbbbbb0000000000000000000000000000000000000000000000000002"
)

const providerStream = `
apiVersion: meta.pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-test
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.test.lockstep.io
  labels:
    from-package: "yes"
    team: package-value
spec:
  group: test.lockstep.io
  names: {kind: Thing, plural: things}
  scope: Cluster
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, description: "a <b>thing</b> & more"}}}]
`

const functionStream = `
apiVersion: meta.pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: function-test
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: inputs.fn.lockstep.io
spec:
  group: fn.lockstep.io
  names: {kind: Input, plural: inputs}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
`

func testInput(pkgs ...Package) Input {
	return Input{Namespace: "crossplane-system", Instance: "test", Packages: pkgs}
}

func TestRenderErrors(t *testing.T) {
	provider := func(t *testing.T) Package {
		return Package{Kind: crossplane.KindProvider, Name: "provider-test", Source: "registry.lockstep.example/test/provider-test", Version: "v1.0.0", Digest: digestA, Contents: parsed(t, providerStream)}
	}
	cases := map[string]struct {
		reason string
		input  func(t *testing.T) Input
		want   string // a substring of the error
	}{
		"BadNamespace": {
			reason: "The namespace must be a DNS label.",
			input:  func(t *testing.T) Input { in := testInput(provider(t)); in.Namespace = "Crossplane_System"; return in },
			want:   `namespace "Crossplane_System" is not a DNS label`,
		},
		"NoInstance": {
			reason: "The instance label is required.",
			input:  func(t *testing.T) Input { in := testInput(provider(t)); in.Instance = ""; return in },
			want:   "instance is required",
		},
		"BadDigest": {
			reason: "A digest must be sha256:<64 hex>.",
			input:  func(t *testing.T) Input { p := provider(t); p.Digest = "sha256:abc"; return testInput(p) },
			want:   `Provider provider-test: digest "sha256:abc" is not sha256:<64 hex>`,
		},
		"SourceWithTag": {
			reason: "A source has no tag.",
			input: func(t *testing.T) Input {
				p := provider(t)
				p.Source += ":v1"
				return testInput(p)
			},
			want: "is not a repository without tag or digest",
		},
		"NoContents": {
			reason: "Every package needs its parsed contents.",
			input:  func(t *testing.T) Input { p := provider(t); p.Contents = nil; return testInput(p) },
			want:   "Provider provider-test: no package contents for registry.lockstep.example/test/provider-test@" + digestA,
		},
		"ContentsOfAnotherKind": {
			reason: "The contents must be a package of the declared kind.",
			input:  func(t *testing.T) Input { p := provider(t); p.Kind = crossplane.KindFunction; return testInput(p) },
			want:   "Function provider-test: the package at registry.lockstep.example/test/provider-test@" + digestA + " is a Provider, not a Function",
		},
		"Twice": {
			reason: "A package may be listed once.",
			input:  func(t *testing.T) Input { return testInput(provider(t), provider(t)) },
			want:   "Provider provider-test: listed twice in the input",
		},
		"DeclarationOfAnotherSource": {
			reason: "The declaration must be of the locked source.",
			input: func(t *testing.T) Input {
				p := provider(t)
				p.Declaration = decl(t, crossplane.KindProvider, "provider-test", "registry.lockstep.example/other/provider-test", "v1.0.0", nil)
				return testInput(p)
			},
			want: `declared spec.package "registry.lockstep.example/other/provider-test:v1.0.0" (packages.yaml:1) is not from source registry.lockstep.example/test/provider-test`,
		},
		"UndeclaredRuntimeConfig": {
			reason: "A runtimeConfigRef other than default must name a declared DeploymentRuntimeConfig; the error names the field and file.",
			input: func(t *testing.T) Input {
				p := provider(t)
				p.Declaration = decl(t, crossplane.KindProvider, "provider-test", p.Source, "v1.0.0", func(d *declarations.Declaration) {
					d.RuntimeConfigRef = &declarations.RuntimeConfigReference{Name: "debug"}
				})
				return testInput(p)
			},
			want: `Provider provider-test: spec.runtimeConfigRef (packages.yaml:1): DeploymentRuntimeConfig "debug" is not declared`,
		},
		"ImageConfigRuntimeConfigUndeclared": {
			reason: "An ImageConfig's runtime.configRef wins over the package's and must be declared too.",
			input: func(t *testing.T) Input {
				in := testInput(provider(t))
				in.ImageConfigs = []declarations.ImageConfig{{Spec: declarations.ImageConfigSpec{
					MatchImages: []declarations.ImageMatch{{Prefix: "registry.lockstep.example/"}},
					Runtime:     &declarations.ImageRuntime{ConfigRef: &declarations.RuntimeConfigReference{APIVersion: crossplane.RuntimeAPIVersion, Kind: crossplane.KindDeploymentRuntimeConfig, Name: "mirror"}},
				}}}
				in.ImageConfigs[0].Name = "runtime"
				return in
			},
			want: `Provider provider-test: ImageConfig runtime spec.runtime.configRef: DeploymentRuntimeConfig "mirror" is not declared`,
		},
		"RuntimeConfigDeclaredTwice": {
			reason: "DeploymentRuntimeConfig names are unique.",
			input: func(t *testing.T) Input {
				in := testInput(provider(t))
				drc := declarations.DeploymentRuntimeConfig{}
				drc.Name = "default"
				in.RuntimeConfigs = []declarations.DeploymentRuntimeConfig{drc, drc}
				return in
			},
			want: "DeploymentRuntimeConfig default is declared twice",
		},
		"RuntimeCollision": {
			reason: "A Provider and a Function with one name would share a Service and TLS Secret.",
			input: func(t *testing.T) Input {
				f := Package{Kind: crossplane.KindFunction, Name: "provider-test", Source: "registry.lockstep.example/test/function-test", Digest: digestB, Contents: parsed(t, functionStream)}
				return testInput(provider(t), f)
			},
			want: "Provider provider-test and Function provider-test both render Secret/crossplane-system/provider-test-tls-server",
		},
		"TwoWebhookConfigurations": {
			reason: "Crossplane renames every webhook configuration of a kind to one name, so a package may ship one of each.",
			input: func(t *testing.T) Input {
				p := provider(t)
				p.Contents = parsed(t, providerStream+`
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: one}
webhooks: []
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: two}
webhooks: []
`)
				return testInput(p)
			},
			want: "Provider provider-test: renders ValidatingWebhookConfiguration/crossplane-provider-provider-test twice",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Render(tc.input(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nRender(...): got error %v, want one containing %q", tc.reason, err, tc.want)
			}
		})
	}
}

func TestRenderBehaviour(t *testing.T) {
	provider := Package{Kind: crossplane.KindProvider, Name: "provider-test", Source: "registry.lockstep.example/test/provider-test", Version: "v1.0.0", Digest: digestA, Contents: parsed(t, providerStream)}

	t.Run("PayloadVerbatimApartFromLabels", func(t *testing.T) {
		p := provider
		p.Declaration = decl(t, crossplane.KindProvider, p.Name, p.Source, "v1.0.0", func(d *declarations.Declaration) {
			d.Spec.CommonLabels = map[string]string{"team": "platform"}
			d.Spec.CommonAnnotations = map[string]string{"owner": "platform"}
		})
		out, err := Render(testInput(p))
		if err != nil {
			t.Fatal(err)
		}
		crd := out.Packages[0].Revision.Payload[0]
		got, err := crd.Unstructured()
		if err != nil {
			t.Fatal(err)
		}
		want, err := p.Contents.Objects[0].Unstructured()
		if err != nil {
			t.Fatal(err)
		}
		want.SetLabels(map[string]string{"from-package": "yes", "team": "platform", LabelManagedBy: ManagedByValue, LabelInstance: "test"})
		want.SetAnnotations(map[string]string{"owner": "platform"})
		if diff := cmp.Diff(want.Object, got.Object); diff != "" {
			t.Errorf("commonLabels win over the package's labels, lockstep's labels are added, nothing else changes: -want, +got:\n%s", diff)
		}
		var b strings.Builder
		if err := out.WriteYAML(&b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "description: a <b>thing</b> & more") {
			t.Errorf("the YAML stream shows strings as written:\n%s", b.String())
		}
	})

	t.Run("FunctionInstallsNoPayload", func(t *testing.T) {
		f := Package{Kind: crossplane.KindFunction, Name: "function-test", Source: "registry.lockstep.example/test/function-test", Digest: digestB, Contents: parsed(t, functionStream)}
		out, err := Render(testInput(f))
		if err != nil {
			t.Fatal(err)
		}
		rev := out.Packages[0].Revision
		if len(rev.Payload) != 0 || len(rev.RBAC) != 0 {
			t.Errorf("a Function's input CRDs are not installed and it has no RBAC: payload %d, RBAC %d", len(rev.Payload), len(rev.RBAC))
		}
		if diff := cmp.Diff([]string{"composition"}, rev.Capabilities); diff != "" {
			t.Errorf("a Function without capabilities reports composition: -want, +got:\n%s", diff)
		}
		if _, ok := out.Packages[0].Record.Unstructured(); ok != nil {
			t.Error(ok)
		}
		if strings.Contains(string(out.Packages[0].Record.JSON()), AnnotationTag) {
			t.Errorf("a package pinned by digest only has no tag annotation: %s", out.Packages[0].Record.JSON())
		}
	})

	t.Run("ManualActivationLeavesDesiredStateToApply", func(t *testing.T) {
		p := provider
		p.Declaration = decl(t, crossplane.KindProvider, p.Name, p.Source, "v1.0.0", func(d *declarations.Declaration) {
			d.Spec.RevisionActivationPolicy = declarations.ManualActivation
		})
		out, err := Render(testInput(p))
		if err != nil {
			t.Fatal(err)
		}
		rec := out.Packages[0].Revision.Record
		if strings.Contains(string(rec.JSON()), "desiredState") {
			t.Errorf("a Manual revision is rendered without spec.desiredState: %s", rec.JSON())
		}
		u, err := rec.Bind(Binding{UIDs: map[Reference]types.UID{out.Packages[0].packageRef(): "pkg-uid"}, Revision: 3, DesiredState: "Inactive"})
		if err != nil {
			t.Fatal(err)
		}
		rev, _, _ := unstructured.NestedInt64(u.Object, "spec", "revision")
		state, _, _ := unstructured.NestedString(u.Object, "spec", "desiredState")
		if rev != 3 || state != "Inactive" {
			t.Errorf("Bind set spec.revision %d and desiredState %q, want 3 and Inactive", rev, state)
		}
	})

	t.Run("SameCRDInTwoPackagesIsLeftToApply", func(t *testing.T) {
		other := provider
		other.Name, other.Source, other.Digest = "provider-copy", "registry.lockstep.example/copy/provider-copy", digestB
		out, err := Render(testInput(provider, other))
		if err != nil {
			t.Fatalf("two packages shipping one CRD render; apply refuses the second to arrive: %v", err)
		}
		if len(out.Packages) != 2 {
			t.Errorf("got %d packages, want 2", len(out.Packages))
		}
	})

	t.Run("ExternallyManagedServiceAccount", func(t *testing.T) {
		p := provider
		p.Declaration = decl(t, crossplane.KindProvider, p.Name, p.Source, "v1.0.0", func(d *declarations.Declaration) {
			d.RuntimeConfigRef = &declarations.RuntimeConfigReference{Name: "external-sa"}
		})
		set := loadDecls(t, `
apiVersion: pkg.crossplane.io/v1beta1
kind: DeploymentRuntimeConfig
metadata:
  name: external-sa
spec:
  deploymentTemplate:
    spec:
      selector: {}
      template:
        spec:
          serviceAccountName: managed-elsewhere
          containers: []
`)
		in := testInput(p)
		in.RuntimeConfigs = set.RuntimeConfigs
		out, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		rev := out.Packages[0].Revision
		for _, o := range rev.Runtime {
			if o.Kind == "ServiceAccount" {
				t.Errorf("a Deployment that runs as another ServiceAccount gets none rendered (docs/crossplane-behaviour.md#deploymentruntimeconfig), got %s", o)
			}
		}
		for _, o := range rev.RBAC {
			if o.Kind == "ClusterRoleBinding" && !strings.Contains(string(o.JSON()), `"name":"managed-elsewhere"`) {
				t.Errorf("the binding's subject is the Deployment's ServiceAccount: %s", o.JSON())
			}
		}
	})

	t.Run("ExamplePackages", func(t *testing.T) {
		root := filepath.Join(repoRoot(t), "examples", "packages")
		src := "lockstep.example/lockstep-examples/"
		in := testInput(
			pkg(t, crossplane.KindProvider, "lockstep-examples-provider-demo", src+"provider-demo", "v0.2.0", filepath.Join(root, "provider-demo", "v0.2.0"), nil),
			pkg(t, crossplane.KindFunction, "lockstep-examples-function-demo", src+"function-demo", "v0.2.0", filepath.Join(root, "function-demo", "v0.2.0"), nil),
			pkg(t, crossplane.KindConfiguration, "configuration-demo", src+"configuration-demo", "v0.2.0", filepath.Join(root, "configuration-demo", "v0.2.0"), nil),
		)
		out, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, p := range out.Packages {
			kinds = append(kinds, string(p.Kind)+"/"+p.Name)
		}
		want := []string{"Provider/lockstep-examples-provider-demo", "Function/lockstep-examples-function-demo", "Configuration/configuration-demo"}
		if diff := cmp.Diff(want, kinds); diff != "" {
			t.Errorf("packages are ordered Providers, Functions, Configurations: -want, +got:\n%s", diff)
		}
		if n := len(out.Package(crossplane.KindProvider, "lockstep-examples-provider-demo").Revision.Payload); n != 4 {
			t.Errorf("provider-demo v0.2.0 has 4 CRDs, rendered %d", n)
		}
		if out.Err() != nil {
			t.Errorf("Err() = %v, want nil", out.Err())
		}
	})
}
