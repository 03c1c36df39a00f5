// Package events records the Kubernetes Events an apply emits on package
// and revision records, as `kubectl describe` shows them, and sends them
// once the apply's steps are done. The reasons are Crossplane's where
// Crossplane has one for the same thing
// (docs/crossplane-behaviour.md#package-conditions-and-events,
// docs/crossplane-behaviour.md#revision-reconcile).
package events

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/render"
)

// Reasons of the Events an apply records.
const (
	// ReasonInstallPackageRevision: a package's current revision was
	// installed (Normal), or could not be (Warning), on the package.
	ReasonInstallPackageRevision = "InstallPackageRevision"
	// ReasonSyncPackage: a revision's payload or runtime was applied
	// (Normal), or a step failed (Warning), on the revision.
	ReasonSyncPackage = "SyncPackage"
	// ReasonTransitionRevision: a revision became Active or Inactive.
	ReasonTransitionRevision = "TransitionRevision"
	// ReasonGarbageCollect: revisions past revisionHistoryLimit were
	// deleted.
	ReasonGarbageCollect = "GarbageCollect"
	// ReasonDeactivatePackage: a package was deactivated because another
	// replaces it (docs/crossplane-behaviour.md#moved-packages-and-replaces).
	ReasonDeactivatePackage = "DeactivatePackage"
)

// Component is the Events' source component, and ReportingController
// their reporting controller.
const (
	Component           = "lockstep"
	ReportingController = "lockstep.io/lockstep"
)

// maxMessage is the longest message an Event keeps (the API server
// refuses longer ones); a longer one ends with "...".
const maxMessage = 1024

// seq makes the names of Events recorded in the same nanosecond distinct.
var seq atomic.Int64

// Recorder keeps the Events of one apply until Send; it is safe for
// concurrent use.
type Recorder struct {
	instance string
	now      time.Time
	dryRun   bool

	mu     sync.Mutex
	events []*corev1.Event
}

// NewRecorder returns the Recorder of an apply of instance at time now;
// with dryRun it records nothing.
func NewRecorder(instance string, now time.Time, dryRun bool) *Recorder {
	return &Recorder{instance: instance, now: now, dryRun: dryRun}
}

// Record keeps an Event of type typ (corev1.EventTypeNormal or
// EventTypeWarning) about obj, a package or revision record; nil obj
// records nothing. Events of cluster-scoped objects go to the default
// namespace, as client-go's recorder puts them. Messages over 1,024
// characters are cut.
func (r *Recorder) Record(obj *unstructured.Unstructured, typ, reason, msg string) {
	if obj == nil || r.dryRun {
		return
	}
	ns := obj.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	name := strings.ToLower(obj.GetName())
	if len(name) > 200 {
		name = name[:200]
	}
	ts := metav1.NewTime(r.now)
	if len(msg) > maxMessage {
		msg = msg[:maxMessage-3] + "..."
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x%x", name, r.now.UnixNano(), seq.Add(1)),
			Namespace: ns,
			Labels:    map[string]string{render.LabelManagedBy: render.ManagedByValue, render.LabelInstance: r.instance},
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(),
			Namespace: obj.GetNamespace(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
		Reason:              reason,
		Message:             msg,
		Type:                typ,
		Source:              corev1.EventSource{Component: Component},
		ReportingController: ReportingController,
		ReportingInstance:   r.instance,
		Action:              reason,
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
	}
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// Send creates the Events recorded since the last Send through c,
// concurrency at a time, as manager. It returns how many were created and
// one error per Event that could not be, naming it; an apply reports them
// as warnings, not failures.
func (r *Recorder) Send(ctx context.Context, c client.Client, concurrency int, manager string) (int, []error) {
	r.mu.Lock()
	evs := r.events
	r.events = nil
	r.mu.Unlock()
	errs := parallel.Errors(ctx, len(evs), concurrency, func(ctx context.Context, i int) error {
		ev := evs[i]
		if err := c.Create(ctx, ev, client.FieldOwner(manager)); err != nil {
			return fmt.Errorf("cannot record event %s on %s %s: %w", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, err)
		}
		return nil
	})
	sent := 0
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
			continue
		}
		sent++
	}
	return sent, failed
}
