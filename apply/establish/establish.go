// Package establish waits until the CustomResourceDefinitions an apply
// wrote are Established, before anything that needs their kinds is
// written, as Crossplane's package manager installs a payload stage by
// stage (docs/crossplane-behaviour.md#establishing-the-payload). It also
// repairs a CRD a crashed kube-apiserver left not Established (Stuck,
// Nudge).
package establish

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/crdwait"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Waiter waits for CRDs to be Established: through Tracker, one watch for
// the whole apply, when it is set, else by polling through kstatus with
// Poller every Interval. Timeout bounds each Wait.
type Waiter struct {
	Tracker  *crdwait.Tracker
	Poller   *ssa.ResourceManager
	Interval time.Duration
	Timeout  time.Duration
	// View is what the apply listed: the conditions of the CRDs it saw.
	View *liveview.View
	// Writer sends Nudge's patches as FieldManager, and counts them.
	Writer       *writer.Writer
	FieldManager string
}

// Changed returns the CRDs of objs that the apply creates or changes
// (their action was planned): the ones to wait for. Objects of other
// kinds (MRDs share the stage) are not waited for.
func Changed(objs []*desired.Object) []*desired.Object {
	var out []*desired.Object
	for _, d := range objs {
		if (d.Action == ssa.CreatedAction || d.Action == ssa.ConfiguredAction) && d.U.GroupVersionKind().GroupKind() == crossplane.GroupKindCRD {
			out = append(out, d)
		}
	}
	return out
}

// Stuck returns the CRDs of objs that the apply leaves as they are but
// that its LIST saw not Established, with names not refused: a
// kube-apiserver that crashed after accepting a CRD's names and before
// establishing it (a crash in the middle of an earlier apply) never
// establishes it on its own, because its establishing controller is
// queued only by an update of the CRD (kubernetes apiextensions-apiserver
// pkg/apiserver/customresource_handler.go,
// updateCustomResourceDefinition), and discovery leaves the kind out until
// then. The caller updates them (Nudge) and waits for them with the CRDs
// it writes.
func (w *Waiter) Stuck(objs []*desired.Object) []*desired.Object {
	var out []*desired.Object
	for _, d := range objs {
		if d.Action == ssa.CreatedAction || d.Action == ssa.ConfiguredAction || d.U.GroupVersionKind().GroupKind() != crossplane.GroupKindCRD {
			continue
		}
		if st, ok := w.Listed(d.U.GetName()); ok && !st.Established && st.NotAccepted == "" {
			out = append(out, d)
		}
	}
	return out
}

// annotation is the annotation Nudge adds and removes.
const annotation = "lockstep.io/establish"

// Nudge updates the live CRD of d twice with JSON merge patches, adding
// an annotation and removing it again, so that the API server's
// establishing controller is queued for it (see Stuck) and the object
// ends as it was. d.Result's resourceVersion becomes the last write's,
// for the wait. A dry-run Writer sends nothing.
func (w *Waiter) Nudge(ctx context.Context, d *desired.Object) error {
	if w.Writer.DryRun() {
		return nil
	}
	gvk, name := d.U.GroupVersionKind(), d.U.GetName()
	var answer *metav1.PartialObjectMetadata
	for _, v := range []any{"true", nil} {
		patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{annotation: v}}}
		var err error
		if answer, err = w.Writer.Patch(ctx, gvk, "", name, types.MergePatchType, patch, w.FieldManager); err != nil {
			return fmt.Errorf("CustomResourceDefinition %s: not Established, and cannot update it to have it established: %w", name, err)
		}
	}
	d.Result = &unstructured.Unstructured{}
	d.Result.SetGroupVersionKind(gvk)
	d.Result.SetName(name)
	d.Result.SetResourceVersion(answer.ResourceVersion)
	return nil
}

// Wait waits until every CRD of crds (see Changed, Stuck), written by the
// apply, is Established, or Timeout passes.
func (w *Waiter) Wait(ctx context.Context, crds []*desired.Object) error {
	if len(crds) == 0 {
		return nil
	}
	if w.Tracker != nil {
		want := make([]crdwait.Want, 0, len(crds))
		for _, d := range crds {
			c := crdwait.Want{Name: d.U.GetName()}
			if d.Result != nil {
				c.ResourceVersion = d.Result.GetResourceVersion()
			}
			want = append(want, c)
		}
		return w.Tracker.Wait(ctx, want, w.Timeout)
	}
	set := make(object.ObjMetadataSet, 0, len(crds))
	for _, d := range crds {
		set = append(set, object.UnstructuredToObjMetadata(d.U))
	}
	return w.Poller.WaitForSetWithContext(ctx, set, ssa.WaitOptions{Interval: w.Interval, Timeout: w.Timeout})
}

// Listed returns what the apply's LIST said of the CRD name: its
// resourceVersion and conditions, kept in its summary (drift.Summary.CRD).
// It is false when the LIST did not have it.
func (w *Waiter) Listed(name string) (crdwait.State, bool) {
	_, s := w.View.ObjectSummary(liveview.IDFor("", name, crossplane.GroupKindCRD))
	if s == nil || s.CRD == nil {
		return crdwait.State{}, false
	}
	return *s.CRD, true
}
