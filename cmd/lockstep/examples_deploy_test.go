package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/internal/writelock"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
)

// deployExample is examples/deploy as the test reads it: the agent's
// Deployment, its RBAC objects, and the agent's --namespace and --instance.
type deployExample struct {
	deployment          appsv1.Deployment
	clusterRole         rbacv1.ClusterRole
	clusterRoleBinding  rbacv1.ClusterRoleBinding
	role                rbacv1.Role
	roleBinding         rbacv1.RoleBinding
	namespace, instance string
	// pullSA is --pull-service-account, NAMESPACE/NAME.
	pullSA string
}

// readDeployExample reads deployment.yaml and rbac.yaml of examples/deploy,
// strictly, and the agent's --namespace and --instance (default lockstep).
func readDeployExample(t *testing.T) *deployExample {
	t.Helper()
	dir := filepath.Join("..", "..", "examples", "deploy")
	ex := &deployExample{instance: "lockstep"}
	for _, f := range []string{"deployment.yaml", "rbac.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("examples/deploy/%s: %v", f, err)
			}
			var meta struct{ Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("examples/deploy/%s: %v", f, err)
			}
			into := map[string]any{
				"Deployment":         &ex.deployment,
				"ClusterRole":        &ex.clusterRole,
				"ClusterRoleBinding": &ex.clusterRoleBinding,
				"Role":               &ex.role,
				"RoleBinding":        &ex.roleBinding,
			}[meta.Kind]
			if into == nil {
				continue
			}
			if err := yaml.UnmarshalStrict(doc, into); err != nil {
				t.Fatalf("examples/deploy/%s: %s: %v", f, meta.Kind, err)
			}
		}
	}
	if len(ex.deployment.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("examples/deploy/deployment.yaml: no container")
	}
	for _, a := range ex.deployment.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--namespace="); ok {
			ex.namespace = v
		}
		if v, ok := strings.CutPrefix(a, "--instance="); ok {
			ex.instance = v
		}
		if v, ok := strings.CutPrefix(a, "--pull-service-account="); ok {
			ex.pullSA = v
		}
	}
	return ex
}

// granted returns which of verbs the rules allow on resource name of
// group, the way RBAC matches a rule: "*" matches any group, resource or
// verb, and a rule without resourceNames matches every name.
func granted(rules []rbacv1.PolicyRule, group, resource, name string, verbs ...string) []string {
	in := func(list []string, v string) bool {
		for _, l := range list {
			if l == v || l == rbacv1.VerbAll {
				return true
			}
		}
		return false
	}
	var out []string
	for _, v := range verbs {
		for _, r := range rules {
			if in(r.APIGroups, group) && in(r.Resources, resource) && in(r.Verbs, v) &&
				(len(r.ResourceNames) == 0 || in(r.ResourceNames, name)) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// TestExampleDeployRBAC keeps examples/deploy/rbac.yaml in step with what
// the agent does: both Leases it takes (leader election, lockstep-<instance>,
// and the write Lease of internal/writelock) are allowed in the namespace
// it runs its applies in, the deletion protection's policy and binding
// may be written and deleted, the bindings name the Deployment's
// ServiceAccount, and escalate and bind are granted where they mean
// something (ClusterRoles) and nowhere else (docs/design/agent.md#the-agents-rbac).
func TestExampleDeployRBAC(t *testing.T) {
	ex := readDeployExample(t)
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: ex.deployment.Spec.Template.Spec.ServiceAccountName, Namespace: ex.deployment.Namespace}
	leaseVerbs := []string{"get", "create", "update"}
	protectVerbs := []string{"get", "create", "patch", "delete"}
	pullNS, pullName, _ := strings.Cut(ex.pullSA, "/")
	cases := map[string]struct {
		reason string
		got    any
		want   any
	}{
		"PullServiceAccount": {
			reason: "the agent reads the imagePullSecrets of --pull-service-account and those Secrets, in the namespace the Role grants",
			got:    []any{pullNS, granted(ex.role.Rules, "", "serviceaccounts", pullName, "get"), granted(ex.role.Rules, "", "secrets", "regcred", "get")},
			want:   []any{ex.role.Namespace, []string{"get"}, []string{"get"}},
		},
		"RoleInAgentNamespace": {
			reason: "both Leases live in the agent's --namespace, so the Role granting them must be there",
			got:    ex.role.Namespace,
			want:   ex.namespace,
		},
		"LeaderElectionLease": {
			reason: "--leader-elect gets, creates and renews Lease lockstep-<instance>",
			got:    granted(ex.role.Rules, "coordination.k8s.io", "leases", "lockstep-"+ex.instance, leaseVerbs...),
			want:   leaseVerbs,
		},
		"WriteLease": {
			reason: "every apply gets, creates and renews the write Lease lockstep-apply-<instance>",
			got:    granted(ex.role.Rules, "coordination.k8s.io", "leases", writelock.LeaseName(ex.instance), leaseVerbs...),
			want:   leaseVerbs,
		},
		"CrossplaneLock": {
			reason: "every apply reads Crossplane's Lock/lock, creates it when absent and updates it",
			got:    granted(ex.clusterRole.Rules, "pkg.crossplane.io", "locks", "lock", "get", "create", "update"),
			want:   []string{"get", "create", "update"},
		},
		"CrossplaneLockWatched": {
			reason: "the agent watches Crossplane's Lock/lock by name (docs/design/agent.md#the-agents-steady-state)",
			got:    granted(ex.clusterRole.Rules, "pkg.crossplane.io", "locks", "lock", "list", "watch"),
			want:   []string{"list", "watch"},
		},
		"DeletionProtectionWatched": {
			reason: "the agent watches the instance's deletion protection objects (docs/design/agent.md#the-agents-steady-state)",
			got: append(granted(ex.clusterRole.Rules, "admissionregistration.k8s.io", "validatingadmissionpolicies", render.DeletionProtectionName(ex.instance), "list", "watch"),
				granted(ex.clusterRole.Rules, "admissionregistration.k8s.io", "validatingadmissionpolicybindings", render.DeletionProtectionName(ex.instance), "list", "watch")...),
			want: []string{"list", "watch", "list", "watch"},
		},
		"CrossplaneDeployment": {
			reason: "every apply reads Crossplane's core Deployment for the version Crossplane constraints are checked against",
			got:    granted(ex.role.Rules, "apps", "deployments", "crossplane", "get", "list"),
			want:   []string{"get", "list"},
		},
		"EscalateAndBindOnClusterRoles": {
			reason: "rendering provider ClusterRoles with permissions lockstep does not hold needs escalate, binding them needs bind",
			got:    granted(ex.clusterRole.Rules, "rbac.authorization.k8s.io", "clusterroles", "crossplane:provider:p-0123456789ab:system", "escalate", "bind"),
			want:   []string{"escalate", "bind"},
		},
		"NoEscalateOrBindOnBindings": {
			reason: "escalate and bind mean nothing on ClusterRoleBindings; granting them there only misleads",
			got:    granted(ex.clusterRole.Rules, "rbac.authorization.k8s.io", "clusterrolebindings", "x", "escalate", "bind"),
			want:   []string(nil),
		},
		"DeletionProtectionPolicy": {
			reason: "every apply reads, applies (create, patch) and with --deletion-protection=false deletes the ValidatingAdmissionPolicy of the instance",
			got:    granted(ex.clusterRole.Rules, "admissionregistration.k8s.io", "validatingadmissionpolicies", render.DeletionProtectionName(ex.instance), protectVerbs...),
			want:   protectVerbs,
		},
		"DeletionProtectionBinding": {
			reason: "the same for the policy's binding",
			got:    granted(ex.clusterRole.Rules, "admissionregistration.k8s.io", "validatingadmissionpolicybindings", render.DeletionProtectionName(ex.instance), protectVerbs...),
			want:   protectVerbs,
		},
		"ClusterRoleBoundToAgent": {
			reason: "the ClusterRoleBinding binds the ClusterRole to the Deployment's ServiceAccount",
			got:    []any{ex.clusterRoleBinding.RoleRef.Name, ex.clusterRoleBinding.Subjects},
			want:   []any{ex.clusterRole.Name, []rbacv1.Subject{sa}},
		},
		"RoleBoundToAgent": {
			reason: "the RoleBinding binds the Role to the Deployment's ServiceAccount in the Role's namespace",
			got:    []any{ex.roleBinding.Namespace, ex.roleBinding.RoleRef.Name, ex.roleBinding.Subjects},
			want:   []any{ex.role.Namespace, ex.role.Name, []rbacv1.Subject{sa}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s\nexamples/deploy: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestExampleDeployTrustedRoot keeps the agent's --trusted-root in
// examples/deploy pointing at a Sigstore trusted root that is there and
// reads: the flag names a file under the mount of a ConfigMap volume, the
// ConfigMap is one of the example's resources (kustomization.yaml) and has
// that key, and its content is a trusted_root.json that cosign.LoadTrustedRoot
// (the agent's reader) accepts.
func TestExampleDeployTrustedRoot(t *testing.T) {
	ex := readDeployExample(t)
	dir := filepath.Join("..", "..", "examples", "deploy")
	pod := ex.deployment.Spec.Template.Spec
	var flag string
	for _, a := range pod.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--trusted-root="); ok {
			flag = v
		}
	}
	// The volume mounted at the flag's directory, and the ConfigMap it reads.
	var volume, configMap string
	for _, m := range pod.Containers[0].VolumeMounts {
		if filepath.Dir(flag) == filepath.Clean(m.MountPath) {
			volume = m.Name
		}
	}
	for _, v := range pod.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			configMap = v.ConfigMap.Name
		}
	}
	var kust struct {
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err == nil {
		err = yaml.UnmarshalStrict(b, &kust)
	}
	if err != nil {
		t.Fatalf("examples/deploy/kustomization.yaml: %v", err)
	}
	var cm corev1.ConfigMap
	b, err = os.ReadFile(filepath.Join(dir, "trusted-root.yaml"))
	if err == nil {
		err = yaml.UnmarshalStrict(b, &cm)
	}
	if err != nil {
		t.Fatalf("examples/deploy/trusted-root.yaml: %v", err)
	}
	content, hasKey := cm.Data[filepath.Base(flag)]
	root := filepath.Join(t.TempDir(), "trusted_root.json")
	if err := os.WriteFile(root, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	_, loadErr := cosign.LoadTrustedRoot(root)

	cases := map[string]struct {
		reason string
		got    any
		want   any
	}{
		"FlagUnderConfigMapMount": {
			reason: "--trusted-root names a file in a mounted ConfigMap volume",
			got:    []any{flag != "", volume != "", configMap},
			want:   []any{true, true, cm.Name},
		},
		"ConfigMapDeployed": {
			reason: "the ConfigMap is a resource of the example, in the agent's namespace",
			got:    []any{slices.Contains(kust.Resources, "trusted-root.yaml"), cm.Namespace},
			want:   []any{true, ex.deployment.Namespace},
		},
		"ConfigMapHasTheFile": {
			reason: "the ConfigMap has the key the flag names, holding a trusted root the agent reads",
			got:    []any{hasKey, loadErr == nil},
			want:   []any{true, true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s (load error: %v)\nexamples/deploy: -want, +got:\n%s", tc.reason, loadErr, diff)
			}
		})
	}
}
