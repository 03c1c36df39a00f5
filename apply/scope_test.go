package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/apply/manifests"
	"github.com/lockstep-gitops/lockstep/render"
)

// TestManifestScope on the real API server: manifests outside the
// instance's kinds, or that the ServiceAccount manifests are applied as
// may not create, refuse the whole commit before anything is written
// (neither the package nor any manifest of it); in scope, manifests are
// written as that ServiceAccount (its missing delete permission makes the
// prune of a manifest gone from Git fail, naming it).
func TestManifestScope(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// The ServiceAccount may read, create and patch ConfigMaps in the
	// fixture's namespace, nothing else: no delete.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: "manifests"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: "manifests"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: f.namespace, Name: "manifests"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "manifests"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: f.namespace, Name: "manifests"}}}
	for _, o := range []client.Object{sa, role, binding} {
		if err := f.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	provider := build(t, f.demo(t, "provider-demo", "v0.1.0"))
	cm := func(name, ns string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + f.prefix + "-" + name + ", namespace: " + ns + "}\ndata: {a: b}\n"
	}
	out := func(files map[string]string) *render.Output {
		t.Helper()
		o, err := render.Render(render.Input{Namespace: f.namespace, Instance: f.instance, Packages: []render.Package{provider}, Manifests: manifestSet(t, files)})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	nothingWritten := func(reason string) {
		t.Helper()
		if f.get(t, "pkg.crossplane.io/v1", "Provider", "", provider.Name) != nil {
			t.Errorf("%s: the Provider was written", reason)
		}
		if f.get(t, "v1", "ConfigMap", f.namespace, f.prefix+"-settings") != nil {
			t.Errorf("%s: a ConfigMap was written", reason)
		}
	}

	for _, c := range []struct {
		name, reason string
		opts         func(*apply.Options)
		files        map[string]string
		want         []string
	}{
		{
			name: "DefaultKinds", reason: "by default only what a Crossplane user declares: a ConfigMap and a Namespace are refused, with file and line",
			files: map[string]string{"settings.yaml": cm("settings", f.namespace), "ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + f.prefix + "-team}\n"},
			want: []string{
				`ns.yaml:1: Namespace/` + f.prefix + `-team: kind Namespace of group "" is not among the manifest kinds of instance ` + f.instance + ` (crossplane); add /Namespace to allow it`,
				`settings.yaml:1: ConfigMap/` + f.namespace + `/` + f.prefix + `-settings: kind ConfigMap of group "" is not among the manifest kinds`,
			},
		},
		{
			name: "ServiceAccountMayNot", reason: "the ServiceAccount may not create ConfigMaps in another namespace",
			opts: func(o *apply.Options) {
				o.ManifestKinds, o.ManifestServiceAccount = []string{manifests.KindsCrossplane, "/ConfigMap"}, "manifests"
			},
			files: map[string]string{"settings.yaml": cm("settings", f.namespace), "elsewhere.yaml": cm("elsewhere", "default")},
			want:  []string{`elsewhere.yaml:1: ConfigMap/default/` + f.prefix + `-elsewhere: ServiceAccount ` + f.namespace + `/manifests may not create configmaps in namespace default`},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.manager(t, c.opts).Apply(ctx, out(c.files), apply.Origin{Commit: c.name})
			var se *manifests.ScopeError
			if !errors.As(err, &se) {
				t.Fatalf("%s: Apply: %v, want a manifests.ScopeError", c.reason, err)
			}
			if len(se.Objects) != len(c.want) {
				t.Fatalf("%s: refused %q, want %d", c.reason, se.Objects, len(c.want))
			}
			for i, w := range c.want {
				if !strings.HasPrefix(se.Objects[i], w) {
					t.Errorf("%s: refusal %d: %q, want it to start with %q", c.reason, i, se.Objects[i], w)
				}
			}
			nothingWritten(c.reason)
		})
	}

	// In scope: written as the ServiceAccount.
	m := f.manager(t, func(o *apply.Options) {
		o.ManifestKinds, o.ManifestServiceAccount = []string{manifests.KindsCrossplane, "/ConfigMap"}, f.namespace+"/manifests"
	})
	mustSucceed(t, f.apply(t, m, out(map[string]string{"settings.yaml": cm("settings", f.namespace)}), apply.Origin{Commit: "in-scope"}))
	if f.get(t, "v1", "ConfigMap", f.namespace, f.prefix+"-settings") == nil {
		t.Fatal("the ConfigMap in scope was not applied")
	}
	res := f.apply(t, m, out(nil), apply.Origin{Commit: "gone"})
	var pruneErr error
	for _, mr := range res.Manifests {
		if strings.Contains(mr.Object, f.prefix+"-settings") {
			pruneErr = mr.Err
		}
	}
	if pruneErr == nil || !strings.Contains(pruneErr.Error(), "system:serviceaccount:"+f.namespace+":manifests") {
		t.Errorf("prune of the ConfigMap: %v, want it refused to the ServiceAccount, which may not delete", pruneErr)
	}
}
