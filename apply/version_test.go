package apply_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// crossplaneDeployment returns a Deployment like the one Crossplane's Helm
// chart runs its core in (only the image matters here).
func crossplaneDeployment(ns, name, image string) *appsv1.Deployment {
	labels := map[string]string{"app": "crossplane"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "crossplane", Image: image}}},
			},
		},
	}
}

// TestCrossplaneVersionConstraint: apply reads the Crossplane
// version from Crossplane's core Deployment and refuses, before writing
// anything of it, a package whose spec.crossplane.version excludes it.
func TestCrossplaneVersionConstraint(t *testing.T) {
	cases := map[string]struct {
		reason     string
		deployment string // "" for none; "name=image" otherwise
		ignore     bool
		wantErr    string // "" for success
		wantSource string
	}{
		"too old": {
			reason:     "Crossplane v1.20.0 does not satisfy >=v2.1.0",
			deployment: "crossplane=xpkg.crossplane.io/crossplane/crossplane:v1.20.0",
			wantErr:    "Provider %s requires Crossplane >=v2.1.0, the cluster runs v1.20.0 (Deployment %s/crossplane image xpkg.crossplane.io/crossplane/crossplane:v1.20.0); set spec.ignoreCrossplaneConstraints in its declaration to install it anyway",
		},
		"ignored": {
			reason:     "ignoreCrossplaneConstraints installs the package anyway, as Crossplane does",
			deployment: "crossplane=xpkg.crossplane.io/crossplane/crossplane:v1.20.0",
			ignore:     true,
			wantSource: "Deployment %s/crossplane image xpkg.crossplane.io/crossplane/crossplane:v1.20.0",
		},
		"new enough, found by label, tag and digest": {
			reason:     "a Deployment labelled app=crossplane under another name, with tag and digest",
			deployment: "core=xpkg.crossplane.io/crossplane/crossplane:v2.3.4@sha256:0000000000000000000000000000000000000000000000000000000000000000",
			wantSource: "Deployment %s/core image xpkg.crossplane.io/crossplane/crossplane:v2.3.4@sha256:0000000000000000000000000000000000000000000000000000000000000000",
		},
		"no Deployment": {
			reason:     "without a Crossplane Deployment the check is skipped, and the result says so",
			wantSource: "no Crossplane Deployment in namespace %s (none named or labelled app=crossplane): the packages' Crossplane version constraints were not checked",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			if tc.deployment != "" {
				n, image, _ := strings.Cut(tc.deployment, "=")
				if err := f.env.Client.Create(context.Background(), crossplaneDeployment(f.namespace, n, image)); err != nil {
					t.Fatal(err)
				}
			}
			spec := f.demo(t, "provider-demo", "v0.1.0")
			spec.edit = func(files map[string]string) {
				files["crossplane.yaml"] = strings.Replace(files["crossplane.yaml"], `version: ">=v1.14.0-0"`, `version: ">=v2.1.0"`, 1)
			}
			spec.decl = func(d *declarations.Declaration) { d.Spec.IgnoreCrossplaneConstraints = tc.ignore }
			out := f.render(t, build(t, spec))
			res := f.apply(t, f.manager(t, nil), out, apply.Origin{})
			pkg := f.get(t, "pkg.crossplane.io/v1", "Provider", "", spec.name)
			if tc.wantErr != "" {
				p := res.Packages[0]
				wantMsg := strings.Replace(strings.Replace(tc.wantErr, "%s", spec.name, 1), "%s", f.namespace, 1)
				got := ""
				if p.Err != nil {
					got = p.Err.Error()
				}
				if diff := cmp.Diff(wantMsg, got); diff != "" || p.Step != "preflight" {
					t.Errorf("%s: step %q, error -want +got:\n%s", tc.reason, p.Step, diff)
				}
				if pkg != nil {
					t.Errorf("%s: the refused Provider was written", tc.reason)
				}
				return
			}
			mustSucceed(t, res)
			if pkg == nil {
				t.Errorf("%s: the Provider was not installed", tc.reason)
			}
			if diff := cmp.Diff(strings.Replace(tc.wantSource, "%s", f.namespace, 1), res.Crossplane.Source); diff != "" {
				t.Errorf("%s: Result.Crossplane.Source -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
