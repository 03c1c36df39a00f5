package render

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// TestSpliceMetadata: a document in encoding/json's sorted compact form is
// relabelled as a splice over its own bytes, byte for byte what withMetadata
// writes; any other document is left to withMetadata.
func TestSpliceMetadata(t *testing.T) {
	labels, annotations := map[string]string{"b": "two", "c": "3"}, map[string]string{"note": "n"}
	cases := map[string]struct {
		reason  string
		raw     string
		spliced bool
	}{
		"SortedCompact": {
			reason:  "What xpkg parses a package document into is spliced.",
			raw:     `{"apiVersion":"v1","kind":"X","metadata":{"generation":12345678901234567,"labels":{"a":"1","b":"2"},"name":"x"},"spec":{"n":1.50,"s":"\u003ctag\u003e"}}`,
			spliced: true,
		},
		"MetadataLast": {
			reason:  "A number as the last value ends where the object does.",
			raw:     `{"apiVersion":"v1","kind":"X","metadata":{"name":"x"},"z":12}`,
			spliced: true,
		},
		"SpaceInsideValue": {
			reason:  "Space inside a value is kept by both, so it does not matter.",
			raw:     `{"apiVersion":"v1","kind":"X","metadata":{"name":"x"},"spec":{"a": [1, 2]}}`,
			spliced: true,
		},
		"Unsorted": {
			reason: "withMetadata sorts the keys, so a document with unsorted ones is rebuilt.",
			raw:    `{"kind":"X","apiVersion":"v1","metadata":{"name":"x"}}`,
		},
		"Duplicate": {
			reason: "withMetadata keeps the last of duplicate keys.",
			raw:    `{"apiVersion":"v1","kind":"X","metadata":{"name":"x"},"metadata":{"name":"y"}}`,
		},
		"SpaceAtTop": {
			reason: "withMetadata drops space between the top-level tokens.",
			raw:    `{"apiVersion": "v1","kind":"X","metadata":{"name":"x"}}`,
		},
		"SpaceBeforeEnd": {
			reason: "withMetadata drops space before the closing brace.",
			raw:    `{"apiVersion":"v1","kind":"X","metadata":{"name":"x"} }`,
		},
		"EscapedKey": {
			reason: "withMetadata writes keys without HTML escapes.",
			raw:    `{"a\u003cb":1,"apiVersion":"v1","kind":"X","metadata":{"name":"x"}}`,
		},
		"NoMetadata": {
			reason: "withMetadata adds metadata where it sorts.",
			raw:    `{"apiVersion":"v1","kind":"X","spec":{}}`,
		},
		"MetadataNotObject": {
			reason: "withMetadata reports metadata that is not an object.",
			raw:    `{"apiVersion":"v1","kind":"X","metadata":"x"}`,
		},
		"NotJSON": {
			reason: "withMetadata reports what is not JSON.",
			raw:    `{"apiVersion":"v1",`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sp, err := spliceMetadata([]byte(tc.raw), labels, annotations)
			if err != nil {
				t.Fatalf("%s\nspliceMetadata: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.spliced, sp != nil); diff != "" {
				t.Errorf("%s\nspliced (-want +got):\n%s", tc.reason, diff)
			}
			if sp == nil {
				return
			}
			want, err := withMetadata([]byte(tc.raw), labels, annotations)
			if err != nil {
				t.Fatalf("withMetadata: %v", err)
			}
			o := &Object{splice: sp}
			if diff := cmp.Diff(string(want), string(o.JSON())); diff != "" {
				t.Errorf("%s\nthe splice is not what withMetadata writes (-want +got):\n%s", tc.reason, diff)
			}
			if o.Size() != len(want) {
				t.Errorf("%s\nSize() = %d, want %d", tc.reason, o.Size(), len(want))
			}
		})
	}
}

// TestRenderSharesPackageBytes: the rendered payload of a real provider is
// what withMetadata would write, and holds only its new metadata, sharing
// the rest with the parsed package, so that the rendered output and the
// package are not two copies of the same JSON at once
// (docs/design/apply.md#memory).
func TestRenderSharesPackageBytes(t *testing.T) {
	const source, tag = "xpkg.upbound.io/upbound/provider-aws-s3", "v2.6.0"
	p := pkg(t, crossplane.KindProvider, "provider-aws-s3", source, tag, upstream(t, "provider-aws-s3-v2.6.0"),
		decl(t, crossplane.KindProvider, "provider-aws-s3", source, tag, nil))
	out, err := Render(Input{Namespace: "crossplane-system", Instance: "test", Packages: []Package{p}})
	if err != nil {
		t.Fatal(err)
	}
	src := map[string][]byte{}
	for _, o := range p.Contents.Objects {
		src[o.Kind+"/"+o.Name] = o.Raw
	}
	payload := out.Packages[0].Revision.Payload
	var own, total int
	for _, o := range payload {
		raw, ok := src[o.Kind+"/"+o.Name]
		if !ok {
			t.Fatalf("%s: not in the package", o)
		}
		u, err := o.Unstructured()
		if err != nil {
			t.Fatal(err)
		}
		// Merging the rendered labels and annotations again over the
		// package's own is what render merged.
		want, err := withMetadata(raw, u.GetLabels(), u.GetAnnotations())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(o.JSON())); diff != "" {
			t.Errorf("%s: rendered JSON is not the package's with its labels (-want +got):\n%s", o, diff)
		}
		own, total = own+o.ownBytes(), total+len(o.JSON())
	}
	var size int
	for _, o := range out.Objects() {
		size += len(o.JSON())
	}
	if got := out.Size(); got != int64(size) {
		t.Errorf("Output.Size() = %d, want the %d bytes of its objects' JSON", got, size)
	}
	if len(payload) == 0 || own*10 > total {
		t.Errorf("%d payload objects hold %d of their %d bytes of JSON: the rendered payload copies the package's documents instead of sharing them", len(payload), own, total)
	}
}
