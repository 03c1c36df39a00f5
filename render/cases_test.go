package render

import (
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// loadDecls reads declarations from YAML the way lockstep reads a Git
// tree, with the real loader (declarations.LoadFS).
func loadDecls(tb testing.TB, doc string) *declarations.Set {
	tb.Helper()
	set, err := declarations.LoadFS(fstest.MapFS{"cluster.yaml": {Data: []byte(strings.TrimLeft(doc, "\n"))}})
	if err != nil {
		tb.Fatalf("declarations: %v", err)
	}
	return set
}

// declared returns the declaration of kind and name in set.
func declared(tb testing.TB, set *declarations.Set, kind crossplane.Kind, name string) *declarations.Declaration {
	tb.Helper()
	for i := range set.Packages {
		if d := &set.Packages[i]; d.Kind == kind && d.Name == name {
			return d
		}
	}
	tb.Fatalf("no %s %s declared", kind, name)
	return nil
}

// fromDecl returns the input Package for a declaration, built from dir.
func fromDecl(tb testing.TB, d *declarations.Declaration, tag, dir string) Package {
	tb.Helper()
	return pkg(tb, crossplane.Kind(d.Kind), d.Name, d.Source(), tag, dir, d)
}

// expect is what the review test expects of one package's runtime and RBAC
// beyond Crossplane's defaults. Zero values mean the default.
type expect struct {
	image          string // runtime image; default source@digest
	replicas       int32  // default 1
	serviceAccount string // default the revision name
	serviceName    string // default the package name
	podLabels      map[string]string
	pullSecrets    []string // the Deployment's imagePullSecrets
	rbacFrom       []string // other packages whose CRDs the provider's roles cover (a family)
	refused        bool     // RBAC refused by the allow list
}

// renderCase is one rendering scenario, shared by the golden, determinism
// and review tests.
type renderCase struct {
	name    string // the golden file is testdata/<name>.golden.yaml
	reason  string
	needs   bool // needs $LOCKSTEP_TESTDATA
	inputs  []string
	input   func(t *testing.T) Input
	expects map[string]expect // by package name
}

// legacyAllowed is the allow list of the v1-style provider case: core
// ConfigMaps and Secrets, read-only.
var legacyAllowed = []rbacv1.PolicyRule{{
	APIGroups: []string{""},
	Resources: []string{"configmaps", "secrets"},
	Verbs:     []string{"get", "list", "watch"},
}}

func renderCases() []renderCase {
	return []renderCase{
		{
			name:   "provider-nop",
			reason: "A v1 Provider with a CRD and a ValidatingWebhookConfiguration, all defaults.",
			needs:  true,
			inputs: []string{"Provider provider-nop: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0 from $LOCKSTEP_TESTDATA/packages/provider-nop-v0.4.0, declared with defaults"},
			input: func(t *testing.T) Input {
				set := loadDecls(t, `
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
`)
				return Input{Packages: []Package{
					fromDecl(t, declared(t, set, crossplane.KindProvider, "provider-nop"), "v0.4.0", upstream(t, "provider-nop-v0.4.0")),
				}}
			},
		},
		{
			name:   "provider-kubernetes-runtimeconfig",
			reason: "A safe-start Provider with a conversion-webhook CRD, run with a DeploymentRuntimeConfig that sets replicas, a ServiceAccount name and pod labels, plus pull secrets and commonLabels.",
			needs:  true,
			inputs: []string{
				"Provider provider-kubernetes: xpkg.crossplane.io/crossplane-contrib/provider-kubernetes:v1.2.1 from $LOCKSTEP_TESTDATA/packages/provider-kubernetes-v1.2.1, runtimeConfigRef provider-kubernetes, packagePullSecrets [xpkg-pull], commonLabels {team: platform}, packagePullPolicy Always",
				"DeploymentRuntimeConfig provider-kubernetes: replicas 2, pod label app.kubernetes.io/part-of: platform, a --debug arg on package-runtime, serviceAccountTemplate name provider-kubernetes",
			},
			input: func(t *testing.T) Input {
				set := loadDecls(t, `
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-kubernetes
  labels:
    team: platform
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-kubernetes:v1.2.1
  packagePullPolicy: Always
  packagePullSecrets:
  - name: xpkg-pull
  commonLabels:
    team: platform
  runtimeConfigRef:
    name: provider-kubernetes
---
apiVersion: pkg.crossplane.io/v1beta1
kind: DeploymentRuntimeConfig
metadata:
  name: provider-kubernetes
spec:
  deploymentTemplate:
    spec:
      replicas: 2
      selector: {}
      template:
        metadata:
          labels:
            app.kubernetes.io/part-of: platform
        spec:
          containers:
          - name: package-runtime
            args: [--debug]
  serviceAccountTemplate:
    metadata:
      name: provider-kubernetes
`)
				return Input{
					Packages: []Package{
						fromDecl(t, declared(t, set, crossplane.KindProvider, "provider-kubernetes"), "v1.2.1", upstream(t, "provider-kubernetes-v1.2.1")),
					},
					RuntimeConfigs: set.RuntimeConfigs,
				}
			},
			expects: map[string]expect{
				"provider-kubernetes": {replicas: 2, serviceAccount: "provider-kubernetes", podLabels: map[string]string{"app.kubernetes.io/part-of": "platform"}, pullSecrets: []string{"xpkg-pull"}},
			},
		},
		{
			name:   "function-auto-ready",
			reason: "A v1 Function with an input CRD, which Crossplane does not install.",
			needs:  true,
			inputs: []string{"Function function-auto-ready: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.7.0 from $LOCKSTEP_TESTDATA/packages/function-auto-ready-v0.7.0, declared with defaults"},
			input: func(t *testing.T) Input {
				set := loadDecls(t, `
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-auto-ready
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.7.0
`)
				return Input{Packages: []Package{
					fromDecl(t, declared(t, set, crossplane.KindFunction, "function-auto-ready"), "v0.7.0", upstream(t, "function-auto-ready-v0.7.0")),
				}}
			},
		},
		{
			name:   "configuration-getting-started",
			reason: "A Configuration (XRDs and Compositions) with its three dependencies, which lockstep installs under Crossplane's dependency names with CRD defaults; Manual activation on the Configuration.",
			needs:  true,
			inputs: []string{
				"Configuration configuration-getting-started: xpkg.upbound.io/upbound/configuration-getting-started:v0.2.0 from $LOCKSTEP_TESTDATA/packages/configuration-getting-started-v0.2.0, revisionActivationPolicy Manual, revisionHistoryLimit 3",
				"dependency Provider crossplane-contrib-provider-nop: xpkg.upbound.io/crossplane-contrib/provider-nop:v0.2.1 from provider-nop-v0.2.1",
				"dependency Function crossplane-contrib-function-kcl: xpkg.upbound.io/crossplane-contrib/function-kcl:v0.8.0 from function-kcl-v0.8.0",
				"dependency Function crossplane-contrib-function-auto-ready: xpkg.upbound.io/crossplane-contrib/function-auto-ready:v0.2.1 from function-auto-ready-v0.2.1",
			},
			input: func(t *testing.T) Input {
				set := loadDecls(t, `
apiVersion: pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-getting-started
  annotations:
    platform.example.com/owner: team-a
spec:
  package: xpkg.upbound.io/upbound/configuration-getting-started:v0.2.0
  revisionActivationPolicy: Manual
  revisionHistoryLimit: 3
`)
				return Input{Packages: []Package{
					fromDecl(t, declared(t, set, crossplane.KindConfiguration, "configuration-getting-started"), "v0.2.0", upstream(t, "configuration-getting-started-v0.2.0")),
					pkg(t, crossplane.KindProvider, "crossplane-contrib-provider-nop", "xpkg.upbound.io/crossplane-contrib/provider-nop", "v0.2.1", upstream(t, "provider-nop-v0.2.1"), nil),
					pkg(t, crossplane.KindFunction, "crossplane-contrib-function-kcl", "xpkg.upbound.io/crossplane-contrib/function-kcl", "v0.8.0", upstream(t, "function-kcl-v0.8.0"), nil),
					pkg(t, crossplane.KindFunction, "crossplane-contrib-function-auto-ready", "xpkg.upbound.io/crossplane-contrib/function-auto-ready", "v0.2.1", upstream(t, "function-auto-ready-v0.2.1"), nil),
				}}
			},
		},
		{
			name:   "provider-family-aws-s3",
			reason: "A family provider and one member: each revision's roles cover the family's resources, both are safe-start.",
			needs:  true,
			inputs: []string{
				"Provider provider-aws-s3: xpkg.upbound.io/upbound/provider-aws-s3:v2.6.0 from $LOCKSTEP_TESTDATA/packages/provider-aws-s3-v2.6.0, declared with defaults",
				"dependency Provider upbound-provider-family-aws: xpkg.upbound.io/upbound/provider-family-aws:v2.6.0 from provider-family-aws-v2.6.0",
			},
			input: func(t *testing.T) Input {
				set := loadDecls(t, `
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-aws-s3
spec:
  package: xpkg.upbound.io/upbound/provider-aws-s3:v2.6.0
`)
				return Input{Packages: []Package{
					fromDecl(t, declared(t, set, crossplane.KindProvider, "provider-aws-s3"), "v2.6.0", upstream(t, "provider-aws-s3-v2.6.0")),
					pkg(t, crossplane.KindProvider, "upbound-provider-family-aws", "xpkg.upbound.io/upbound/provider-family-aws", "v2.6.0", upstream(t, "provider-family-aws-v2.6.0"), nil),
				}}
			},
			expects: map[string]expect{
				"provider-aws-s3":             {rbacFrom: []string{"upbound-provider-family-aws"}},
				"upbound-provider-family-aws": {rbacFrom: []string{"provider-aws-s3"}},
			},
		},
		{
			name:   "provider-v1-permissions",
			reason: "v1-style provider metadata: spec.controller.image runs, permissionRequests are checked against the allow list; the refused provider gets no RBAC and a problem naming the rule.",
			inputs: []string{
				"Provider provider-legacy-allowed: registry.lockstep.example/legacy/provider-legacy-allowed:v0.3.0 from render/testdata/packages/provider-legacy-allowed",
				"Provider provider-legacy-refused: registry.lockstep.example/legacy/provider-legacy-refused:v0.3.0 from render/testdata/packages/provider-legacy-refused",
				"allowed provider permissions: core configmaps and secrets, get, list and watch",
			},
			input: func(t *testing.T) Input {
				set := loadDecls(t, `
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-legacy-allowed
spec:
  package: registry.lockstep.example/legacy/provider-legacy-allowed:v0.3.0
---
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-legacy-refused
spec:
  package: registry.lockstep.example/legacy/provider-legacy-refused:v0.3.0
`)
				dir := filepath.Join(repoRoot(t), "render", "testdata", "packages")
				return Input{
					Packages: []Package{
						fromDecl(t, declared(t, set, crossplane.KindProvider, "provider-legacy-allowed"), "v0.3.0", filepath.Join(dir, "provider-legacy-allowed")),
						fromDecl(t, declared(t, set, crossplane.KindProvider, "provider-legacy-refused"), "v0.3.0", filepath.Join(dir, "provider-legacy-refused")),
					},
					AllowedProviderPermissions: legacyAllowed,
				}
			},
			expects: map[string]expect{
				"provider-legacy-allowed": {image: "registry.lockstep.example/legacy/provider-legacy-controller:v0.3.0"},
				"provider-legacy-refused": {refused: true},
			},
		},
		{
			name:   "imageconfig-mirror",
			reason: "ImageConfigs rewrite the crossplane-contrib images to a mirror (the longest prefix wins), add the mirror's pull secret, and pick a runtime config for functions.",
			needs:  true,
			inputs: []string{
				"Provider provider-nop: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0 from $LOCKSTEP_TESTDATA/packages/provider-nop-v0.4.0",
				"Function function-auto-ready: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.7.0 from $LOCKSTEP_TESTDATA/packages/function-auto-ready-v0.7.0",
				"ImageConfig mirror: xpkg.crossplane.io/crossplane-contrib/ -> mirror.lockstep.example/xp/; ImageConfig everything: xpkg.crossplane.io/ -> wrong.lockstep.example/ (shorter, loses)",
				"ImageConfig mirror-auth: pull secret mirror-pull for mirror.lockstep.example/",
				"ImageConfig mirror-functions: runtime.configRef functions for mirror.lockstep.example/xp/function-; DeploymentRuntimeConfig functions: a node selector and a Service name",
			},
			input: func(t *testing.T) Input {
				set := loadDecls(t, `
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
spec:
  package: xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0
---
apiVersion: pkg.crossplane.io/v1
kind: Function
metadata:
  name: function-auto-ready
spec:
  package: xpkg.crossplane.io/crossplane-contrib/function-auto-ready:v0.7.0
---
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: mirror
spec:
  matchImages:
  - prefix: xpkg.crossplane.io/crossplane-contrib/
  rewriteImage:
    prefix: mirror.lockstep.example/xp/
---
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: everything
spec:
  matchImages:
  - prefix: xpkg.crossplane.io/
  rewriteImage:
    prefix: wrong.lockstep.example/
---
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: mirror-auth
spec:
  matchImages:
  - prefix: mirror.lockstep.example/
  registry:
    authentication:
      pullSecretRef:
        name: mirror-pull
---
apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: mirror-functions
spec:
  matchImages:
  - prefix: mirror.lockstep.example/xp/function-
  runtime:
    configRef:
      name: functions
---
apiVersion: pkg.crossplane.io/v1beta1
kind: DeploymentRuntimeConfig
metadata:
  name: functions
spec:
  deploymentTemplate:
    spec:
      selector: {}
      template:
        spec:
          nodeSelector:
            lockstep.example/pool: functions
          containers: []
  serviceTemplate:
    metadata:
      name: auto-ready
`)
				return Input{
					Packages: []Package{
						fromDecl(t, declared(t, set, crossplane.KindProvider, "provider-nop"), "v0.4.0", upstream(t, "provider-nop-v0.4.0")),
						fromDecl(t, declared(t, set, crossplane.KindFunction, "function-auto-ready"), "v0.7.0", upstream(t, "function-auto-ready-v0.7.0")),
					},
					RuntimeConfigs: set.RuntimeConfigs,
					ImageConfigs:   set.ImageConfigs,
				}
			},
			expects: map[string]expect{
				"provider-nop":        {image: "mirror.lockstep.example/xp/provider-nop@", pullSecrets: []string{"mirror-pull"}},
				"function-auto-ready": {image: "mirror.lockstep.example/xp/function-auto-ready@", pullSecrets: []string{"mirror-pull"}, serviceName: "auto-ready"},
			},
		},
	}
}

// caseInput returns the case's input with the namespace and instance every
// case uses.
func caseInput(t *testing.T, c renderCase) Input {
	t.Helper()
	if c.needs {
		testdataDir(t)
	}
	in := c.input(t)
	in.Namespace = "crossplane-system"
	in.Instance = "golden"
	return in
}
