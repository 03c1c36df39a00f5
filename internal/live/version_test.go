package live_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// deployment returns a Deployment named name with label app=app and one
// container per "name=image" of containers.
func deployment(ns, name, app string, containers ...string) *appsv1.Deployment {
	labels := map[string]string{"app": app}
	var cs []corev1.Container
	for _, c := range containers {
		n, image, _ := strings.Cut(c, "=")
		cs = append(cs, corev1.Container{Name: n, Image: image})
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: cs}},
		},
	}
}

// TestReadCrossplaneVersion reads Crossplane's version from Deployments
// on a real API server, as the Helm chart names and labels them.
func TestReadCrossplaneVersion(t *testing.T) {
	env := envtest.Shared(t)
	cases := map[string]struct {
		reason string
		// dep is the Deployment in the namespace, nil for none.
		dep func(ns string) *appsv1.Deployment
		// version is the version read, "" for none; source a part of
		// Source.
		version, source string
	}{
		"Chart": {
			reason: "the chart's Deployment named crossplane gives its image tag",
			dep: func(ns string) *appsv1.Deployment {
				return deployment(ns, "crossplane", "crossplane", "crossplane=xpkg.crossplane.io/crossplane/crossplane:v2.3.4")
			},
			version: "2.3.4", source: "image xpkg.crossplane.io/crossplane/crossplane:v2.3.4",
		},
		"Labelled": {
			reason: "a Deployment of another name labelled app=crossplane is read, from its container named crossplane",
			dep: func(ns string) *appsv1.Deployment {
				return deployment(ns, "core", "crossplane", "sidecar=example.org/proxy:v9.9.9", "crossplane=example.org/crossplane:v2.1.0")
			},
			version: "2.1.0", source: "Deployment %s/core",
		},
		"TagAndDigest": {
			reason: "an image pinned by tag and digest keeps its tag",
			dep: func(ns string) *appsv1.Deployment {
				return deployment(ns, "crossplane", "crossplane", "crossplane=example.org/crossplane:v2.0.1@sha256:"+strings.Repeat("a", 64))
			},
			version: "2.0.1",
		},
		"DigestOnly": {
			reason: "an image pinned by digest alone names no version",
			dep: func(ns string) *appsv1.Deployment {
				return deployment(ns, "crossplane", "crossplane", "crossplane=example.org/crossplane@sha256:"+strings.Repeat("a", 64))
			},
			source: "no version tag",
		},
		"None": {
			reason: "without a Crossplane Deployment the version is unknown, which is not an error",
			source: "no Crossplane Deployment in namespace %s",
		},
		"OtherApp": {
			reason: "a Deployment of another app is not Crossplane",
			dep: func(ns string) *appsv1.Deployment {
				return deployment(ns, "other", "other", "other=example.org/other:v2.3.4")
			},
			source: "no Crossplane Deployment",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := envtest.Context(t, time.Minute)
			ns := env.Namespace(t, "xpversion")
			if tc.dep != nil {
				if err := env.Client.Create(ctx, tc.dep(ns)); err != nil {
					t.Fatal(err)
				}
			}
			got, err := live.ReadCrossplaneVersion(ctx, env.Client, ns)
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			version := ""
			if got.Version != nil {
				version = got.Version.String()
			}
			if version != tc.version {
				t.Errorf("%s: version %q, want %q (source %q)", tc.reason, version, tc.version, got.Source)
			}
			source := tc.source
			if strings.Contains(source, "%s") {
				source = fmt.Sprintf(source, ns)
			}
			if !strings.Contains(got.Source, source) {
				t.Errorf("%s: source %q lacks %q", tc.reason, got.Source, source)
			}
		})
	}
}

// TestCheck applies a package's spec.crossplane.version to the version
// the cluster runs, as Crossplane's revision controller does.
func TestCheck(t *testing.T) {
	at := func(v string) live.CrossplaneVersion {
		return live.CrossplaneVersion{Version: semver.MustParse(v), Source: "Deployment crossplane-system/crossplane"}
	}
	cases := map[string]struct {
		reason     string
		version    live.CrossplaneVersion
		constraint string
		wantErr    string
	}{
		"Allowed":        {reason: "a version inside the constraint passes", version: at("v2.3.4"), constraint: ">=v2.0.0"},
		"NoConstraint":   {reason: "a package without a constraint passes", version: at("v1.20.0")},
		"UnknownVersion": {reason: "a cluster whose version is unknown passes", constraint: ">=v2.0.0"},
		"Refused": {reason: "a version outside the constraint is refused, naming both and the way out", version: at("v1.20.0"), constraint: ">=v2.1.0",
			wantErr: "Provider provider-a requires Crossplane >=v2.1.0, the cluster runs v1.20.0 (Deployment crossplane-system/crossplane); set spec.ignoreCrossplaneConstraints in its declaration to install it anyway"},
		"PrereleaseRefused": {reason: "a pre-release Crossplane satisfies only constraints with a pre-release part (Masterminds semver)", version: at("v2.4.0-rc.1"), constraint: ">=v2.0.0",
			wantErr: "requires Crossplane >=v2.0.0"},
		"PrereleaseAllowed": {reason: "a constraint with a pre-release part allows a pre-release", version: at("v2.4.0-rc.1"), constraint: ">=v2.0.0-0"},
		"NotSemver": {reason: "a constraint that is not semver is an error naming the field", version: at("v2.3.4"), constraint: "two or later",
			wantErr: `Provider provider-a: spec.crossplane.version "two or later" is not a semver constraint`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.version.Check("Provider provider-a", tc.constraint)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("%s\nCheck: %v, want no error", tc.reason, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("%s\nCheck: %v, want an error containing %q", tc.reason, err, tc.wantErr)
			}
		})
	}
}
