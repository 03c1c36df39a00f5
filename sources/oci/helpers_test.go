package oci_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// examples is the example packages folder, so tests run without
// $LOCKSTEP_TESTDATA.
const examples = "../../examples/packages"

// fastRetry retries quickly, so that retry tests do not wait seconds.
var fastRetry = remote.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 3}

var (
	builtMu sync.Mutex
	built   = map[string]v1.Image{}
)

// example builds (once per test binary) the example package in
// examples/packages/<pkg> with xpkg.Build.
func example(t testing.TB, pkg string) v1.Image {
	t.Helper()
	builtMu.Lock()
	defer builtMu.Unlock()
	if img, ok := built[pkg]; ok {
		return img
	}
	img, err := xpkg.Build(filepath.Join(examples, pkg))
	if err != nil {
		t.Fatalf("build %s: %v", pkg, err)
	}
	built[pkg] = img
	return img
}

// parsed is what xpkg reads from img locally, the expected result of a pull.
func parsed(t testing.TB, img v1.Image) *xpkg.Package {
	t.Helper()
	p, err := xpkg.FromImage(img)
	if err != nil {
		t.Fatalf("parse local image: %v", err)
	}
	return p
}

// push writes img to the registry as repoTag ("org/name:tag") and returns
// its digest.
func push(t testing.TB, reg *registry.Registry, repoTag string, img v1.Image) v1.Hash {
	t.Helper()
	d, err := xpkg.Push(context.Background(), img, reg.Ref(t, repoTag), reg.RemoteOptions()...)
	if err != nil {
		t.Fatalf("push %s: %v", repoTag, err)
	}
	return d
}

// baseLayer returns the digest of img's io.crossplane.xpkg: base layer.
func baseLayer(t testing.TB, img v1.Image) v1.Hash {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		if l.Annotations[xpkg.LayerAnnotationKey] == xpkg.BaseLayerAnnotation {
			return l.Digest
		}
	}
	t.Fatal("image has no base layer")
	return v1.Hash{}
}

// options reaches reg over plain HTTP (or its TLS certificate) with fast
// retries.
func options(reg *registry.Registry) oci.Options {
	o := oci.Options{Transport: reg.Transport(), Retry: fastRetry}
	if !reg.TLS {
		o.InsecureRegistries = []string{reg.Host}
	}
	return o
}

// client returns a Client for reg with a cache in dir (a new temporary
// directory when empty).
func client(t testing.TB, opts oci.Options, dir string, ics ...pkgv1beta1.ImageConfig) *oci.Client {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cache, err := oci.NewCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := oci.NewClient(opts, cache, ics)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tag(t testing.TB, s string) name.Tag {
	t.Helper()
	ref, err := name.NewTag(s, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func digestRef(t testing.TB, repo string, d v1.Hash) name.Digest {
	t.Helper()
	ref, err := name.NewDigest(repo+"@"+d.String(), name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

func repository(t testing.TB, s string) name.Repository {
	t.Helper()
	r, err := name.NewRepository(s, name.StrictValidation)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// cacheFiles lists every file under the cache directory, temporary files
// included, relative to it.
func cacheFiles(t testing.TB, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	return files
}

// blobFile is the cache file of the blob d.
func blobFile(dir string, d v1.Hash) string {
	return filepath.Join(dir, "blobs", d.Algorithm, d.Hex)
}

// imageConfig returns an ImageConfig named n matching prefixes; rewrite, when
// not empty, is its spec.rewriteImage.prefix.
func imageConfig(n, rewrite string, prefixes ...string) pkgv1beta1.ImageConfig {
	ic := pkgv1beta1.ImageConfig{}
	ic.Name = n
	for _, p := range prefixes {
		ic.Spec.MatchImages = append(ic.Spec.MatchImages, pkgv1beta1.ImageMatch{Type: pkgv1beta1.Prefix, Prefix: p})
	}
	if rewrite != "" {
		ic.Spec.RewriteImage = &pkgv1beta1.ImageRewrite{Prefix: rewrite}
	}
	return ic
}

// verificationOf is a Cosign spec.verification listing authorities, each
// given as JSON; t, when not nil, fails the test on JSON it cannot read
// (nil panics instead, for package-level values).
func verificationOf(t testing.TB, authorities ...string) *pkgv1beta1.ImageVerification {
	v := &pkgv1beta1.ImageVerification{}
	err := json.Unmarshal([]byte(`{"provider":"Cosign","cosign":{"authorities":[`+strings.Join(authorities, ",")+`]}}`), v)
	switch {
	case err != nil && t != nil:
		t.Helper()
		t.Fatalf("spec.verification: %v", err)
	case err != nil:
		panic(err)
	}
	return v
}

// fault is a registry middleware that a test arms after it has pushed its
// images, so that only the client under test meets it.
type fault struct{ armed atomic.Bool }

// onRequest returns a middleware that, once armed, calls fn for every
// request; fn answers itself and returns true, or returns false to let the
// registry answer.
func (f *fault) onRequest(fn func(w http.ResponseWriter, r *http.Request) bool) registry.Option {
	return registry.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !f.armed.Load() || !fn(w, r) {
				next.ServeHTTP(w, r)
			}
		})
	})
}

// tamper returns a middleware that, once armed, serves the body of matching
// GET requests changed by change, with a fitting Content-Length.
func (f *fault) tamper(match func(*http.Request) bool, change func([]byte) []byte) registry.Option {
	return registry.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !f.armed.Load() || r.Method != http.MethodGet || !match(r) {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if rec.Code == http.StatusOK {
				body = change(bytes.Clone(body))
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
		})
	})
}

// isManifest reports whether r is for a manifest.
func isManifest(r *http.Request) bool { return strings.Contains(r.URL.Path, "/manifests/") }

// copyTag copies the manifest src to the tag dst in reg (both under reg).
func copyTag(t testing.TB, reg *registry.Registry, src, dst string) {
	t.Helper()
	img, err := remote.Image(reg.Ref(t, src), reg.RemoteOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(reg.Ref(t, dst), img, reg.RemoteOptions()...); err != nil {
		t.Fatal(err)
	}
}
