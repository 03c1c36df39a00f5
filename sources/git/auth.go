package git

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // known_hosts hashes host names with HMAC-SHA1 (OpenSSH's format).
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// The keys of a Git credentials Secret (and of the files of a mounted
// Secret), the ones Flux's GitRepository reads (fluxcd/pkg/git
// NewAuthOptions, docs/design.md#flux-source).
const (
	// SecretIdentity is an SSH private key in PEM or OpenSSH format.
	SecretIdentity = "identity"
	// SecretKnownHosts is an OpenSSH known_hosts file for SSH URLs.
	SecretKnownHosts = "known_hosts"
	// SecretUsername is the HTTPS basic-auth user name.
	SecretUsername = "username"
	// SecretPassword is the HTTPS basic-auth password, or the passphrase of
	// an encrypted SecretIdentity.
	SecretPassword = "password"
	// SecretBearerToken is an HTTPS bearer token (Authorization: Bearer).
	SecretBearerToken = "bearerToken"
	// SecretCAFile is a PEM bundle of CA certificates trusted for HTTPS in
	// addition to the system pool.
	SecretCAFile = "caFile"
	// SecretCACert is the alternative name of SecretCAFile that Flux also
	// reads (the key of a kubernetes.io/tls Secret).
	SecretCACert = "ca.crt"
)

// Auth holds the credentials for one Git remote. The zero value is
// anonymous access over HTTPS, file or git URLs. Which fields apply depends
// on the URL's scheme, as in Flux's GitRepository: Identity, KnownHosts and
// Password (as the key passphrase) for ssh; Username and Password, or
// BearerToken, and CAFile for https. Fields that do not apply are ignored.
//
// Auth never prints its secrets: String and GoString list which fields are
// set, not their values.
type Auth struct {
	// Username is the HTTPS basic-auth user name. It is not used for SSH;
	// the SSH user is the URL's (default "git").
	Username string
	// Password is the HTTPS basic-auth password, or the passphrase of an
	// encrypted Identity.
	Password string
	// BearerToken is sent as "Authorization: Bearer" over HTTPS. It cannot
	// be combined with Username or Password.
	BearerToken string
	// Identity is the SSH private key (PEM or OpenSSH format). Required for
	// SSH URLs.
	Identity []byte
	// KnownHosts is an OpenSSH known_hosts file; SSH host keys are checked
	// against it and a host it does not list is refused. Required for SSH
	// URLs: lockstep never trusts a host key on first use.
	KnownHosts []byte
	// CAFile is a PEM bundle of CA certificates trusted for HTTPS in
	// addition to the system pool.
	CAFile []byte
}

// AuthFromSecret reads the credentials from the data of a Kubernetes
// Secret, with the keys Flux's GitRepository uses (SecretIdentity,
// SecretKnownHosts, SecretUsername, SecretPassword, SecretBearerToken,
// SecretCAFile or SecretCACert). Other keys are ignored. It fails when
// bearerToken is combined with username or password. The error never holds
// a secret value.
func AuthFromSecret(data map[string][]byte) (Auth, error) {
	a := Auth{
		Username:    strings.TrimSpace(string(data[SecretUsername])),
		Password:    string(data[SecretPassword]),
		BearerToken: strings.TrimSpace(string(data[SecretBearerToken])),
		Identity:    data[SecretIdentity],
		KnownHosts:  data[SecretKnownHosts],
		CAFile:      data[SecretCAFile],
	}
	if len(a.CAFile) == 0 {
		a.CAFile = data[SecretCACert]
	}
	if a.BearerToken != "" && (a.Username != "" || a.Password != "") {
		return Auth{}, fmt.Errorf("git credentials: set either %s or %s and %s, not both", SecretBearerToken, SecretUsername, SecretPassword)
	}
	return a, nil
}

// AuthFromDir reads the credentials from a directory holding one file per
// Secret key, as Kubernetes mounts a Secret volume (see AuthFromSecret for
// the keys). Missing files are skipped; a directory that does not exist is
// an error naming it.
func AuthFromDir(dir string) (Auth, error) {
	if _, err := os.Stat(dir); err != nil {
		return Auth{}, fmt.Errorf("git credentials directory: %w", err)
	}
	data := map[string][]byte{}
	for _, key := range []string{SecretIdentity, SecretKnownHosts, SecretUsername, SecretPassword, SecretBearerToken, SecretCAFile, SecretCACert} {
		b, err := os.ReadFile(filepath.Join(dir, key))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Auth{}, fmt.Errorf("git credentials: cannot read %s: %w", filepath.Join(dir, key), err)
		}
		data[key] = b
	}
	return AuthFromSecret(data)
}

// String lists which credentials are set, never their values.
func (a Auth) String() string {
	var set []string
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{SecretUsername, a.Username != ""},
		{SecretPassword, a.Password != ""},
		{SecretBearerToken, a.BearerToken != ""},
		{SecretIdentity, len(a.Identity) > 0},
		{SecretKnownHosts, len(a.KnownHosts) > 0},
		{SecretCAFile, len(a.CAFile) > 0},
	} {
		if f.ok {
			set = append(set, f.name)
		}
	}
	if len(set) == 0 {
		return "git.Auth{anonymous}"
	}
	return "git.Auth{" + strings.Join(set, ", ") + ": set}"
}

// GoString is String, so %#v does not print secrets either.
func (a Auth) GoString() string { return a.String() }

// secrets returns the secret values, for redacting error messages.
func (a Auth) secrets() []string { return []string{a.Password, a.BearerToken} }

// method builds the go-git transport credentials for ep, and the CA bundle
// to pass with every call. insecureHTTP allows credentials over plain http.
func (a Auth) method(ep *transport.Endpoint, insecureHTTP bool) (transport.AuthMethod, []byte, error) {
	switch ep.Protocol {
	case "ssh":
		m, err := a.sshMethod(ep)
		return m, nil, err
	case "https", "http":
		if ep.Protocol == "http" && !insecureHTTP && (a.Username != "" || a.Password != "" || a.BearerToken != "") {
			return nil, nil, errors.New("git credentials would be sent over plain http: use an https URL (or allow insecure http explicitly)")
		}
		var ca []byte
		if ep.Protocol == "https" {
			ca = a.CAFile
		}
		switch {
		case a.BearerToken != "" && (a.Username != "" || a.Password != ""):
			return nil, nil, fmt.Errorf("git credentials: set either %s or %s and %s, not both", SecretBearerToken, SecretUsername, SecretPassword)
		case a.BearerToken != "":
			return &githttp.TokenAuth{Token: a.BearerToken}, ca, nil
		case a.Username != "" || a.Password != "":
			return &githttp.BasicAuth{Username: a.Username, Password: a.Password}, ca, nil
		}
		return nil, ca, nil
	}
	return nil, nil, nil
}

// sshMethod builds public-key authentication with host keys checked against
// KnownHosts (golang.org/x/crypto/ssh/knownhosts), offering only the host
// key algorithms known_hosts lists for the host so the server cannot pick
// one whose key is not listed.
func (a Auth) sshMethod(ep *transport.Endpoint) (transport.AuthMethod, error) {
	if len(a.Identity) == 0 {
		return nil, fmt.Errorf("ssh URL needs a private key: set %s", SecretIdentity)
	}
	if len(a.KnownHosts) == 0 {
		return nil, fmt.Errorf("ssh URL needs the host's public key: set %s (lockstep never trusts an unknown host key)", SecretKnownHosts)
	}
	if _, err := ssh.ParseRawPrivateKey(a.Identity); err != nil {
		var missing *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &missing) && a.Password == "":
			return nil, fmt.Errorf("%s is encrypted: set %s to its passphrase", SecretIdentity, SecretPassword)
		case errors.As(err, &missing):
			if _, err := ssh.ParseRawPrivateKeyWithPassphrase(a.Identity, []byte(a.Password)); err != nil {
				return nil, fmt.Errorf("%s: cannot decrypt with %s: %w", SecretIdentity, SecretPassword, err)
			}
		default:
			return nil, fmt.Errorf("%s is not an SSH private key: %w", SecretIdentity, err)
		}
	}
	user := ep.User
	if user == "" {
		user = gitssh.DefaultUsername
	}
	keys, err := gitssh.NewPublicKeys(user, a.Identity, a.Password)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SecretIdentity, err)
	}
	callback, err := knownHostsCallback(a.KnownHosts)
	if err != nil {
		return nil, err
	}
	port := ep.Port
	if port == 0 {
		port = 22
	}
	keys.HostKeyCallback = callback
	keys.HostKeyAlgorithms = hostKeyAlgorithms(a.KnownHosts, ep.Host, port)
	return keys, nil
}

// knownHostsCallback parses known_hosts content with x/crypto's knownhosts,
// which reads files only: the content goes to a private temporary file that
// is removed before returning (knownhosts reads it whole in New).
func knownHostsCallback(content []byte) (ssh.HostKeyCallback, error) {
	dir, err := os.MkdirTemp("", "lockstep-known-hosts-")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SecretKnownHosts, err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		return nil, fmt.Errorf("%s: %w", SecretKnownHosts, err)
	}
	cb, err := knownhosts.New(path)
	if err != nil {
		return nil, fmt.Errorf("%s is not a known_hosts file: %s", SecretKnownHosts, strings.ReplaceAll(err.Error(), path, SecretKnownHosts))
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		if err := cb(hostname, remote, key); err != nil {
			var ke *knownhosts.KeyError
			if errors.As(err, &ke) && len(ke.Want) == 0 {
				return fmt.Errorf("ssh host %s is not in %s", hostname, SecretKnownHosts)
			}
			if errors.As(err, &ke) {
				return fmt.Errorf("ssh host %s offered a %s key that %s does not list for it (possible man-in-the-middle, or the host key changed)", hostname, key.Type(), SecretKnownHosts)
			}
			return err
		}
		return nil
	}, nil
}

// hostKeyAlgorithms returns the SSH host key algorithms to offer for
// host:port: those of the known_hosts keys listed for it (plain or hashed
// host patterns, without wildcards), or nil (the library's default order)
// when none is listed or a @cert-authority line is present.
func hostKeyAlgorithms(content []byte, host string, port int) []string {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	addr := knownhosts.Normalize(net.JoinHostPort(host, strconv.Itoa(port)))
	var algos []string
	rest := content
	for len(rest) > 0 {
		marker, hosts, key, _, next, err := ssh.ParseKnownHosts(rest)
		if err != nil {
			break
		}
		rest = next
		if marker == "cert-authority" {
			return nil
		}
		if marker != "" || !slices.ContainsFunc(hosts, func(p string) bool { return hostMatches(p, addr) }) {
			continue
		}
		for _, a := range keyAlgorithms(key.Type()) {
			if !slices.Contains(algos, a) {
				algos = append(algos, a)
			}
		}
	}
	return algos
}

// keyAlgorithms lists the signature algorithms a host key of type t can
// use: an RSA key signs with SHA-2 first.
func keyAlgorithms(t string) []string {
	if t == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{t}
}

// hostMatches reports whether a known_hosts host pattern names addr (as
// knownhosts.Normalize writes it): a plain name, or an OpenSSH hashed name
// (|1|salt|hmac-sha1).
func hostMatches(pattern, addr string) bool {
	if !strings.HasPrefix(pattern, "|1|") {
		return knownhosts.Normalize(pattern) == addr
	}
	parts := strings.Split(pattern[3:], "|")
	if len(parts) != 2 {
		return false
	}
	salt, err1 := base64.StdEncoding.DecodeString(parts[0])
	want, err2 := base64.StdEncoding.DecodeString(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(addr))
	return hmac.Equal(mac.Sum(nil), want)
}
