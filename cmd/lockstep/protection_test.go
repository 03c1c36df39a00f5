package main

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestApplyDeletionProtection: `lockstep apply` installs the deletion
// protection for its own user, as a SelfSubjectReview names it, so that
// another cluster admin deleting the Provider is denied with a message
// naming lockstep and the escape hatch (crossplane/crossplane#6001); --deletion-protection=false removes it and
// the delete goes through.
func TestApplyDeletionProtection(t *testing.T) {
	reg := registry.New(t)
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	// The example packages are cluster-scoped and other tests install them
	// with other instances: this test has a control plane of its own.
	env, kubeconfig := clusterOn(t, envtest.Dedicated(t), "xp-protect")
	regFlags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	applyArgs := append(append([]string{"apply", "--instance", "protect"}, regFlags...), "--kubeconfig", kubeconfig, "--namespace", "xp-protect")
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, regFlags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	if out, err := run(t, applyArgs...); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	name := render.DeletionProtectionName("protect")
	policy := getObj(t, env, "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", name)
	if policy == nil {
		t.Fatalf("apply did not install ValidatingAdmissionPolicy %s", name)
	}
	vars, _, _ := unstructured.NestedSlice(policy.Object, "spec", "variables")
	if len(vars) == 0 || !strings.Contains(vars[0].(map[string]any)["expression"].(string), `"lockstep-cli-xp-protect"`) {
		t.Errorf("the policy does not let the CLI's user lockstep-cli-xp-protect delete: %v", vars)
	}

	// env.Client is the control plane's admin, not the CLI's user.
	provider := &unstructured.Unstructured{}
	provider.SetAPIVersion("pkg.crossplane.io/v1")
	provider.SetKind("Provider")
	provider.SetName("lockstep-examples-provider-demo")
	ctx := envtest.Context(t, 2*time.Minute)
	envtest.WaitDeleteAdmission(t, env.Client, provider, true)
	err := env.Client.Delete(ctx, provider.DeepCopy())
	want := `ValidatingAdmissionPolicy 'lockstep-deletion-protection-protect' with binding 'lockstep-deletion-protection-protect' denied request: lockstep instance "protect" manages this object and deletion protection allows only lockstep-cli-xp-protect to delete it`
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "annotate the object lockstep.io/allow-delete=true") {
		t.Fatalf("an admin deleting the Provider: got %v, want Forbidden with %q and the escape hatch", err, want)
	}

	out, err := run(t, append(applyArgs, "--deletion-protection=false")...)
	if err != nil {
		t.Fatalf("apply --deletion-protection=false: %v\n%s", err, out)
	}
	for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		if getObj(t, env, "admissionregistration.k8s.io/v1", kind, name) != nil {
			t.Errorf("apply --deletion-protection=false left %s %s", kind, name)
		}
	}
	envtest.WaitDeleteAdmission(t, env.Client, provider, false)
	if err := env.Client.Delete(ctx, provider.DeepCopy()); err != nil {
		t.Errorf("without deletion protection, an admin deleting the Provider: %v", err)
	}
}
