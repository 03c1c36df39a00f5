package git

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// VerifyMode says which Git object of a checkout must carry a signature by
// a trusted key, with the values of Flux's GitRepository spec.verify.mode
// (https://fluxcd.io/flux/components/source/gitrepositories/#verification).
type VerifyMode string

// The verification modes.
const (
	// VerifyHEAD verifies the commit checked out (for a tag, the commit
	// it points to).
	VerifyHEAD VerifyMode = "HEAD"
	// VerifyTag verifies the annotated tag the Source's Ref names; a
	// lightweight tag carries no signature and fails.
	VerifyTag VerifyMode = "Tag"
	// VerifyTagAndHEAD verifies both the annotated tag and its commit.
	VerifyTagAndHEAD VerifyMode = "TagAndHEAD"
)

// ParseVerifyMode returns the mode s names, case-insensitively ("head",
// "Tag", "TagAndHEAD"); an error names the valid values.
func ParseVerifyMode(s string) (VerifyMode, error) {
	for _, m := range []VerifyMode{VerifyHEAD, VerifyTag, VerifyTagAndHEAD} {
		if strings.EqualFold(s, string(m)) {
			return m, nil
		}
	}
	return "", fmt.Errorf("verification mode %q is not HEAD, Tag or TagAndHEAD", s)
}

// Verification is what a Source checks before it checks out a commit:
// the objects Mode names must be signed by a key of Keys. A commit that
// does not verify is not checked out (the worktree keeps the last one) and
// Checkout returns a *SignatureError. There is no fallback: a key ring
// that cannot be read fails the checkout too.
type Verification struct {
	// Mode is which objects must be signed; empty means VerifyHEAD.
	Mode VerifyMode
	// Keys are the trusted public keys.
	Keys *KeyRing
}

// KeyRing holds trusted public keys: OpenPGP keys, which verify the
// OpenPGP signatures `git commit -S` writes with gpg, and SSH keys, which
// verify the SSH signatures it writes with gpg.format=ssh (namespace
// "git", as `ssh-keygen -Y sign -n git`).
type KeyRing struct {
	pgp openpgp.EntityList
	ssh []ssh.PublicKey
}

// Len returns the number of keys (OpenPGP primary keys and SSH keys).
func (k *KeyRing) Len() int {
	if k == nil {
		return 0
	}
	return len(k.pgp) + len(k.ssh)
}

// ParseKeyRing reads trusted public keys from sources, a map from a name
// (a file path, or a key of a Kubernetes Secret's data) to its content:
// ASCII-armored OpenPGP public keys (`gpg --export --armor`), or SSH
// public keys one per line in authorized_keys format (`ssh-ed25519 AAAA...
// comment`; blank lines and # comments are skipped). An error names the
// source; a key ring with no key is an error.
func ParseKeyRing(sources map[string][]byte) (*KeyRing, error) {
	k := &KeyRing{}
	for _, name := range slices.Sorted(maps.Keys(sources)) {
		data := sources[name]
		if bytes.Contains(data, []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----")) {
			el, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(data))
			if err != nil {
				return nil, fmt.Errorf("%s: not an armored OpenPGP public key: %w", name, err)
			}
			k.pgp = append(k.pgp, el...)
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
			if err != nil {
				return nil, fmt.Errorf("%s: line %d: neither an SSH public key nor an armored OpenPGP key: %w", name, i+1, err)
			}
			k.ssh = append(k.ssh, pub)
		}
	}
	if k.Len() == 0 {
		return nil, errors.New("no public key to verify signatures with")
	}
	return k, nil
}

// ErrSignature is what every SignatureError matches with errors.Is.
var ErrSignature = errors.New("signature not verified")

// SignatureError says that a Git object does not carry a signature by a
// trusted key.
type SignatureError struct {
	// Object is "commit <hash>" or "tag <name> (<hash>)".
	Object string
	// Commit is the commit the checkout would have taken.
	Commit string
	// Reason says what is wrong: no signature, an unknown key, a bad
	// signature.
	Reason string
}

func (e *SignatureError) Error() string {
	return e.Object + ": signature not verified: " + e.Reason
}

// Is makes a SignatureError match ErrSignature.
func (e *SignatureError) Is(target error) bool { return target == ErrSignature }

// verify checks signature over payload against the key ring and returns
// the signer: "OpenPGP key <fingerprint> (<identity>)" or "SSH key
// <SHA256 fingerprint>".
func (k *KeyRing) verify(payload []byte, signature string) (string, error) {
	signature = strings.TrimSpace(signature)
	switch {
	case signature == "":
		return "", errors.New("it is not signed")
	case strings.HasPrefix(signature, "-----BEGIN SSH SIGNATURE-----"):
		sig, err := sshsig.Unarmor([]byte(signature))
		if err != nil {
			return "", fmt.Errorf("unreadable SSH signature: %w", err)
		}
		fp := ssh.FingerprintSHA256(sig.PublicKey)
		for _, pub := range k.ssh {
			if ssh.FingerprintSHA256(pub) != fp {
				continue
			}
			if err := sshsig.Verify(bytes.NewReader(payload), sig, pub, sig.HashAlgorithm, "git"); err != nil {
				return "", fmt.Errorf("SSH signature by %s does not verify: %w", fp, err)
			}
			return "SSH key " + fp, nil
		}
		return "", fmt.Errorf("signed by SSH key %s, which is not trusted", fp)
	case strings.HasPrefix(signature, "-----BEGIN PGP SIGNATURE-----"):
		signer, err := openpgp.CheckArmoredDetachedSignature(k.pgp, bytes.NewReader(payload), strings.NewReader(signature), nil)
		if err != nil {
			return "", fmt.Errorf("OpenPGP signature does not verify against the trusted keys: %w", err)
		}
		return "OpenPGP key " + strings.ToUpper(fmt.Sprintf("%x", signer.PrimaryKey.Fingerprint)) + identity(signer), nil
	default:
		return "", errors.New("the signature is neither OpenPGP nor SSH")
	}
}

// identity is " (<the key's primary user ID>)", "" when it has none.
func identity(e *openpgp.Entity) string {
	if id := e.PrimaryIdentity(); id != nil {
		return " (" + id.Name + ")"
	}
	return ""
}

// encodable is a Git object that encodes itself as it was signed: without
// its signature (object.Commit and object.Tag).
type encodable interface {
	EncodeWithoutSignature(o plumbing.EncodedObject) error
}

// payloadOf returns what o's signature signs.
func payloadOf(o encodable) ([]byte, error) {
	mem := &plumbing.MemoryObject{}
	if err := o.EncodeWithoutSignature(mem); err != nil {
		return nil, err
	}
	r, err := mem.Reader()
	if err != nil {
		return nil, err
	}
	defer func() { _ = r.Close() }()
	return io.ReadAll(r)
}

// VerifyCommitSignature checks that c is signed by a key of keys and returns the
// signer (see Verification); the error is a *SignatureError.
func VerifyCommitSignature(c *object.Commit, keys *KeyRing) (string, error) {
	fail := func(reason string) error {
		return &SignatureError{Object: "commit " + c.Hash.String(), Commit: c.Hash.String(), Reason: reason}
	}
	payload, err := payloadOf(c)
	if err != nil {
		return "", fail(err.Error())
	}
	signer, err := keys.verify(payload, c.PGPSignature)
	if err != nil {
		return "", fail(err.Error())
	}
	return signer, nil
}

// VerifyTagSignature checks that the annotated tag t is signed by a key of keys
// and returns the signer; the error is a *SignatureError.
func VerifyTagSignature(t *object.Tag, keys *KeyRing) (string, error) {
	fail := func(reason string) error {
		return &SignatureError{Object: "tag " + t.Name + " (" + t.Hash.String() + ")", Commit: t.Target.String(), Reason: reason}
	}
	payload, err := payloadOf(t)
	if err != nil {
		return "", fail(err.Error())
	}
	signer, err := keys.verify(payload, t.PGPSignature)
	if err != nil {
		return "", fail(err.Error())
	}
	return signer, nil
}

// verifyCheckout verifies, before the checkout, what v.Mode names of the
// ref name (of kind) that points to advertised, whose commit is commit,
// and returns the signers, "tag: ..., commit: ...".
func verifyCheckout(repo *gogit.Repository, v *Verification, name plumbing.ReferenceName, kind RefKind, advertised plumbing.Hash, commit *object.Commit) (string, error) {
	mode := v.Mode
	if mode == "" {
		mode = VerifyHEAD
	}
	var signers []string
	if mode == VerifyTag || mode == VerifyTagAndHEAD {
		if kind != RefTag {
			return "", &SignatureError{Object: describeRef(name, advertised), Commit: commit.Hash.String(), Reason: "verification mode " + string(mode) + " needs a tag ref"}
		}
		tag, err := repo.TagObject(advertised)
		if err != nil {
			return "", &SignatureError{Object: "tag " + name.Short(), Commit: commit.Hash.String(), Reason: "a lightweight tag carries no signature"}
		}
		signer, err := VerifyTagSignature(tag, v.Keys)
		if err != nil {
			return "", err
		}
		signers = append(signers, "tag: "+signer)
	}
	if mode == VerifyHEAD || mode == VerifyTagAndHEAD {
		signer, err := VerifyCommitSignature(commit, v.Keys)
		if err != nil {
			return "", err
		}
		signers = append(signers, "commit: "+signer)
	}
	return strings.Join(signers, ", "), nil
}

// VerifyRevision verifies a revision of the local repository holding dir
// (found as git does, in dir or a parent) as a Source with Verify v would
// before checking it out: rev is a branch, a tag, a commit hash or any
// revision go-git resolves ("HEAD", "main~1"); in modes Tag and
// TagAndHEAD it must name an annotated tag. It returns the commit and the
// signers; a signature that does not verify is a *SignatureError.
func VerifyRevision(dir, rev string, v Verification) (commit, signers string, err error) {
	repo, err := gogit.PlainOpenWithOptions(dir, &gogit.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", dir, err)
	}
	name, kind := plumbing.ReferenceName(""), RefCommit
	var target plumbing.Hash
	if ref, err := repo.Tag(rev); err == nil {
		name, kind, target = ref.Name(), RefTag, ref.Hash()
	} else {
		h, err := repo.ResolveRevision(plumbing.Revision(rev))
		if err != nil {
			return "", "", fmt.Errorf("revision %q: %w", rev, err)
		}
		target = *h
	}
	c, err := peel(repo, target)
	if err != nil {
		return "", "", fmt.Errorf("revision %q: %w", rev, err)
	}
	signers, err = verifyCheckout(repo, &v, name, kind, target, c)
	return c.Hash.String(), signers, err
}
