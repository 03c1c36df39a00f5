package declarations

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// wantErr is an expected *Error: its location as "file:line", object and
// field exactly, and a fragment of its message.
type wantErr struct {
	At     string
	Object string
	Field  string
	Msg    string
}

// project turns errors into wantErrs, keeping want's message fragment when
// the actual message contains it, so cmp.Diff shows every mismatch.
func project(got []*Error, want []wantErr) []wantErr {
	if len(got) == 0 {
		return nil
	}
	out := make([]wantErr, len(got))
	for i, e := range got {
		out[i] = wantErr{At: e.Location.String(), Object: e.Object, Field: e.Field, Msg: e.Err.Error()}
		if i < len(want) && strings.Contains(out[i].Msg, want[i].Msg) {
			out[i].Msg = want[i].Msg
		}
	}
	return out
}

const provider = `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
`

func TestLoadErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		files  map[string]string
		want   []wantErr
	}{
		"MalformedYAML": {
			reason: "A syntax error names the file and the line the parser stopped at.",
			files: map[string]string{"bad/p.yaml": y(`
				apiVersion: pkg.crossplane.io/v1
				kind: Provider
				metadata:
					name: a: b
			`)},
			want: []wantErr{{At: "bad/p.yaml:4", Msg: "malformed YAML: mapping values are not allowed"}},
		},
		"MalformedYAMLFirstLine": {
			reason: "yaml/v3 leaves out the line when it is the first one; it is still reported as line 1.",
			files:  map[string]string{"p.yaml": "a: b: c\n"},
			want:   []wantErr{{At: "p.yaml:1", Msg: "malformed YAML"}},
		},
		"MalformedLaterDocument": {
			reason: "A syntax error in a later document keeps the documents before it and points at the stream line.",
			files:  map[string]string{"p.yaml": provider + "---\napiVersion: v1\nkind: [\n"},
			want:   []wantErr{{At: "p.yaml:9", Msg: "malformed YAML"}},
		},
		"MergeConflictMarker": {
			reason: "A file with Git conflict markers names the first marker as the cause, not yaml/v3's \"could not find expected ':'\".",
			files: map[string]string{"clusters/a/providers.yaml": provider + "---\n" + y(`
				apiVersion: pkg.crossplane.io/v1
				kind: Provider
				metadata:
					name: provider-helm
				spec:
				<<<<<<< HEAD
					package: xpkg.crossplane.io/crossplane-contrib/provider-helm:v0.21.0
				=======
					package: xpkg.crossplane.io/crossplane-contrib/provider-helm:v1.4.0
				>>>>>>> upgrade-helm
			`)},
			want: []wantErr{{At: "clusters/a/providers.yaml:13", Msg: `merge-conflict marker "<<<<<<< HEAD": resolve the Git conflict first`}},
		},
		"MergeConflictMarkerFirstLine": {
			reason: "A conflict around the first line is named at the marker, though yaml/v3 stops on line 2.",
			files:  map[string]string{"p.yaml": "<<<<<<< HEAD\napiVersion: v1\n=======\napiVersion: v2\n>>>>>>> main\n"},
			want:   []wantErr{{At: "p.yaml:1", Msg: `merge-conflict marker "<<<<<<< HEAD": resolve the Git conflict first`}},
		},
		"TabIndentation": {
			reason: "A tab in the indentation of the reported line is named as the cause.",
			files:  map[string]string{"p.yaml": "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n\tname: provider-nop\n"},
			want:   []wantErr{{At: "p.yaml:4", Msg: "tab character in indentation: YAML allows only spaces"}},
		},
		"TabIndentationNextLine": {
			reason: "yaml/v3 reports some bad tab indentation on the line before it; the tab's own line is named.",
			files:  map[string]string{"p.yaml": "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-nop\n\tlabels: {}\n"},
			want:   []wantErr{{At: "p.yaml:5", Msg: "tab character in indentation: YAML allows only spaces"}},
		},
		"TabInValueIsNotTheCause": {
			reason: "A tab that is not indentation is left out of the message; the YAML error stays.",
			files:  map[string]string{"p.yaml": "apiVersion: pkg.crossplane.io/v1\nkind:\tProvider\nmetadata:\n  name: a: b\n"},
			want:   []wantErr{{At: "p.yaml:4", Msg: "malformed YAML: mapping values are not allowed in this context"}},
		},
		"RuntimeConfigNotDeclared": {
			reason: "A runtimeConfigRef to a DeploymentRuntimeConfig no file declares fails at load, as render would.",
			files: map[string]string{
				"clusters/a/providers.yaml": provider + "  runtimeConfigRef:\n    name: debug\n",
				"clusters/a/runtime.yaml":   "apiVersion: pkg.crossplane.io/v1beta1\nkind: DeploymentRuntimeConfig\nmetadata:\n  name: other\n",
			},
			want: []wantErr{{At: "clusters/a/providers.yaml:8", Object: "Provider provider-nop", Field: "spec.runtimeConfigRef.name", Msg: `DeploymentRuntimeConfig "debug" is not declared`}},
		},
		"RuntimeConfigNotDeclaredFunction": {
			reason: "A Function's runtimeConfigRef is checked the same way.",
			files:  map[string]string{"f.yaml": replaceOnce(provider, "kind: Provider", "kind: Function") + "  runtimeConfigRef: {name: debug}\n"},
			want:   []wantErr{{At: "f.yaml:7", Object: "Function provider-nop", Field: "spec.runtimeConfigRef.name", Msg: `DeploymentRuntimeConfig "debug" is not declared`}},
		},
		"UnknownAnchor": {
			reason: "An alias to an unknown anchor is located at the alias.",
			files:  map[string]string{"p.yaml": "apiVersion: v1\nkind: ConfigMap\ndata: *nope\n"},
			want:   []wantErr{{At: "p.yaml:3", Msg: "unknown anchor 'nope'"}},
		},
		"DuplicateKey": {
			reason: "A key set twice in one mapping is an error at the second one, as strict decoding in the API server would have it.",
			files:  map[string]string{"p.yaml": provider + "  packagePullPolicy: Always\n  packagePullPolicy: Never\n"},
			want:   []wantErr{{At: "p.yaml:8", Object: "Provider provider-nop", Field: "spec.packagePullPolicy", Msg: "key defined twice, first on line 7"}},
		},
		"ScalarDocument": {
			reason: "A document must be an object.",
			files:  map[string]string{"p.yaml": provider + "---\njust a string\n"},
			want:   []wantErr{{At: "p.yaml:8", Msg: "document is a YAML scalar, not an object"}},
		},
		"ListDocument": {
			reason: "A bare YAML list is not an object either.",
			files:  map[string]string{"p.yaml": "- a\n- b\n"},
			want:   []wantErr{{At: "p.yaml:1", Msg: "document is a YAML list"}},
		},
		"NoApiVersionOrKind": {
			reason: "Both apiVersion and kind are required; each is reported.",
			files:  map[string]string{"p.yaml": "metadata:\n  name: x\n"},
			want: []wantErr{
				{At: "p.yaml:1", Field: "apiVersion", Msg: "required"},
				{At: "p.yaml:1", Field: "kind", Msg: "required"},
			},
		},
		"KindNotString": {
			reason: "kind must be a string.",
			files:  map[string]string{"p.yaml": "apiVersion: v1\nkind: [a]\n"},
			want:   []wantErr{{At: "p.yaml:2", Field: "kind", Msg: "must be a non-empty string"}},
		},
		"MissingName": {
			reason: "metadata.name is required; the object is named by its kind alone.",
			files: map[string]string{"p.yaml": y(`
				apiVersion: pkg.crossplane.io/v1
				kind: Provider
				metadata:
					labels: {a: b}
				spec:
					package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
			`)},
			want: []wantErr{{At: "p.yaml:3", Object: "Provider", Field: "metadata.name", Msg: "required"}},
		},
		"InvalidName": {
			reason: "metadata.name must be a DNS subdomain, as the API server requires.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, "name: provider-nop", "name: Provider_Nop")},
			want:   []wantErr{{At: "p.yaml:4", Object: "Provider Provider_Nop", Field: "metadata.name", Msg: "invalid name"}},
		},
		"DuplicateNameAcrossFiles": {
			reason: "Two Providers with one name collide; the error names both files.",
			files: map[string]string{
				"a.yaml":   provider,
				"b/c.yaml": replaceOnce(provider, "provider-nop:v0.4.0", "provider-nop:v0.5.0"),
			},
			want: []wantErr{{At: "b/c.yaml:4", Object: "Provider provider-nop", Field: "metadata.name", Msg: "declared twice: first at a.yaml:4"}},
		},
		"DuplicateNameSameFile": {
			reason: "Duplicates within one multi-document file are found too.",
			files:  map[string]string{"a.yaml": "# head\n" + provider + "---\n" + provider},
			want:   []wantErr{{At: "a.yaml:12", Object: "Provider provider-nop", Field: "metadata.name", Msg: "first at a.yaml:5"}},
		},
		"SameNameDifferentKinds": {
			reason: "Names are unique per kind: a Provider and a Function may share one, but not a source.",
			files: map[string]string{
				"a.yaml": provider,
				"b.yaml": replaceOnce(replaceOnce(provider, "kind: Provider", "kind: Function"), "provider-nop:", "function-nop:"),
			},
		},
		"NoRegistry": {
			reason: "spec.package needs a registry host with a dot (the CRD's CEL rule; Crossplane v2 has no default registry).",
			files:  map[string]string{"p.yaml": replaceOnce(provider, "xpkg.crossplane.io/crossplane-contrib/", "crossplane/")},
			want:   []wantErr{{At: "p.yaml:6", Object: "Provider provider-nop", Field: "spec.package", Msg: "must be a fully qualified image name"}},
		},
		"NoTagOrDigest": {
			reason: "spec.package needs a tag or a digest.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, ":v0.4.0", "")},
			want:   []wantErr{{At: "p.yaml:6", Object: "Provider provider-nop", Field: "spec.package", Msg: "including the registry, repository, and tag or digest"}},
		},
		"UppercaseRepository": {
			reason: "A reference the CEL rule lets through is still parsed with name.StrictValidation, which rejects an uppercase repository.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, "crossplane-contrib", "CrossplaneContrib")},
			want:   []wantErr{{At: "p.yaml:6", Object: "Provider provider-nop", Field: "spec.package", Msg: "invalid image reference"}},
		},
		"ShortDigest": {
			reason: "A digest must be a full sha256 digest.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, ":v0.4.0", "@sha256:abc")},
			want:   []wantErr{{At: "p.yaml:6", Object: "Provider provider-nop", Field: "spec.package", Msg: "invalid image reference"}},
		},
		"MissingPackage": {
			reason: "spec.package is required; the error points at spec.",
			files:  map[string]string{"p.yaml": "apiVersion: pkg.crossplane.io/v1\nkind: Configuration\nmetadata:\n  name: c\nspec:\n  revisionHistoryLimit: 2\n"},
			want:   []wantErr{{At: "p.yaml:5", Object: "Configuration c", Field: "spec.package", Msg: "required"}},
		},
		"UnknownSpecField": {
			reason: "A misspelt field is an error at its own line, named by its path.",
			files:  map[string]string{"p.yaml": provider + "  packagePullPolicyy: Always\n"},
			want:   []wantErr{{At: "p.yaml:7", Object: "Provider provider-nop", Field: "spec.packagePullPolicyy", Msg: "unknown field"}},
		},
		"UnknownFieldsEverywhere": {
			reason: "Every unknown field is reported, in lists too, and at the top level.",
			files: map[string]string{"p.yaml": y(`
				apiVersion: pkg.crossplane.io/v1
				kind: Provider
				metadata:
					name: provider-nop
					lables: {a: b}
				spec:
					package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
					packagePullSecrets:
					- name: a
					- nmae: b
				sepc: {}
			`)},
			want: []wantErr{
				{At: "p.yaml:5", Object: "Provider provider-nop", Field: "metadata.lables", Msg: "unknown field"},
				{At: "p.yaml:10", Object: "Provider provider-nop", Field: "spec.packagePullSecrets[1].name", Msg: "required"},
				{At: "p.yaml:10", Object: "Provider provider-nop", Field: "spec.packagePullSecrets[1].nmae", Msg: "unknown field"},
				{At: "p.yaml:11", Object: "Provider provider-nop", Field: "sepc", Msg: "unknown field"},
			},
		},
		"FieldNamesAreCaseSensitive": {
			reason: "The API server matches field names exactly; PackagePullPolicy is not packagePullPolicy.",
			files:  map[string]string{"p.yaml": provider + "  PackagePullPolicy: Always\n"},
			want:   []wantErr{{At: "p.yaml:7", Object: "Provider provider-nop", Field: "spec.PackagePullPolicy", Msg: "unknown field"}},
		},
		"ConfigurationHasNoRuntimeConfigRef": {
			reason: "runtimeConfigRef is only in the Provider and Function schemas.",
			files:  map[string]string{"c.yaml": replaceOnce(provider, "kind: Provider", "kind: Configuration") + "  runtimeConfigRef: {name: default}\n"},
			want:   []wantErr{{At: "c.yaml:7", Object: "Configuration provider-nop", Field: "spec.runtimeConfigRef", Msg: "unknown field"}},
		},
		"ControllerConfigRefGone": {
			reason: "controllerConfigRef was removed with ControllerConfig in Crossplane v2.",
			files:  map[string]string{"p.yaml": provider + "  controllerConfigRef: {name: x}\n"},
			want:   []wantErr{{At: "p.yaml:7", Object: "Provider provider-nop", Field: "spec.controllerConfigRef", Msg: "unknown field"}},
		},
		"WrongType": {
			reason: "A value of the wrong type names the field and the line.",
			files:  map[string]string{"p.yaml": provider + "  revisionHistoryLimit: one\n"},
			want:   []wantErr{{At: "p.yaml:7", Object: "Provider provider-nop", Field: "spec.revisionHistoryLimit", Msg: "must be an integer, not a string"}},
		},
		"WrongTypeInList": {
			reason: "Type errors inside lists are located at the list item that has the field.",
			files:  map[string]string{"p.yaml": provider + "  packagePullSecrets:\n  - name: a\n  - name: [b]\n"},
			want:   []wantErr{{At: "p.yaml:9", Object: "Provider provider-nop", Field: "spec.packagePullSecrets.name", Msg: "must be a string, not a list"}},
		},
		"WrongTypeInMap": {
			reason: "A label value must be a string; YAML 1.2 reads an unquoted 1 as a number.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, "  name: provider-nop\n", "  name: provider-nop\n  labels:\n    tier: 1\n")},
			want:   []wantErr{{At: "p.yaml:5", Object: "Provider provider-nop", Field: "metadata.labels", Msg: "must be a string, not a number"}},
		},
		"InvalidEnums": {
			reason: "revisionActivationPolicy and packagePullPolicy take only the values Crossplane knows.",
			files:  map[string]string{"p.yaml": provider + "  revisionActivationPolicy: automatic\n  packagePullPolicy: Sometimes\n"},
			want: []wantErr{
				{At: "p.yaml:7", Object: "Provider provider-nop", Field: "spec.revisionActivationPolicy", Msg: `unsupported value "automatic": must be Automatic or Manual`},
				{At: "p.yaml:8", Object: "Provider provider-nop", Field: "spec.packagePullPolicy", Msg: `unsupported value "Sometimes": must be Always, IfNotPresent or Never`},
			},
		},
		"NegativeHistoryLimit": {
			reason: "revisionHistoryLimit cannot be negative.",
			files:  map[string]string{"p.yaml": provider + "  revisionHistoryLimit: -1\n"},
			want:   []wantErr{{At: "p.yaml:7", Object: "Provider provider-nop", Field: "spec.revisionHistoryLimit", Msg: "must be 0 or more"}},
		},
		"RuntimeConfigRef": {
			reason: "A runtimeConfigRef needs a name and can only point at a DeploymentRuntimeConfig.",
			files:  map[string]string{"p.yaml": provider + "  runtimeConfigRef:\n    kind: ControllerConfig\n"},
			want: []wantErr{
				{At: "p.yaml:7", Object: "Provider provider-nop", Field: "spec.runtimeConfigRef.name", Msg: "required"},
				{At: "p.yaml:8", Object: "Provider provider-nop", Field: "spec.runtimeConfigRef.kind", Msg: "must be DeploymentRuntimeConfig"},
			},
		},
		"InvalidLabels": {
			reason: "Labels must be valid Kubernetes labels, on the object and in commonLabels, located at the key.",
			files:  map[string]string{"p.yaml": provider + "  commonLabels:\n    ok: fine\n    bad key: x\n"},
			want:   []wantErr{{At: "p.yaml:9", Object: "Provider provider-nop", Field: "spec.commonLabels[bad key]", Msg: "Invalid value"}},
		},
		"DuplicateSource": {
			reason: "One repository declared under two names would install the package twice; both are named.",
			files: map[string]string{
				"a.yaml": provider,
				"b.yaml": replaceOnce(replaceOnce(provider, "name: provider-nop", "name: nop-again"), ":v0.4.0", "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
			},
			want: []wantErr{{At: "b.yaml:6", Object: "Provider nop-again", Field: "spec.package", Msg: "source xpkg.crossplane.io/crossplane-contrib/provider-nop is also declared by Provider provider-nop at a.yaml:6"}},
		},
		"DuplicateSourceAcrossKinds": {
			reason: "A source is one package whatever the kind, and docker.io is index.docker.io.",
			files: map[string]string{
				"a.yaml": replaceOnce(provider, "xpkg.crossplane.io/", "docker.io/"),
				"b.yaml": replaceOnce(replaceOnce(provider, "kind: Provider", "kind: Function"), "xpkg.crossplane.io/", "index.docker.io/"),
			},
			want: []wantErr{{At: "b.yaml:6", Object: "Function provider-nop", Field: "spec.package", Msg: "also declared by Provider provider-nop at a.yaml:6"}},
		},
		"UnservedVersion": {
			reason: "pkg.crossplane.io/v1beta1 Provider is not served; silently ignoring it would drop a package.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, "/v1\n", "/v1beta1\n")},
			want:   []wantErr{{At: "p.yaml:1", Object: "Provider provider-nop", Field: "apiVersion", Msg: "pkg.crossplane.io/v1beta1 Provider is not served by Crossplane; use pkg.crossplane.io/v1"}},
		},
		"GroupWithoutVersion": {
			reason: "apiVersion pkg.crossplane.io parses as a core version; it must not be silently ignored.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, "/v1\n", "\n")},
			want:   []wantErr{{At: "p.yaml:1", Object: "Provider provider-nop", Field: "apiVersion", Msg: "has no version"}},
		},
		"UnservedRuntimeVersion": {
			reason: "DeploymentRuntimeConfig exists only as v1beta1.",
			files:  map[string]string{"r.yaml": "apiVersion: pkg.crossplane.io/v1\nkind: DeploymentRuntimeConfig\nmetadata: {name: r}\n"},
			want:   []wantErr{{At: "r.yaml:1", Object: "DeploymentRuntimeConfig r", Field: "apiVersion", Msg: "use pkg.crossplane.io/v1beta1"}},
		},
		"ControllerConfig": {
			reason: "ControllerConfig was removed in Crossplane v2; it would otherwise be silently ignored.",
			files:  map[string]string{"c.yaml": "apiVersion: pkg.crossplane.io/v1alpha1\nkind: ControllerConfig\nmetadata: {name: old}\n"},
			want:   []wantErr{{At: "c.yaml:2", Object: "ControllerConfig old", Field: "kind", Msg: "removed in Crossplane v2.0"}},
		},
		"KindPlural": {
			reason: "A plural kind in pkg.crossplane.io would be ignored, and lock and apply would uninstall the package.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, "kind: Provider", "kind: Providers")},
			want:   []wantErr{{At: "p.yaml:2", Object: "Providers provider-nop", Field: "kind", Msg: `unknown kind "Providers" in pkg.crossplane.io; did you mean Provider? lockstep reads Provider, Function, Configuration (pkg.crossplane.io/v1), DeploymentRuntimeConfig, ImageConfig (pkg.crossplane.io/v1beta1) and skips ProviderRevision, FunctionRevision, ConfigurationRevision, Lock`}},
		},
		"KindTypo": {
			reason: "A misspelt kind is an error suggesting the nearest accepted kind.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, "kind: Provider", "kind: Providr")},
			want:   []wantErr{{At: "p.yaml:2", Object: "Providr provider-nop", Field: "kind", Msg: `unknown kind "Providr" in pkg.crossplane.io; did you mean Provider?`}},
		},
		"KindLowerCase": {
			reason: "Kinds are case-sensitive, as in Kubernetes; a lower-case kind suggests the right case.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, "kind: Provider", "kind: provider")},
			want:   []wantErr{{At: "p.yaml:2", Object: "provider provider-nop", Field: "kind", Msg: `unknown kind "provider" in pkg.crossplane.io; did you mean Provider?`}},
		},
		"KindTypoRuntimeConfig": {
			reason: "Runtime kinds are suggested too.",
			files:  map[string]string{"r.yaml": "apiVersion: pkg.crossplane.io/v1beta1\nkind: DeploymentRuntimeConfigs\nmetadata: {name: r}\n"},
			want:   []wantErr{{At: "r.yaml:2", Object: "DeploymentRuntimeConfigs r", Field: "kind", Msg: `did you mean DeploymentRuntimeConfig?`}},
		},
		"KindFarOff": {
			reason: "A kind near none of the group's gets no suggestion, only the list of kinds.",
			files:  map[string]string{"c.yaml": "apiVersion: pkg.crossplane.io/v1\nkind: Composition\nmetadata: {name: c}\n"},
			want:   []wantErr{{At: "c.yaml:2", Object: "Composition c", Field: "kind", Msg: `unknown kind "Composition" in pkg.crossplane.io; lockstep reads Provider`}},
		},
		"KindList": {
			reason: "A typed list of packages (ProviderList) is not read item by item; ignoring it would uninstall its items.",
			files:  map[string]string{"l.yaml": "apiVersion: pkg.crossplane.io/v1\nkind: ProviderList\nitems: []\n"},
			want:   []wantErr{{At: "l.yaml:2", Object: "ProviderList", Field: "kind", Msg: `unknown kind "ProviderList" in pkg.crossplane.io; write each Provider as its own document, or use apiVersion v1, kind List`}},
		},
		"RuntimeConfigUnknownField": {
			reason: "The Deployment template is decoded strictly as an apps/v1 DeploymentSpec.",
			files: map[string]string{"r.yaml": y(`
				apiVersion: pkg.crossplane.io/v1beta1
				kind: DeploymentRuntimeConfig
				metadata: {name: r}
				spec:
					deploymentTemplate:
						spec:
							selector: {}
							template:
								spec:
									containers:
									- name: package-runtime
										imagee: x
			`)},
			want: []wantErr{{At: "r.yaml:12", Object: "DeploymentRuntimeConfig r", Field: "spec.deploymentTemplate.spec.template.spec.containers[0].imagee", Msg: "unknown field"}},
		},
		"RuntimeConfigRequired": {
			reason: "The CRD requires selector and template in a deploymentTemplate.spec, and a name on each container.",
			files: map[string]string{"r.yaml": y(`
				apiVersion: pkg.crossplane.io/v1beta1
				kind: DeploymentRuntimeConfig
				metadata: {name: r}
				spec:
					deploymentTemplate:
						spec:
							replicas: 1
			`) + "---\n" + y(`
				apiVersion: pkg.crossplane.io/v1beta1
				kind: DeploymentRuntimeConfig
				metadata: {name: s}
				spec:
					deploymentTemplate:
						spec:
							selector: {}
							template:
								spec:
									containers:
									- args: [--debug]
			`)},
			want: []wantErr{
				{At: "r.yaml:6", Object: "DeploymentRuntimeConfig r", Field: "spec.deploymentTemplate.spec.selector", Msg: "required"},
				{At: "r.yaml:6", Object: "DeploymentRuntimeConfig r", Field: "spec.deploymentTemplate.spec.template", Msg: "required"},
				{At: "r.yaml:19", Object: "DeploymentRuntimeConfig s", Field: "spec.deploymentTemplate.spec.template.spec.containers[0].name", Msg: "required"},
			},
		},
		"ImageConfigRequired": {
			reason: "An ImageConfig needs matchImages, and each section its required fields.",
			files: map[string]string{"i.yaml": y(`
				apiVersion: pkg.crossplane.io/v1beta1
				kind: ImageConfig
				metadata: {name: i}
				spec:
					matchImages: []
					rewriteImage: {}
					registry:
						authentication: {}
			`)},
			want: []wantErr{
				{At: "i.yaml:5", Object: "ImageConfig i", Field: "spec.matchImages", Msg: "at least one"},
				{At: "i.yaml:6", Object: "ImageConfig i", Field: "spec.rewriteImage.prefix", Msg: "required"},
				{At: "i.yaml:8", Object: "ImageConfig i", Field: "spec.registry.authentication.pullSecretRef", Msg: "required"},
			},
		},
		"ImageConfigMatchType": {
			reason: "Prefix is the only match type.",
			files:  map[string]string{"i.yaml": "apiVersion: pkg.crossplane.io/v1beta1\nkind: ImageConfig\nmetadata: {name: i}\nspec:\n  matchImages:\n  - type: Regex\n    prefix: x\n"},
			want:   []wantErr{{At: "i.yaml:6", Object: "ImageConfig i", Field: "spec.matchImages[0].type", Msg: `unsupported value "Regex"`}},
		},
		"ImageConfigVerification": {
			reason: "spec.verification is kept raw but checked strictly against the CRD schema.",
			files: map[string]string{"i.yaml": y(`
				apiVersion: pkg.crossplane.io/v1beta1
				kind: ImageConfig
				metadata: {name: i}
				spec:
					matchImages: [{prefix: x}]
					verification:
						provider: Cosign
						cosign:
							authorities:
							- name: a
								kee: {}
			`)},
			want: []wantErr{
				{At: "i.yaml:10", Object: "ImageConfig i", Field: "spec.verification.cosign.authorities[0]", Msg: "set key or keyless"},
				{At: "i.yaml:11", Object: "ImageConfig i", Field: "spec.verification.cosign.authorities[0].kee", Msg: "unknown field"},
			},
		},
		"AllErrorsSorted": {
			reason: "Every problem in the tree is reported at once, sorted by file and line, whatever the walk order.",
			files: map[string]string{
				"z.yaml": provider + "  packagePullPolicy: Sometimes\n",
				"a.yaml": replaceOnce(provider, ":v0.4.0", "") + "  revisionHistoryLimit: -3\n",
				"m.yaml": "kind: [\n",
			},
			want: []wantErr{
				{At: "a.yaml:6", Object: "Provider provider-nop", Field: "spec.package", Msg: "fully qualified"},
				{At: "a.yaml:7", Object: "Provider provider-nop", Field: "spec.revisionHistoryLimit", Msg: "must be 0 or more"},
				{At: "m.yaml:1", Msg: "malformed YAML"},
				{At: "z.yaml:4", Object: "Provider provider-nop", Field: "metadata.name", Msg: "declared twice: first at a.yaml:4"},
				{At: "z.yaml:7", Object: "Provider provider-nop", Field: "spec.packagePullPolicy", Msg: "unsupported value"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Load(writeTree(t, tc.files))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("%s\nLoad(...): unexpected error:\n%v", tc.reason, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s\nLoad(...): want errors, got none", tc.reason)
			}
			if s != nil {
				t.Errorf("%s\nLoad(...): want a nil Set with errors", tc.reason)
			}
			got := errorsOf(t, err)
			if diff := cmp.Diff(tc.want, project(got, tc.want)); diff != "" {
				t.Errorf("%s\nLoad(...) errors: -want, +got:\n%s\nfull error:\n%v", tc.reason, diff, err)
			}
		})
	}
}

func TestLoadWarningsAndSkippedKinds(t *testing.T) {
	const skipped = `apiVersion: pkg.crossplane.io/v1
kind: ProviderRevision
metadata: {name: provider-nop-1234}
---
apiVersion: pkg.crossplane.io/v1
kind: FunctionRevision
metadata: {name: function-1234}
---
apiVersion: pkg.crossplane.io/v1
kind: ConfigurationRevision
metadata: {name: configuration-1234}
---
apiVersion: pkg.crossplane.io/v1beta1
kind: Lock
metadata: {name: lock}
`
	cases := map[string]struct {
		reason  string
		files   map[string]string
		want    []wantErr
		ignored map[string]int
	}{
		"SkippedKinds": {
			reason: "Revisions and the Lock are served in pkg.crossplane.io and managed by Crossplane: skipped without an error or a warning.",
			files:  map[string]string{"exported.yaml": skipped},
			ignored: map[string]int{
				"pkg.crossplane.io/v1/ProviderRevision": 1, "pkg.crossplane.io/v1/FunctionRevision": 1,
				"pkg.crossplane.io/v1/ConfigurationRevision": 1, "pkg.crossplane.io/v1beta1/Lock": 1,
			},
		},
		"GroupTypo": {
			reason: "A group one edit from pkg.crossplane.io is most likely a typo: the object is ignored, with a warning.",
			files:  map[string]string{"p.yaml": replaceOnce(provider, "pkg.crossplane.io", "pkg.crossplan.io")},
			want: []wantErr{{At: "p.yaml:1", Object: "Provider provider-nop", Field: "apiVersion",
				Msg: `group "pkg.crossplan.io" is not pkg.crossplane.io, the group lockstep reads packages from; this object is ignored`}},
			ignored: map[string]int{"pkg.crossplan.io/v1/Provider": 1},
		},
		"GroupTopLevelDomain": {
			reason:  "pkg.crossplane.com is two edits from pkg.crossplane.io.",
			files:   map[string]string{"p.yaml": replaceOnce(provider, "pkg.crossplane.io", "pkg.crossplane.com")},
			want:    []wantErr{{At: "p.yaml:1", Object: "Provider provider-nop", Field: "apiVersion", Msg: `group "pkg.crossplane.com" is not pkg.crossplane.io`}},
			ignored: map[string]int{"pkg.crossplane.com/v1/Provider": 1},
		},
		"GroupLookalike": {
			reason:  "An unknown *.crossplane.io group with a pkg.crossplane.io kind looks like pkg.crossplane.io.",
			files:   map[string]string{"p.yaml": replaceOnce(provider, "pkg.crossplane.io", "packages.crossplane.io")},
			want:    []wantErr{{At: "p.yaml:1", Object: "Provider provider-nop", Field: "apiVersion", Msg: `group "packages.crossplane.io" is not pkg.crossplane.io`}},
			ignored: map[string]int{"packages.crossplane.io/v1/Provider": 1},
		},
		"ProviderGroup": {
			reason:  "A provider's own *.crossplane.io group (a ProviderConfig kept beside the declarations) is not a lookalike: it is a manifest, not ignored.",
			files:   map[string]string{"pc.yaml": "apiVersion: helm.crossplane.io/v1beta1\nkind: ProviderConfig\nmetadata: {name: default}\n"},
			ignored: map[string]int{},
		},
		"MetaGroup": {
			reason:  "A package's own metadata (meta.pkg.crossplane.io) kept in the repository is not a lookalike.",
			files:   map[string]string{"crossplane.yaml": "apiVersion: meta.pkg.crossplane.io/v1\nkind: Provider\nmetadata: {name: p}\n"},
			ignored: map[string]int{"meta.pkg.crossplane.io/v1/Provider": 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := Load(writeTree(t, tc.files))
			if err != nil {
				t.Fatalf("%s\nLoad(...): unexpected error:\n%v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, project(s.Warnings, tc.want)); diff != "" {
				t.Errorf("%s\nLoad(...) warnings: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.ignored, s.Ignored); diff != "" {
				t.Errorf("%s\nLoad(...) ignored: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	// The message a user reads starts with file:line, then the object and
	// the field.
	_, err := Load(writeTree(t, map[string]string{"providers/nop.yaml": provider + "  packagePullPolicyy: Always\n"}))
	want := "providers/nop.yaml:7: Provider provider-nop: spec.packagePullPolicyy: unknown field"
	if err == nil || err.Error() != want {
		t.Errorf("Load(...): want error %q, got %v", want, err)
	}
}
