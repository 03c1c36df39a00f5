package declarations

import (
	"cmp"
	"errors"
	"slices"
	"strings"
)

// Error is one problem Load found in the declarations. Load returns every
// Error it finds, joined with errors.Join and sorted by file and line; use
// errors.As on each element of the joined error's Unwrap() []error to
// inspect them.
type Error struct {
	// Location is the file and line of the offending field, or of the
	// document when the field is missing.
	Location
	// Object names the object as "Kind name" (for example
	// "Provider provider-nop"); "Kind" alone when the name is missing, empty
	// when the problem is not inside an object (malformed YAML).
	Object string
	// Field is the field path, for example "spec.packagePullSecrets[0].name";
	// empty when the problem concerns the whole document.
	Field string
	// Err is the problem itself.
	Err error
}

// Error formats the problem as "file:line: Kind name: field: problem".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Location.String())
	b.WriteString(": ")
	if e.Object != "" {
		b.WriteString(e.Object)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the underlying problem.
func (e *Error) Unwrap() error { return e.Err }

// joinSorted sorts errs by file, line and message and joins them; nil when
// errs is empty.
func joinSorted(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	errs = sortedErrors(errs)
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// sortedErrors sorts errs in place by file, line and message, and returns
// it.
func sortedErrors(errs []*Error) []*Error {
	slices.SortStableFunc(errs, func(a, b *Error) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Error(), b.Error()),
		)
	})
	return errs
}

// sortedCopy returns a copy of s sorted by key.
func sortedCopy[T any](s []T, key func(T) string) []T {
	out := slices.Clone(s)
	slices.SortStableFunc(out, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return out
}
