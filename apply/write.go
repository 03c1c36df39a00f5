package apply

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// applyDesired server-side applies d as FieldManager through the run's
// writer and returns the API server's answer. A payload object is sent as
// its JSON body (writer.Writer.ApplyBody), and with metaOnly the answer is
// its apiVersion, kind and metadata alone, which is all apply keeps of
// it. Records and runtime are sent and answered in full.
func (r *run) applyDesired(ctx context.Context, d *desired, dryRun, metaOnly bool) (*unstructured.Unstructured, error) {
	if !d.isPayload() {
		return r.w.Apply(ctx, d.applyObject(), FieldManager, dryRun)
	}
	body, err := d.payloadJSON()
	if err != nil {
		return nil, err
	}
	return r.w.ApplyBody(ctx, d.u.GroupVersionKind(), d.u.GetNamespace(), d.u.GetName(), body, FieldManager, dryRun, metaOnly)
}
