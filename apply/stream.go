package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/rest"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/live"
)

// compactKinds are the kinds whose live objects apply keeps compact: their
// header decoded, the rest as digests (liveSummary). They are the bulk of
// a provider's payload (a monolith's 2,000 CRDs list as ~70 MB of JSON,
// ~10 times that decoded), and apply reads their content only to compare
// it with what it applies.
var compactKinds = map[schema.GroupKind]bool{
	crossplane.GroupKindCRD: true, crossplane.GroupKindMRD: true, crossplane.GroupKindXRD: true, crossplane.GroupKindComposition: true,
}

// rawLister lists objects page by page and hands each item to a function
// as it is read from the response, without decoding the page.
type rawLister struct {
	rc     rest.Interface
	mapper meta.RESTMapper
}

// list lists the objects of gvk in namespace ("" for all or cluster-scoped)
// that match selector, live.PageSize a page, and calls item with the JSON of
// each. It returns the list's resourceVersion (that of the first page: the
// pages are one snapshot), from which a watch sees every later change, and
// a NoKindMatchError when the kind is not served.
func (l *rawLister) list(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Set, item func([]byte) error) (string, error) {
	m, err := l.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
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
		req := l.rc.Get().AbsPath(p).Param("limit", strconv.Itoa(live.PageSize))
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
		lm, err := readList(body, item)
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

// readList reads a JSON list response, calls item with each element of
// "items" and returns the list's metadata (continue, resourceVersion).
func readList(r io.Reader, item func([]byte) error) (metav1.ListMeta, error) {
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

// decodeItem decodes the JSON of a list item, which the API server sends
// without apiVersion and kind (the caller sets them).
func decodeItem(b []byte) (*unstructured.Unstructured, error) {
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// isNotServed reports whether err says the kind is not served (yet).
func isNotServed(err error) bool {
	var se *apierrors.StatusError
	return meta.IsNoMatchError(err) || (errors.As(err, &se) && se.ErrStatus.Code == http.StatusNotFound)
}
