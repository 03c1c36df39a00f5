package certs

// The TLS vocabulary render requests and apply fills
// (docs/crossplane-behaviour.md#tls).
const (
	// RootCASecretName is the Secret in the Crossplane namespace holding the
	// CA that signs every package's TLS certificates (docs/crossplane-behaviour.md#tls).
	RootCASecretName = "crossplane-root-ca"
	// TLSCertKey, TLSKeyKey and CACertKey are the keys of a TLS Secret.
	TLSCertKey = "tls.crt"
	TLSKeyKey  = "tls.key"
	CACertKey  = "ca.crt"
)

// TLSUsage is what a requested certificate is for.
type TLSUsage string

// The TLS usages of Crossplane's certificate generator (docs/crossplane-behaviour.md#tls).
const (
	// TLSServer is a serving certificate (extended key usage serverAuth).
	TLSServer TLSUsage = "server"
	// TLSClient is a client certificate (extended key usage clientAuth).
	TLSClient TLSUsage = "client"
)

// TLSRequest asks lockstep's apply to fill a TLS Secret the way Crossplane's
// certificate generator does (docs/crossplane-behaviour.md#tls; internal/initializer/tls.go): a
// certificate for DNSNames with Usage, valid 10 years, signed by the CA in
// Secret CASecretName (created in Crossplane's format when missing), stored
// under tls.crt, tls.key and ca.crt. A Secret that already holds any of the
// three keys is left alone: certificates are never regenerated.
type TLSRequest struct {
	// Usage is server or client.
	Usage TLSUsage
	// DNSNames are the certificate's DNS names: for a server certificate
	// the Service's names (<svc>, <svc>.<ns>, <svc>.<ns>.svc), for a client
	// certificate the revision name.
	DNSNames []string
	// CASecretName is the Secret, in the Crossplane namespace, of the CA
	// that signs the certificate: crossplane-root-ca.
	CASecretName string
}
