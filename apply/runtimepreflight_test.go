package apply_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// runtimeObjects returns the runtime and RBAC objects of every package of
// out.
func runtimeObjects(out *render.Output) []*render.Object {
	var objs []*render.Object
	for _, p := range out.Packages {
		objs = append(append(objs, p.Revision.Runtime...), p.Revision.RBAC...)
	}
	return objs
}

// dryRunObjects returns "Kind/name" of the objects of objs that a
// request of log dry-ran, sorted.
func dryRunObjects(log []string, objs []*render.Object) []string {
	var out []string
	for _, o := range objs {
		suffix := "/" + strings.ToLower(o.Kind) + "s/" + o.Name + " (dry-run)"
		for _, l := range log {
			if strings.HasSuffix(l, suffix) {
				out = append(out, o.Kind+"/"+o.Name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestDefaultRuntimeObjectsNotDryRun: under --preflight=local a cold
// install creates the runtime and RBAC objects that lockstep renders from
// its defaults alone without dry-running them (the authorizer is asked
// instead), and still installs them; an object a DeploymentRuntimeConfig
// shapes keeps its dry-run, and --preflight=server dry-runs them all. The
// server case also checks that the real API server accepts the dry-run of
// every default runtime object: they are valid by construction, not by
// assumption.
func TestDefaultRuntimeObjectsNotDryRun(t *testing.T) {
	cases := map[string]struct {
		reason string
		mode   apply.PreflightMode
		drc    bool
		// rewrite adds an ImageConfig that rewrites the packages'
		// images to a mirror.
		rewrite bool
		// dryRun returns the runtime objects ("Kind/name") that must be
		// dry-run; every other one must not be.
		dryRun func(objs []*render.Object) []string
	}{
		"local defaults": {
			reason: "objects from lockstep's defaults are created without a dry-run",
			mode:   apply.PreflightLocal,
			dryRun: func([]*render.Object) []string { return nil },
		},
		"local with a runtime config": {
			reason: "a DeploymentRuntimeConfig template may shape the Service, ServiceAccount, Deployment and binding: they are dry-run",
			mode:   apply.PreflightLocal,
			drc:    true,
			dryRun: func(objs []*render.Object) []string {
				var out []string
				for _, o := range objs {
					switch o.Kind {
					case "Service", "ServiceAccount", "Deployment", "ClusterRoleBinding":
						out = append(out, o.Kind+"/"+o.Name)
					}
				}
				return out
			},
		},
		"local with an image rewrite": {
			reason:  "an ImageConfig's rewrite leaves the Deployment from defaults: the rewritten image is a parsed reference",
			mode:    apply.PreflightLocal,
			rewrite: true,
			dryRun:  func([]*render.Object) []string { return nil },
		},
		"server with an image rewrite": {
			reason:  "the API server accepts the Deployments with the rewritten images that local mode creates without a dry-run",
			mode:    apply.PreflightServer,
			rewrite: true,
			dryRun: func(objs []*render.Object) []string {
				var out []string
				for _, o := range objs {
					out = append(out, o.Kind+"/"+o.Name)
				}
				return out
			},
		},
		"server": {
			reason: "--preflight=server dry-runs every new object, and the API server accepts every default one",
			mode:   apply.PreflightServer,
			dryRun: func(objs []*render.Object) []string {
				var out []string
				for _, o := range objs {
					out = append(out, o.Kind+"/"+o.Name)
				}
				return out
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			m := f.manager(t, func(o *apply.Options) { o.Preflight, o.PreflightSkew = tc.mode, 1 })
			in := render.Input{Namespace: f.namespace, Instance: f.instance, Packages: []render.Package{
				build(t, f.demo(t, "provider-demo", "v0.1.0")),
				build(t, f.demo(t, "function-demo", "v0.1.0")),
			}}
			if tc.drc {
				c := declarations.DeploymentRuntimeConfig{Spec: declarations.DeploymentRuntimeConfigSpec{
					DeploymentTemplate: &declarations.DeploymentTemplate{Metadata: &declarations.TemplateMeta{Labels: map[string]string{"team": "platform"}}},
				}}
				c.Name = declarations.DefaultRuntimeConfigName
				in.RuntimeConfigs = []declarations.DeploymentRuntimeConfig{c}
			}
			if tc.rewrite {
				mirror := declarations.ImageConfig{}
				mirror.Name = f.prefix + "-mirror"
				mirror.Spec.MatchImages = []declarations.ImageMatch{{Type: declarations.ImageMatchPrefix, Prefix: "registry.lockstep.test/" + f.prefix + "/"}}
				mirror.Spec.RewriteImage = &declarations.ImageRewrite{Prefix: "mirror.lockstep.test:5000/" + f.prefix + "/"}
				in.ImageConfigs = []declarations.ImageConfig{mirror}
			}
			out, err := render.Render(in)
			if err != nil {
				t.Fatal(err)
			}
			objs := runtimeObjects(out)
			f.reqs.reset()
			res := f.apply(t, m, out, apply.Origin{})
			mustSucceed(t, res)
			for _, w := range res.Warnings {
				if strings.Contains(w, "--preflight=local") {
					t.Errorf("%s: local mode was not used: %s", tc.reason, w)
				}
			}
			all, _ := f.reqs.snapshot()
			want := tc.dryRun(objs)
			sort.Strings(want)
			if diff := cmp.Diff(want, dryRunObjects(all, objs)); diff != "" {
				t.Errorf("%s: dry-run runtime objects -want +got\n%s", tc.reason, diff)
			}
			for _, o := range objs {
				u := f.get(t, o.APIVersion, o.Kind, o.Namespace, o.Name)
				if u == nil {
					t.Errorf("%s: %s was not installed", tc.reason, o)
					continue
				}
				if tc.rewrite && o.Kind == "Deployment" {
					containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
					if image, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image"); !strings.HasPrefix(image, "mirror.lockstep.test:5000/") {
						t.Errorf("%s: %s runs %q, not the rewritten image", tc.reason, o, image)
					}
				}
			}
		})
	}
}

// TestRuntimeCreateForbidden: under --preflight=local, a user that may not
// create Deployments in the Crossplane namespace gets the API server's
// Forbidden error naming the Deployment at the preflight, before the
// package's first payload write: the authorizer's refusal sends the object
// back to a dry-run, whose error is the server's own.
func TestRuntimeCreateForbidden(t *testing.T) {
	f := newFixture(t)
	ctx := envtest.Context(t, 5*time.Minute)
	user := f.prefix + "-limited"
	role := grantAllButDeployments(t, f, user)
	cfg := rest.CopyConfig(f.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	o := apply.DefaultOptions()
	o.Namespace, o.Instance = f.namespace, f.instance
	o.Preflight, o.PreflightSkew = apply.PreflightLocal, 1
	o.WaitTimeout = time.Minute
	m, err := apply.NewManager(c, o, apply.WithRESTConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	waitAllowed(ctx, t, c, authorizationv1.ResourceAttributes{Verb: "create", Resource: "configmaps", Namespace: f.namespace})
	pkg := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	rev := render.RevisionName(pkg.Name, pkg.Digest)
	res, err := m.Apply(ctx, f.render(t, pkg), apply.Origin{})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if len(res.Packages) != 1 || res.Packages[0].Err == nil {
		t.Fatalf("the package installed without the right to create its Deployment (role %s): %v", role, res.Err())
	}
	p := res.Packages[0]
	if diff := cmp.Diff("preflight", p.Step); diff != "" {
		t.Errorf("failed step -want +got\n%s", diff)
	}
	for _, want := range []string{
		"Deployment/" + f.namespace + "/" + rev,
		`deployments.apps "` + rev + `" is forbidden: User "` + user + `" cannot patch resource "deployments" in API group "apps" in the namespace "` + f.namespace + `"`,
	} {
		if !strings.Contains(p.Err.Error(), want) {
			t.Errorf("the error %q does not say %q", p.Err, want)
		}
	}
	for _, crd := range []string{"buckets." + f.prefix + ".demo.lockstep.io", "queues." + f.prefix + ".demo.lockstep.io"} {
		if f.get(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", crd) != nil {
			t.Errorf("the refused package created CRD %s", crd)
		}
	}
	if f.get(t, "v1", "ServiceAccount", f.namespace, rev) != nil {
		t.Errorf("the refused package created its ServiceAccount")
	}
}

// grantAllButDeployments binds user to a ClusterRole of its own that
// allows every verb on every resource of every API group the server
// serves, except in group apps, where it may only read and delete
// Deployments. It returns the role's name.
func grantAllButDeployments(t *testing.T, f *fixture, user string) string {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(f.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups.Groups {
		if g.Name != "apps" {
			names = append(names, g.Name)
		}
	}
	// Groups of CRDs the test creates are not served yet.
	names = append(names, "", f.prefix+".demo.lockstep.io", f.prefix+".demo.m.lockstep.io")
	name := f.prefix + "-all-but-deployments"
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: names, Resources: []string{"*"}, Verbs: []string{"*"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{NonResourceURLs: []string{"*"}, Verbs: []string{"get"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := f.env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.env.Client.Delete(context.Background(), o) })
	}
	return name
}

// waitAllowed waits until c may do what attrs say: the RBAC authorizer
// sees a new binding through an informer, a moment after its create.
func waitAllowed(ctx context.Context, t *testing.T, c client.Client, attrs authorizationv1.ResourceAttributes) {
	t.Helper()
	for {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
		err := c.Create(ctx, review)
		if err == nil && review.Status.Allowed {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("never allowed to %s %s: %v", attrs.Verb, attrs.Resource, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
