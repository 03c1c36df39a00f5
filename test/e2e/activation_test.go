package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

const iamProvider = `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-aws-iam
spec:
  package: xpkg.upbound.io/upbound/provider-aws-iam:v2.6.0
`

// pushIAM pushes provider-aws-iam v2.6.0 (safe-start, 46 managed-resource
// CRDs) and the family provider it depends on.
func pushIAM(t *testing.T, c *cluster) {
	c.push(t, "provider-family-aws-v2.6.0", "upbound/provider-family-aws", "v2.6.0")
	c.push(t, "provider-aws-iam-v2.6.0", "upbound/provider-aws-iam", "v2.6.0")
}

// TestActivationDefaultPolicy: beside Crossplane's default activation
// policy (the Helm chart's provider.defaultActivations ["*"], which `core
// init` installs as the ManagedResourceActivationPolicy default), with no
// policy in Git, a safe-start provider locked for Crossplane v2.3.4 gets
// every MRD Active, runs its Deployment with a replica, and a repeat apply
// neither warns nor writes. Before, lockstep rendered every MRD inactive
// and the Deployment at 0 replicas while Crossplane activated all 46 MRDs
// and made their CRDs, and every apply printed 46 warnings.
func TestActivationDefaultPolicy(t *testing.T) {
	c := newCluster(t, envtest.CrossplaneOptions{})
	pushIAM(t, c)
	c.write(t, "providers.yaml", iamProvider)
	c.lock(t, envtest.CrossplaneVersion)
	// diff --cluster shows what the cluster's policy adds to Git's.
	out, err := c.lockstep(t, append([]string{"diff", "--base-dir", t.TempDir(), "--head-dir", c.dir, "--cluster",
		"--cache-dir", c.cache, "--insecure-registry", c.reg.Host}, c.clusterFlags()...)...)
	if err != nil || !strings.Contains(out, "managed resource activation: 46 of 46 MRDs active (46 activated by the cluster, not by Git)") {
		t.Errorf("diff --cluster does not show the 46 MRDs the cluster's default policy activates: %v\n%s", err, out)
	}
	out = c.apply(t)
	if w := warnings(out); len(w) > 0 {
		t.Errorf("the first apply warned %d times, want none; first: %s", len(w), w[0])
	}

	waitFor(t, 2*time.Minute, "every iam MRD Active and the runtime with a ready replica", func(ctx context.Context) (bool, string) {
		states, err := c.mrdStates(ctx, "iam.aws")
		if err != nil {
			return false, err.Error()
		}
		inactive := 0
		for _, s := range states {
			if s != "Active" {
				inactive++
			}
		}
		if len(states) != 46 || inactive > 0 {
			return false, fmt.Sprintf("%d MRDs, %d not Active", len(states), inactive)
		}
		ds, err := c.runtimeDeployments(ctx, "provider-aws-iam-")
		if err != nil || len(ds) != 1 {
			return false, fmt.Sprintf("runtime Deployments %v: %v", ds, err)
		}
		d := ds[0]
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 1 || d.Status.ReadyReplicas < 1 {
			return false, fmt.Sprintf("Deployment %s: replicas %d, ready %d", d.Name, ptr.Deref(d.Spec.Replicas, -1), d.Status.ReadyReplicas)
		}
		return true, ""
	})

	// lockstep created the MRDs paused and resumed them once their CRDs
	// were Established: Crossplane's MRD controller then reconciles each
	// one and marks it Established itself.
	waitFor(t, 3*time.Minute, "every iam MRD resumed and Established by Crossplane's MRD controller", func(ctx context.Context) (bool, string) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(mrdGVK)
		if err := c.env.Client.List(ctx, l); err != nil {
			return false, err.Error()
		}
		var paused, pending []string
		for _, m := range l.Items {
			if !strings.Contains(m.GetName(), "iam.aws") {
				continue
			}
			if a := m.GetAnnotations(); a["crossplane.io/paused"] != "" || a[apply.AnnotationInstalling] != "" {
				paused = append(paused, m.GetName())
			}
			if condition(&m, "Established") != "True/EstablishedManagedResource" {
				pending = append(pending, m.GetName())
			}
		}
		return len(paused) == 0 && len(pending) == 0, fmt.Sprintf("%d still paused, %d not Established: %v %v", len(paused), len(pending), paused, pending)
	})

	// Two more applies: the first may still see Crossplane's MRD controller
	// at work; the last must be silent and write nothing.
	c.apply(t)
	out = c.apply(t)
	if w := warnings(out); len(w) > 0 {
		t.Errorf("a repeat apply warned %d times, want none:\n%s", len(w), strings.Join(w, "\n"))
	}
	if !noWrite(out) {
		t.Errorf("a repeat apply wrote, want no mutating request:\n%s", out)
	}
}

const kubernetesProvider = `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-kubernetes
spec:
  package: xpkg.upbound.io/crossplane-contrib/provider-kubernetes:v1.2.1
  runtimeConfigRef:
    name: two-replicas
---
apiVersion: pkg.crossplane.io/v1beta1
kind: DeploymentRuntimeConfig
metadata:
  name: two-replicas
spec:
  deploymentTemplate:
    spec:
      replicas: 2
      selector: {}
      template: {}
`

// objectsPolicy is a policy in Git activating provider-kubernetes' two
// Object kinds.
const objectsPolicy = `apiVersion: apiextensions.crossplane.io/v1alpha1
kind: ManagedResourceActivationPolicy
metadata:
  name: objects
spec:
  activate:
  - objects.kubernetes.crossplane.io
  - objects.kubernetes.m.crossplane.io
`

// lockKubernetes pushes provider-kubernetes v1.2.1, declares it with
// kubernetesProvider and locks it for Crossplane version.
func (c *cluster) lockKubernetes(t *testing.T, version string) {
	t.Helper()
	c.push(t, "provider-kubernetes-v1.2.1", "crossplane-contrib/provider-kubernetes", "v1.2.1")
	c.write(t, "providers.yaml", kubernetesProvider)
	c.lock(t, version)
}

// replicasOf waits for the one runtime Deployment of prefix and returns
// its spec.replicas.
func (c *cluster) replicasOf(t *testing.T, prefix string) int32 {
	t.Helper()
	var got int32 = -1
	waitFor(t, time.Minute, "the runtime Deployment of "+prefix, func(ctx context.Context) (bool, string) {
		ds, err := c.runtimeDeployments(ctx, prefix)
		if err != nil || len(ds) != 1 {
			return false, fmt.Sprintf("Deployments %d: %v", len(ds), err)
		}
		got = ptr.Deref(ds[0].Spec.Replicas, 1)
		return true, ""
	})
	return got
}

// TestActivationNoDefaultPolicyKeepsReplicas: with no default policy
// (provider.defaultActivations: []) and none in Git, a safe-start
// provider locked for Crossplane v2.3.4 has every MRD Inactive, and its
// Deployment keeps the DeploymentRuntimeConfig's 2 replicas, as v2.3.4
// does (it has no scale to zero). Before, lockstep rendered 0 replicas.
func TestActivationNoDefaultPolicyKeepsReplicas(t *testing.T) {
	c := newCluster(t, envtest.CrossplaneOptions{NoDefaultPolicy: true})
	c.lockKubernetes(t, envtest.CrossplaneVersion)
	c.apply(t)
	if got := c.replicasOf(t, "provider-kubernetes-"); got != 2 {
		t.Errorf("runtime replicas %d, want the DeploymentRuntimeConfig's 2", got)
	}
	ctx := envtest.Context(t, time.Minute)
	states, err := c.mrdStates(ctx, "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	for n, s := range states {
		if s == "Active" {
			t.Errorf("MRD %s is Active with no policy anywhere", n)
		}
	}
	// The second apply may record the runtime's new availability in the
	// revision's status; the third has nothing left to write.
	c.apply(t)
	out := c.apply(t)
	if w := warnings(out); len(w) > 0 || !noWrite(out) {
		t.Errorf("a repeat apply warned or wrote:\n%s", out)
	}
}

// TestActivationScaleToZeroLatch runs Crossplane v2.4.0, the first release
// that scales a safe-start runtime to zero while all its MRDs are Inactive,
// with no default policy, under a lock for v2.4.0: the Deployment has 0
// replicas. A policy in Git activates two kinds: the Deployment scales to
// the DeploymentRuntimeConfig's 2. With the policy removed from Git the
// MRDs stay Active (Crossplane refuses Active → Inactive) and so the
// Deployment keeps its 2 replicas: the latch is not undone, and the repeat
// apply writes nothing and warns once per MRD that no policy activates any
// more (docs/design/activation.md#managed-resource-activation).
func TestActivationScaleToZeroLatch(t *testing.T) {
	c := newCluster(t, envtest.CrossplaneOptions{Version: "v2.4.0", NoDefaultPolicy: true})
	c.lockKubernetes(t, "v2.4.0")
	c.apply(t)
	if got := c.replicasOf(t, "provider-kubernetes-"); got != 0 {
		t.Errorf("with no Active MRD under v2.4.0: runtime replicas %d, want 0", got)
	}

	c.write(t, "policy.yaml", objectsPolicy)
	c.lock(t, "v2.4.0")
	c.apply(t)
	if got := c.replicasOf(t, "provider-kubernetes-"); got != 2 {
		t.Errorf("with 2 kinds activated in Git: runtime replicas %d, want 2", got)
	}

	c.remove(t, "policy.yaml")
	c.lock(t, "v2.4.0")
	c.apply(t)
	out := c.apply(t)
	if got := c.replicasOf(t, "provider-kubernetes-"); got != 2 {
		t.Errorf("after the policy left Git: runtime replicas %d, want 2 (the MRDs stay Active)", got)
	}
	if w := warnings(out); len(w) != 2 || !noWrite(out) || !strings.Contains(out, "no ManagedResourceActivationPolicy activates it any more") {
		t.Errorf("a repeat apply wrote, or did not warn once for each of the 2 MRDs:\n%s", out)
	}
}
