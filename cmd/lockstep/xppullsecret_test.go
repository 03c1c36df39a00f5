package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestApplyCrossplanePullSecrets: the provider and function runtimes'
// ServiceAccounts get the imagePullSecrets of the ServiceAccount Crossplane
// runs as, as Crossplane gives them
// (crossplane/crossplane internal/controller/pkg/runtime/reconciler.go),
// read by apply from the test API server; --crossplane-service-account=""
// leaves them out again.
func TestApplyCrossplanePullSecrets(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	if out, err := run(t, "lock", "--crossplane-version", "v2.1.0", "--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	const ns = "xp-sa"
	env, kubeconfig := clusterOn(t, envtest.Dedicated(t), ns)
	ctx := context.Background()
	xp := &corev1.ServiceAccount{
		ObjectMeta:       metav1.ObjectMeta{Name: "crossplane", Namespace: ns},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "xp-pull"}},
	}
	if err := env.Client.Create(ctx, xp); err != nil {
		t.Fatal(err)
	}
	// runtimeSecrets returns, per runtime ServiceAccount of the instance,
	// its imagePullSecrets' names.
	runtimeSecrets := func(t *testing.T) map[string][]string {
		t.Helper()
		var sas corev1.ServiceAccountList
		if err := env.Client.List(ctx, &sas, client.InNamespace(ns), client.MatchingLabels{render.LabelInstance: "xpsa"}); err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, sa := range sas.Items {
			for _, s := range sa.ImagePullSecrets {
				out[sa.Name] = append(out[sa.Name], s.Name)
			}
			if out[sa.Name] == nil {
				out[sa.Name] = []string{}
			}
		}
		return out
	}
	cases := []struct {
		name, reason string
		args         []string
		want         []string
	}{
		{name: "Default", reason: "By default the ServiceAccount crossplane's pull secrets go to every runtime.", want: []string{"xp-pull"}},
		{name: "Off", reason: "--crossplane-service-account='' renders the package's pull secrets alone.", args: []string{"--crossplane-service-account", ""}, want: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"apply", "--instance", "xpsa", "--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host,
				"--kubeconfig", kubeconfig, "--namespace", ns}, tc.args...)
			if out, err := run(t, args...); err != nil {
				t.Fatalf("apply: %v\n%s", err, out)
			}
			got := runtimeSecrets(t)
			if len(got) != 2 {
				t.Fatalf("%s\nruntime ServiceAccounts %v, want the provider's and the function's", tc.reason, got)
			}
			for sa, secrets := range got {
				if diff := cmp.Diff(tc.want, secrets); diff != "" {
					t.Errorf("%s\nServiceAccount %s imagePullSecrets: -want +got\n%s", tc.reason, sa, diff)
				}
				if !strings.HasPrefix(sa, "lockstep-examples-") || slices.Contains(secrets, "") {
					t.Errorf("unexpected ServiceAccount %s %v", sa, secrets)
				}
			}
		})
	}
}
