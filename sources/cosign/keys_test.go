package cosign_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/sources/cosign"
)

// TestFileKeysNamesTheFile: a --verification-key file that is not a PEM
// public key is reported as that file and flag, not as a cluster Secret.
func TestFileKeysNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pub")
	if err := os.WriteFile(garbage, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := cosign.FileKeys(map[string]string{"release": garbage}, nil)
	_, err := keys(context.Background(), "release", "cosign.pub")
	if err == nil {
		t.Fatal("a file that is not a PEM public key was accepted")
	}
	for _, want := range []string{"--verification-key release", garbage, "not a PEM public key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "Secret") {
		t.Errorf("error %q speaks of a Secret for a file", err)
	}
}
