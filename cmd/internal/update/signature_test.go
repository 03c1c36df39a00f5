package update_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestPollVerifiesSignatures: with an ImageConfig that requires a cosign
// signature, a re-pushed tag whose new content is unsigned is not proposed
// (the poll fails naming the package, the ImageConfig and the authority,
// and no branch is written); once signed, the proposed lock records how
// the new pin was verified, as `lockstep lock` does.
func TestPollVerifiesSignatures(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	release := registry.NewSigningKey(t)
	e.pushExample("provider-demo", "v0.1.0", "v0.1.0")
	e.reg.Sign(t, "lockstep-examples/provider-demo:v0.1.0", release)
	e.commitLocked(map[string]string{
		"provider.yaml": declaration("Provider", "provider-demo", "provider-demo:v0.1.0", "Always"),
		"signed.yaml": `apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: signed
spec:
  matchImages:
  - prefix: ` + exampleSource + `
  verification:
    provider: Cosign
    cosign:
      authorities:
      - name: release-key
        key: {secretRef: {name: release, key: cosign.pub}}
`,
	})
	opts := e.options()
	opts.VerificationKeys = func(_ context.Context, secret, _ string) ([]byte, error) {
		if secret != "release" {
			return nil, fmt.Errorf("Secret %s not found", secret)
		}
		return release.PublicPEM, nil
	}
	u := e.updater(opts)

	moved := e.pushExample("provider-demo", "v0.2.0", "v0.1.0")
	_, err := u.Poll(ctx)
	for _, want := range []string{"the updated lock does not verify", "provider-demo@" + moved, "ImageConfig signed", `authority "release-key"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("poll of an unsigned re-push: got %v, want an error containing %q", err, want)
		}
	}
	if got := e.remote.Ref(t, "refs/heads/lockstep/updates"); !got.IsZero() {
		t.Fatalf("an unsigned update was proposed on the update branch")
	}

	sig := e.reg.Sign(t, "lockstep-examples/provider-demo:v0.1.0", release)
	if _, err := u.Poll(ctx); err != nil {
		t.Fatalf("poll once the re-push is signed: %v", err)
	}
	p := entry(t, e.lockAt(e.remote.Ref(t, "refs/heads/lockstep/updates")), "provider-demo")
	want := &lockfile.Verification{ImageConfig: "signed", Authority: "release-key", Signature: sig.String(), Layout: "cosign-tag"}
	if diff := cmp.Diff(want, p.Verification); diff != "" || p.Digest != moved {
		t.Errorf("proposed provider-demo %s, verification -want +got:\n%s", p.Digest, diff)
	}
}
