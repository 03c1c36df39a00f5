package apply

import (
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func TestSummarize(t *testing.T) {
	item := `{"metadata":{"name":"a.x.io","generation":3,"managedFields":[{"manager":"m"}]},"spec":{"group":"x.io"}}`
	h, sum, err := summarize([]byte(item), crossplane.GroupKindCRD.WithVersion("v1"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.GetName() != "a.x.io" || h.GetGeneration() != 3 || len(h.GetManagedFields()) != 0 || h.Object["spec"] != nil || h.GetKind() != "CustomResourceDefinition" {
		t.Errorf("summarize = %v, want the kind, name and generation (as int64), no managedFields, no spec", h.Object)
	}
	if sum.content == "" || sum.match != "" || sum.crd == nil {
		t.Errorf("summary = %+v, want a content digest, no match (nothing rendered) and the CRD's state", sum)
	}

}
