package manifests_test

import (
	"context"
	"errors"
	"fmt"
	"testing/fstest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/manifests"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// writer writes as an apply does: server-side apply with force, delete in
// the background on the UID it read.
type writer struct{}

func (writer) Apply(ctx context.Context, c client.Client, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	obj := u.DeepCopy()
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("lockstep"), client.ForceOwnership)
	return obj, err
}

func (writer) Delete(ctx context.Context, c client.Client, obj client.Object, uid types.UID) error {
	return c.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid})
}

// renderFiles renders the manifests of files for instance prod.
func renderFiles(files map[string]string) (*render.Output, error) {
	fsys := fstest.MapFS{}
	for p, c := range files {
		fsys[p] = &fstest.MapFile{Data: []byte(c)}
	}
	set, err := declarations.LoadFS(fsys)
	if err != nil {
		return nil, err
	}
	return render.Render(render.Input{Namespace: "crossplane-system", Instance: "prod", Manifests: set.Manifests})
}

// Apply a Namespace and a ConfigMap on a real API server (the test
// control plane): the default scope refuses both kinds, the owners check
// refuses a ConfigMap someone else created, a second Apply changes
// nothing, and Prune deletes both once they are gone from Git.
func Example() {
	envtest.RunExample(func(env *envtest.Env) {
		ctx := context.Background()
		disco, err := discovery.NewDiscoveryClientForConfig(env.Config)
		if err != nil {
			fmt.Println(err)
			return
		}
		s := &manifests.Step{Client: env.Client, Writer: writer{}, Discovery: disco, Options: manifests.Options{Instance: "prod"}}

		legacy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "legacy"}, Data: map[string]string{"owner": "ops"}}
		if err := env.Client.Create(ctx, legacy, client.FieldOwner("kubectl")); err != nil {
			fmt.Println(err)
			return
		}
		files := map[string]string{
			"clusters/prod/team.yaml":   "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: team-a\ndata:\n  region: eu-west-1\n",
			"clusters/prod/legacy.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: legacy\n  namespace: default\n",
		}
		out, err := renderFiles(files)
		if err != nil {
			fmt.Println(err)
			return
		}
		var scope *manifests.ScopeError
		if err := s.CheckScope(ctx, out); errors.As(err, &scope) {
			fmt.Println("outside the default scope:", len(scope.Objects))
		}
		s.Kinds = []string{"/Namespace", "/ConfigMap"}
		fmt.Println("scope:", s.CheckScope(ctx, out))
		var foreign *manifests.ForeignError
		if err := s.CheckOwners(ctx, out, nil); errors.As(err, &foreign) {
			fmt.Println(foreign.Objects[0])
		}

		delete(files, "clusters/prod/legacy.yaml")
		if out, err = renderFiles(files); err != nil {
			fmt.Println(err)
			return
		}
		record := func(context.Context) error { return nil }
		for range 2 {
			for _, r := range s.Apply(ctx, out, nil, record) {
				fmt.Println(r, r.Action, r.Status, r.Err)
			}
		}
		entries := manifests.Entries(out)
		results, gone := s.Prune(ctx, &render.Output{}, entries, nil)
		for _, r := range results {
			fmt.Println(r, r.Action, r.Err)
		}
		fmt.Println("gone from the inventory:", len(gone))
	})
	// Output:
	// outside the default scope: 3
	// scope: <nil>
	// clusters/prod/legacy.yaml:1: ConfigMap/default/legacy: exists and lockstep did not create it: it has no owner (field managers: kubectl)
	// clusters/prod/team.yaml:1: Namespace/team-a created Current <nil>
	// clusters/prod/team.yaml:6: ConfigMap/team-a/settings created Current <nil>
	// clusters/prod/team.yaml:1: Namespace/team-a unchanged Current <nil>
	// clusters/prod/team.yaml:6: ConfigMap/team-a/settings unchanged Current <nil>
	// Namespace/team-a deleted <nil>
	// ConfigMap/team-a/settings deleted <nil>
	// gone from the inventory: 2
}
