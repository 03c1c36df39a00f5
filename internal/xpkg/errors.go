package xpkg

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Errors that callers can test for with errors.Is.
var (
	// ErrPackageYAMLNotFound means the image has no package.yaml where
	// Crossplane looks for it (docs/crossplane-behaviour.md#package-image):
	// neither in the base layer nor,
	// when no layer is annotated as base, in the flattened filesystem.
	ErrPackageYAMLNotFound = errors.New("package.yaml not found in package")

	// ErrNoMeta means package.yaml has no meta.pkg.crossplane.io object.
	// Crossplane's validator requires exactly one
	// (docs/crossplane-behaviour.md#validation, OneMeta).
	ErrNoMeta = errors.New("package.yaml has no meta.pkg.crossplane.io Provider, Configuration or Function")

	// ErrMultipleMeta means package.yaml has more than one
	// meta.pkg.crossplane.io object (docs/crossplane-behaviour.md#validation,
	// OneMeta). It is returned
	// wrapped in the *DocumentError of the second meta object.
	ErrMultipleMeta = errors.New("package.yaml has more than one meta.pkg.crossplane.io object")

	// ErrKindNotAllowed means a payload object's kind is not one the package's
	// type may carry (docs/crossplane-behaviour.md#validation, the linter's
	// allowlist). It is returned
	// wrapped in the *DocumentError of each offending object.
	ErrKindNotAllowed = errors.New("kind not allowed in this package type")
)

// DocumentError is an error about one document of a package.yaml stream.
// Index counts non-empty documents from 0, the same way Object.Index does.
// Kind and Name are empty when the document could not be decoded far enough
// to know them. Err is the cause; DocumentError unwraps to it.
type DocumentError struct {
	Index int
	Kind  string
	Name  string
	Err   error
}

// Error returns "package.yaml document <index> (<kind> <name>): <cause>",
// leaving out the parenthesis, kind or name when they are unknown.
func (e *DocumentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s document %d", StreamFile, e.Index)
	switch {
	case e.Kind != "" && e.Name != "":
		fmt.Fprintf(&b, " (%s %s)", e.Kind, e.Name)
	case e.Kind != "":
		fmt.Fprintf(&b, " (%s)", e.Kind)
	case e.Name != "":
		fmt.Fprintf(&b, " (%s)", e.Name)
	}
	b.WriteString(": ")
	if e.Err == nil {
		b.WriteString("unknown error")
	} else {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *DocumentError) Unwrap() error { return e.Err }

// kindNotAllowedError reads as the allowlist of the package type and matches
// ErrKindNotAllowed.
type kindNotAllowedError struct {
	pkg     crossplane.Kind
	got     schema.GroupKind
	allowed []schema.GroupKind
}

func (e *kindNotAllowedError) Error() string {
	kinds := make([]string, 0, len(e.allowed))
	group := ""
	for _, gk := range e.allowed {
		kinds = append(kinds, gk.Kind)
		if gk.Kind == e.got.Kind {
			group = gk.Group
		}
	}
	list := "no payload"
	if len(kinds) > 0 {
		list = strings.Join(kinds, ", ")
	}
	msg := fmt.Sprintf("a %s package may carry %s", e.pkg, list)
	if group != "" {
		msg += fmt.Sprintf("; %s must be in API group %s, not %q", e.got.Kind, group, e.got.Group)
	}
	return msg
}

func (e *kindNotAllowedError) Is(target error) bool { return target == ErrKindNotAllowed }
