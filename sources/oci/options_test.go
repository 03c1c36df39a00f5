package oci_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/sources/oci"
)

func TestParseReference(t *testing.T) {
	o := oci.Options{InsecureRegistries: []string{"mirror.internal:5000"}}
	cases := map[string]struct {
		reason     string
		in         string
		wantErr    bool
		wantScheme string
	}{
		"TagOnHTTPS": {reason: "hosts not listed as insecure use HTTPS", in: "xpkg.crossplane.io/crossplane-contrib/provider-nop:v0.4.0", wantScheme: "https"},
		"Insecure":   {reason: "a listed host is reached over plain HTTP", in: "mirror.internal:5000/org/provider-nop:v0.4.0", wantScheme: "http"},
		"Digest":     {reason: "a digest reference parses", in: "xpkg.crossplane.io/org/p@sha256:" + strings.Repeat("a", 64), wantScheme: "https"},
		"NoTag":      {reason: "strict parsing refuses a reference without tag or digest", in: "xpkg.crossplane.io/org/p", wantErr: true},
		"BadDigest":  {reason: "a malformed digest is refused", in: "xpkg.crossplane.io/org/p@sha256:abc", wantErr: true},
		"UpperRepo":  {reason: "repositories are lower case", in: "xpkg.crossplane.io/Org/P:v1", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ref, err := o.ParseReference(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nParseReference(%q): err %v, want error %t", tc.reason, tc.in, err, tc.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tc.in) {
					t.Errorf("%s\nerror %q does not name the reference", tc.reason, err)
				}
				return
			}
			if got := ref.Context().Scheme(); got != tc.wantScheme {
				t.Errorf("%s\nscheme: got %s, want %s", tc.reason, got, tc.wantScheme)
			}
		})
	}
}

// TestKeychainFromRegistryConfig runs a registry that demands basic auth and
// shows that the credentials in a Docker config file given as RegistryConfig
// are sent, and that without them the push is refused.
func TestKeychainFromRegistryConfig(t *testing.T) {
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "robot" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	cfg := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte("robot:s3cret"))
	if err := os.WriteFile(cfg, []byte(`{"auths":{"`+host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(empty, []byte(`{"auths":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (oci.Options{RegistryConfig: filepath.Join(t.TempDir(), "missing.json")}).Keychain(); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Keychain with a missing config file: got %v, want an error naming the file", err)
	}
	img, _ := random.Image(64, 1)

	for name, tc := range map[string]struct {
		opts    oci.Options
		wantErr bool
	}{
		"WithConfig":    {opts: oci.Options{InsecureRegistries: []string{host}, RegistryConfig: cfg}},
		"NoCredentials": {opts: oci.Options{InsecureRegistries: []string{host}, RegistryConfig: empty}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			ref, err := tc.opts.ParseReference(host + "/org/pkg:v1")
			if err != nil {
				t.Fatal(err)
			}
			ropts, err := tc.opts.RemoteOptions(context.Background())
			if err != nil {
				t.Fatalf("RemoteOptions: %v", err)
			}
			err = remote.Write(ref, img, ropts...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("push: err %v, want error %t", err, tc.wantErr)
			}
		})
	}
}

// TestPlainHTTPNeedsInsecure: a plain-HTTP registry on loopback, which
// go-containerregistry alone would reach over HTTP, is refused unless listed.
func TestPlainHTTPNeedsInsecure(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, _ := random.Image(64, 1)
	for name, tc := range map[string]struct {
		opts    oci.Options
		wantErr bool
	}{
		"Listed":    {opts: oci.Options{InsecureRegistries: []string{host}}},
		"NotListed": {opts: oci.Options{}, wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			ref, err := tc.opts.ParseReference(host + "/org/pkg:v1")
			if err != nil {
				t.Fatal(err)
			}
			ropts, err := tc.opts.RemoteOptions(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			err = remote.Write(ref, img, ropts...)
			if (err != nil) != tc.wantErr {
				t.Fatalf("push: err %v, want error %t", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, oci.ErrPlainHTTP) {
				t.Errorf("push error %v does not wrap ErrPlainHTTP", err)
			}
		})
	}
}
