package lockfile

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

const (
	providerDemo = "lockstep.example/lockstep-examples/provider-demo"
	configDemo   = "lockstep.example/lockstep-examples/configuration-demo"
)

// examplesLocked pushes the example packages to a new in-process registry
// (with setup run on it after the push) and locks configuration-demo
// v0.1.0 from it: configuration-demo, function-demo v0.2.0 and
// provider-demo v0.2.0. It returns the registry, the declarations, the
// lock and the example digests by "pkg:version".
func examplesLocked(t *testing.T, setup func(t *testing.T, r *registry.Registry, digests map[string]string)) (*registry.Registry, *declarations.Set, *Lock, map[string]string) {
	t.Helper()
	r := registry.New(t)
	digests := map[string]string{}
	for _, pkg := range registry.ExamplePackages {
		for _, v := range registry.ExampleVersions {
			digests[pkg+":"+v] = pushImage(t, r, "lockstep-examples/"+pkg+":"+v, buildExample(t, pkg, v))
		}
	}
	set := declare(t, map[string]string{
		"platform.yaml":     decl("Configuration", "configuration-demo", configDemo+":v0.1.0"),
		"imageconfigs.yaml": rewriteTo(r, "lockstep.example"),
	})
	res, err := resolve(t, ociClient(t, r, t.TempDir(), set), set, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Lock.Entry(providerDemo); got == nil || got.Digest != digests["provider-demo:v0.2.0"] {
		t.Fatalf("the examples lock provider-demo at %v, want v0.2.0 %s; update the test", got, digests["provider-demo:v0.2.0"])
	}
	if setup != nil {
		setup(t, r, digests)
	}
	return r, set, res.Lock, digests
}

func buildExample(t *testing.T, pkg, version string) v1.Image {
	t.Helper()
	img, err := xpkg.Build(filepath.Join("..", "examples", "packages", pkg, version))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// edited returns a deep copy of l with edit applied to the entry of
// source, as a hand edit of lockstep.lock would change it.
func edited(t *testing.T, l *Lock, source string, edit func(e *Entry)) *Lock {
	t.Helper()
	b, err := Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(FileName, b)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(c.Entry(source))
	}
	return c
}

// TestKeptPinContent: lock never rewrites what the previous lock records
// about a pin it keeps. A digest swapped by hand for
// another version's, or a payload summary edited by hand, is refused with
// an error naming the lock, the package and the field, unless that
// package is re-resolved with --update.
func TestKeptPinContent(t *testing.T) {
	r, set, first, digests := examplesLocked(t, nil)
	cases := []struct {
		name   string
		reason string
		edit   func(e *Entry)
		source string
		opts   Options
		// wantErr are substrings of the error; none means success.
		wantErr []string
		// wantDigest is provider-demo's digest in the new lock.
		wantDigest string
	}{
		{
			name:       "Unchanged",
			reason:     "a lock that matches its packages is kept as it is",
			source:     providerDemo,
			wantDigest: digests["provider-demo:v0.2.0"],
		},
		{
			name:   "SwappedDigest",
			reason: "provider-demo v0.2.0's digest swapped for v0.1.0's: the kept pin's content disagrees with the lock, so lock refuses instead of recording v0.1.0's payload under v0.2.0",
			source: providerDemo,
			edit:   func(e *Entry) { e.Digest = digests["provider-demo:v0.1.0"] },
			wantErr: []string{
				"lockstep.lock: Provider lockstep-examples-provider-demo: digest " + digests["provider-demo:v0.1.0"] + " holds payload.layer sha256:",
				"but the lock records " + first.Entry(providerDemo).Payload.Layer,
				"(was the digest edited by hand?",
				"lockstep lock --update lockstep-examples-provider-demo",
			},
		},
		{
			name:    "EditedPayload",
			reason:  "a payload count edited by hand, digest kept, is refused naming the field",
			source:  providerDemo,
			edit:    func(e *Entry) { e.Payload.CRDs++ },
			wantErr: []string{"digest " + digests["provider-demo:v0.2.0"] + " holds payload.crds 4 but the lock records 5"},
		},
		{
			name:    "EditedDependencies",
			reason:  "a dependency constraint edited by hand on the declared package is refused naming dependencies",
			source:  configDemo,
			edit:    func(e *Entry) { e.Dependencies[0].Constraint = ">=v9.0.0" },
			wantErr: []string{"lockstep.lock: Configuration configuration-demo: digest " + digests["configuration-demo:v0.1.0"] + " holds dependencies ["},
		},
		{
			name:    "UpdateOther",
			reason:  "--update of another package keeps the swapped pin, so it is still refused",
			source:  providerDemo,
			edit:    func(e *Entry) { e.Digest = digests["provider-demo:v0.1.0"] },
			opts:    Options{UpdatePackages: []string{"lockstep-examples-function-demo"}},
			wantErr: []string{"Provider lockstep-examples-provider-demo: digest " + digests["provider-demo:v0.1.0"] + " holds payload.layer"},
		},
		{
			name:       "UpdateNamed",
			reason:     "--update of the package re-resolves its tag and records the content of the digest the tag points to",
			source:     providerDemo,
			edit:       func(e *Entry) { e.Digest = digests["provider-demo:v0.1.0"] },
			opts:       Options{UpdatePackages: []string{"lockstep-examples-provider-demo"}},
			wantDigest: digests["provider-demo:v0.2.0"],
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prev := edited(t, first, tc.source, tc.edit)
			res, err := resolve(t, ociClient(t, r, t.TempDir(), set), set, prev, tc.opts)
			if len(tc.wantErr) > 0 {
				var ce *ContentError
				if !errors.As(err, &ce) {
					t.Fatalf("%s\nResolve: got %v, want a *ContentError", tc.reason, err)
				}
				if missing := errorMissing(err, tc.wantErr); len(missing) > 0 {
					t.Errorf("%s\nResolve: the error\n%v\nlacks %q", tc.reason, err, missing)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nResolve: %v", tc.reason, err)
			}
			if diff := cmp.Diff(first, res.Lock); diff != "" {
				t.Errorf("%s\nlock: -want +got:\n%s", tc.reason, diff)
			}
			if got := res.Lock.Entry(providerDemo).Digest; got != tc.wantDigest {
				t.Errorf("%s\nprovider-demo pinned at %s, want %s", tc.reason, got, tc.wantDigest)
			}
		})
	}
}

// TestCheckContent: every field of Content is compared and named.
func TestCheckContent(t *testing.T) {
	e := Entry{Kind: "Provider", Name: "provider-nop", Digest: "sha256:aa",
		Dependencies:         []Dependency{{Kind: "Function", Source: "r.example/f", Constraint: ">=v1.0.0", ReplacedBy: "r.example/g"}},
		CrossplaneConstraint: ">=v1.14.0", Replaces: []string{"r.example/old"},
		Payload: Payload{Layer: "sha256:bb", CRDs: 1, Other: 1}}
	same := e.Content()
	cases := []struct {
		name   string
		reason string
		edit   func(c *Content)
		want   []FieldMismatch
	}{
		{name: "Same", reason: "the entry's own content agrees; ReplacedBy, chosen by resolution, is not content", edit: func(*Content) {}},
		{name: "Layer", reason: "another layer", edit: func(c *Content) { c.Payload.Layer = "sha256:cc" },
			want: []FieldMismatch{{Field: "payload.layer", Pulled: "sha256:cc", Recorded: "sha256:bb"}}},
		{name: "NoLayer", reason: "a package without a base layer", edit: func(c *Content) { c.Payload.Layer = "" },
			want: []FieldMismatch{{Field: "payload.layer", Pulled: "none", Recorded: "sha256:bb"}}},
		{name: "Counts", reason: "every count", edit: func(c *Content) { c.Payload = Payload{Layer: "sha256:bb", XRDs: 2, Compositions: 3} },
			want: []FieldMismatch{
				{Field: "payload.crds", Pulled: "0", Recorded: "1"},
				{Field: "payload.xrds", Pulled: "2", Recorded: "0"},
				{Field: "payload.compositions", Pulled: "3", Recorded: "0"},
				{Field: "payload.other", Pulled: "0", Recorded: "1"},
			}},
		{name: "Metadata", reason: "kind, dependencies, Crossplane constraint and replaces",
			edit: func(c *Content) {
				c.Kind, c.Dependencies, c.CrossplaneConstraint, c.Replaces = "Function", nil, "", []string{"r.example/other"}
			},
			want: []FieldMismatch{
				{Field: "kind", Pulled: "Function", Recorded: "Provider"},
				{Field: "dependencies", Pulled: "none", Recorded: `[Function r.example/f ">=v1.0.0"]`},
				{Field: "crossplaneConstraint", Pulled: "none", Recorded: `">=v1.14.0"`},
				{Field: "replaces", Pulled: "r.example/other", Recorded: "r.example/old"},
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := e.Content()
			c.Dependencies, c.Replaces = slices.Clone(same.Dependencies), slices.Clone(same.Replaces)
			tc.edit(&c)
			err := CheckContent("clusters/prod/lockstep.lock", &e, c)
			var got []FieldMismatch
			var ce *ContentError
			if errors.As(err, &ce) {
				got = ce.Fields
				if !strings.HasPrefix(err.Error(), "clusters/prod/lockstep.lock: Provider provider-nop: digest sha256:aa holds ") {
					t.Errorf("%s\nthe error %q does not name the lock, the package and the digest", tc.reason, err)
				}
			} else if err != nil {
				t.Fatalf("%s\nCheckContent: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nCheckContent: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// flattened returns an image of provider-demo v0.2.0's package.yaml layer
// without the io.crossplane.xpkg: base annotation (a package read from its
// flattened filesystem), followed by extra, a layer of other bits.
func flattened(t *testing.T, extra v1.Layer) v1.Image {
	t.Helper()
	layers, err := buildExample(t, "provider-demo", "v0.2.0").Layers()
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layers[0]}, mutate.Addendum{Layer: extra})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestFlattenedSwapSeen: two flattened images with the same package.yaml
// (so the same CRD names and counts) but other bits have no payload.layer;
// the lock records payload.layers, which covers every layer, so a digest
// swapped by hand from one to the other is refused without asking the
// registry for the tag. Before, lock and render accepted the swap and only
// lock --verify saw it.
func TestFlattenedSwapSeen(t *testing.T) {
	r := registry.New(t)
	layers := make([]v1.Layer, 2)
	digests := make([]string, 2)
	for i := range layers {
		l, err := random.Layer(64, types.DockerLayer)
		if err != nil {
			t.Fatal(err)
		}
		layers[i] = l
		digests[i] = pushImage(t, r, fmt.Sprintf("lockstep-examples/provider-demo:v0.%d.0", i+1), flattened(t, l))
	}
	set := declare(t, map[string]string{
		"providers.yaml":    decl("Provider", "provider-demo", providerDemo+":v0.2.0"),
		"imageconfigs.yaml": rewriteTo(r, "lockstep.example"),
	})
	res, err := resolve(t, ociClient(t, r, t.TempDir(), set), set, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := res.Lock.Entry(providerDemo)
	if e.Digest != digests[1] || e.Payload.Layer != "" {
		t.Fatalf("locked %s with payload.layer %q, want %s with none (a flattened image)", e.Digest, e.Payload.Layer, digests[1])
	}
	img := flattened(t, layers[1])
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if want := oci.LayersDigestOf(m.Layers).String(); e.Payload.Layers != want {
		t.Fatalf("payload.layers %q, want %q", e.Payload.Layers, want)
	}
	swapped := edited(t, res.Lock, providerDemo, func(e *Entry) { e.Digest = digests[0] })
	_, err = resolve(t, ociClient(t, r, t.TempDir(), set), set, swapped, Options{})
	var ce *ContentError
	if !errors.As(err, &ce) {
		t.Fatalf("Resolve of the swapped lock: %v, want a *ContentError", err)
	}
	if want := "digest " + digests[0] + " holds payload.layers sha256:"; !strings.Contains(err.Error(), want) {
		t.Errorf("the error %q lacks %q", err, want)
	}
}
