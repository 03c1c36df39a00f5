package liststream_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/liststream"
)

func TestReadList(t *testing.T) {
	body := `{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1",
		"metadata":{"resourceVersion":"42","continue":"next-page"},
		"items":[{"metadata":{"name":"a.x.io","generation":3,"managedFields":[{"manager":"m"}]},"spec":{"group":"x.io"}},
		         {"metadata":{"name":"b.x.io"},"spec":{"group":"x.io","names":{"kind":"B"}}}]}`
	var items []string
	lm, err := liststream.ReadList(strings.NewReader(body), func(b []byte) error {
		items = append(items, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if lm.Continue != "next-page" || lm.ResourceVersion != "42" {
		t.Errorf("list metadata = %+v, want continue next-page and resourceVersion 42", lm)
	}
	want := []string{
		`{"metadata":{"name":"a.x.io","generation":3,"managedFields":[{"manager":"m"}]},"spec":{"group":"x.io"}}`,
		`{"metadata":{"name":"b.x.io"},"spec":{"group":"x.io","names":{"kind":"B"}}}`,
	}
	if diff := cmp.Diff(want, items); diff != "" {
		t.Errorf("items: -want +got\n%s", diff)
	}

	if _, err := liststream.ReadList(strings.NewReader(`{"items":{}}`), func([]byte) error { return nil }); err == nil {
		t.Error("a list whose items is not an array: no error")
	}
}
