package drift

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/fluxcd/pkg/ssa/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// AnnotationAppliedHash is set by lockstep on every object it applies: the
// SHA-256 of the object as lockstep applied it, without this annotation.
// When an object's desired state still hashes to it and every field lockstep
// sets still has lockstep's value, lockstep sends no request for the object.
const AnnotationAppliedHash = "lockstep.io/applied-hash"

// AnnotationContentHash is set by lockstep on every object it applies: the
// SHA-256 of the object as lockstep applied it without its metadata (and
// status). When a live object carries the content hash of what lockstep
// applies now and still holds that content, the apply changes its metadata
// alone (a new revision taking control of a payload object changes only
// its owner references): apply then checks the metadata in-process with
// the API server's own validation instead of a server-side dry-run.
const AnnotationContentHash = "lockstep.io/applied-content-hash"

// SetAppliedHash sets AnnotationContentHash on u to the digest of its
// content (Content), then sets AnnotationAppliedHash to the digest of u
// without that annotation, and returns the latter. It fails, naming u,
// only when u holds a value JSON cannot encode.
func SetAppliedHash(u *unstructured.Unstructured) (string, error) {
	content, err := Digest(Content(u.Object))
	if err != nil {
		return "", fmt.Errorf("%s: %w", utils.FmtUnstructured(u), err)
	}
	ann := u.GetAnnotations()
	delete(ann, AnnotationAppliedHash)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationContentHash] = content
	u.SetAnnotations(ann)
	h, err := Digest(u.Object) // maps are encoded with sorted keys
	if err != nil {
		return "", fmt.Errorf("%s: %w", utils.FmtUnstructured(u), err)
	}
	ann[AnnotationAppliedHash] = h
	u.SetAnnotations(ann)
	return h, nil
}

// Content returns obj without metadata and status: what the API server
// validates of an object beyond its metadata. The values are shared with
// obj, not copied.
func Content(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "metadata" && k != "status" {
			out[k] = v
		}
	}
	return out
}

// WithoutMetadata returns u's object without its metadata, sharing the
// values.
func WithoutMetadata(u *unstructured.Unstructured) map[string]any {
	out := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// Header returns u's apiVersion, kind and metadata, sharing u's metadata.
func Header(u *unstructured.Unstructured) *unstructured.Unstructured {
	h := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	if m, ok := u.Object["metadata"]; ok {
		h.Object["metadata"] = m
	}
	return h
}

// Digest returns "sha256:<hex>" of v's JSON as json.Marshal writes it
// (maps with sorted keys), the form of AnnotationContentHash. It hashes
// the encoder's own buffer, which encoding/json reuses, instead of the copy
// json.Marshal returns: a CRD of a large provider is up to a megabyte of
// JSON, hashed two or three times per bind
// (docs/design/apply.md#memory). It fails only for a value JSON cannot
// encode.
func Digest(v any) (string, error) {
	h := sha256.New()
	// Encode writes json.Marshal's bytes and a newline in one Write.
	if err := json.NewEncoder(endlessWriter{h}).Encode(v); err != nil {
		return "", fmt.Errorf("cannot encode: %w", err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// endlessWriter writes to w what it is given without its final newline.
type endlessWriter struct{ w io.Writer }

// Write implements io.Writer.
func (e endlessWriter) Write(p []byte) (int, error) {
	if _, err := e.w.Write(bytes.TrimSuffix(p, []byte("\n"))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// BodyDigest returns the digest of u without its metadata, comparable with
// Summary.Match. For an object without status that is its content, whose
// digest SetAppliedHash already set as AnnotationContentHash, which is
// returned without hashing again.
func BodyDigest(u *unstructured.Unstructured) (string, error) {
	if _, ok := u.Object["status"]; !ok {
		if h := u.GetAnnotations()[AnnotationContentHash]; h != "" {
			return h, nil
		}
	}
	return Digest(WithoutMetadata(u))
}
