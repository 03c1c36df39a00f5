package xpstate

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// StandInInterval is how often the stand-ins react: well within the
// second the issue saw Crossplane take to recreate an object.
const StandInInterval = 100 * time.Millisecond

// MRDManager is the field manager of the CRDs Crossplane's MRD controller
// writes (managers.txt of the capture: CustomResourceDefinition ...
// apiextensions.crossplane.io/managed (Apply)).
const MRDManager = "apiextensions.crossplane.io/managed"

// StandIn is a running stand-in; Errors returns what its writes failed
// with, as the real controller would log and retry them.
type StandIn struct {
	mu     sync.Mutex
	errors []string
	writes int
}

// Errors returns the distinct errors the stand-in's writes got.
func (s *StandIn) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errors...)
}

// Writes returns how many writes the stand-in sent that succeeded.
func (s *StandIn) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

func (s *StandIn) record(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.writes++
		return
	}
	for _, e := range s.errors {
		if e == err.Error() {
			return
		}
	}
	s.errors = append(s.errors, err.Error())
}

func standInClient(tb testing.TB, cfg *rest.Config) client.Client {
	tb.Helper()
	c, err := client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func loop(ctx context.Context, tb testing.TB, fn func(context.Context)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	tb.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		t := time.NewTicker(StandInInterval)
		defer t.Stop()
		for {
			fn(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// StartMRDController is a STAND-IN for one reaction of Crossplane's
// managed resource definition controller (crossplane/crossplane
// internal/controller/apiextensions/managed/reconciler.go), which cannot
// run here: every StandInInterval, for each ManagedResourceDefinition
// whose spec.state is Active, it server-side applies with force, as
// MRDManager, the CustomResourceDefinition of the same name made from the
// MRD's spec (its CRD fields, without state), owned by the MRD and
// controlled by the MRD's controller — the owners the capture shows on
// every CRD made from an MRD (S1, S2). So a CRD whose MRD is left behind
// is written again, as the issue saw Crossplane recreate a CRD lockstep
// had pruned, and fight lockstep's owner references. It stops when ctx
// ends (and the test waits for it).
func StartMRDController(ctx context.Context, tb testing.TB, cfg *rest.Config) *StandIn {
	c := standInClient(tb, cfg)
	s := &StandIn{}
	loop(ctx, tb, func(ctx context.Context) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.crossplane.io", Version: "v1alpha1", Kind: "ManagedResourceDefinitionList"})
		if err := c.List(ctx, list); err != nil {
			return
		}
		for i := range list.Items {
			mrd := &list.Items[i]
			if state, _, _ := unstructured.NestedString(mrd.Object, "spec", "state"); state != "Active" || mrd.GetDeletionTimestamp() != nil {
				continue
			}
			spec, _, _ := unstructured.NestedMap(mrd.Object, "spec")
			delete(spec, "state")
			delete(spec, "connectionDetails")
			// The MRD as a plain owner without controller or
			// blockOwnerDeletion fields, as every captured CRD made from an
			// MRD has it (S1, S2, S3).
			refs := []metav1.OwnerReference{{APIVersion: mrd.GetAPIVersion(), Kind: mrd.GetKind(), Name: mrd.GetName(), UID: mrd.GetUID()}}
			for _, r := range mrd.GetOwnerReferences() {
				if r.Controller != nil && *r.Controller {
					refs = append(refs, r)
				}
			}
			crd := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
				"metadata": map[string]any{"name": mrd.GetName()},
				"spec":     spec,
			}}
			crd.SetOwnerReferences(refs)
			s.record(c.Apply(ctx, client.ApplyConfigurationFromUnstructured(crd), client.FieldOwner(MRDManager), client.ForceOwnership))
		}
	})
	return s
}

// StartRuntimeController is a STAND-IN for one reaction of Crossplane's
// package runtime controller (crossplane/crossplane
// internal/controller/pkg/runtime/reconciler.go and its runtime_provider.go
// and runtime_function.go), which cannot run here: every StandInInterval,
// for each revision of the state's packages that is Active and not paused
// (crossplane.io/paused), it makes the TLS Secrets and the Service that
// the capture shows controlled by a revision of the same package exist
// again, controlled by this revision, with a full update as manager
// "crossplane" (managers.txt: Secret and Service, crossplane (Update)).
// So an unpaused Crossplane revision takes back, within a poll, the
// Secrets and Service lockstep gave to its own revision, as the issue saw.
func StartRuntimeController(ctx context.Context, tb testing.TB, cfg *rest.Config, state *State) *StandIn {
	c := standInClient(tb, cfg)
	s := &StandIn{}
	byPackage := runtimeObjects(state)
	loop(ctx, tb, func(ctx context.Context) {
		for _, kind := range []string{"ProviderRevision", "FunctionRevision"} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: kind + "List"})
			if err := c.List(ctx, list); err != nil {
				continue
			}
			for i := range list.Items {
				rev := &list.Items[i]
				st, _, _ := unstructured.NestedString(rev.Object, "spec", "desiredState")
				if st != "Active" || rev.GetAnnotations()["crossplane.io/paused"] == "true" || rev.GetDeletionTimestamp() != nil {
					continue
				}
				t := true
				ctrl := metav1.OwnerReference{APIVersion: rev.GetAPIVersion(), Kind: rev.GetKind(), Name: rev.GetName(), UID: rev.GetUID(), Controller: &t, BlockOwnerDeletion: &t}
				for _, want := range byPackage[kind+"/"+rev.GetLabels()["pkg.crossplane.io/package"]] {
					s.record(ensureControlled(ctx, c, want, ctrl))
				}
			}
		}
	})
	return s
}

// runtimeObjects returns the captured objects a revision's runtime
// controller keeps (its Secrets and Services), by the kind of the
// revision that controlled them and its package: "ProviderRevision/name".
func runtimeObjects(state *State) map[string][]*unstructured.Unstructured {
	byPackage := map[string][]*unstructured.Unstructured{}
	for _, k := range state.Order {
		u := state.Objects[k]
		if u.GetAPIVersion() != "v1" || (u.GetKind() != "Secret" && u.GetKind() != "Service") {
			continue
		}
		for _, r := range u.GetOwnerReferences() {
			if r.Controller == nil || !*r.Controller || !strings.HasSuffix(r.Kind, "Revision") {
				continue
			}
			if rev := state.Get(r.Kind, "", r.Name); rev != nil {
				pkg := rev.GetLabels()["pkg.crossplane.io/package"]
				byPackage[r.Kind+"/"+pkg] = append(byPackage[r.Kind+"/"+pkg], u)
			}
		}
	}
	return byPackage
}

// ensureControlled creates want (without server-assigned fields) when it
// is missing, or updates the live object's owner references to ctrl alone
// when something else controls it; it returns nil without a write
// otherwise, and a write's error.
func ensureControlled(ctx context.Context, c client.Client, want *unstructured.Unstructured, ctrl metav1.OwnerReference) error {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(want.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(want), live)
	switch {
	case apierrors.IsNotFound(err):
		u := want.DeepCopy()
		for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"} {
			unstructured.RemoveNestedField(u.Object, "metadata", f)
		}
		unstructured.RemoveNestedField(u.Object, "spec", "clusterIP")
		unstructured.RemoveNestedField(u.Object, "spec", "clusterIPs")
		u.SetOwnerReferences([]metav1.OwnerReference{ctrl})
		return c.Create(ctx, u, client.FieldOwner("crossplane"))
	case err != nil:
		return nil
	}
	for _, r := range live.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller && r.UID == ctrl.UID {
			return nil
		}
	}
	live.SetOwnerReferences([]metav1.OwnerReference{ctrl})
	return c.Update(ctx, live, client.FieldOwner("crossplane"))
}
