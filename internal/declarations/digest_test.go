package declarations

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// Documents of the digest base tree. Each holds the fields the change cases
// below edit.
var (
	digestProvider = y(`
		apiVersion: pkg.crossplane.io/v1
		kind: Provider
		metadata:
			name: provider-nop
			labels: {team: platform}
		spec:
			package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
			packagePullSecrets: [{name: creds}]
			commonLabels: {tier: infra}
			commonAnnotations: {note: hello}
			runtimeConfigRef: {name: debug}
	`)
	digestFunction = y(`
		apiVersion: pkg.crossplane.io/v1
		kind: Function
		metadata:
			name: function-patch-and-transform
		spec:
			package: xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2
	`)
	digestConfiguration = y(`
		apiVersion: pkg.crossplane.io/v1
		kind: Configuration
		metadata:
			name: platform-ref
		spec:
			package: xpkg.example.com/platform/platform-ref:v1.0.0
	`)
	digestRuntimeConfig = y(`
		apiVersion: pkg.crossplane.io/v1beta1
		kind: DeploymentRuntimeConfig
		metadata:
			name: debug
		spec:
			deploymentTemplate:
				spec:
					selector: {}
					template:
						spec:
							containers:
							- name: package-runtime
								args: [--debug]
	`)
	digestImageConfig = y(`
		apiVersion: pkg.crossplane.io/v1beta1
		kind: ImageConfig
		metadata:
			name: mirror
		spec:
			matchImages:
			- prefix: xpkg.crossplane.io/crossplane-contrib
			rewriteImage:
				prefix: mirror.example.com/crossplane-contrib
			verification:
				provider: Cosign
				cosign:
					authorities:
					- name: contrib
						key: {secretRef: {name: cosign-pub, key: cosign.pub}}
	`)
)

// replaceOnce replaces old with new in s once, and panics when old is not
// in s, so a test input cannot silently stay unchanged.
func replaceOnce(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic(fmt.Sprintf("replaceOnce: %q not found in:\n%s", old, s))
	}
	return strings.Replace(s, old, new, 1)
}

func digestBase() map[string]string {
	return map[string]string{
		"providers.yaml":     digestProvider + "---\n" + digestFunction,
		"platform/conf.yaml": digestConfiguration,
		"runtime/all.yml":    digestRuntimeConfig + "---\n" + digestImageConfig,
	}
}

func digestOf(t *testing.T, files map[string]string) string {
	t.Helper()
	s, err := Load(writeTree(t, files))
	if err != nil {
		t.Fatalf("Load(...): unexpected error:\n%v", err)
	}
	return s.Digest()
}

func TestDigestFormat(t *testing.T) {
	d := digestOf(t, digestBase())
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(d) {
		t.Errorf("Digest(): want sha256:<64 hex>, got %q", d)
	}
	empty := (&Set{}).Digest()
	if empty == d {
		t.Errorf("Digest(): an empty set has the same digest as a full one: %s", d)
	}
}

func TestDigestStable(t *testing.T) {
	base := digestOf(t, digestBase())
	cases := map[string]struct {
		reason string
		files  map[string]string
	}{
		"OneFileReordered": {
			reason: "Moving every document into one renamed file, in another order, is not a change.",
			files: map[string]string{"everything.yml": strings.Join([]string{
				digestImageConfig, digestFunction, digestRuntimeConfig, digestConfiguration, digestProvider,
			}, "---\n")},
		},
		"OneFilePerObject": {
			reason: "Splitting documents into nested files is not a change.",
			files: map[string]string{
				"a/z.yaml":   digestProvider,
				"b/y.yaml":   digestFunction,
				"c/d/x.yaml": digestConfiguration,
				"w.yaml":     digestRuntimeConfig,
				"v.yml":      digestImageConfig,
			},
		},
		"Reformatted": {
			reason: "Flow style, quoting, comments, key order and blank lines are not changes.",
			files: map[string]string{
				"providers.yaml": y(`
					# Providers of the platform.
					kind: Provider
					spec:
						runtimeConfigRef:
							name: "debug"
						commonAnnotations:
							note: 'hello'
						commonLabels:
							"tier": infra
						packagePullSecrets:
							- name: creds

						package: "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0"
					metadata: {labels: {team: platform}, name: provider-nop}
					apiVersion: pkg.crossplane.io/v1
					---
					{"apiVersion": "pkg.crossplane.io/v1", "kind": "Function", "metadata": {"name": "function-patch-and-transform"},
					 "spec": {"package": "xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform:v0.8.2"}}
				`),
				"platform/conf.yaml": digestConfiguration,
				"runtime/all.yml":    digestRuntimeConfig + "---\n" + digestImageConfig,
			},
		},
		"DefaultsSpelledOut": {
			reason: "Writing a CRD default explicitly is not a change: the digest covers the defaulted spec.",
			files: map[string]string{
				"providers.yaml": digestProvider +
					"  revisionActivationPolicy: Automatic\n" +
					"  revisionHistoryLimit: 1\n" +
					"  packagePullPolicy: IfNotPresent\n" +
					"  ignoreCrossplaneConstraints: false\n" +
					"  skipDependencyResolution: false\n" + "---\n" + digestFunction + "  runtimeConfigRef: {apiVersion: pkg.crossplane.io/v1beta1, kind: DeploymentRuntimeConfig, name: default}\n",
				"platform/conf.yaml": digestConfiguration,
				"runtime/all.yml": digestRuntimeConfig + "---\n" + replaceOnce(
					replaceOnce(digestImageConfig, "- prefix: xpkg", "- type: Prefix\n    prefix: xpkg"),
					"key: cosign.pub}}", "key: cosign.pub}, hashAlgorithm: sha256}"),
			},
		},
		"PausedAnnotation": {
			reason: "Pausing a package (lockstep.io/paused) needs no new lock: the annotation is left out (docs/design/agent.md#pausing).",
			files: func() map[string]string {
				f := digestBase()
				f["platform/conf.yaml"] = replaceOnce(digestConfiguration, "name: platform-ref\n", "name: platform-ref\n  annotations: {lockstep.io/paused: \"true\"}\n")
				f["providers.yaml"] = replaceOnce(f["providers.yaml"], "labels: {team: platform}\n", "labels: {team: platform}\n  annotations: {lockstep.io/paused: \"false\"}\n")
				return f
			}(),
		},
		"ReleasePolicyAnnotation": {
			reason: "Setting a package's release policy (lockstep.io/release-policy) needs no new lock: the annotation is left out (docs/design/agent.md#release-proposals).",
			files: func() map[string]string {
				f := digestBase()
				f["platform/conf.yaml"] = replaceOnce(digestConfiguration, "name: platform-ref\n", "name: platform-ref\n  annotations: {lockstep.io/release-policy: minor, lockstep.io/paused: \"true\"}\n")
				return f
			}(),
		},
		"IgnoredObjectsAdded": {
			reason: "Objects lockstep does not manage are not part of the digest.",
			files: func() map[string]string {
				f := digestBase()
				f["apps/configmap.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
				f["README.md"] = "docs"
				return f
			}(),
		},
		"FunctionV1beta1": {
			reason: "A v1beta1 Function is the same Function as a v1 one.",
			files: map[string]string{
				"providers.yaml":     digestProvider + "---\n" + replaceOnce(digestFunction, "pkg.crossplane.io/v1\n", "pkg.crossplane.io/v1beta1\n"),
				"platform/conf.yaml": digestConfiguration,
				"runtime/all.yml":    digestRuntimeConfig + "---\n" + digestImageConfig,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := digestOf(t, tc.files); got != base {
				t.Errorf("%s\nDigest(): want %s, got %s", tc.reason, base, got)
			}
		})
	}
}

func TestDigestChanges(t *testing.T) {
	base := digestOf(t, digestBase())
	cases := map[string]struct {
		reason   string
		file     string // key in digestBase
		old, new string
	}{
		"PackageTag":          {"A new tag is a new package version.", "providers.yaml", "provider-nop:v0.4.0", "provider-nop:v0.5.0"},
		"ActivationPolicy":    {"Manual activation changes how revisions roll.", "providers.yaml", "package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0", "package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0\n  revisionActivationPolicy: Manual"},
		"HistoryLimit":        {"The history limit changes revision GC.", "providers.yaml", "commonLabels:", "revisionHistoryLimit: 3\n  commonLabels:"},
		"HistoryLimitZero":    {"0 is not the default 1.", "providers.yaml", "commonLabels:", "revisionHistoryLimit: 0\n  commonLabels:"},
		"PullPolicy":          {"The pull policy is part of the revision.", "providers.yaml", "commonLabels:", "packagePullPolicy: Always\n  commonLabels:"},
		"PullSecret":          {"Pull secrets are part of the revision.", "providers.yaml", "name: creds", "name: other-creds"},
		"IgnoreConstraints":   {"ignoreCrossplaneConstraints changes the install.", "providers.yaml", "commonLabels:", "ignoreCrossplaneConstraints: true\n  commonLabels:"},
		"SkipDependencies":    {"skipDependencyResolution changes the lock.", "providers.yaml", "commonLabels:", "skipDependencyResolution: true\n  commonLabels:"},
		"CommonLabels":        {"commonLabels reach every payload object.", "providers.yaml", "tier: infra", "tier: data"},
		"CommonAnnotations":   {"commonAnnotations reach every payload object.", "providers.yaml", "note: hello", "note: bye"},
		"RuntimeConfigRef":    {"Another runtime config renders another Deployment.", "providers.yaml", "runtimeConfigRef: {name: debug}", "runtimeConfigRef: {name: default}"},
		"MetadataLabel":       {"The Provider object's own labels are applied too.", "providers.yaml", "team: platform", "team: apps"},
		"Name":                {"Renaming a package is a change.", "platform/conf.yaml", "name: platform-ref", "name: platform"},
		"Kind":                {"The same package as another kind is a change.", "platform/conf.yaml", "kind: Configuration", "kind: Provider"},
		"RuntimeConfigArg":    {"DeploymentRuntimeConfig content renders the Deployment.", "runtime/all.yml", "args: [--debug]", "args: [--verbose]"},
		"ImageConfigPrefix":   {"ImageConfig rewrites change what is pulled.", "runtime/all.yml", "prefix: mirror.example.com/crossplane-contrib", "prefix: mirror2.example.com/crossplane-contrib"},
		"ImageVerification":   {"Verification settings are covered although kept raw.", "runtime/all.yml", "key: cosign.pub}}", "key: cosign.pub}, hashAlgorithm: sha512}"},
		"FunctionDigestAdded": {"Pinning a digest is a change.", "providers.yaml", "function-patch-and-transform:v0.8.2", "function-patch-and-transform:v0.8.2@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := digestBase()
			changed := strings.Replace(files[tc.file], tc.old, tc.new, 1)
			if changed == files[tc.file] {
				t.Fatalf("test case does not apply: %q not found in %s", tc.old, tc.file)
			}
			files[tc.file] = changed
			if got := digestOf(t, files); got == base {
				t.Errorf("%s\nDigest(): want a digest other than %s after the change", tc.reason, base)
			}
		})
	}
}

func TestDigestOfSetIgnoresOrderAndLocation(t *testing.T) {
	// Digest sorts what it hashes itself, so a Set assembled in any order
	// (not only by Load) and with any Location hashes the same.
	s, err := Load(writeTree(t, digestBase()))
	if err != nil {
		t.Fatalf("Load(...): %v", err)
	}
	want := s.Digest()
	r := &Set{Ignored: map[string]int{"v1/ConfigMap": 7}}
	for i := len(s.Packages) - 1; i >= 0; i-- {
		d := s.Packages[i]
		d.Location = Location{File: "elsewhere.yaml", Line: 99}
		d.Ref = nil
		r.Packages = append(r.Packages, d)
	}
	r.RuntimeConfigs = s.RuntimeConfigs
	r.ImageConfigs = s.ImageConfigs
	if got := r.Digest(); got != want {
		t.Errorf("Digest() of a reordered set: want %s, got %s", want, got)
	}
}
