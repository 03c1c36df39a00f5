package apply

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/render"
)

// Event types.
const (
	eventNormal  = corev1.EventTypeNormal
	eventWarning = corev1.EventTypeWarning
)

// Event reasons lockstep emits on packages and revisions. They are
// Crossplane's where Crossplane has one for the same thing
// (docs/crossplane-behaviour.md#package-conditions-and-events,
// docs/crossplane-behaviour.md#revision-reconcile).
const (
	// ReasonInstallPackageRevision: a package's current revision was
	// installed (Normal), or could not be (Warning).
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

var eventSeq atomic.Int64

// event records a Kubernetes Event about obj (a package or revision), as
// `kubectl describe` shows it, to be sent by sendEvents once every
// package's steps are done. Events of cluster-scoped objects go to the
// default namespace, as client-go's recorder puts them. A dry run records
// nothing.
func (r *run) event(obj *unstructured.Unstructured, typ, reason, msg string) {
	if obj == nil || r.opts.DryRun {
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
	if len(msg) > 1024 {
		msg = msg[:1021] + "..."
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x%x", name, r.now.UnixNano(), eventSeq.Add(1)),
			Namespace: ns,
			Labels:    map[string]string{render.LabelManagedBy: render.ManagedByValue, render.LabelInstance: r.opts.Instance},
		},
		InvolvedObject: corev1.ObjectReference{
			APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Name: obj.GetName(),
			Namespace: obj.GetNamespace(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		},
		Reason:              reason,
		Message:             msg,
		Type:                typ,
		Source:              corev1.EventSource{Component: "lockstep"},
		ReportingController: "lockstep.io/lockstep",
		ReportingInstance:   r.opts.Instance,
		Action:              reason,
		FirstTimestamp:      ts,
		LastTimestamp:       ts,
		Count:               1,
	}
	r.eventsMu.Lock()
	r.events = append(r.events, ev)
	r.eventsMu.Unlock()
}

// sendEvents creates the Events the run recorded (event), Concurrency at
// a time, once every package's steps are done, so that no package waits
// for its Events. A failure to create one is a warning, not an apply
// failure.
func (r *run) sendEvents(ctx context.Context) {
	r.eventsMu.Lock()
	evs := r.events
	r.events = nil
	r.eventsMu.Unlock()
	_ = parallel.Each(ctx, len(evs), r.opts.Concurrency, func(ctx context.Context, i int) error {
		ev := evs[i]
		if err := r.c.Create(ctx, ev, client.FieldOwner(FieldManager)); err != nil {
			r.warn(nil, "cannot record event %s on %s %s: %v", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, err)
			return nil
		}
		r.wrote()
		return nil
	})
}
