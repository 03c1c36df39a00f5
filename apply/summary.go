package apply

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/internal/drift"
	"github.com/lockstep-gitops/lockstep/render"
)

// liveSummary is what apply keeps of a listed object of compactKinds
// besides its header: its drift.Summary and, for a CRD an upgrade changes
// (Summary.Changes), its listed JSON when run.keepListed allowed it (raw),
// which the in-process update check reads instead of a GET (run.liveCRD);
// nil otherwise and once taken.
type liveSummary struct {
	drift.Summary
	raw []byte
}

// summarize decodes the JSON of a listed object of the compact kind gvk
// and returns its header and summary (drift.Summarize); shapes are the
// rendered objects by inventory ID (run.shapes).
func summarize(raw []byte, gvk schema.GroupVersionKind, shapes map[string]*render.Object) (*unstructured.Unstructured, *liveSummary, error) {
	h, s, err := drift.Summarize(raw, gvk, func(id string) *drift.Shape {
		o := shapes[id]
		if o == nil {
			return nil
		}
		w, err := shapeOf(o)
		if err != nil || o.Controller == nil {
			return &drift.Shape{Object: w}
		}
		return &drift.Shape{Object: w, ControllerKind: o.Controller.Kind, ControllerName: o.Controller.Name}
	})
	if err != nil {
		return nil, nil, err
	}
	return h, &liveSummary{Summary: *s}, nil
}

// shapeOf returns the rendered object o completed as Bind completes it,
// with placeholders for the UIDs and the CA bundle only the cluster knows:
// the fields (not the values) of what apply sends for o.
func shapeOf(o *render.Object) (*unstructured.Unstructured, error) {
	uids := map[render.Reference]types.UID{}
	if o.Controller != nil {
		uids[*o.Controller] = "shape"
	}
	for _, r := range o.Owners {
		uids[r] = "shape"
	}
	return o.Bind(render.Binding{UIDs: uids, CABundle: []byte("shape"), Revision: 1})
}
