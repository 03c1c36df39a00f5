package git

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"net"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func ed25519Key(t *testing.T) (ssh.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return sp, priv
}

func pemKey(t *testing.T, priv any, passphrase string) []byte {
	t.Helper()
	var block *pem.Block
	var err error
	if passphrase == "" {
		block, err = ssh.MarshalPrivateKey(priv, "")
	} else {
		block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

func endpoint(t *testing.T, u string) *transport.Endpoint {
	t.Helper()
	ep, err := transport.NewEndpoint(u)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestSSHMethod builds SSH public-key auth with known_hosts checking. No
// SSH server is involved: the host key callback is called directly with
// the keys a server would present (TestSSHRoundTrip talks to a real one).
func TestSSHMethod(t *testing.T) {
	hostKey, _ := ed25519Key(t)
	otherHostKey, _ := ed25519Key(t)
	_, clientKey := ed25519Key(t)
	identity := pemKey(t, clientKey, "")
	known := []byte("# comment\n" + knownhosts.Line([]string{"git.example.com"}, hostKey) + "\n" +
		knownhosts.Line([]string{"[git.example.com]:2222"}, otherHostKey) + "\n")
	addr := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 22}

	cases := map[string]struct {
		reason   string
		url      string
		user     string
		host     string
		algos    []string
		accept   ssh.PublicKey
		refuse   ssh.PublicKey
		refusal  string
		unlisted string
	}{
		"SSHURL": {
			reason: "ssh:// with a user: that user, the ed25519 key listed for port 22.",
			url:    "ssh://deploy@git.example.com/org/repo.git", user: "deploy", host: "git.example.com:22",
			algos: []string{ssh.KeyAlgoED25519}, accept: hostKey, refuse: otherHostKey, refusal: "does not list",
		},
		"SCPLike": {
			reason: "scp-like address: user git, port 22.",
			url:    "git@git.example.com:org/repo.git", user: "git", host: "git.example.com:22",
			algos: []string{ssh.KeyAlgoED25519}, accept: hostKey, refuse: otherHostKey, refusal: "does not list",
		},
		"DefaultUser": {
			reason: "No user in the URL: git.",
			url:    "ssh://git.example.com/org/repo.git", user: "git", host: "git.example.com:22",
			algos: []string{ssh.KeyAlgoED25519}, accept: hostKey, refuse: otherHostKey, refusal: "does not list",
		},
		"OtherPort": {
			reason: "A non-default port matches the [host]:port entry only.",
			url:    "ssh://git@git.example.com:2222/org/repo.git", user: "git", host: "git.example.com:2222",
			algos: []string{ssh.KeyAlgoED25519}, accept: otherHostKey, refuse: hostKey, refusal: "does not list",
		},
		"UnknownHost": {
			reason: "A host known_hosts does not list is refused, never trusted on first use.",
			url:    "ssh://git@elsewhere.example.com/org/repo.git", user: "git", host: "elsewhere.example.com:22",
			refuse: hostKey, refusal: "is not in known_hosts",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a := Auth{Identity: identity, KnownHosts: known}
			m, ca, err := a.method(endpoint(t, tc.url), false)
			if err != nil {
				t.Fatalf("%s\nmethod: %v", tc.reason, err)
			}
			if ca != nil {
				t.Errorf("%s\nSSH got a CA bundle", tc.reason)
			}
			pk, ok := m.(*gitssh.PublicKeys)
			if !ok {
				t.Fatalf("%s\nmethod is %T, want *ssh.PublicKeys", tc.reason, m)
			}
			cfg, err := pk.ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.User != tc.user {
				t.Errorf("%s\nuser %q, want %q", tc.reason, cfg.User, tc.user)
			}
			if diff := cmp.Diff(tc.algos, cfg.HostKeyAlgorithms); diff != "" {
				t.Errorf("%s\nhost key algorithms (-want +got):\n%s", tc.reason, diff)
			}
			if tc.accept != nil {
				if err := cfg.HostKeyCallback(tc.host, addr, tc.accept); err != nil {
					t.Errorf("%s\nthe listed host key is refused: %v", tc.reason, err)
				}
			}
			err = cfg.HostKeyCallback(tc.host, addr, tc.refuse)
			if err == nil || !strings.Contains(err.Error(), tc.refusal) {
				t.Errorf("%s\nhost key check: %v, want an error containing %q", tc.reason, err, tc.refusal)
			}
			if len(cfg.Auth) != 1 {
				t.Errorf("%s\n%d auth methods, want the public key", tc.reason, len(cfg.Auth))
			}
		})
	}
}

// TestSSHMethodKeys: encrypted keys, hashed and RSA known_hosts entries,
// and what is missing.
func TestSSHMethodKeys(t *testing.T) {
	hostKey, _ := ed25519Key(t)
	_, clientKey := ed25519Key(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaHost, err := ssh.NewPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	plain := pemKey(t, clientKey, "")
	encrypted := pemKey(t, clientKey, "correct horse")
	known := []byte(knownhosts.Line([]string{"git.example.com"}, hostKey) + "\n")
	hashed := []byte(knownhosts.Line([]string{knownhosts.HashHostname("git.example.com")}, hostKey) + "\n")
	rsaKnown := []byte(knownhosts.Line([]string{"git.example.com"}, rsaHost) + "\n")
	url := "ssh://git@git.example.com/org/repo.git"

	cases := map[string]struct {
		reason string
		auth   Auth
		algos  []string
		err    string
	}{
		"EncryptedWithPassphrase": {
			reason: "An encrypted key with its passphrase in password works.",
			auth:   Auth{Identity: encrypted, Password: "correct horse", KnownHosts: known}, algos: []string{ssh.KeyAlgoED25519},
		},
		"EncryptedWithoutPassphrase": {
			reason: "An encrypted key without password: say what to set.",
			auth:   Auth{Identity: encrypted, KnownHosts: known}, err: "identity is encrypted: set password to its passphrase",
		},
		"EncryptedWrongPassphrase": {
			reason: "A wrong passphrase is an error that does not print it.",
			auth:   Auth{Identity: encrypted, Password: "wrong horse", KnownHosts: known}, err: "cannot decrypt",
		},
		"HashedKnownHosts": {
			reason: "A hashed known_hosts entry still selects the host key algorithm.",
			auth:   Auth{Identity: plain, KnownHosts: hashed}, algos: []string{ssh.KeyAlgoED25519},
		},
		"RSAHostKey": {
			reason: "An RSA host key accepts the SHA-2 signature algorithms first.",
			auth:   Auth{Identity: plain, KnownHosts: rsaKnown}, algos: []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA},
		},
		"NoIdentity": {
			reason: "An SSH URL needs a key.",
			auth:   Auth{KnownHosts: known}, err: "needs a private key: set identity",
		},
		"NoKnownHosts": {
			reason: "An SSH URL needs known_hosts.",
			auth:   Auth{Identity: plain}, err: "set known_hosts",
		},
		"NotAKey": {
			reason: "Garbage in identity is named.",
			auth:   Auth{Identity: []byte("not a key"), KnownHosts: known}, err: "identity is not an SSH private key",
		},
		"BadKnownHosts": {
			reason: "Garbage in known_hosts is named, without a temporary path.",
			auth:   Auth{Identity: plain, KnownHosts: []byte("git.example.com ssh-ed25519 !!!\n")}, err: "known_hosts is not a known_hosts file",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, _, err := tc.auth.method(endpoint(t, url), false)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s\nmethod: %v, want an error containing %q", tc.reason, err, tc.err)
				}
				if strings.Contains(err.Error(), "horse") || strings.Contains(err.Error(), "/tmp") {
					t.Errorf("%s\nerror leaks a secret or a path: %v", tc.reason, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nmethod: %v", tc.reason, err)
			}
			cfg, err := m.(*gitssh.PublicKeys).ClientConfig()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.algos, cfg.HostKeyAlgorithms); diff != "" {
				t.Errorf("%s\nalgorithms (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestHTTPMethod: basic auth, bearer tokens and CA bundles for HTTPS.
func TestHTTPMethod(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\n...\n")
	cases := map[string]struct {
		reason   string
		url      string
		auth     Auth
		insecure bool
		want     transport.AuthMethod
		ca       []byte
		err      string
	}{
		"Anonymous": {
			reason: "No credentials: anonymous.",
			url:    "https://git.example.com/org/repo.git",
		},
		"Basic": {
			reason: "username and password: basic auth, with the CA.",
			url:    "https://git.example.com/org/repo.git", auth: Auth{Username: "u", Password: "p", CAFile: ca},
			want: &githttp.BasicAuth{Username: "u", Password: "p"}, ca: ca,
		},
		"Bearer": {
			reason: "bearerToken: an Authorization: Bearer header.",
			url:    "https://git.example.com/org/repo.git", auth: Auth{BearerToken: "tok"},
			want: &githttp.TokenAuth{Token: "tok"},
		},
		"BearerAndBasic": {
			reason: "Both kinds at once is a mistake.",
			url:    "https://git.example.com/org/repo.git", auth: Auth{BearerToken: "tok", Username: "u"},
			err: "either bearerToken or username and password",
		},
		"PlainHTTPRefused": {
			reason: "Credentials over plain http are refused.",
			url:    "http://git.example.com/org/repo.git", auth: Auth{Username: "u", Password: "p"},
			err: "plain http",
		},
		"PlainHTTPAllowed": {
			reason: "...unless allowed; no CA for http.",
			url:    "http://git.example.com/org/repo.git", auth: Auth{Username: "u", Password: "p", CAFile: ca}, insecure: true,
			want: &githttp.BasicAuth{Username: "u", Password: "p"},
		},
		"SSHKeysIgnoredForHTTPS": {
			reason: "Keys that do not apply to the scheme are ignored, as Flux does.",
			url:    "https://git.example.com/org/repo.git", auth: Auth{Identity: []byte("x"), KnownHosts: []byte("y")},
		},
		"File": {
			reason: "file:// takes no credentials.",
			url:    "file:///srv/repo.git", auth: Auth{Username: "u", Password: "p"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, gotCA, err := tc.auth.method(endpoint(t, tc.url), tc.insecure)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("%s\nmethod: %v, want an error containing %q", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nmethod: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, m); diff != "" {
				t.Errorf("%s\nauth method (-want +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.ca, gotCA); diff != "" {
				t.Errorf("%s\nCA (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}
