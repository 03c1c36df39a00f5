package crdcheck

import (
	"context"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/liststream"
)

// Lister lists the objects of gvk in namespace ("" for every namespace)
// that match selector, and calls item with the JSON of each, one at a
// time. internal/liststream's Lister is one: it reads the LIST's pages as
// a stream, so that a kind with many objects never sits in memory whole.
type Lister interface {
	List(ctx context.Context, gvk schema.GroupVersionKind, namespace string, selector labels.Set, item func([]byte) error) (string, error)
}

// Breakages lists every existing object of the kind next defines, at gvk
// (the version the live CRD serves, as discovery has it), with l, and
// returns how next breaks each (Checker.Check). The Checker, whose schemas
// and CEL programs cost the most, is built only when an object exists: a
// kind with none costs its one LIST. A list error is returned as l
// returned it (with the breakages found until then), so that the caller
// can tell a kind the API server does not serve.
func Breakages(ctx context.Context, next *apiextensionsv1.CustomResourceDefinition, gvk schema.GroupVersionKind, l Lister) ([]Breakage, error) {
	var broken []Breakage
	var checker *Checker
	_, err := l.List(ctx, gvk, "", nil, func(b []byte) error {
		u, err := liststream.DecodeItem(b)
		if err != nil {
			return err
		}
		if checker == nil {
			if checker, err = NewChecker(next); err != nil {
				return err
			}
		}
		u.SetGroupVersionKind(gvk)
		broken = append(broken, checker.Check(ctx, u)...)
		return nil
	})
	return broken, err
}

// maxShown is how many breakages an UpgradeError's message names; the
// count covers them all.
const maxShown = 5

// UpgradeError refuses a package whose new CRDs would break existing
// custom resources, before any write of the package. Its message names
// the first objects and the count (the caller names the package), and how
// to let the upgrade through anyway
// (docs/design/apply.md#breaking-upgrades).
type UpgradeError struct {
	// Package is "Kind/name".
	Package string
	// Breakages are every broken object and pruned field, in CRD order.
	Breakages []Breakage
}

// Error is "the new version would break N existing objects or fields
// (...); OBJECT: ...; and M more".
func (e *UpgradeError) Error() string {
	var b strings.Builder
	n := len(e.Breakages)
	what := "objects or fields"
	if n == 1 {
		what = "object or field"
	}
	fmt.Fprintf(&b, "the new version would break %d existing %s (set lockstep.io/allow-breaking-upgrade: \"true\" on its declaration to install it anyway)", n, what)
	for _, br := range e.Breakages[:min(n, maxShown)] {
		fmt.Fprintf(&b, "; %s", br)
	}
	if n > maxShown {
		fmt.Fprintf(&b, "; and %d more", n-maxShown)
	}
	return b.String()
}
