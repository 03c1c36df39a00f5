// Package certs is the certificate authority lockstep keeps for package
// runtimes: the crossplane-root-ca key pair and the TLS certificates it
// signs for the Secrets a revision's runtime requests (webhook and
// function servers, their clients). It is pure: generating, parsing,
// issuing and validating; reading and writing the Secrets is
// apply's.
//
// It follows Crossplane's initializer (crossplane/crossplane
// internal/initializer/tls.go): the CA is stored in the Secret
// crossplane-root-ca under tls.crt and tls.key in the same format, so a
// Crossplane core reads a CA lockstep generated, and lockstep reads one
// Crossplane generated.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// Certificate parameters. Crossplane's generator (crossplane/crossplane
// internal/initializer/tls.go) signs 10-year certificates with RSA keys
// and stores the CA in crossplane-root-ca under tls.crt and tls.key (PKCS #1
// PEM); lockstep writes the CA in the same format so Crossplane's core reads
// it unchanged. The certificates of runtimes get ECDSA P-256 keys (PKCS #8
// PEM), which every TLS stack the runtimes use (Go's crypto/tls, gRPC)
// loads: an RSA 2048 key costs ~60 ms of CPU to generate, and a first
// install of 20 packages spent three quarters of its client CPU on them.
const (
	certValidity = 10 * 365 * 24 * time.Hour
	// certRenewBefore: a certificate that expires sooner is replaced.
	certRenewBefore = 30 * 24 * time.Hour
	rsaKeyBits      = 2048
	pemCertificate  = "CERTIFICATE"
	pemRSAKey       = "RSA PRIVATE KEY"
	pemPKCS8Key     = "PRIVATE KEY"
)

// CA is a certificate authority key pair: crossplane-root-ca.
type CA struct {
	cert *x509.Certificate
	// key is RSA when lockstep or Crossplane generated the CA; a CA
	// brought by the user may have any key crypto/x509 signs with.
	key     crypto.Signer
	certPEM []byte
	// keyPEM is the PKCS #1 PEM of a CA New generated, nil otherwise.
	keyPEM []byte
}

// CertPEM returns the CA certificate as PEM, what a Secret's tls.crt and
// every issued Secret's ca.crt hold.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// KeyPEM returns the PKCS #1 PEM of the key of a CA that New generated, to
// store under tls.key; nil for a CA that Parse read.
func (ca *CA) KeyPEM() []byte { return ca.keyPEM }

// Valid reports whether data holds tls.crt, tls.key and ca.crt that
// satisfy req at now: the certificate parses, matches the key, has exactly
// the requested DNS names and usage, is signed by ca.crt (and ca.crt is the
// root CA's, when ca is known), and does not expire within
// certRenewBefore. Crossplane keeps any Secret that holds one of the keys;
// lockstep keeps valid ones and replaces broken or expiring ones.
func Valid(data map[string][]byte, req *TLSRequest, now time.Time, ca *CA) bool {
	crt, key, caPEM := data[TLSCertKey], data[TLSKeyKey], data[CACertKey]
	if len(crt) == 0 || len(key) == 0 || len(caPEM) == 0 {
		return false
	}
	if ca != nil && !bytes.Equal(bytes.TrimSpace(caPEM), bytes.TrimSpace(ca.certPEM)) {
		return false
	}
	cert, err := parseCert(crt)
	if err != nil {
		return false
	}
	k, err := parseKey(key)
	if err != nil || !samePublicKey(k, cert.PublicKey) {
		return false
	}
	if now.Before(cert.NotBefore) || now.Add(certRenewBefore).After(cert.NotAfter) {
		return false
	}
	want := slices.Clone(req.DNSNames)
	got := slices.Clone(cert.DNSNames)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		return false
	}
	usage := x509.ExtKeyUsageServerAuth
	if req.Usage == TLSClient {
		usage = x509.ExtKeyUsageClientAuth
	}
	caCert, err := parseCert(caPEM)
	if err != nil {
		return false
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err == nil
}

// New generates a self-signed RSA CA valid for certValidity from now,
// named as Crossplane names its root CA. It returns an error when the key
// cannot be generated or the certificate signed.
func New(now time.Time) (*CA, error) {
	key, err := rsa.GenerateKey(rand.Reader, rsaKeyBits)
	if err != nil {
		return nil, fmt.Errorf("cannot generate the CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	name := pkix.Name{CommonName: "Crossplane Root CA", Organization: []string{"Crossplane"}}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               name,
		Issuer:                name,
		DNSNames:              []string{RootCASecretName},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certValidity),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("cannot sign the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, certPEM: pemEncode(pemCertificate, der), keyPEM: pemEncode(pemRSAKey, x509.MarshalPKCS1PrivateKey(key))}, nil
}

// Parse parses a PEM CA certificate and its private key (PKCS #1, SEC 1 or
// PKCS #8). It returns an error naming the Secret key (tls.crt, tls.key)
// that is empty, does not parse, is not a CA or does not match.
func Parse(crt, key []byte) (*CA, error) {
	if len(crt) == 0 || len(key) == 0 {
		return nil, fmt.Errorf("%s or %s is empty", TLSCertKey, TLSKeyKey)
	}
	cert, err := parseCert(crt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", TLSCertKey, err)
	}
	if !cert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", TLSCertKey)
	}
	k, err := parseKey(key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", TLSKeyKey, err)
	}
	if !samePublicKey(k, cert.PublicKey) {
		return nil, fmt.Errorf("%s does not match %s", TLSKeyKey, TLSCertKey)
	}
	block, _ := pem.Decode(crt)
	return &CA{cert: cert, key: k, certPEM: pem.EncodeToMemory(block)}, nil
}

// Issue returns the data of a TLS Secret for req: tls.crt, tls.key and
// ca.crt, a certificate valid for certValidity signed by ca.
func (ca *CA) Issue(req *TLSRequest, now time.Time) (map[string][]byte, error) {
	if len(req.DNSNames) == 0 {
		return nil, errors.New("a TLS certificate needs at least one DNS name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("cannot generate a TLS key: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("cannot encode a TLS key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	usage := x509.ExtKeyUsageServerAuth
	if req.Usage == TLSClient {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.DNSNames[0], Organization: []string{"Crossplane"}},
		DNSNames:              slices.Clone(req.DNSNames),
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("cannot sign a TLS certificate: %w", err)
	}
	return map[string][]byte{
		TLSCertKey: pemEncode(pemCertificate, der),
		TLSKeyKey:  pemEncode(pemPKCS8Key, keyDER),
		CACertKey:  ca.certPEM,
	}, nil
}

// serialNumber draws a random positive 127-bit serial number.
func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("cannot draw a certificate serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// pemEncode returns der as a PEM block of type typ.
func pemEncode(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// parseCert parses the first PEM certificate of b.
func parseCert(b []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != pemCertificate {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// parseKey parses a PEM private key: PKCS #1 RSA, SEC 1 EC, or PKCS #8
// RSA, ECDSA or Ed25519.
func parseKey(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}

// samePublicKey reports whether k's public key is pub.
func samePublicKey(k crypto.Signer, pub any) bool {
	e, ok := k.Public().(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(pub)
}
