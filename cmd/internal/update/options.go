package update

import (
	"bytes"
	"errors"
	"fmt"
	"net/mail"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-logr/logr"

	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// Mode is where a poll writes the lock it proposes (--update-mode).
type Mode string

// The write-back modes (docs/commands.md, `lockstep update`).
const (
	// ModeBranch commits the new lock on Options.Branch, based on the
	// watched ref's head, and force-pushes it: the branch is rewritten with
	// each new proposal so one pull request tracks the latest state (Flux
	// image-automation's push branch, docs/design.md#flux-image-automation). The
	// default.
	ModeBranch Mode = "branch"
	// ModeCommit pushes the new lock straight to the watched branch, for
	// users who want Crossplane's automatic upgrades with a record in Git.
	ModeCommit Mode = "commit"
	// ModeOff only reports what a poll found.
	ModeOff Mode = "off"
)

// DefaultBranch is the default proposal branch (--update-branch).
const DefaultBranch = "lockstep/updates"

// DefaultAuthor is the default commit author (--update-author).
var DefaultAuthor = git.Signature{Name: "lockstep", Email: "lockstep@noreply.invalid"}

// DefaultAttempts bounds how often a poll rebuilds its commit on a watched
// ref that moved before the push (Options.Attempts).
const DefaultAttempts = 3

// DefaultBackoff is the per-registry backoff after failed polls.
var DefaultBackoff = Backoff{Initial: time.Minute, Max: 30 * time.Minute}

// ParseMode parses --update-mode: branch, commit or off. The error lists
// the valid modes.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeBranch, ModeCommit, ModeOff:
		return m, nil
	case "":
		return ModeBranch, nil
	}
	return "", fmt.Errorf("update mode %q: want branch, commit or off", s)
}

// ParseSignature parses "Name <email>" (RFC 5322, as git writes authors)
// into a Signature without a time.
func ParseSignature(s string) (git.Signature, error) {
	a, err := mail.ParseAddress(s)
	if err != nil {
		return git.Signature{}, fmt.Errorf("%q is not \"Name <email>\": %w", s, err)
	}
	if a.Name == "" {
		return git.Signature{}, fmt.Errorf("%q has no name: write \"Name <email>\"", s)
	}
	return git.Signature{Name: a.Name, Email: a.Address}, nil
}

// ReadSigningKey reads an armored OpenPGP private key ring (what gpg
// --export-secret-keys --armor writes) and returns its first entity with a
// private key, decrypted with passphrase when it is encrypted
// (--update-signing-key). Errors never include the passphrase.
func ReadSigningKey(armored, passphrase []byte) (*openpgp.Entity, error) {
	ring, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(armored))
	if err != nil {
		return nil, fmt.Errorf("signing key: not an armored OpenPGP key: %w", err)
	}
	for _, e := range ring {
		if e.PrivateKey == nil {
			continue
		}
		if e.PrivateKey.Encrypted {
			if len(passphrase) == 0 {
				return nil, errors.New("signing key: the key is encrypted and no passphrase was given")
			}
			if err := e.DecryptPrivateKeys(passphrase); err != nil {
				return nil, errors.New("signing key: the passphrase does not decrypt the key")
			}
		}
		return e, nil
	}
	return nil, errors.New("signing key: the key ring holds no private key")
}

// Backoff is how long polls leave a registry alone after it failed: Initial
// after the first failed poll, doubling with each further one up to Max.
// The first poll that reaches the registry without an error resets it.
type Backoff struct {
	// Initial is the wait after the first failed poll.
	Initial time.Duration
	// Max caps the wait.
	Max time.Duration
}

// delay returns the wait after failures consecutive failed polls.
func (b Backoff) delay(failures int) time.Duration {
	d := b.Initial
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Options configure an Updater. The registry options are the ones `lockstep
// lock` uses, so a poll resolves exactly as `lockstep lock --update` does.
type Options struct {
	// Mode is the write-back mode; empty means ModeBranch.
	Mode Mode
	// Branch is the proposal branch for ModeBranch; empty means
	// DefaultBranch. It must differ from the watched ref.
	Branch string
	// UpdateDependencies also checks dependencies whose dependents ask for a
	// semver range, for newer versions inside the range
	// (--update-dependencies).
	UpdateDependencies bool
	// Author and Committer sign the commit; an empty Author means
	// DefaultAuthor, an empty Committer the Author. Their times are ignored:
	// commits carry the Clock's time.
	Author, Committer git.Signature
	// SignKey, when set, signs every commit with OpenPGP (see
	// ReadSigningKey).
	SignKey *openpgp.Entity
	// Registry says how registries are reached (the CLI's registry flags).
	Registry oci.Options
	// Cache is the package cache; required. Packages already in it are not
	// pulled again.
	Cache *oci.Cache
	// VerificationKeys gives the public keys ImageConfig spec.verification
	// key authorities name: a proposed lock is verified and records how,
	// as `lockstep lock` does (snapshot.RecordVerifications). The agent
	// reads them from the cluster's Secrets, the CLI from
	// --verification-key files; nil means none.
	VerificationKeys cosign.KeySource
	// Jobs bounds concurrent registry calls; 0 means lockfile.DefaultJobs.
	Jobs int
	// Attempts bounds the pushes of one poll when the watched ref keeps
	// moving; 0 means DefaultAttempts.
	Attempts int
	// Backoff is the per-registry backoff; the zero value means
	// DefaultBackoff.
	Backoff Backoff
	// Clock gives the time of polls, commits and backoffs, and the schedule's
	// timers; nil means the system clock.
	Clock Clock
	// Log receives one line per poll and per write-back; the zero Logger
	// discards.
	Log logr.Logger
}

// withDefaults fills in the defaults and validates opts.
func (o Options) withDefaults(src git.Source) (Options, error) {
	m, err := ParseMode(string(o.Mode))
	if err != nil {
		return o, err
	}
	o.Mode = m
	if o.Branch == "" {
		o.Branch = DefaultBranch
	}
	if o.Mode == ModeBranch && (o.Branch == src.Ref || "refs/heads/"+o.Branch == src.Ref) {
		return o, fmt.Errorf("update branch %s is the watched ref: use --update-mode commit to push to it", o.Branch)
	}
	if o.Author.Name == "" && o.Author.Email == "" {
		o.Author = DefaultAuthor
	}
	if o.Author.Name == "" || o.Author.Email == "" {
		return o, errors.New("update author needs a name and an email")
	}
	if o.Committer.Name == "" && o.Committer.Email == "" {
		o.Committer = o.Author
	}
	if o.Cache == nil {
		return o, errors.New("update: a package cache is required")
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Backoff == (Backoff{}) {
		o.Backoff = DefaultBackoff
	}
	if o.Backoff.Max < o.Backoff.Initial {
		o.Backoff.Max = o.Backoff.Initial
	}
	if o.Clock == nil {
		o.Clock = SystemClock
	}
	return o, nil
}
