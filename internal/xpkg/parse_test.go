package xpkg

import (
	"bufio"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Small documents shared by the cases below.
const (
	providerV1 = `apiVersion: meta.pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
`
	configurationV1 = `apiVersion: meta.pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: getting-started
`
	functionV1 = `apiVersion: meta.pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-auto-ready
`
	crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: nopresources.nop.crossplane.io
spec:
  group: nop.crossplane.io
`
	crdJSON = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"nopresources.nop.crossplane.io"},"spec":{"group":"nop.crossplane.io"}}`
	xrd     = `apiVersion: apiextensions.crossplane.io/v2
kind: CompositeResourceDefinition
metadata:
  name: apps.example.org
`
	composition = `apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: app
`
	configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: foo
  namespace: default
`
)

// stream joins documents into a YAML stream.
func stream(docs ...string) string { return strings.Join(docs, "---\n") }

// wantError describes an expected error: the sentinel it must match with
// errors.Is (if any), the *DocumentError it must contain (if any), and text
// it must contain.
type wantError struct {
	is       error
	doc      *DocumentError // Err is not compared
	contains string
}

// checkError fails t unless err matches want (or is nil when want is nil).
func checkError(t *testing.T, reason string, err error, want *wantError) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("%s\nunexpected error: %v", reason, err)
		}
		return
	}
	if err == nil {
		t.Fatalf("%s\nwant an error, got none", reason)
	}
	if want.is != nil && !errors.Is(err, want.is) {
		t.Errorf("%s\nerrors.Is(err, %v) = false; err: %v", reason, want.is, err)
	}
	if want.doc != nil {
		var de *DocumentError
		if !errors.As(err, &de) {
			t.Fatalf("%s\nwant a *DocumentError, got %T: %v", reason, err, err)
		}
		got := DocumentError{Index: de.Index, Kind: de.Kind, Name: de.Name}
		wantDoc := DocumentError{Index: want.doc.Index, Kind: want.doc.Kind, Name: want.doc.Name}
		if diff := cmp.Diff(wantDoc, got, cmp.Comparer(func(_, _ error) bool { return true })); diff != "" {
			t.Errorf("%s\nDocumentError: -want, +got:\n%s", reason, diff)
		}
	}
	if !strings.Contains(err.Error(), want.contains) {
		t.Errorf("%s\nerror %q does not contain %q", reason, err.Error(), want.contains)
	}
}

// rawAsString lets cmp show Raw JSON as text.
var rawAsString = cmp.Transformer("RawString", func(b []byte) string { return string(b) })

func TestParse(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   *Package
		err    *wantError
	}{
		"ProviderWithCRD": {
			reason: "A Provider meta and a CRD parse into Meta and one Object whose Raw is the compact JSON of the document.",
			in:     stream(providerV1, crd),
			want: &Package{
				Meta: Meta{APIVersion: "meta.pkg.crossplane.io/v1", Kind: crossplane.KindProvider, Name: "provider-nop"},
				Objects: []Object{{Index: 1, APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition",
					Name: "nopresources.nop.crossplane.io", Raw: []byte(crdJSON)}},
			},
		},
		"EmptyDocumentsSkipped": {
			reason: "Leading markers, comment-only, whitespace-only and '...' documents are skipped and not counted; the meta may come after payload.",
			in: "---\n# leading comment\n---\n\n   \n---\n" + crd + "...\n---\n# only a comment\n---\n" + composition + "---\n" +
				configurationV1 + "---\n---\n" + xrd + "---\n",
			err: &wantError{is: ErrKindNotAllowed, doc: &DocumentError{Index: 0, Kind: "CustomResourceDefinition", Name: "nopresources.nop.crossplane.io"},
				contains: "package.yaml document 0 (CustomResourceDefinition nopresources.nop.crossplane.io): a Configuration package may carry CompositeResourceDefinition, Composition, ManagedResourceActivationPolicy, Operation, CronOperation, WatchOperation"},
		},
		"ConfigurationPayload": {
			reason: "A Configuration may carry XRDs and Compositions in any order; Index counts only non-empty documents.",
			in:     "---\n# comment\n---\n" + composition + "---\n" + configurationV1 + "---\n\n---\n" + xrd,
			want: &Package{
				Meta: Meta{APIVersion: "meta.pkg.crossplane.io/v1", Kind: crossplane.KindConfiguration, Name: "getting-started"},
				Objects: []Object{
					{Index: 0, APIVersion: "apiextensions.crossplane.io/v1", Kind: "Composition", Name: "app",
						Raw: []byte(`{"apiVersion":"apiextensions.crossplane.io/v1","kind":"Composition","metadata":{"name":"app"}}`)},
					{Index: 2, APIVersion: "apiextensions.crossplane.io/v2", Kind: "CompositeResourceDefinition", Name: "apps.example.org",
						Raw: []byte(`{"apiVersion":"apiextensions.crossplane.io/v2","kind":"CompositeResourceDefinition","metadata":{"name":"apps.example.org"}}`)},
				},
			},
		},
		"ConfigurationOperations": {
			reason: "Configurations may carry MRAPs and the three ops.crossplane.io kinds.",
			in: stream(configurationV1,
				"apiVersion: apiextensions.crossplane.io/v1alpha1\nkind: ManagedResourceActivationPolicy\nmetadata:\n  name: mrap\n",
				"apiVersion: ops.crossplane.io/v1alpha1\nkind: Operation\nmetadata:\n  name: op\n",
				"apiVersion: ops.crossplane.io/v1alpha1\nkind: CronOperation\nmetadata:\n  name: cron\n",
				"apiVersion: ops.crossplane.io/v1alpha1\nkind: WatchOperation\nmetadata:\n  name: watch\n"),
			want: &Package{
				Meta: Meta{APIVersion: "meta.pkg.crossplane.io/v1", Kind: crossplane.KindConfiguration, Name: "getting-started"},
				Objects: []Object{
					{Index: 1, APIVersion: "apiextensions.crossplane.io/v1alpha1", Kind: "ManagedResourceActivationPolicy", Name: "mrap",
						Raw: []byte(`{"apiVersion":"apiextensions.crossplane.io/v1alpha1","kind":"ManagedResourceActivationPolicy","metadata":{"name":"mrap"}}`)},
					{Index: 2, APIVersion: "ops.crossplane.io/v1alpha1", Kind: "Operation", Name: "op",
						Raw: []byte(`{"apiVersion":"ops.crossplane.io/v1alpha1","kind":"Operation","metadata":{"name":"op"}}`)},
					{Index: 3, APIVersion: "ops.crossplane.io/v1alpha1", Kind: "CronOperation", Name: "cron",
						Raw: []byte(`{"apiVersion":"ops.crossplane.io/v1alpha1","kind":"CronOperation","metadata":{"name":"cron"}}`)},
					{Index: 4, APIVersion: "ops.crossplane.io/v1alpha1", Kind: "WatchOperation", Name: "watch",
						Raw: []byte(`{"apiVersion":"ops.crossplane.io/v1alpha1","kind":"WatchOperation","metadata":{"name":"watch"}}`)},
				},
			},
		},
		"ProviderWebhooksAndMRD": {
			reason: "Providers may carry webhook configurations and MRDs; a namespace is read from the header.",
			in: stream(providerV1,
				"apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: v\n",
				"apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\nmetadata:\n  name: m\n  namespace: ns\n",
				"apiVersion: apiextensions.crossplane.io/v1alpha1\nkind: ManagedResourceDefinition\nmetadata:\n  name: mrd\n"),
			want: &Package{
				Meta: Meta{APIVersion: "meta.pkg.crossplane.io/v1", Kind: crossplane.KindProvider, Name: "provider-nop"},
				Objects: []Object{
					{Index: 1, APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration", Name: "v",
						Raw: []byte(`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"v"}}`)},
					{Index: 2, APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration", Name: "m", Namespace: "ns",
						Raw: []byte(`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingWebhookConfiguration","metadata":{"name":"m","namespace":"ns"}}`)},
					{Index: 3, APIVersion: "apiextensions.crossplane.io/v1alpha1", Kind: "ManagedResourceDefinition", Name: "mrd",
						Raw: []byte(`{"apiVersion":"apiextensions.crossplane.io/v1alpha1","kind":"ManagedResourceDefinition","metadata":{"name":"mrd"}}`)},
				},
			},
		},
		"FunctionWithoutTrailingNewline": {
			reason: "A Function may carry input CRDs; the last document may lack a trailing newline.",
			in:     "---\n" + functionV1 + "---\n" + strings.TrimSuffix(crd, "\n"),
			want: &Package{
				Meta: Meta{APIVersion: "meta.pkg.crossplane.io/v1", Kind: crossplane.KindFunction, Name: "function-auto-ready"},
				Objects: []Object{{Index: 1, APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition",
					Name: "nopresources.nop.crossplane.io", Raw: []byte(crdJSON)}},
			},
		},
		"NoMeta": {
			reason: "A stream without a meta.pkg.crossplane.io object is not a package.",
			in:     stream(crd, composition),
			err:    &wantError{is: ErrNoMeta, contains: "no meta.pkg.crossplane.io"},
		},
		"EmptyStream": {
			reason: "An empty stream has no meta object.",
			in:     "---\n# nothing\n",
			err:    &wantError{is: ErrNoMeta},
		},
		"TwoMetas": {
			reason: "A second meta object is an error naming both documents.",
			in:     stream(providerV1, crd, configurationV1),
			err: &wantError{is: ErrMultipleMeta, doc: &DocumentError{Index: 2, Kind: "Configuration", Name: "getting-started"},
				contains: "package.yaml document 2 (Configuration getting-started): package.yaml has more than one meta.pkg.crossplane.io object: document 0 (Provider provider-nop) is already the package meta"},
		},
		"ProviderWithConfigMap": {
			reason: "A Provider may not carry a ConfigMap; the error names the document and lists what is allowed.",
			in:     stream(providerV1, crd, configMap, crd),
			err: &wantError{is: ErrKindNotAllowed, doc: &DocumentError{Index: 2, Kind: "ConfigMap", Name: "foo"},
				contains: "package.yaml document 2 (ConfigMap foo): a Provider package may carry CustomResourceDefinition, ManagedResourceDefinition, ValidatingWebhookConfiguration, MutatingWebhookConfiguration"},
		},
		"ProviderWithComposition": {
			reason: "Compositions belong in Configurations, not Providers.",
			in:     stream(providerV1, composition),
			err:    &wantError{is: ErrKindNotAllowed, doc: &DocumentError{Index: 1, Kind: "Composition", Name: "app"}, contains: "a Provider package may carry"},
		},
		"ProviderWithCRDOfWrongGroup": {
			reason: "The allowlist is by API group and kind: a CustomResourceDefinition outside apiextensions.k8s.io is rejected, and the error says why.",
			in:     stream(providerV1, "apiVersion: example.org/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: fake\n"),
			err: &wantError{is: ErrKindNotAllowed, doc: &DocumentError{Index: 1, Kind: "CustomResourceDefinition", Name: "fake"},
				contains: `CustomResourceDefinition must be in API group apiextensions.k8s.io, not "example.org"`},
		},
		"ConfigurationWithCRD": {
			reason: "A Configuration may not carry CRDs.",
			in:     stream(configurationV1, xrd, crd),
			err: &wantError{is: ErrKindNotAllowed, doc: &DocumentError{Index: 2, Kind: "CustomResourceDefinition", Name: "nopresources.nop.crossplane.io"},
				contains: "a Configuration package may carry CompositeResourceDefinition, Composition, ManagedResourceActivationPolicy, Operation, CronOperation, WatchOperation"},
		},
		"FunctionWithComposition": {
			reason: "A Function may carry only CRDs.",
			in:     stream(functionV1, composition),
			err: &wantError{is: ErrKindNotAllowed, doc: &DocumentError{Index: 1, Kind: "Composition", Name: "app"},
				contains: "package.yaml document 1 (Composition app): a Function package may carry CustomResourceDefinition"},
		},
		"FunctionWithWebhook": {
			reason: "A Function may not carry webhook configurations, which only Providers may.",
			in:     stream(functionV1, "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata:\n  name: v\n"),
			err:    &wantError{is: ErrKindNotAllowed, doc: &DocumentError{Index: 1, Kind: "ValidatingWebhookConfiguration", Name: "v"}},
		},
		"MalformedYAML": {
			reason: "Malformed YAML is an error naming the document index.",
			in:     stream(providerV1, "apiVersion: v1\nkind: [unclosed\n"),
			err:    &wantError{doc: &DocumentError{Index: 1}, contains: "package.yaml document 1: malformed YAML"},
		},
		"BadSeparator": {
			reason: "A separator line followed by content is a YAML syntax error, reported for the document being read when it is met.",
			in:     providerV1 + "---foo\n" + crd,
			err:    &wantError{doc: &DocumentError{Index: 0}, contains: "package.yaml document 0: malformed YAML: invalid Yaml document separator: foo"},
		},
		"MissingKind": {
			reason: "A document without kind is an error that names it by index and name.",
			in:     stream(providerV1, "apiVersion: v1\nmetadata:\n  name: nameless-kind\n"),
			err:    &wantError{doc: &DocumentError{Index: 1, Name: "nameless-kind"}, contains: "package.yaml document 1 (nameless-kind): document has no kind"},
		},
		"MissingAPIVersion": {
			reason: "A document without apiVersion is an error.",
			in:     stream(providerV1, "kind: ConfigMap\nmetadata:\n  name: x\n"),
			err:    &wantError{doc: &DocumentError{Index: 1, Kind: "ConfigMap", Name: "x"}, contains: "document has no apiVersion"},
		},
		"NotAnObject": {
			reason: "A document that is a list, not a mapping, is an error.",
			in:     stream(providerV1, "- a\n- b\n"),
			err:    &wantError{doc: &DocumentError{Index: 1}, contains: "not a YAML mapping"},
		},
		"ScalarDocument": {
			reason: "A scalar document is an error.",
			in:     stream("just a string\n", providerV1),
			err:    &wantError{doc: &DocumentError{Index: 0}, contains: "not a YAML mapping"},
		},
		"BadMetadataType": {
			reason: "metadata must be an object.",
			in:     stream(providerV1, "apiVersion: v1\nkind: ConfigMap\nmetadata: oops\n"),
			err:    &wantError{doc: &DocumentError{Index: 1, Kind: "ConfigMap"}, contains: "invalid object header"},
		},
		"BadCrossplaneConstraint": {
			reason: "spec.crossplane.version must be a semver constraint (Crossplane's PackageValidSemver).",
			in:     stream(providerV1+"spec:\n  crossplane:\n    version: \">=> v1\"\n", crd),
			err: &wantError{doc: &DocumentError{Index: 0, Kind: "Provider", Name: "provider-nop"},
				contains: `spec.crossplane.version ">=> v1" is not a valid semver constraint`},
		},
		"EmptyCrossplaneConstraint": {
			reason: "Crossplane checks spec.crossplane.version whenever spec.crossplane is set, so an empty constraint is an error.",
			in:     providerV1 + "spec:\n  crossplane: {}\n",
			err:    &wantError{doc: &DocumentError{Index: 0, Kind: "Provider", Name: "provider-nop"}, contains: `spec.crossplane.version ""`},
		},
		"UnknownMetaVersion": {
			reason: "meta.pkg.crossplane.io/v1alpha1 has no Function; the error lists the served meta types.",
			in:     "apiVersion: meta.pkg.crossplane.io/v1alpha1\nkind: Function\nmetadata:\n  name: fn\n",
			err:    &wantError{doc: &DocumentError{Index: 0, Kind: "Function", Name: "fn"}, contains: "meta.pkg.crossplane.io/v1alpha1 Function is not a package meta type"},
		},
		"UnknownMetaKind": {
			reason: "A meta.pkg.crossplane.io kind that is not a package type is an error, not payload.",
			in:     stream(providerV1, "apiVersion: meta.pkg.crossplane.io/v1\nkind: Project\nmetadata:\n  name: p\n"),
			err:    &wantError{doc: &DocumentError{Index: 1, Kind: "Project", Name: "p"}, contains: "not a package meta type"},
		},
		"BadMetaSpecType": {
			reason: "A meta field of the wrong type is an error.",
			in:     providerV1 + "spec:\n  dependsOn: provider-nop\n",
			err:    &wantError{doc: &DocumentError{Index: 0, Kind: "Provider", Name: "provider-nop"}, contains: "cannot decode package meta"},
		},
		"DependencyWithoutTarget": {
			reason: "A dependency must name a package.",
			in:     configurationV1 + "spec:\n  dependsOn:\n  - version: v1\n",
			err:    &wantError{doc: &DocumentError{Index: 0, Kind: "Configuration", Name: "getting-started"}, contains: "spec.dependsOn[0]: dependency names no package"},
		},
		"DependencyWithTag": {
			reason: "A dependency's package is a repository; a tag belongs in version.",
			in:     configurationV1 + "spec:\n  dependsOn:\n  - provider: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0\n    version: v0.4.0\n",
			err:    &wantError{contains: "spec.dependsOn[0]: \"xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0\" is not an OCI repository without tag or digest"},
		},
		"DependencyWithoutVersion": {
			reason: "A dependency's version is required.",
			in:     configurationV1 + "spec:\n  dependsOn:\n  - provider: xpkg.crossplane.io/crossplane-contrib/provider-nop\n",
			err:    &wantError{contains: "spec.dependsOn[0]: version is required"},
		},
		"DependencyWithBadVersion": {
			reason: "A dependency's version must be a constraint or a digest.",
			in:     configurationV1 + "spec:\n  dependsOn:\n  - function: xpkg.crossplane.io/crossplane-contrib/function-kcl\n    version: latest\n",
			err:    &wantError{contains: `spec.dependsOn[0]: version "latest" is neither a semver constraint nor a sha256 digest`},
		},
		"BadReplaces": {
			reason: "spec.replaces lists repositories.",
			in:     providerV1 + "spec:\n  replaces:\n  - xpkg.upbound.io/upbound/provider-nop@sha256:abc\n",
			err:    &wantError{contains: "spec.replaces[0]"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			checkError(t, tc.reason, err, tc.err)
			if diff := cmp.Diff(tc.want, got, rawAsString); diff != "" {
				t.Errorf("%s\nParse(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParseDisallowedKindsAllReported(t *testing.T) {
	reason := "Every object of a disallowed kind gets its own *DocumentError, so one run shows them all."
	_, err := Parse(strings.NewReader(stream(providerV1, configMap, crd, composition)))
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("%s\nwant a joined error, got %T: %v", reason, err, err)
	}
	var got []DocumentError
	for _, e := range joined.Unwrap() {
		var de *DocumentError
		if !errors.As(e, &de) || !errors.Is(e, ErrKindNotAllowed) {
			t.Fatalf("%s\nwant *DocumentError matching ErrKindNotAllowed, got %T: %v", reason, e, e)
		}
		got = append(got, DocumentError{Index: de.Index, Kind: de.Kind, Name: de.Name})
	}
	want := []DocumentError{{Index: 1, Kind: "ConfigMap", Name: "foo"}, {Index: 3, Kind: "Composition", Name: "app"}}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(_, _ error) bool { return true })); diff != "" {
		t.Errorf("%s\n-want, +got:\n%s", reason, diff)
	}
}

func TestParseMeta(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   Meta
	}{
		"ConfigurationV1alpha1": {
			reason: "v1alpha1 Configuration metadata (the Upbound Configurations) with deprecated dependency keys; unknown spec fields are ignored like Crossplane does.",
			in: `apiVersion: meta.pkg.crossplane.io/v1alpha1
kind: Configuration
metadata:
  name: configuration-app
  annotations:
    meta.crossplane.io/maintainer: Upbound <support@upbound.io>
spec:
  crossplane:
    version: ">=v1.14.1-0"
  repository: xpkg.crossplane.io/crossplane/ignored
  dependsOn:
    - provider: xpkg.upbound.io/upbound/provider-helm
      version: "v0"
    - function: xpkg.upbound.io/crossplane-contrib/function-patch-and-transform
      # renovate: datasource=github-releases
      version: "v0.8.2"
    - configuration: xpkg.upbound.io/upbound/configuration-aws-network
      version: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
`,
			want: Meta{
				APIVersion:        "meta.pkg.crossplane.io/v1alpha1",
				Kind:              crossplane.KindConfiguration,
				Name:              "configuration-app",
				Annotations:       map[string]string{"meta.crossplane.io/maintainer": "Upbound <support@upbound.io>"},
				CrossplaneVersion: ">=v1.14.1-0",
				DependsOn: []Dependency{
					{Provider: "xpkg.upbound.io/upbound/provider-helm", Version: "v0"},
					{Function: "xpkg.upbound.io/crossplane-contrib/function-patch-and-transform", Version: "v0.8.2"},
					{Configuration: "xpkg.upbound.io/upbound/configuration-aws-network", Version: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
				},
			},
		},
		"FunctionV1beta1": {
			reason: "v1beta1 Function metadata; the removed spec.image is ignored.",
			in: `---
apiVersion: meta.pkg.crossplane.io/v1beta1
kind: Function
metadata:
  name: function-kcl
spec:
  image: xpkg.upbound.io/crossplane-contrib/function-kcl:v0.8.0
`,
			want: Meta{APIVersion: "meta.pkg.crossplane.io/v1beta1", Kind: crossplane.KindFunction, Name: "function-kcl"},
		},
		"ProviderV1": {
			reason: "v1 Provider metadata with labels, capabilities, the new dependency form, a v1.x controller block and replaces.",
			in: `apiVersion: meta.pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-aws-ec2
  labels:
    pkg.crossplane.io/provider-family: provider-family-aws
spec:
  capabilities:
  - SafeStart
  crossplane:
    version: ">= 1.12.1-0"
  dependsOn:
  - apiVersion: pkg.crossplane.io/v1
    kind: Provider
    package: xpkg.upbound.io/upbound/provider-family-aws
    version: ">= 0.0.0"
  controller:
    image: xpkg.upbound.io/upbound/provider-aws-ec2-controller:v1.0.0
    permissionRequests:
    - apiGroups: ["secrets.crossplane.io"]
      resources: ["storeconfigs"]
      verbs: ["get", "list"]
  replaces:
  - xpkg.upbound.io/upbound/provider-aws-ec2
  - crossplane-contrib/provider-aws-ec2
`,
			want: Meta{
				APIVersion:        "meta.pkg.crossplane.io/v1",
				Kind:              crossplane.KindProvider,
				Name:              "provider-aws-ec2",
				Labels:            map[string]string{"pkg.crossplane.io/provider-family": "provider-family-aws"},
				CrossplaneVersion: ">= 1.12.1-0",
				Capabilities:      []string{"SafeStart"},
				DependsOn: []Dependency{{APIVersion: "pkg.crossplane.io/v1", Kind: "Provider",
					Package: "xpkg.upbound.io/upbound/provider-family-aws", Version: ">= 0.0.0"}},
				Controller: &Controller{
					Image: "xpkg.upbound.io/upbound/provider-aws-ec2-controller:v1.0.0",
					PermissionRequests: []rbacv1.PolicyRule{{APIGroups: []string{"secrets.crossplane.io"},
						Resources: []string{"storeconfigs"}, Verbs: []string{"get", "list"}}},
				},
				Replaces: []string{"xpkg.upbound.io/upbound/provider-aws-ec2", "crossplane-contrib/provider-aws-ec2"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := Parse(strings.NewReader(tc.in))
			if err != nil {
				t.Fatalf("%s\nParse(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, p.Meta); diff != "" {
				t.Errorf("%s\nMeta: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDependencyTarget(t *testing.T) {
	type want struct {
		kind crossplane.Kind
		repo string
		err  string
	}
	const (
		nop = "xpkg.crossplane.io/crossplane-contrib/provider-nop"
		cfg = "xpkg.crossplane.io/crossplane/e2e-depends-on-provider-nop"
		fn  = "xpkg.crossplane.io/crossplane-contrib/function-kcl"
	)
	cases := map[string]struct {
		reason string
		dep    Dependency
		want   want
	}{
		"Provider": {
			reason: "The deprecated provider key names a Provider.",
			dep:    Dependency{Provider: nop, Version: "v0"},
			want:   want{kind: crossplane.KindProvider, repo: nop},
		},
		"Configuration": {
			reason: "The deprecated configuration key names a Configuration.",
			dep:    Dependency{Configuration: cfg},
			want:   want{kind: crossplane.KindConfiguration, repo: cfg},
		},
		"Function": {
			reason: "The deprecated function key names a Function.",
			dep:    Dependency{Function: fn},
			want:   want{kind: crossplane.KindFunction, repo: fn},
		},
		"Explicit": {
			reason: "apiVersion + kind + package name the dependency directly.",
			dep:    Dependency{APIVersion: "pkg.crossplane.io/v1", Kind: "Function", Package: fn},
			want:   want{kind: crossplane.KindFunction, repo: fn},
		},
		"ExplicitBeatsDeprecated": {
			reason: "The explicit form wins over every deprecated key.",
			dep:    Dependency{APIVersion: "pkg.crossplane.io/v1", Kind: "Provider", Package: nop, Configuration: cfg, Function: fn},
			want:   want{kind: crossplane.KindProvider, repo: nop},
		},
		"ConfigurationBeatsProvider": {
			reason: "Crossplane checks configuration before provider.",
			dep:    Dependency{Provider: nop, Configuration: cfg, Function: fn},
			want:   want{kind: crossplane.KindConfiguration, repo: cfg},
		},
		"ProviderBeatsFunction": {
			reason: "Crossplane checks provider before function.",
			dep:    Dependency{Provider: nop, Function: fn},
			want:   want{kind: crossplane.KindProvider, repo: nop},
		},
		"PartialExplicitFallsBack": {
			reason: "The explicit form is honoured only when all three fields are set; otherwise a deprecated key applies.",
			dep:    Dependency{APIVersion: "pkg.crossplane.io/v1", Kind: "Configuration", Function: fn},
			want:   want{kind: crossplane.KindFunction, repo: fn},
		},
		"PartialExplicitAlone": {
			reason: "A partial explicit form without a deprecated key is an error naming the missing fields.",
			dep:    Dependency{Kind: "Provider", Package: nop},
			want:   want{err: "dependency sets kind, package but not apiVersion"},
		},
		"None": {
			reason: "A dependency that names nothing is an error.",
			dep:    Dependency{Version: "v1"},
			want:   want{err: "dependency names no package"},
		},
		"UnknownKind": {
			reason: "Only Provider, Configuration and Function are package types.",
			dep:    Dependency{APIVersion: "pkg.crossplane.io/v1", Kind: "DeploymentRuntimeConfig", Package: nop},
			want:   want{err: "pkg.crossplane.io/v1 DeploymentRuntimeConfig is not a Crossplane package type"},
		},
		"UnknownGroup": {
			reason: "The apiVersion must be in pkg.crossplane.io.",
			dep:    Dependency{APIVersion: "example.org/v1", Kind: "Provider", Package: nop},
			want:   want{err: "example.org/v1 Provider is not a Crossplane package type"},
		},
		"TaggedPackage": {
			reason: "The package is a repository without a tag.",
			dep:    Dependency{APIVersion: "pkg.crossplane.io/v1", Kind: "Provider", Package: nop + ":v0.4.0"},
			want:   want{err: "is not an OCI repository without tag or digest"},
		},
		"PartiallyQualified": {
			reason: "A repository without a registry is returned as written (docs/crossplane-behaviour.md#moved-packages-and-replaces, replicating a package).",
			dep:    Dependency{Provider: "crossplane-contrib/provider-nop"},
			want:   want{kind: crossplane.KindProvider, repo: "crossplane-contrib/provider-nop"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k, repo, err := tc.dep.Target()
			got := want{kind: k, repo: repo}
			if err != nil {
				got = want{err: err.Error()}
				if tc.want.err != "" && strings.Contains(got.err, tc.want.err) {
					got.err = tc.want.err
				}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nTarget(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestObject(t *testing.T) {
	reason := "Unstructured decodes Raw on demand and GroupKind parses the apiVersion; Count and Summary count by GroupKind."
	p, err := Parse(strings.NewReader(stream(configurationV1, xrd, composition, composition, xrd)))
	if err != nil {
		t.Fatal(err)
	}
	u, err := p.Objects[1].Unstructured()
	if err != nil {
		t.Fatalf("%s\nUnstructured(): %v", reason, err)
	}
	got := []any{u.GetAPIVersion(), u.GetKind(), u.GetName(), p.Objects[0].GroupKind(),
		p.Count(crossplane.GroupKindComposition), p.Count(crossplane.GroupKindXRD), p.Count(crossplane.GroupKindCRD), p.Summary()}
	want := []any{"apiextensions.crossplane.io/v1", "Composition", "app", crossplane.GroupKindXRD,
		2, 2, 0, Summary{XRDs: 2, Compositions: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s\n-want, +got:\n%s", reason, diff)
	}

	bad := Object{APIVersion: "a/b/c", Kind: "Thing", Raw: []byte(`[1]`)}
	if _, err := bad.Unstructured(); err == nil {
		t.Errorf("Unstructured() of a JSON list: want error, got none")
	}
	if diff := cmp.Diff(schema.GroupKind{Kind: "Thing"}, bad.GroupKind()); diff != "" {
		t.Errorf("GroupKind() of an unparseable apiVersion: -want, +got:\n%s", diff)
	}
}

// TestDecodeAllKeepsStreamOrder converts many documents with several
// workers and checks that they come back in stream order, and that the
// first bad document is reported at its own index even when later ones are
// bad too and may be converted first.
func TestDecodeAllKeepsStreamOrder(t *testing.T) {
	var docs []string
	for i := range 300 {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n", i))
	}
	decode := func(s string) []decoded {
		t.Helper()
		got, err := decodeAll(utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s))), 4)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := decode(stream(docs...))
	if len(got) != len(docs) {
		t.Fatalf("decodeAll returned %d documents, want %d", len(got), len(docs))
	}
	for i, d := range got {
		if want := fmt.Sprintf("cm-%d", i); d.err != nil || d.h.Metadata.Name != want {
			t.Fatalf("document %d: name %q, error %v; want %q in stream order", i, d.h.Metadata.Name, d.err, want)
		}
	}

	bad := append([]string(nil), docs...)
	bad[120] = "kind: ConfigMap\n"    // no apiVersion
	bad[250] = "- not\n- a mapping\n" // not an object
	_, err := Parse(strings.NewReader(stream(append([]string{providerV1}, bad...)...)))
	var de *DocumentError
	if !errors.As(err, &de) || de.Index != 121 || !strings.Contains(err.Error(), "no apiVersion") {
		t.Errorf("Parse with bad documents 121 and 251: got %v, want the *DocumentError of document 121 (no apiVersion)", err)
	}
}
