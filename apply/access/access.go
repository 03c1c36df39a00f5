// Package access asks the API server's authorizer, once per question,
// whether lockstep's user may create the kinds of runtime objects render
// makes (SelfSubjectAccessReview). apply creates such an object without a
// server-side dry-run only when the answer is yes: the dry-run would find
// nothing else wrong with an object of lockstep's own defaults.
package access

import (
	"context"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Reviewer asks through one client and keeps each answer for its life
// (one apply). Its methods are safe for concurrent use.
type Reviewer struct {
	c       client.Client
	mu      sync.Mutex
	answers map[accessKey]*accessAnswer
}

// New returns a Reviewer that asks as c's user.
func New(c client.Client) *Reviewer { return &Reviewer{c: c} }

// accessKey is one question to the API server's authorizer: may lockstep's
// user do verb on resource of group in namespace ("" for cluster-scoped or
// every namespace), whatever the object's name.
type accessKey struct {
	verb, group, resource, namespace string
}

// accessAnswer is an accessKey's answer, asked once per run.
type accessAnswer struct {
	once    sync.Once
	allowed bool
}

// runtimeResources are the resources of the kinds render makes runtime and
// RBAC objects of (render/runtime.go, render/rbac.go), and of the MRDs it
// converts from a package's CRDs (apply converts them from a package's CRDs). A kind not listed is
// always dry-run.
var runtimeResources = map[schema.GroupKind]string{
	crossplane.GroupKindMRD:                               "managedresourcedefinitions",
	{Kind: "Secret"}:                                      "secrets",
	{Kind: "Service"}:                                     "services",
	{Kind: "ServiceAccount"}:                              "serviceaccounts",
	{Group: "apps", Kind: "Deployment"}:                   "deployments",
	{Group: rbacv1.GroupName, Kind: "ClusterRole"}:        "clusterroles",
	{Group: rbacv1.GroupName, Kind: "ClusterRoleBinding"}: "clusterrolebindings",
}

// createChecks returns the authorizations the API server checks when a
// server-side apply creates an object of gk in namespace, and false when
// gk is not a kind lockstep renders runtime objects of. An apply is a
// PATCH, and a PATCH that creates is also authorized as a create
// (k8s.io/apiserver pkg/endpoints/handlers/patch.go,
// createAuthorizerAttributes). A ClusterRole is created as it is only with
// "escalate" on clusterroles, and a ClusterRoleBinding only with "bind" on
// its role; otherwise the API server checks that the user holds every
// permission the object grants (kubernetes pkg/registry/rbac/clusterrole/
// policybased and clusterrolebinding/policybased, RoleEscalationAuthorized
// and BindingAuthorized; https://kubernetes.io/docs/reference/access-authn-authz/rbac/#privilege-escalation-prevention-and-bootstrapping),
// which cannot be checked in-process.
func createChecks(gk schema.GroupKind, namespace string) ([]accessKey, bool) {
	res, ok := runtimeResources[gk]
	if !ok {
		return nil, false
	}
	keys := []accessKey{
		{verb: "patch", group: gk.Group, resource: res, namespace: namespace},
		{verb: "create", group: gk.Group, resource: res, namespace: namespace},
	}
	switch gk.Kind {
	case "ClusterRole":
		keys = append(keys, accessKey{verb: "escalate", group: rbacv1.GroupName, resource: "clusterroles"})
	case "ClusterRoleBinding":
		keys = append(keys, accessKey{verb: "bind", group: rbacv1.GroupName, resource: "clusterroles"})
	}
	return keys, true
}

// MayCreate reports whether the API server's authorizer lets lockstep's
// user create an object of gk in namespace with a server-side apply,
// from one SelfSubjectAccessReview per createChecks key, each asked once
// per run. A review that fails, or a kind createChecks does not know,
// answers false: the caller then dry-runs the object, whose error is the
// API server's own.
func (r *Reviewer) MayCreate(ctx context.Context, gk schema.GroupKind, namespace string) bool {
	keys, ok := createChecks(gk, namespace)
	if !ok {
		return false
	}
	for _, k := range keys {
		if !r.allowed(ctx, k) {
			return false
		}
	}
	return true
}

// allowed answers k with a SelfSubjectAccessReview, once per run; a
// failed review answers false.
func (r *Reviewer) allowed(ctx context.Context, k accessKey) bool {
	r.mu.Lock()
	a := r.answers[k]
	if a == nil {
		if r.answers == nil {
			r.answers = map[accessKey]*accessAnswer{}
		}
		a = &accessAnswer{}
		r.answers[k] = a
	}
	r.mu.Unlock()
	a.once.Do(func() {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: k.verb, Group: k.group, Resource: k.resource, Namespace: k.namespace},
		}}
		if err := r.c.Create(ctx, review); err != nil {
			return
		}
		a.allowed = review.Status.Allowed && !review.Status.Denied
	})
	return a.allowed
}
