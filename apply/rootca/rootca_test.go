package rootca_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/rootca"
	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

var nsSeq atomic.Int64

// TestAuthority: the root CA on the test control plane's API server, in a
// namespace of each case's own.
func TestAuthority(t *testing.T) {
	env := envtest.Shared(t)
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	existing, err := certs.New(now)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(ns string, crt, key []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: certs.RootCASecretName},
			Data: map[string][]byte{certs.TLSCertKey: crt, certs.TLSKeyKey: key}}
	}
	cases := map[string]struct {
		reason string
		// before is the Secret there before Load, if any.
		before func(ns string) *corev1.Secret
		// between is the Secret someone else creates between Load and
		// Ensure, if any.
		between func(ns string) *corev1.Secret
		dryRun  bool
		// loadErr and ensureErr are parts of the errors, "" for none.
		loadErr, ensureErr string
		// created is how often OnCreate was called; stored whether the
		// Secret holds the CA Load returned afterwards.
		created int
		stored  bool
	}{
		"Generated": {
			reason:  "a missing CA is generated, and Ensure creates its Secret once",
			created: 1, stored: true,
		},
		"Existing": {
			reason: "an existing CA is read, never replaced",
			before: func(ns string) *corev1.Secret { return secret(ns, existing.CertPEM(), existing.KeyPEM()) },
			stored: true,
		},
		"Broken": {
			reason:  "a Secret without a usable CA fails Load, naming it",
			before:  func(ns string) *corev1.Secret { return secret(ns, []byte("not a certificate"), existing.KeyPEM()) },
			loadErr: "does not hold a usable CA",
		},
		"DryRun": {
			reason: "a dry run generates the CA but creates no Secret",
			dryRun: true,
		},
		"CreatedMeanwhile": {
			reason:    "a CA someone else created after Load fails Ensure: this one's certificates would not verify",
			between:   func(ns string) *corev1.Secret { return secret(ns, existing.CertPEM(), existing.KeyPEM()) },
			ensureErr: "was created by someone else",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ns := fmt.Sprintf("rootca-%d", nsSeq.Add(1))
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			if tc.before != nil {
				if err := env.Client.Create(ctx, tc.before(ns)); err != nil {
					t.Fatal(err)
				}
			}
			created := 0
			a := rootca.New(env.Client, ns, now, rootca.WithDryRun(tc.dryRun), rootca.WithFieldManager("lockstep"), rootca.OnCreate(func() { created++ }))
			if a.Known() != nil {
				t.Errorf("%s: Known before Load is not nil", tc.reason)
			}
			ca, err := a.Load(ctx)
			if !errorHas(err, tc.loadErr) {
				t.Fatalf("%s: Load error %v, want one with %q", tc.reason, err, tc.loadErr)
			}
			if err != nil {
				return
			}
			if a.Known() != ca {
				t.Errorf("%s: Known after Load is not the CA Load returned", tc.reason)
			}
			if tc.between != nil {
				if err := env.Client.Create(ctx, tc.between(ns)); err != nil {
					t.Fatal(err)
				}
			}
			err = a.Ensure(ctx)
			if !errorHas(err, tc.ensureErr) {
				t.Fatalf("%s: Ensure error %v, want one with %q", tc.reason, err, tc.ensureErr)
			}
			if err := a.Ensure(ctx); err != nil && tc.ensureErr == "" {
				t.Errorf("%s: a second Ensure: %v", tc.reason, err)
			}
			if created != tc.created {
				t.Errorf("%s: OnCreate called %d times, want %d", tc.reason, created, tc.created)
			}
			got := &corev1.Secret{}
			err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: certs.RootCASecretName}, got)
			switch {
			case tc.stored && err != nil:
				t.Errorf("%s: the CA Secret: %v", tc.reason, err)
			case tc.stored && !bytes.Equal(got.Data[certs.TLSCertKey], ca.CertPEM()):
				t.Errorf("%s: the CA Secret does not hold the CA Load returned", tc.reason)
			case tc.dryRun && !apierrors.IsNotFound(err):
				t.Errorf("%s: the dry run left a CA Secret (error %v)", tc.reason, err)
			}
		})
	}
}

// TestData: a live Secret that holds a valid certificate for the request
// is kept as it is; one that does not gets a new certificate signed by the
// root CA.
func TestData(t *testing.T) {
	env := envtest.Shared(t)
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	ns := fmt.Sprintf("rootca-%d", nsSeq.Add(1))
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	a := rootca.New(env.Client, ns, now, rootca.WithDryRun(true))
	req := &certs.TLSRequest{Usage: certs.TLSServer, DNSNames: []string{"provider-nop", "provider-nop." + ns}, CASecretName: certs.RootCASecretName}
	issued, err := a.Data(ctx, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !certs.Valid(issued, req, now, a.Known()) {
		t.Fatal("the certificate Data issued is not valid for its request and the root CA")
	}
	kept, err := a.Data(ctx, req, issued)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept[certs.TLSCertKey], issued[certs.TLSCertKey]) {
		t.Error("a valid live certificate was replaced")
	}
	other := &certs.TLSRequest{Usage: certs.TLSServer, DNSNames: []string{"function-demo"}, CASecretName: certs.RootCASecretName}
	renewed, err := a.Data(ctx, other, issued)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(renewed[certs.TLSCertKey], issued[certs.TLSCertKey]) || !certs.Valid(renewed, other, now, a.Known()) {
		t.Error("a live certificate for other DNS names was kept, or its replacement is not valid")
	}
}

func errorHas(err error, part string) bool {
	if part == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), part)
}
