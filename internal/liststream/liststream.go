// Package liststream lists Kubernetes objects without holding a whole
// page decoded: each item of a LIST response is handed to the caller as
// its JSON while the response is read, one page (live.PageSize objects)
// after another.
//
// A provider monolith's 2,000 CustomResourceDefinitions list as about
// 70 MB of JSON and ten times that once decoded; the apply step keeps
// only a digest of most of each (docs/design/apply.md), so it reads them
// this way. The requests are the API server's paginated LIST
// (https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks):
// the same as client-go's pager sends, with the same labelSelector,
// limit and continue parameters.
package liststream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strconv"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/rest"

	"github.com/lockstep-gitops/lockstep/internal/live"
)

// Lister lists objects page by page and hands each item to a function
// as it is read from the response, without decoding the page.
type Lister struct {
	// REST is a client of the API server's root (a rest.RESTClient
	// made for no group, as rest.UnversionedRESTClientFor makes).
	REST rest.Interface
	// Mapper maps a kind to its resource and scope.
	Mapper meta.RESTMapper
}

// List lists the objects of gvk in namespace ("" for all or cluster-scoped)
// that match selector, live.PageSize a page, and calls item with the JSON of
// each. It returns the list's resourceVersion (that of the first page: the
// pages are one snapshot), from which a watch sees every later change, and
// a NoKindMatchError when the kind is not served.
func (l *Lister) List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Set, item func([]byte) error) (string, error) {
	m, err := l.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return "", err
	}
	p := "/api/" + gvk.Version
	if gvk.Group != "" {
		p = path.Join("/apis", gvk.Group, gvk.Version)
	}
	if namespace != "" && m.Scope.Name() == meta.RESTScopeNameNamespace {
		p = path.Join(p, "namespaces", namespace)
	}
	p = path.Join(p, m.Resource.Resource)
	cont, rv := "", ""
	for {
		req := l.REST.Get().AbsPath(p).Param("limit", strconv.Itoa(live.PageSize))
		if len(selector) > 0 {
			req = req.Param("labelSelector", labels.SelectorFromSet(selector).String())
		}
		if cont != "" {
			req = req.Param("continue", cont)
		}
		body, err := req.Stream(ctx)
		if err != nil {
			return "", err
		}
		lm, err := ReadList(body, item)
		body.Close()
		if err != nil {
			return "", fmt.Errorf("reading the list of %s: %w", m.Resource.Resource, err)
		}
		if rv == "" {
			rv = lm.ResourceVersion
		}
		if cont = lm.Continue; cont == "" {
			return rv, nil
		}
	}
}

// ReadList reads a JSON list response, calls item with each element of
// "items" and returns the list's metadata (continue, resourceVersion).
func ReadList(r io.Reader, item func([]byte) error) (metav1.ListMeta, error) {
	var lm metav1.ListMeta
	dec := json.NewDecoder(r)
	if err := expectDelim(dec, '{'); err != nil {
		return lm, err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return lm, err
		}
		switch key, _ := t.(string); key {
		case "metadata":
			if err := dec.Decode(&lm); err != nil {
				return lm, err
			}
		case "items":
			if err := expectDelim(dec, '['); err != nil {
				return lm, err
			}
			for dec.More() {
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return lm, err
				}
				if err := item(raw); err != nil {
					return lm, err
				}
			}
			if err := expectDelim(dec, ']'); err != nil {
				return lm, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return lm, err
			}
		}
	}
	return lm, nil
}

// expectDelim reads the next token of dec and fails unless it is want.
func expectDelim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q in the list response, got %v", want, t)
	}
	return nil
}

// DecodeItem decodes the JSON of a list item, which the API server sends
// without apiVersion and kind (the caller sets them).
func DecodeItem(b []byte) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
