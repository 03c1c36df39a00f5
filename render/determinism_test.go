package render

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// renderBytes renders in and returns its YAML stream.
func renderBytes(t *testing.T, in Input) []byte {
	t.Helper()
	out, err := Render(in)
	if err != nil {
		t.Fatalf("Render(...): %v", err)
	}
	var b bytes.Buffer
	if err := out.WriteYAML(&b); err != nil {
		t.Fatalf("WriteYAML(...): %v", err)
	}
	return b.Bytes()
}

// shuffled returns a copy of in whose packages, runtime configs, image
// configs, allowed permissions and every package's payload documents are in
// a random order, as another directory walk or declaration order would give.
// The contents are copied, not modified.
func shuffled(in Input, r *rand.Rand) Input {
	out := in
	out.Packages = append([]Package(nil), in.Packages...)
	r.Shuffle(len(out.Packages), func(i, j int) { out.Packages[i], out.Packages[j] = out.Packages[j], out.Packages[i] })
	for i := range out.Packages {
		c := *out.Packages[i].Contents
		c.Objects = append([]xpkg.Object(nil), c.Objects...)
		r.Shuffle(len(c.Objects), func(i, j int) { c.Objects[i], c.Objects[j] = c.Objects[j], c.Objects[i] })
		out.Packages[i].Contents = &c
	}
	out.RuntimeConfigs = append(out.RuntimeConfigs[:0:0], in.RuntimeConfigs...)
	r.Shuffle(len(out.RuntimeConfigs), func(i, j int) {
		out.RuntimeConfigs[i], out.RuntimeConfigs[j] = out.RuntimeConfigs[j], out.RuntimeConfigs[i]
	})
	out.ImageConfigs = append(out.ImageConfigs[:0:0], in.ImageConfigs...)
	r.Shuffle(len(out.ImageConfigs), func(i, j int) { out.ImageConfigs[i], out.ImageConfigs[j] = out.ImageConfigs[j], out.ImageConfigs[i] })
	out.AllowedProviderPermissions = append(out.AllowedProviderPermissions[:0:0], in.AllowedProviderPermissions...)
	r.Shuffle(len(out.AllowedProviderPermissions), func(i, j int) {
		out.AllowedProviderPermissions[i], out.AllowedProviderPermissions[j] = out.AllowedProviderPermissions[j], out.AllowedProviderPermissions[i]
	})
	return out
}

// contentsDigest hashes what Render must not modify: every package's meta
// labels and annotations and every payload document.
func contentsDigest(in Input) [32]byte {
	h := sha256.New()
	for _, p := range in.Packages {
		fmt.Fprintf(h, "%s/%s %v %v\n", p.Kind, p.Name, p.Contents.Meta.Labels, p.Contents.Meta.Annotations)
		for _, o := range p.Contents.Objects {
			h.Write(o.Raw)
		}
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

// TestDeterministic renders every case twice and from five shuffled input
// orders, and requires identical bytes each time; it also requires that
// Render leaves the package contents untouched.
func TestDeterministic(t *testing.T) {
	for _, c := range renderCases() {
		t.Run(c.name, func(t *testing.T) {
			in := caseInput(t, c)
			before := contentsDigest(in)
			want := renderBytes(t, in)
			if got := renderBytes(t, in); !bytes.Equal(got, want) {
				t.Errorf("%s\nRender(...) twice with the same input gave different bytes", c.reason)
			}
			if contentsDigest(in) != before {
				t.Errorf("%s\nRender(...) modified the package contents of its input", c.reason)
			}
			for seed := uint64(1); seed <= 5; seed++ {
				got := renderBytes(t, shuffled(in, rand.New(rand.NewPCG(seed, seed*7919))))
				if !bytes.Equal(got, want) {
					t.Errorf("%s\nRender(...) of the input shuffled with seed %d gave different bytes", c.reason, seed)
				}
			}
		})
	}
}
