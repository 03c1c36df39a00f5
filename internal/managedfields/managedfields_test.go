package managedfields

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// object returns an object with one managedFields entry per entry given.
func object(entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "pkg.crossplane.io/v1", "kind": "ProviderRevision"}}
	u.SetManagedFields(entries)
	return u
}

// entry is a managedFields entry of manager with operation op on
// subresource, holding fields (FieldsV1 JSON; "" for none).
func entry(manager string, op metav1.ManagedFieldsOperationType, subresource, fields string) metav1.ManagedFieldsEntry {
	e := metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Subresource: subresource}
	if fields != "" {
		e.FieldsV1 = metav1.NewFieldsV1(fields)
	}
	return e
}

const (
	apply  = metav1.ManagedFieldsOperationApply
	update = metav1.ManagedFieldsOperationUpdate

	desiredState = `{"f:spec":{"f:desiredState":{}}}`
	runtime      = `{"f:status":{"f:conditions":{"k:{\"type\":\"RuntimeHealthy\"}":{".":{},"f:status":{}}}}}`
)

func TestSoleApplier(t *testing.T) {
	cases := map[string]struct {
		reason string
		u      *unstructured.Unstructured
		want   bool
	}{
		"Sole": {
			reason: "the one entry owning the field is the manager's Apply",
			u:      object(entry("lockstep", apply, "", desiredState)),
			want:   true,
		},
		"Shared": {
			reason: "another manager owns the field too",
			u:      object(entry("lockstep", apply, "", desiredState), entry("kubectl-edit", update, "", desiredState)),
		},
		"OtherOnly": {
			reason: "only another manager owns it",
			u:      object(entry("crossplane", update, "", desiredState)),
		},
		"Update": {
			reason: "the manager owns it by Update, not Apply",
			u:      object(entry("lockstep", update, "", desiredState)),
		},
		"SubresourceIgnored": {
			reason: "an entry of a subresource does not own the object's field",
			u:      object(entry("lockstep", apply, "", desiredState), entry("crossplane", update, "status", desiredState)),
			want:   true,
		},
		"Malformed": {
			reason: "an entry whose FieldsV1 does not decode owns nothing",
			u:      object(entry("lockstep", apply, "", desiredState), entry("other", update, "", `"not an object"`)),
			want:   true,
		},
		"Parent": {
			reason: "owning spec's other fields is not owning spec.desiredState",
			u:      object(entry("lockstep", apply, "", `{"f:spec":{"f:package":{}}}`)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := SoleApplier(tc.u, "lockstep", "f:spec", "f:desiredState")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nSoleApplier: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAppliedBy(t *testing.T) {
	path := []string{"f:status", "f:conditions", `k:{"type":"RuntimeHealthy"}`}
	cases := map[string]struct {
		reason      string
		u           *unstructured.Unstructured
		subresource string
		path        []string
		want        bool
	}{
		"ListElement": {
			reason:      "the manager's status entry holds the keyed list element",
			u:           object(entry("lockstep-status", apply, "status", runtime)),
			subresource: "status", path: path, want: true,
		},
		"WrongSubresource": {
			reason:      "the object's own entry is not the status subresource's",
			u:           object(entry("lockstep-status", apply, "", runtime)),
			subresource: "status", path: path,
		},
		"OtherManager": {
			reason:      "Crossplane's condition is not lockstep's",
			u:           object(entry("crossplane", apply, "status", runtime)),
			subresource: "status", path: path,
		},
		"NoFields": {
			reason:      "an entry without FieldsV1 owns nothing",
			u:           object(entry("lockstep-status", apply, "status", "")),
			subresource: "status", path: path,
		},
		"EmptyPath": {
			reason:      "an empty path names no field",
			u:           object(entry("lockstep-status", apply, "status", runtime)),
			subresource: "status",
		},
		"ThroughLeaf": {
			reason:      "a path cannot go on below a leaf",
			u:           object(entry("lockstep-status", apply, "status", `{"f:status":"x"}`)),
			subresource: "status", path: []string{"f:status", "f:conditions"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := AppliedBy(tc.u, "lockstep-status", tc.subresource, tc.path...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAppliedBy: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
