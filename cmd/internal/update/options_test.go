package update_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/sources/git"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

func TestParseModeAndSignature(t *testing.T) {
	for in, want := range map[string]update.Mode{"": update.ModeBranch, "branch": update.ModeBranch, "commit": update.ModeCommit, "off": update.ModeOff} {
		if got, err := update.ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := update.ParseMode("pr"); err == nil || !strings.Contains(err.Error(), "want branch, commit or off") {
		t.Errorf("ParseMode(pr): %v", err)
	}
	if got, err := update.ParseSignature("Platform Bot <bot@example.com>"); err != nil || got != (git.Signature{Name: "Platform Bot", Email: "bot@example.com"}) {
		t.Errorf("ParseSignature: %+v, %v", got, err)
	}
	for _, bad := range []string{"bot@example.com", "Bot", "Bot <not an email>"} {
		if _, err := update.ParseSignature(bad); err == nil {
			t.Errorf("ParseSignature(%q) accepted", bad)
		}
	}
}

// TestReadSigningKey reads armored private keys, encrypted or not.
func TestReadSigningKey(t *testing.T) {
	key, err := openpgp.NewEntity("lockstep", "", "bot@example.invalid", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	export := func(e *openpgp.Entity, private bool) []byte {
		var b bytes.Buffer
		typ := openpgp.PublicKeyType
		if private {
			typ = openpgp.PrivateKeyType
		}
		w, err := armor.Encode(&b, typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		if private {
			err = e.SerializePrivateWithoutSigning(w, nil)
		} else {
			err = e.Serialize(w)
		}
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		return b.Bytes()
	}
	plain := export(key, true)
	public := export(key, false)
	if err := key.EncryptPrivateKeys([]byte("open sesame"), nil); err != nil {
		t.Fatal(err)
	}
	encrypted := export(key, true)

	cases := map[string]struct {
		reason     string
		armored    []byte
		passphrase string
		err        string
	}{
		"Plain":         {"An unencrypted key.", plain, "", ""},
		"Encrypted":     {"An encrypted key with its passphrase.", encrypted, "open sesame", ""},
		"NoPassphrase":  {"An encrypted key needs the passphrase.", encrypted, "", "encrypted and no passphrase"},
		"BadPassphrase": {"The wrong passphrase, not printed.", encrypted, "close sesame", "does not decrypt"},
		"PublicOnly":    {"A public key cannot sign.", public, "", "no private key"},
		"Garbage":       {"Not a key at all.", []byte("hello"), "", "not an armored OpenPGP key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := update.ReadSigningKey(tc.armored, []byte(tc.passphrase))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || (tc.passphrase != "" && strings.Contains(err.Error(), tc.passphrase)) {
					t.Errorf("%s\nerror %v, want %q", tc.reason, err, tc.err)
				}
				return
			}
			if err != nil || e.PrivateKey == nil || e.PrivateKey.Encrypted {
				t.Errorf("%s\n%v", tc.reason, err)
			}
		})
	}
}

// TestNewRefuses: options that cannot work are refused before any poll.
func TestNewRefuses(t *testing.T) {
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := git.Source{URL: "https://git.example.com/org/repo.git", Ref: "main", CacheDir: t.TempDir()}
	cases := map[string]struct {
		reason string
		src    git.Source
		opts   update.Options
		err    string
	}{
		"BranchIsWatched": {"Branch mode cannot propose on the watched branch.", src, update.Options{Cache: cache, Branch: "main"}, "use --update-mode commit"},
		"NoCache":         {"A package cache is required.", src, update.Options{}, "cache is required"},
		"BadMode":         {"Unknown modes are refused.", src, update.Options{Cache: cache, Mode: "pr"}, "want branch, commit or off"},
		"HalfAuthor":      {"An author needs both name and email.", src, update.Options{Cache: cache, Author: git.Signature{Name: "x"}}, "name and an email"},
		"BadSource":       {"The Git source is validated.", git.Source{URL: "https://git.example.com/r.git"}, update.Options{Cache: cache}, "cache directory is required"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := update.New(tc.src, tc.opts); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s\nNew: %v, want %q", tc.reason, err, tc.err)
			}
		})
	}
	u, err := update.New(src, update.Options{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if st := u.Status(); st.Mode != update.ModeBranch || st.Branch != update.DefaultBranch || st.LastPoll != nil {
		t.Errorf("defaults: %+v", st)
	}
}
