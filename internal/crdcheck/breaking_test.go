package crdcheck_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/internal/crdwait"
	"github.com/lockstep-gitops/lockstep/internal/liststream"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// TestBreakages lists real custom resources, streamed from a real API
// server, and checks them against a narrower CRD.
func TestBreakages(t *testing.T) {
	env := envtest.Shared(t)
	ctx := envtest.Context(t, 2*time.Minute)
	rc, err := crdwait.NewRESTClient(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	lister := &liststream.Lister{REST: rc, Mapper: env.Client.RESTMapper()}
	const open = "            type: object\n            properties:\n              size: {type: string}\n"
	const narrow = "            type: object\n            properties:\n              size: {type: string, enum: [small]}\n"
	cases := map[string]struct {
		reason string
		// sizes are the spec.size of the objects that exist.
		sizes []string
		// want are the names of the objects broken.
		want []string
	}{
		"NoObjects": {
			reason: "a kind without objects has nothing to break",
		},
		"SomeBroken": {
			reason: "every object the narrower schema refuses is reported, and only those",
			sizes:  []string{"small", "large", "small", "huge"},
			want:   []string{"w1", "w3"},
		},
	}
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			group := fmt.Sprintf("breaking%d.lockstep.io", i)
			crd := widgetCRD(t, "v1", open)
			crd.Name, crd.Spec.Group = "widgets."+group, group
			if err := env.InstallCRDs(crd); err != nil {
				t.Fatal(err)
			}
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			for j, size := range tc.sizes {
				obj := widget(t, "v1", "{size: "+size+"}")
				obj.SetAPIVersion(group + "/v1")
				obj.SetName(fmt.Sprintf("w%d", j))
				if err := env.Client.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
			next := widgetCRD(t, "v1", narrow)
			next.Name, next.Spec.Group = crd.Name, group
			got, err := crdcheck.Breakages(ctx, next, schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}, lister)
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			var names []string
			for _, b := range got {
				if b.Reason != crdcheck.ReasonSchema || b.Field != "spec.size" {
					t.Errorf("%s: unexpected breakage %v", tc.reason, b)
				}
				names = append(names, strings.TrimPrefix(b.Object, "Widget team-a/"))
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("%s: broken objects -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

func TestUpgradeErrorMessage(t *testing.T) {
	breakages := func(n int) []crdcheck.Breakage {
		out := make([]crdcheck.Breakage, n)
		for i := range out {
			out[i] = crdcheck.Breakage{Object: fmt.Sprintf("Widget w%d", i), Version: "v1", Reason: crdcheck.ReasonSchema, Field: "spec.size"}
		}
		return out
	}
	cases := map[string]struct {
		reason string
		n      int
		// has are parts of the message; hasNot parts it must not hold.
		has, hasNot []string
	}{
		"One": {
			reason: "one breakage is named, in the singular",
			n:      1,
			has:    []string{"would break 1 existing object or field (", "Widget w0", "allow-breaking-upgrade"},
			hasNot: []string{"more"},
		},
		"Many": {
			reason: "the first five of many are named, and the rest counted",
			n:      7,
			has:    []string{"would break 7 existing objects or fields", "Widget w4", "; and 2 more"},
			hasNot: []string{"Widget w5"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			msg := (&crdcheck.UpgradeError{Package: "Provider/p", Breakages: breakages(tc.n)}).Error()
			for _, s := range tc.has {
				if !strings.Contains(msg, s) {
					t.Errorf("%s: %q lacks %q", tc.reason, msg, s)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(msg, s) {
					t.Errorf("%s: %q holds %q", tc.reason, msg, s)
				}
			}
		})
	}
}
