package apply_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/render"
)

// TestInterruptedFirstInstallPruned: lockstep dies during a package's first
// install (the inventory used to be written only at the
// end, so nothing knew what the dead apply had created). Once the package
// is gone from Git, the next apply with --prune-crds always deletes every
// object of it, and the inventory no longer lists it.
func TestInterruptedFirstInstallPruned(t *testing.T) {
	cases := map[string]struct {
		reason string
		// killAfter is the path of the write after which the apply dies,
		// without its prefix; %s is the provider's revision name, %p the
		// fixture's prefix.
		killAfter string
	}{
		"after a CRD": {
			reason:    "the apply dies once the first CRD of the payload is written",
			killAfter: "/customresourcedefinitions/buckets.%p.demo.lockstep.io",
		},
		"after the runtime Deployment": {
			reason:    "the apply dies once the Deployment is written, records, payload and Secrets in place",
			killAfter: "/deployments/%s",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			m := f.manager(t, func(o *apply.Options) { o.PruneCRDs = plan.PruneAlways })
			prov := build(t, f.demo(t, "provider-demo", "v0.2.0"))
			fn := build(t, f.demo(t, "function-demo", "v0.2.0"))
			rev := render.RevisionName(prov.Name, prov.Digest)
			first := f.render(t, prov, fn)
			var po *render.PackageOutput
			for _, p := range first.Packages {
				if p.Kind == crossplane.KindProvider {
					po = p
				}
			}
			killAfter := strings.NewReplacer("%s", rev, "%p", f.prefix).Replace(tc.killAfter)

			ctx, cancel := context.WithCancel(context.Background())
			f.reqs.cancelAfterPath, f.reqs.cancel = killAfter, cancel
			res, err := m.Apply(ctx, first, apply.Origin{Commit: "c1"})
			f.reqs.cancelAfterPath, f.reqs.cancel = "", nil
			cancel()
			if err == nil && res.Err() == nil {
				t.Fatalf("%s: the interrupted apply reports success", tc.reason)
			}
			if left := f.existing(t, po, false); len(left) == 0 {
				t.Fatalf("%s: the interrupted apply left nothing of the provider; the test proves nothing", tc.reason)
			}

			// The provider is gone from Git.
			second := f.render(t, fn)
			res = f.apply(t, m, second, apply.Origin{Commit: "c2"})
			mustSucceed(t, res)
			for _, w := range res.Warnings {
				t.Logf("second apply warns: %s", w)
			}

			// lockstep's part ends once the API server accepted the
			// DELETE: a CRD then stays Terminating until the API server's
			// own finalizer (customresourcecleanup) deleted its instances.
			// That finalizer fails with "could not list instances: storage
			// is (re)initializing" while the storage of a CRD created a
			// moment ago is still starting, and is retried with an
			// exponential backoff that may pass 30 s on a loaded machine:
			// such a CRD counts as deleted here.
			err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				return len(f.existing(t, po, true)) == 0 && len(f.labelled(t, po, second)) == 0, nil
			})
			if err != nil {
				t.Errorf("%s: after the prune, objects of the provider exist by name: %v", tc.reason, f.existing(t, po, true))
				t.Errorf("%s: after the prune, objects labelled with the instance that the output does not render: %v", tc.reason, f.labelled(t, po, second))
			}
			inv, err := inventory.Read(context.Background(), f.c, f.namespace, f.instance)
			if err != nil {
				t.Fatal(err)
			}
			if ip := inv.Package(crossplane.KindProvider, prov.Name); ip != nil {
				t.Errorf("%s: the inventory still lists the provider with %d entries", tc.reason, len(ip.Entries))
			}
			if inv.Package(crossplane.KindFunction, fn.Name) == nil {
				t.Errorf("%s: the inventory lost the function", tc.reason)
			}
		})
	}
}

// existing returns "Kind name" of every object of po that exists; with
// skipDeleting, aside from those only the API server's own deletion keeps
// (deleteIssued).
func (f *fixture) existing(t *testing.T, po *render.PackageOutput, skipDeleting bool) []string {
	t.Helper()
	var out []string
	for _, o := range po.Objects() {
		u := f.get(t, o.APIVersion, o.Kind, o.Namespace, o.Name)
		if u != nil && !(skipDeleting && deleteIssued(u)) {
			out = append(out, o.Kind+" "+o.Name)
		}
	}
	return out
}

// deleteIssued reports whether o was deleted and waits only for the
// kube-apiserver's CRD finalizer customresourcecleanup.apiextensions.k8s.io
// (kubernetes/apiextensions-apiserver
// pkg/controller/finalizer/crd_finalizer.go), which deletes the instances
// and then the CRD, retrying on its own: nothing is left for lockstep to do.
func deleteIssued(o metav1.Object) bool {
	if o.GetDeletionTimestamp() == nil {
		return false
	}
	for _, fin := range o.GetFinalizers() {
		if fin != apiextensionsv1.CustomResourceCleanupFinalizer {
			return false
		}
	}
	return true
}

// labelled lists, for every kind po renders, the objects labelled with the
// fixture's instance, and returns "Kind name" of those that out does not
// render (the root CA Secret, shared by every package, aside).
func (f *fixture) labelled(t *testing.T, po *render.PackageOutput, out *render.Output) []string {
	t.Helper()
	allowed := map[string]bool{}
	for _, p := range out.Packages {
		for _, o := range p.Objects() {
			allowed[o.ID()] = true
		}
	}
	kinds := map[schema.GroupVersionKind]bool{}
	for _, o := range po.Objects() {
		gv, _ := schema.ParseGroupVersion(o.APIVersion)
		kinds[gv.WithKind(o.Kind)] = true
	}
	var left []string
	for gvk := range kinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := f.env.Client.List(context.Background(), list, client.MatchingLabels{render.LabelInstance: f.instance}); err != nil {
			t.Fatalf("list %s: %v", gvk.Kind, err)
		}
		for _, it := range list.Items {
			id := object.ObjMetadata{Namespace: it.Namespace, Name: it.Name, GroupKind: gvk.GroupKind()}.String()
			if allowed[id] || (gvk.Kind == "Secret" && it.Name == certs.RootCASecretName) || deleteIssued(&it) {
				continue
			}
			left = append(left, gvk.Kind+" "+it.Name)
		}
	}
	sort.Strings(left)
	return left
}

// TestIntentsShareInventoryWrites: packages that record their intent
// while another package's inventory write is in flight share the next
// write instead of writing the ConfigMap one by one. The first write is
// held (by a test hook, up to 3 minutes) until the other packages queued
// behind it, so the count does not depend on timing: one write for the
// first package, one for the rest (the final write has nothing new);
// each package's entry is in the inventory.
func TestIntentsShareInventoryWrites(t *testing.T) {
	const n = 4
	f := newFixture(t)
	m := f.manager(t, nil)
	var pkgs []render.Package
	for i := range n {
		s := f.demo(t, "function-demo", "v0.1.0")
		s.name = fmt.Sprintf("%s-fn%d", f.prefix, i)
		pkgs = append(pkgs, build(t, s))
	}
	var once sync.Once
	apply.SetIntentWriteHook(func(queued func() int) {
		once.Do(func() {
			deadline := time.Now().Add(3 * time.Minute)
			for queued() < n-1 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
		})
	})
	t.Cleanup(func() { apply.SetIntentWriteHook(nil) })
	f.reqs.reset()
	mustSucceed(t, f.apply(t, m, f.render(t, pkgs...), apply.Origin{}))
	_, mutating := f.reqs.snapshot()
	var writes []string
	for _, l := range mutating {
		if strings.Contains(l, "/configmaps/"+inventory.ConfigMapName(f.instance)) {
			writes = append(writes, l)
		}
	}
	if len(writes) != 2 {
		t.Errorf("%d packages wrote the inventory %d times, want 2 (the first package's intent, then the rest's together; the final write has nothing new): %v", n, len(writes), writes)
	}
	inv, err := inventory.Read(context.Background(), f.c, f.namespace, f.instance)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Packages) != n {
		t.Errorf("the inventory has %d packages, want %d", len(inv.Packages), n)
	}
}
