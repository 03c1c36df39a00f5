package access_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/access"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

var accessSeq atomic.Int64

// TestMayCreate asks the real API server's authorizer, as users with
// different roles, whether lockstep may create each kind of runtime
// object without a dry-run: a ClusterRole needs "escalate" and a
// ClusterRoleBinding "bind" on clusterroles besides patch and create, or
// the API server checks every permission they grant, which only a dry-run
// can do.
func TestMayCreate(t *testing.T) {
	env := envtest.Shared(t)
	const ns = "xp-access"
	kinds := []schema.GroupKind{
		{Kind: "Secret"}, {Kind: "Service"}, {Kind: "ServiceAccount"}, {Group: "apps", Kind: "Deployment"},
		{Group: rbacv1.GroupName, Kind: "ClusterRole"}, {Group: rbacv1.GroupName, Kind: "ClusterRoleBinding"},
		{Group: "batch", Kind: "Job"},
	}
	writeVerbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	cases := map[string]struct {
		reason string
		rules  []rbacv1.PolicyRule
		// want lists the kinds lockstep may create without a dry-run.
		want []string
	}{
		"everything": {
			reason: "with every verb, escalate and bind included, every kind render makes is created without a dry-run; a kind it does not make never is",
			rules:  []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}},
			want:   []string{"Secret", "Service", "ServiceAccount", "Deployment.apps", "ClusterRole.rbac.authorization.k8s.io", "ClusterRoleBinding.rbac.authorization.k8s.io"},
		},
		"no escalate or bind": {
			reason: "without escalate and bind, RBAC objects are dry-run: the API server checks the permissions they grant",
			rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"", "apps"}, Resources: []string{"*"}, Verbs: []string{"*"}},
				{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"*"}, Verbs: writeVerbs},
			},
			want: []string{"Secret", "Service", "ServiceAccount", "Deployment.apps"},
		},
		"patch without create": {
			reason: "a server-side apply that creates is authorized as a patch and as a create",
			rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"*"}, Verbs: []string{"*"}},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}},
			},
			want: []string{"Secret", "Service", "ServiceAccount"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := envtest.Context(t, time.Minute)
			n := accessSeq.Add(1)
			user := fmt.Sprintf("access-%d", n)
			role := fmt.Sprintf("lockstep-access-test-%d", n)
			objs := []client.Object{
				&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: tc.rules},
				&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
					Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}},
			}
			for _, o := range objs {
				if err := env.Client.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
			}
			c, err := env.ClientAs(user, "system:authenticated")
			if err != nil {
				t.Fatal(err)
			}
			// The RBAC authorizer sees the new binding through an informer,
			// a moment later: ask again (a fresh run, no cached answer)
			// until the answers match, for up to a minute.
			var diff string
			for {
				r := access.New(c)
				var got []string
				for _, gk := range kinds {
					namespace := ns
					if gk.Group == rbacv1.GroupName {
						namespace = ""
					}
					if r.MayCreate(ctx, gk, namespace) {
						got = append(got, gk.String())
					}
				}
				if diff = cmp.Diff(tc.want, got); diff == "" || ctx.Err() != nil {
					break
				}
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
			if diff != "" {
				t.Errorf("%s: kinds created without a dry-run -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
