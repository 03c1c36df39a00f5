package bundle_test

import (
	"context"
	"testing"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/sources/bundle"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// options reaches reg over plain HTTP with fast retries.
func options(reg *registry.Registry) oci.Options {
	return oci.Options{
		Transport:          reg.Transport(),
		InsecureRegistries: []string{reg.Host},
		Retry:              remote.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 3},
	}
}

// locked returns "host/lockstep-examples/pkg:version@digest", the way a
// lock pins the example package.
func locked(t *testing.T, reg *registry.Registry, pkg, version string) string {
	t.Helper()
	ref := reg.Ref(t, "lockstep-examples/"+pkg+":"+version)
	desc, err := remote.Head(ref, reg.RemoteOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	return ref.Name() + "@" + desc.Digest.String()
}

// TestWriteLoadPush carries three packages from one registry to a cache
// and to a mirror: one signed in cosign's classic layout, one signed as an
// OCI 1.1 referrer, and one with only an attestation that an ImageConfig
// requires a signature for. Each entry of the written bundle records what
// it carries, the bundle reads back the same, a cache loaded from it holds
// every package and its signatures, and the mirror answers with every
// package's digest at the locked tag and with the signatures where they
// were found.
func TestWriteLoadPush(t *testing.T) {
	ctx := context.Background()
	reg := registry.New(t)
	reg.PushExamples(t, "../..")
	key := registry.NewSigningKey(t)
	reg.Sign(t, "lockstep-examples/configuration-demo:v0.1.0", key)
	reg.SignReferrer(t, "lockstep-examples/provider-demo:v0.2.0", key)
	reg.Attest(t, "lockstep-examples/function-demo:v0.2.0", "https://spdx.dev/Document", key.Signer, nil)
	refs := []string{
		locked(t, reg, "configuration-demo", "v0.1.0"),
		locked(t, reg, "provider-demo", "v0.2.0"),
		locked(t, reg, "function-demo", "v0.2.0"),
	}
	signed := pkgv1beta1.ImageConfig{}
	signed.Name = "signed"
	signed.Spec.MatchImages = []pkgv1beta1.ImageMatch{{Type: pkgv1beta1.Prefix, Prefix: reg.Host + "/lockstep-examples/function-demo"}}
	signed.Spec.Verification = &pkgv1beta1.ImageVerification{Provider: pkgv1beta1.ImageVerificationProviderCosign, Cosign: &pkgv1beta1.CosignVerificationConfig{}}
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	client, err := oci.NewClient(options(reg), cache, []pkgv1beta1.ImageConfig{signed})
	if err != nil {
		t.Fatal(err)
	}

	path := t.TempDir() + "/prod.bundle.tar"
	entries, err := bundle.Write(ctx, client, refs, path)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	type carried struct {
		Ref               string
		Signatures        int
		Signed            bool
		RequiresSignature string
	}
	summary := func(es []bundle.Entry) []carried {
		var out []carried
		for _, e := range es {
			if e.Digest.String() != e.Ref[len(e.Ref)-len(e.Digest.String()):] {
				t.Errorf("entry %s has digest %s", e.Ref, e.Digest)
			}
			out = append(out, carried{Ref: e.Ref, Signatures: len(e.Signatures), Signed: e.Signed, RequiresSignature: e.RequiresSignature})
		}
		return out
	}
	want := []carried{
		{Ref: refs[0], Signatures: 1, Signed: true},
		{Ref: refs[1], Signatures: 1, Signed: true},
		{Ref: refs[2], Signatures: 1, Signed: false, RequiresSignature: "signed"},
	}
	if diff := cmp.Diff(want, summary(entries)); diff != "" {
		t.Errorf("Write: the entries do not say what the bundle carries (-want +got):\n%s", diff)
	}

	b, err := bundle.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer b.Close()
	// What Open reads is what the index holds: no Signed or
	// RequiresSignature, which Write alone knows.
	for i := range want {
		want[i].Signed, want[i].RequiresSignature = false, ""
	}
	if diff := cmp.Diff(want, summary(b.Entries)); diff != "" {
		t.Errorf("Open: the entries differ from what was written (-want +got):\n%s", diff)
	}
	for i := range b.Entries {
		if diff := cmp.Diff(entries[i].Signatures, b.Entries[i].Signatures); diff != "" {
			t.Errorf("Open: signatures of %s (-written +read):\n%s", b.Entries[i].Ref, diff)
		}
	}

	loaded, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Load(loaded); err != nil {
		t.Fatalf("Load: %v", err)
	}
	for _, e := range b.Entries {
		if _, err := loaded.Package(e.Digest); err != nil {
			t.Errorf("the loaded cache does not hold %s: %v", e.Ref, err)
		}
	}

	mirror := registry.New(t)
	pushed, err := b.Push(ctx, options(mirror), mirror.Host+"/mirror/")
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	wantPushed := []string{
		mirror.Host + "/mirror/lockstep-examples/configuration-demo:v0.1.0",
		mirror.Host + "/mirror/lockstep-examples/provider-demo:v0.2.0",
		mirror.Host + "/mirror/lockstep-examples/function-demo:v0.2.0",
	}
	if diff := cmp.Diff(wantPushed, pushed); diff != "" {
		t.Errorf("Push: where the packages went (-want +got):\n%s", diff)
	}
	for i, p := range wantPushed {
		desc, err := remote.Head(mirror.Ref(t, p[len(mirror.Host)+1:]), mirror.RemoteOptions()...)
		if err != nil || desc.Digest != entries[i].Digest {
			t.Errorf("the mirror answers %s with %v (%v), want %s", p, desc, err, entries[i].Digest)
		}
	}
	sig := "mirror/lockstep-examples/configuration-demo:" + entries[0].Digest.Algorithm + "-" + entries[0].Digest.Hex + ".sig"
	if _, err := remote.Head(mirror.Ref(t, sig), mirror.RemoteOptions()...); err != nil {
		t.Errorf("the mirror has no classic signature image %s: %v", sig, err)
	}
}

// TestWriteRefusesUnpinned checks that a package not pinned by digest is
// refused, naming it, and that no bundle is left behind.
func TestWriteRefusesUnpinned(t *testing.T) {
	reg := registry.New(t)
	reg.PushExamples(t, "../..")
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	client, err := oci.NewClient(options(reg), cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/b.tar"
	ref := reg.Host + "/lockstep-examples/provider-demo:v0.1.0"
	_, err = bundle.Write(context.Background(), client, []string{ref}, path)
	if want := "bundle: package " + ref + ": not pinned by digest"; err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	if _, err := bundle.Open(path); err == nil {
		t.Error("a failed Write left a bundle")
	}
}
