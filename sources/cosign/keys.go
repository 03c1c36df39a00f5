package cosign

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretKeys returns the KeySource of the agent and of apply: the key is
// read from the Secret in namespace (the Crossplane namespace, where
// Crossplane reads an ImageConfig's secretRef,
// crossplane/crossplane-runtime pkg/xpkg/signature/validate.go) on every
// call, so a rotated key applies at the next reconcile. Errors name the
// Secret and the key, never the Secret's data.
func SecretKeys(c client.Reader, namespace string) KeySource {
	return func(ctx context.Context, secret, key string) ([]byte, error) {
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: secret}, &s); err != nil {
			return nil, fmt.Errorf("cannot read Secret %s/%s: %w", namespace, secret, err)
		}
		b, ok := s.Data[key]
		if !ok || len(b) == 0 {
			return nil, fmt.Errorf("Secret %s/%s has no key %q", namespace, secret, key)
		}
		return b, nil
	}
}

// FileKeys returns the KeySource of the CLI, for a laptop or CI job without
// a cluster: files maps "SECRET" or "SECRET/KEY" to a PEM public key file,
// as --verification-key SECRET[/KEY]=FILE gives it; "SECRET/KEY" wins over
// "SECRET". fallback, when not nil, is asked for a Secret files does not
// name (apply reads the cluster's). Files are read on each call; a file
// that is not a PEM public key is an error naming the flag and the file.
func FileKeys(files map[string]string, fallback KeySource) KeySource {
	return func(ctx context.Context, secret, key string) ([]byte, error) {
		path, ok := files[secret+"/"+key]
		if !ok {
			path, ok = files[secret]
		}
		if !ok {
			if fallback != nil {
				return fallback(ctx, secret, key)
			}
			return nil, fmt.Errorf("no public key for Secret %s key %s: give it with --verification-key %s=FILE", secret, key, secret)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--verification-key %s: %w", secret, err)
		}
		if _, err := cryptoutils.UnmarshalPEMToPublicKey(b); err != nil {
			return nil, fmt.Errorf("--verification-key %s: file %s is not a PEM public key: %w", secret, path, err)
		}
		return b, nil
	}
}

// ParseKeyFlags parses --verification-key values, SECRET[/KEY]=FILE, into
// FileKeys' map. It fails on a value without "=" or with an empty part,
// naming the flag.
func ParseKeyFlags(values []string) (map[string]string, error) {
	out := make(map[string]string, len(values))
	for _, v := range values {
		k, file, ok := strings.Cut(v, "=")
		if !ok || k == "" || file == "" || strings.HasPrefix(k, "/") || strings.HasSuffix(k, "/") {
			return nil, fmt.Errorf("--verification-key %q: want SECRET=FILE or SECRET/KEY=FILE", v)
		}
		out[k] = file
	}
	return out, nil
}
