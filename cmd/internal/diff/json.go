package diff

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes the report as JSON indented by two spaces with a final
// newline: the documented schema of the package documentation, apiVersion
// lockstep.io/v1alpha1, kind Diff. It returns the first write error.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// ReadJSON reads a report written by WriteJSON. It returns an error when
// the input is not JSON or is not a lockstep.io/v1alpha1 Diff (a report of
// another version must be read by a lockstep that knows it).
func ReadJSON(rd io.Reader) (*Report, error) {
	var r Report
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("cannot read diff report: %w", err)
	}
	if r.APIVersion != APIVersion || r.Kind != Kind {
		return nil, fmt.Errorf("cannot read diff report: %s %s is not a %s %s", r.APIVersion, r.Kind, APIVersion, Kind)
	}
	return &r, nil
}
