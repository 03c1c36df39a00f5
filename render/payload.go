package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// payload renders the package's payload objects
// (docs/crossplane-behaviour.md#establishing-the-payload): each object
// verbatim, with the declaration's commonLabels and commonAnnotations
// merged over its own (common values win, as in Crossplane's establisher)
// and lockstep's labels over those. Provider webhook configurations are
// renamed crossplane-provider-<package> and pointed at the package's
// Service, and CRDs and MRDs with a Webhook conversion strategy get the same
// Service; both ask for the CA bundle of the TLS server Secret. A Function
// installs nothing: its CRDs only describe its input (docs/crossplane-behaviour.md#validation).
//
// Objects are transformed as JSON: only the metadata of an ordinary object
// is decoded, so a package with thousands of CRDs is never decoded into maps.
func (r *renderer) payload(p *Package, d *declarations.Declaration, po *PackageOutput) ([]*Object, error) {
	if !p.Kind.Descriptor().InstallsPayload {
		return nil, nil
	}
	labels := maps.Clone(d.Spec.CommonLabels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, r.labels)
	annotations := d.Spec.CommonAnnotations

	rev, pkg := po.revisionRef(), po.packageRef()
	converts := r.converts && p.Kind.Descriptor().ManagedResources
	safeStart := capabilityMatch(p.Contents.Meta.Capabilities, "safe-start")
	out := make([]*Object, 0, len(p.Contents.Objects))
	for i := range p.Contents.Objects {
		src := &p.Contents.Objects[i]
		fail := func(err error) error {
			return fmt.Errorf("%s: %s document %d (%s %s): %w", p, xpkg.StreamFile, src.Index, src.Kind, src.Name, err)
		}
		if gk := src.GroupKind(); converts && (gk == crossplane.GroupKindCRD || gk == crossplane.GroupKindMRD) {
			mrd, err := r.convert(p, src, safeStart, po, labels, annotations)
			if err != nil {
				return nil, fail(err)
			}
			if mrd != nil {
				out = append(out, mrd)
				continue
			}
		}
		o, err := r.payloadObject(p, src, labels, annotations)
		if err != nil {
			return nil, fail(err)
		}
		o.Controller = &rev
		o.Owners = []Reference{pkg}
		out = append(out, o)
	}
	sortObjects(out)
	if converts {
		finishActivation(po.Revision, safeStart && ScalesToZero(r.in.CrossplaneVersion))
	}
	return out, nil
}

// convert renders the MRD of a provider CRD (convertCRD), or an MRD the
// provider ships itself (nativeMRD), with its activation, and for an Active
// MRD the CRD Crossplane's MRD controller makes of it into the revision's
// ManagedCRDs. It returns nil for the provider-configuration kinds, which
// stay plain CRDs.
func (r *renderer) convert(p *Package, src *xpkg.Object, safeStart bool, po *PackageOutput, labels, annotations map[string]string) (*Object, error) {
	var (
		conv     *xpkg.Object
		kind, by string
		err      error
	)
	if src.GroupKind() == crossplane.GroupKindMRD {
		if conv, kind, by, err = nativeMRD(src, r.activation); err != nil {
			return nil, err
		}
	} else {
		by = "default"
		if safeStart {
			by = r.activation(src.Name)
		}
		var ok bool
		if conv, kind, ok, err = convertCRD(src, by != ""); err != nil || !ok {
			return nil, err
		}
	}
	active := by != ""
	rev := po.Revision
	mrd, err := r.payloadObject(p, conv, labels, annotations)
	if err != nil {
		return nil, err
	}
	mrd.FromCRD = src.GroupKind() != crossplane.GroupKindMRD
	revRef := po.revisionRef()
	mrd.Controller, mrd.Owners = &revRef, []Reference{po.packageRef()}
	rev.MRDs = append(rev.MRDs, MRDActivation{Name: src.Name, Kind: kind, Active: active, By: by})
	if !active {
		return mrd, nil
	}
	crdSrc, err := managedCRD(conv)
	if err != nil {
		return nil, err
	}
	crd, err := r.payloadObject(p, crdSrc, r.labels, nil)
	if err != nil {
		return nil, err
	}
	crd.Controller = &revRef
	crd.Owners = []Reference{{APIVersion: MRDAPIVersion, Kind: crossplane.GroupKindMRD.Kind, Name: src.Name}}
	rev.ManagedCRDs = append(rev.ManagedCRDs, crd)
	return mrd, nil
}

// finishActivation sorts the revision's MRDs and managed CRDs and marks a
// revision with MRDs and none Active as AwaitingActivation when it is
// safe-start and the lock's Crossplane version scales such a runtime to
// zero (scalesToZero, ScalesToZero).
func finishActivation(rev *RevisionOutput, scalesToZero bool) {
	slices.SortFunc(rev.MRDs, func(a, b MRDActivation) int { return strings.Compare(a.Name, b.Name) })
	sortObjects(rev.ManagedCRDs)
	rev.AwaitingActivation = scalesToZero && len(rev.MRDs) > 0 && len(rev.ManagedCRDs) == 0
}

func (r *renderer) payloadObject(p *Package, src *xpkg.Object, labels, annotations map[string]string) (*Object, error) {
	gk := src.GroupKind()
	o := &Object{APIVersion: src.APIVersion, Kind: src.Kind, Name: src.Name, Namespace: src.Namespace}
	switch {
	case gk == crossplane.GroupKindValidatingWebhookConfiguration || gk == crossplane.GroupKindMutatingWebhookConfiguration:
		obj, err := decodeMap(src.Raw)
		if err != nil {
			return nil, err
		}
		o.Name = "crossplane-" + p.Kind.Lower() + "-" + p.Name
		obj["metadata"] = mergeMetadata(asMap(obj["metadata"]), labels, annotations)
		asMap(obj["metadata"])["name"] = o.Name
		hooks, _ := obj["webhooks"].([]any)
		for i, h := range hooks {
			hook, ok := h.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("webhooks[%d] is not an object", i)
			}
			hook["clientConfig"] = r.serviceClientConfig(p, asMap(hook["clientConfig"]))
		}
		o.CABundle = &CABundleRequest{SecretName: tlsServerSecretName(p.Name), Key: certs.TLSCertKey}
		return o, o.encode(obj)
	case (gk == crossplane.GroupKindCRD || gk == crossplane.GroupKindMRD) && webhookConversion(src.Raw):
		obj, err := decodeMap(src.Raw)
		if err != nil {
			return nil, err
		}
		obj["metadata"] = mergeMetadata(asMap(obj["metadata"]), labels, annotations)
		conv := asMap(asMap(obj["spec"])["conversion"])
		webhook := asMap(conv["webhook"])
		webhook["clientConfig"] = r.serviceClientConfig(p, asMap(webhook["clientConfig"]))
		conv["webhook"] = webhook
		o.CABundle = &CABundleRequest{SecretName: tlsServerSecretName(p.Name), Key: certs.TLSCertKey}
		return o, o.encode(obj)
	}
	if sp, err := spliceMetadata(src.Raw, labels, annotations); sp != nil || err != nil {
		o.splice = sp
		return o, err
	}
	raw, err := withMetadata(src.Raw, labels, annotations)
	if err != nil {
		return nil, err
	}
	o.setJSON(raw)
	return o, nil
}

// serviceClientConfig points a webhook client config at the package's
// Service on the webhook port, keeping its path
// (docs/crossplane-behaviour.md#establishing-the-payload). The caBundle
// is removed here and set by Object.Bind.
func (r *renderer) serviceClientConfig(p *Package, cc map[string]any) map[string]any {
	svc := asMap(cc["service"])
	svc["name"] = p.Name
	svc["namespace"] = r.in.Namespace
	svc["port"] = int64(WebhookPort)
	cc["service"] = svc
	delete(cc, "caBundle")
	return cc
}

// webhookConversion reports whether raw, a CRD or MRD, has
// spec.conversion.strategy Webhook. Documents without the word are not
// decoded.
func webhookConversion(raw []byte) bool {
	if !bytes.Contains(raw, []byte(`"Webhook"`)) {
		return false
	}
	var v struct {
		Spec struct {
			Conversion *struct {
				Strategy string `json:"strategy"`
			} `json:"conversion"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return false
	}
	return v.Spec.Conversion != nil && v.Spec.Conversion.Strategy == "Webhook"
}

func (o *Object) encode(obj map[string]any) error {
	raw, err := marshalJSON(obj)
	if err != nil {
		return fmt.Errorf("cannot encode: %w", err)
	}
	o.setJSON(raw)
	return nil
}

// decodeMap decodes a JSON object keeping numbers as json.Number, so that
// re-encoding reproduces them exactly.
func decodeMap(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("cannot decode: %w", err)
	}
	if m == nil {
		return nil, fmt.Errorf("document is not an object")
	}
	return m, nil
}

// asMap returns v as a map, or a new empty map when v is not one.
func asMap(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

// mergeMetadata sets labels and annotations over those of meta and returns
// meta. Existing values that are not string maps are replaced.
func mergeMetadata(meta map[string]any, labels, annotations map[string]string) map[string]any {
	merge := func(key string, add map[string]string) {
		if len(add) == 0 {
			return
		}
		m, ok := meta[key].(map[string]any)
		if !ok {
			m = map[string]any{}
		}
		for k, v := range add {
			m[k] = v
		}
		meta[key] = m
	}
	merge("labels", labels)
	merge("annotations", annotations)
	return meta
}

// spliceMetadata is withMetadata without a copy of the document: when raw
// is compact JSON whose top-level keys are sorted, unique and spelled as
// marshalJSON spells them, and it has a metadata object, it returns the
// splice that replaces that object with the merged one, which is byte for
// byte what withMetadata returns. It returns nil and no error for any other
// document, which withMetadata then rebuilds (and reports, if it is not
// JSON). A package's documents come from xpkg as sigs.k8s.io/yaml's
// YAMLToJSON wrote them, encoding/json's sorted compact form, so a
// provider's CRDs are spliced and share the package's bytes.
func spliceMetadata(raw []byte, labels, annotations map[string]string) (*splice, error) {
	at, end, ok := topLevelValue(raw, "metadata")
	if !ok || raw[at] != '{' {
		return nil, nil
	}
	meta, err := decodeMap(raw[at:end])
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	mb, err := marshalJSON(mergeMetadata(meta, labels, annotations))
	if err != nil {
		return nil, fmt.Errorf("metadata: cannot encode: %w", err)
	}
	return &splice{src: raw, at: at, end: end, meta: bytes.Clone(mb)}, nil
}

// topLevelValue returns the bytes raw[at:end] of the value of key in raw,
// a JSON object, when raw is written the way withMetadata writes one: no
// space between tokens at the top level, keys sorted and unique, each key
// as marshalJSON encodes it. ok is false otherwise, or when key is absent.
func topLevelValue(raw []byte, key string) (at, end int, ok bool) {
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return 0, 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, false
	}
	pos, prev, found := 1, "", false
	for dec.More() {
		t, err := dec.Token()
		k, isKey := t.(string)
		if err != nil || !isKey || (pos > 1 && k <= prev) {
			return 0, 0, false
		}
		kb, err := marshalJSON(k)
		off := int(dec.InputOffset())
		if err != nil || off != pos+len(kb) || !bytes.Equal(raw[pos:off], kb) || off >= len(raw) || raw[off] != ':' {
			return 0, 0, false
		}
		var skip skipValue
		if err := dec.Decode(&skip); err != nil {
			return 0, 0, false
		}
		vEnd := int(dec.InputOffset())
		// The value starts right after the colon: the decoder skips
		// leading space, which this form does not allow.
		if vEnd <= off+1 || isSpace(raw[off+1]) || isSpace(raw[vEnd-1]) {
			return 0, 0, false
		}
		if k == key {
			at, end, found = off+1, vEnd, true
		}
		if vEnd >= len(raw) || (raw[vEnd] != ',' && raw[vEnd] != '}') {
			return 0, 0, false
		}
		pos, prev = vEnd+1, k
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') || int(dec.InputOffset()) != len(raw) || pos != len(raw) {
		return 0, 0, false
	}
	return at, end, found
}

// skipValue decodes any JSON value into nothing, without a copy.
type skipValue struct{}

// UnmarshalJSON implements json.Unmarshaler.
func (*skipValue) UnmarshalJSON([]byte) error { return nil }

// isSpace reports whether c is JSON white space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// withMetadata returns raw, a compact JSON object with sorted keys, with
// labels and annotations merged into its metadata. Only the top level and
// the metadata are decoded; the other values are copied as they are.
func withMetadata(raw []byte, labels, annotations map[string]string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("cannot decode: %w", err)
	}
	meta := map[string]any{}
	if m, ok := top["metadata"]; ok {
		d, err := decodeMap(m)
		if err != nil {
			return nil, fmt.Errorf("metadata: %w", err)
		}
		meta = d
	}
	mb, err := marshalJSON(mergeMetadata(meta, labels, annotations))
	if err != nil {
		return nil, fmt.Errorf("metadata: cannot encode: %w", err)
	}
	top["metadata"] = mb

	keys := slices.Sorted(maps.Keys(top))
	size := 2
	for _, k := range keys {
		size += len(k) + len(top[k]) + 4
	}
	var b bytes.Buffer
	b.Grow(size)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := marshalJSON(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(top[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
