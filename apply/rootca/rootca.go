// Package rootca is Crossplane's root CA as one apply uses it: the Secret
// crossplane-root-ca in the Crossplane namespace, which signs the TLS
// certificates of every provider and function runtime
// (docs/crossplane-behaviour.md#tls). `crossplane core init` creates it
// when Crossplane is installed (crossplane/crossplane
// internal/initializer/tls.go); an apply on a cluster where it is missing
// generates it, and creates it before the first certificate it signed is
// written.
package rootca

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/render"
)

// Authority is the root CA of one apply, safe for concurrent use: it is
// read from the cluster at most once (Load), generated in memory when the
// Secret does not exist, and that Secret is created once (Ensure).
type Authority struct {
	client    client.Client
	namespace string
	now       time.Time
	o         options

	mu sync.Mutex
	// ca is the CA once loaded or generated; nil before.
	ca *certs.CA
	// pending is the Secret of a generated CA, until Ensure created it.
	pending *corev1.Secret
}

// Option configures an Authority.
type Option func(*options)

type options struct {
	dryRun  bool
	manager string
	created func()
}

// WithDryRun makes Ensure create nothing: certificates are still issued
// (in memory), as a dry run needs the Secrets' data to compare.
func WithDryRun(dryRun bool) Option { return func(o *options) { o.dryRun = dryRun } }

// WithFieldManager sets the field manager of the CA Secret's create.
func WithFieldManager(m string) Option { return func(o *options) { o.manager = m } }

// OnCreate calls f once Ensure created the CA Secret (an apply counts its
// writes with it).
func OnCreate(f func()) Option { return func(o *options) { o.created = f } }

// New returns the root CA of an apply at time now, read through c from the
// Crossplane namespace.
func New(c client.Client, namespace string, now time.Time, opts ...Option) *Authority {
	a := &Authority{client: c, namespace: namespace, now: now}
	for _, o := range opts {
		o(&a.o)
	}
	return a
}

// Known returns the CA if it was loaded or generated already, nil
// otherwise; it sends no request.
func (a *Authority) Known() *certs.CA {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ca
}

// Data returns the data of the TLS Secret req asks for (tls.crt, tls.key,
// ca.crt): live, the live Secret's data, when it holds a valid certificate
// for req (certs.Valid, against the CA when it is known), otherwise a new
// certificate signed by the root CA (Load). Its error is Load's or the
// signature's.
func (a *Authority) Data(ctx context.Context, req *certs.TLSRequest, live map[string][]byte) (map[string][]byte, error) {
	if certs.Valid(live, req, a.now, a.Known()) {
		return live, nil
	}
	ca, err := a.Load(ctx)
	if err != nil {
		return nil, err
	}
	return ca.Issue(req, a.now)
}

// Load reads crossplane-root-ca from the Crossplane namespace, or generates
// a new CA in memory when the Secret does not exist (Ensure creates it). A
// Secret that exists is never regenerated: when it does not hold a usable
// CA, Load fails and says so. Concurrent calls share one read.
func (a *Authority) Load(ctx context.Context) (*certs.CA, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ca != nil {
		return a.ca, nil
	}
	sec := &corev1.Secret{}
	err := a.client.Get(ctx, client.ObjectKey{Namespace: a.namespace, Name: certs.RootCASecretName}, sec)
	switch {
	case apierrors.IsNotFound(err):
		gen, err := certs.New(a.now)
		if err != nil {
			return nil, err
		}
		a.ca = gen
		a.pending = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: certs.RootCASecretName, Namespace: a.namespace,
				Labels: map[string]string{render.LabelManagedBy: render.ManagedByValue}},
			Data: map[string][]byte{certs.TLSCertKey: gen.CertPEM(), certs.TLSKeyKey: gen.KeyPEM()},
		}
		return a.ca, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read Secret %s/%s: %w", a.namespace, certs.RootCASecretName, err)
	}
	parsed, err := certs.Parse(sec.Data[certs.TLSCertKey], sec.Data[certs.TLSKeyKey])
	if err != nil {
		return nil, fmt.Errorf("Secret %s/%s does not hold a usable CA (lockstep never regenerates an existing CA; repair or delete it): %w", a.namespace, certs.RootCASecretName, err)
	}
	a.ca = parsed
	return a.ca, nil
}

// Ensure creates the CA Secret that Load generated, if any, and not in a
// dry run. It fails when the Secret appeared meanwhile (someone else
// created a CA: the certificates issued from this one would not verify
// against it), or when the create fails.
func (a *Authority) Ensure(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pending == nil || a.o.dryRun {
		return nil
	}
	if err := a.client.Create(ctx, a.pending, client.FieldOwner(a.o.manager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("Secret %s/%s was created by someone else during this apply; apply again", a.namespace, certs.RootCASecretName)
		}
		return fmt.Errorf("cannot create Secret %s/%s: %w", a.namespace, certs.RootCASecretName, err)
	}
	if a.o.created != nil {
		a.o.created()
	}
	a.pending = nil
	return nil
}
