package gitrepo

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
)

// SSHKey is an SSH key pair made by ssh-keygen, which signs commits as Git
// does with gpg.format=ssh: Git runs `ssh-keygen -Y sign -n git -f KEY`
// on the commit and stores its armored output.
type SSHKey struct {
	// Path is the private key file; Path+".pub" the public key.
	Path string
	// AuthorizedKey is the public key line ("ssh-ed25519 AAAA... comment").
	AuthorizedKey []byte
}

// NewSSHKey makes an ed25519 key pair with ssh-keygen in a temporary
// directory; the test is skipped when ssh-keygen is not installed.
func NewSSHKey(tb testing.TB, comment string) *SSHKey {
	tb.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		tb.Skip("ssh-keygen is not installed: SSH commit signatures are made with it, as Git makes them")
	}
	path := filepath.Join(tb.TempDir(), "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", path).CombinedOutput(); err != nil {
		tb.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		tb.Fatal(err)
	}
	return &SSHKey{Path: path, AuthorizedKey: pub}
}

// Sign signs message as Git does with gpg.format=ssh (go-git's Signer).
func (k *SSHKey) Sign(message io.Reader) ([]byte, error) {
	cmd := exec.Command("ssh-keygen", "-Y", "sign", "-n", "git", "-f", k.Path)
	cmd.Stdin = message
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ssh-keygen -Y sign: %w: %s", err, stderr.Bytes())
	}
	return out, nil
}

// OpenPGPKey is an OpenPGP key pair, which signs commits and tags as `git
// commit -S` does with gpg (an armored detached signature).
type OpenPGPKey struct {
	Entity *openpgp.Entity
	// Armored is the armored public key (`gpg --export --armor`).
	Armored []byte
}

// NewOpenPGPKey makes an OpenPGP key pair for name <email>.
func NewOpenPGPKey(tb testing.TB, name, email string) *OpenPGPKey {
	tb.Helper()
	e, err := openpgp.NewEntity(name, "", email, nil)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := armor.Encode(&buf, openpgp.PublicKeyType, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Serialize(w); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return &OpenPGPKey{Entity: e, Armored: buf.Bytes()}
}

// Sign signs message with an armored detached signature (go-git's
// Signer).
func (k *OpenPGPKey) Sign(message io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&buf, k.Entity, message, nil); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
