package agent_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestAgentVerifiesSignatures: with an ImageConfig that requires a cosign
// signature by the key in the Secret "release" of the Crossplane namespace,
// the agent installs a package signed with that key, refuses an unsigned
// one (SignatureRefused, the signed one stays installed), and verifies
// again on every reconcile of an unchanged commit, from a warm cache: a
// package re-signed with another key is refused and nothing is written.
func TestAgentVerifiesSignatures(t *testing.T) {
	f := newFixture(t, "agent-sig")
	release, other := registry.NewSigningKey(t), registry.NewSigningKey(t)
	f.write(t, "signed.yaml", `apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: signed
spec:
  matchImages:
  - prefix: lockstep.example/lockstep-examples/
  verification:
    provider: Cosign
    cosign:
      authorities:
      - name: release-key
        key:
          secretRef: {name: release, key: cosign.pub}
`)
	provider := func(version string) string {
		f.write(t, "provider.yaml", `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-demo
spec:
  package: lockstep.example/lockstep-examples/provider-demo:`+version+"\n")
		f.lock(t)
		f.commit(t, "provider-demo "+version)
		l, err := lockfile.ReadFile(filepath.Join(f.dir, lockfile.FileName))
		if err != nil {
			t.Fatal(err)
		}
		return l.Packages[0].Digest
	}
	installed := func() string {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: "Provider"})
		if err := f.env.Client.Get(context.Background(), client.ObjectKey{Name: "provider-demo"}, u); err != nil {
			t.Fatalf("get Provider provider-demo: %v", err)
		}
		p, _, _ := unstructured.NestedString(u.Object, "spec", "package")
		return p
	}
	var rec *agent.Reconciler
	refused := func(step string, want ...string) *agent.Outcome {
		t.Helper()
		out, err := rec.Reconcile(context.Background())
		var se *agent.StepError
		if !errors.As(err, &se) || se.Reason != agent.ReasonSignatureRefused {
			t.Fatalf("%s: reconcile: got %v, want a %s step error", step, err, agent.ReasonSignatureRefused)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", step, err, w)
			}
		}
		return out
	}
	v1 := provider("v0.1.0")
	f.reg.Sign(t, "lockstep-examples/provider-demo:v0.1.0", release)
	rec = f.reconciler(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "release", Namespace: f.ns}, Data: map[string][]byte{"cosign.pub": release.PublicPEM}}
	if err := f.env.Client.Create(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Reconcile(context.Background()); err != nil {
		t.Fatalf("reconcile of a signed package: %v", err)
	}
	if got := installed(); !strings.HasSuffix(got, v1) {
		t.Fatalf("installed %s, want the signed digest %s", got, v1)
	}

	// Unsigned: refused, the signed one stays installed.
	provider("v0.2.0")
	out := refused("unsigned", "Provider provider-demo", "ImageConfig signed requires a cosign signature", `authority "release-key"`, "no signature image")
	if got := installed(); !strings.HasSuffix(got, v1) {
		t.Errorf("after an unsigned commit, installed %s, want %s kept", got, v1)
	}
	if out.Reapplied == "" {
		t.Errorf("unsigned: the last good commit was not re-applied")
	}

	// The last good commit, re-applied while the new one is refused, is
	// verified again before every re-apply: once its package is re-signed
	// with another key it is no longer re-applied.
	f.reg.Sign(t, "lockstep-examples/provider-demo:v0.1.0", other)
	out = refused("unsigned, last good re-signed", "no signature image")
	if out.Reapplied != "" {
		t.Errorf("the last good commit was re-applied although its package no longer verifies")
	}
	f.reg.Sign(t, "lockstep-examples/provider-demo:v0.1.0", release)

	// Signed: installed. Then re-signed with another key: the unchanged
	// commit, whose packages are cached, is verified again and refused.
	v2sig := "lockstep-examples/provider-demo:v0.2.0"
	f.reg.Sign(t, v2sig, release)
	if _, err := rec.Reconcile(context.Background()); err != nil {
		t.Fatalf("reconcile once v0.2.0 is signed: %v", err)
	}
	f.reg.Sign(t, v2sig, other)
	refused("re-signed", `authority "release-key" (key release/cosign.pub): no signature verifies with this key`)
}
