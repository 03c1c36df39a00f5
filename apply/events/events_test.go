package events_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/events"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

var nsSeq atomic.Int64

func record(kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("pkg.crossplane.io/v1")
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// TestRecordAndSend on the test control plane's API server: what Send
// creates, where, and what it reports.
func TestRecordAndSend(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	ns := fmt.Sprintf("events-%d", nsSeq.Add(1))
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 2000)
	cases := map[string]struct {
		reason string
		dryRun bool
		// record records on r.
		record func(r *events.Recorder)
		// sent is how many Send creates, failed how many it cannot.
		sent, failed int
		// check, when set, checks the Events created in ns.
		check func(t *testing.T, evs []corev1.Event)
	}{
		"Namespaced": {
			reason: "an Event about a namespaced object goes to its namespace, with its reason, type and instance label",
			record: func(r *events.Recorder) {
				r.Record(record("Widget", ns, "Provider-Nop"), corev1.EventTypeNormal, events.ReasonSyncPackage, "Applied")
			},
			sent: 1,
			check: func(t *testing.T, evs []corev1.Event) {
				var mine []corev1.Event
				for _, e := range evs {
					if e.InvolvedObject.Name == "Provider-Nop" {
						mine = append(mine, e)
					}
				}
				if len(mine) != 1 {
					t.Fatalf("%d Events about Provider-Nop in %s, want 1", len(mine), ns)
				}
				e := mine[0]
				if e.Reason != events.ReasonSyncPackage || e.Type != corev1.EventTypeNormal || e.InvolvedObject.Name != "Provider-Nop" ||
					!strings.HasPrefix(e.Name, "provider-nop.") || e.Labels[render.LabelInstance] != "prod" || e.ReportingController != events.ReportingController {
					t.Errorf("the Event: %+v", e)
				}
			},
		},
		"LongMessage": {
			reason: "a message over 1,024 characters is cut to 1,024, ending in ...",
			record: func(r *events.Recorder) {
				r.Record(record("Widget", ns, "long"), corev1.EventTypeWarning, events.ReasonInstallPackageRevision, long)
			},
			sent: 1,
			check: func(t *testing.T, evs []corev1.Event) {
				for _, e := range evs {
					if e.InvolvedObject.Name == "long" && (len(e.Message) != 1024 || !strings.HasSuffix(e.Message, "...")) {
						t.Errorf("message of %d characters, ending %q", len(e.Message), e.Message[len(e.Message)-5:])
					}
				}
			},
		},
		"DryRun": {
			reason: "a dry run records nothing",
			dryRun: true,
			record: func(r *events.Recorder) {
				r.Record(record("Widget", ns, "dry"), corev1.EventTypeNormal, events.ReasonSyncPackage, "Applied")
			},
		},
		"NilObject": {
			reason: "no object, no Event",
			record: func(r *events.Recorder) { r.Record(nil, corev1.EventTypeNormal, events.ReasonSyncPackage, "Applied") },
		},
		"Refused": {
			reason: "an Event the API server refuses (a namespace that does not exist) is reported, naming it, and the others are created",
			record: func(r *events.Recorder) {
				r.Record(record("Widget", "no-such-namespace", "lost"), corev1.EventTypeNormal, events.ReasonGarbageCollect, "Deleted")
				r.Record(record("Widget", ns, "kept"), corev1.EventTypeNormal, events.ReasonGarbageCollect, "Deleted")
			},
			sent: 1, failed: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := events.NewRecorder("prod", now, tc.dryRun)
			tc.record(r)
			sent, failed := r.Send(ctx, env.Client, 2, "lockstep")
			if sent != tc.sent || len(failed) != tc.failed {
				t.Errorf("%s: Send created %d and failed %d (%v), want %d and %d", tc.reason, sent, len(failed), failed, tc.sent, tc.failed)
			}
			for _, err := range failed {
				if !strings.Contains(err.Error(), "Widget lost") {
					t.Errorf("%s: the failure %q does not name the object", tc.reason, err)
				}
			}
			if again, _ := r.Send(ctx, env.Client, 2, "lockstep"); again != 0 {
				t.Errorf("%s: a second Send created %d Events again", tc.reason, again)
			}
			if tc.check != nil {
				list := &corev1.EventList{}
				if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
					t.Fatal(err)
				}
				tc.check(t, list.Items)
			}
		})
	}
}
