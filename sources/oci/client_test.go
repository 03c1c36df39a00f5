package oci_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

const provider = "provider-demo/v0.1.0"

func TestDigest(t *testing.T) {
	for n, opts := range map[string][]registry.Option{"PlainHTTP": nil, "TLS": {registry.WithTLS()}} {
		t.Run(n, func(t *testing.T) {
			reg := registry.New(t, opts...)
			want := push(t, reg, "org/provider-demo:v0.1.0", example(t, provider))
			reg.Reset()
			c := client(t, options(reg), "")
			ctx := context.Background()

			got, err := c.Digest(ctx, tag(t, reg.Host+"/org/provider-demo:v0.1.0"))
			if err != nil {
				t.Fatalf("Digest: %v", err)
			}
			if got != want {
				t.Errorf("Digest: got %s, want the pushed digest %s", got, want)
			}
			if n := reg.Count("HEAD", `^/v2/org/provider-demo/manifests/v0.1.0$`); n != 1 {
				t.Errorf("a tag resolves with one HEAD: got %d\n%s", n, reg.Summary())
			}
			if n := reg.Count("GET", `/manifests/`); n != 0 {
				t.Errorf("a HEAD that works needs no GET: got %d\n%s", n, reg.Summary())
			}

			before := len(reg.Requests())
			for range 3 {
				again, err := c.Digest(ctx, tag(t, reg.Host+"/org/provider-demo:v0.1.0"))
				if err != nil || again != want {
					t.Fatalf("repeated Digest: got %s, %v; want %s", again, err, want)
				}
			}
			if after := len(reg.Requests()); after != before {
				t.Errorf("repeated Digest calls in one run sent %d new requests, want 0\n%s", after-before, reg.Summary())
			}

			unknown := reg.Host + "/org/provider-demo:v9.9.9"
			_, err = c.Digest(ctx, tag(t, unknown))
			if err == nil || !strings.Contains(err.Error(), unknown) {
				t.Errorf("Digest of an unknown tag: got %v, want an error naming %s", err, unknown)
			}
			before = len(reg.Requests())
			if _, err2 := c.Digest(ctx, tag(t, unknown)); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("repeated Digest of an unknown tag: got %v, want the same error %v", err2, err)
			}
			if after := len(reg.Requests()); after != before {
				t.Errorf("a failed Digest is not asked again in one run: %d new requests\n%s", after-before, reg.Summary())
			}
		})
	}
}

func TestDigestHEADRefused(t *testing.T) {
	cases := map[string]struct {
		reason string
		status int
	}{
		"MethodNotAllowed": {reason: "a registry that refuses HEAD with 405 is asked with GET", status: http.StatusMethodNotAllowed},
		"NotFoundOnHEAD":   {reason: "a registry that answers 404 to HEAD only is asked with GET, as Crossplane does (docs/crossplane-behaviour.md#digest-resolution)", status: http.StatusNotFound},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			var f fault
			reg := registry.New(t, f.onRequest(func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method == http.MethodHead {
					w.WriteHeader(tc.status)
					return true
				}
				return false
			}))
			img := example(t, provider)
			want := push(t, reg, "org/provider-demo:v0.1.0", img)
			f.armed.Store(true)
			reg.Reset()
			c := client(t, options(reg), "")
			got, err := c.Digest(context.Background(), tag(t, reg.Host+"/org/provider-demo:v0.1.0"))
			if err != nil {
				t.Fatalf("%s\nDigest: %v", tc.reason, err)
			}
			if got != want {
				t.Errorf("%s\nDigest: got %s, want %s", tc.reason, got, want)
			}
			counts := []int{reg.Count("HEAD", `/manifests/v0.1.0$`), reg.Count("GET", `/manifests/v0.1.0$`)}
			if diff := cmp.Diff([]int{1, 1}, counts); diff != "" {
				t.Errorf("%s\nrequests (HEAD, GET) -want +got:\n%s\n%s", tc.reason, diff, reg.Summary())
			}

			// The GET already returned the manifest: pulling the package
			// fetches only its layer.
			got2, err := c.Package(context.Background(), digestRef(t, reg.Host+"/org/provider-demo", want))
			if err != nil {
				t.Fatalf("Package: %v", err)
			}
			if diff := cmp.Diff(parsed(t, img), got2.Package); diff != "" {
				t.Errorf("Package: -want +got:\n%s", diff)
			}
			if n := reg.Count("GET", `/manifests/sha256:`); n != 0 {
				t.Errorf("the manifest from the GET fallback is fetched again by digest %d times\n%s", n, reg.Summary())
			}
		})
	}
}

func TestTags(t *testing.T) {
	reg := registry.New(t)
	push(t, reg, "org/provider-demo:v0.1.0", example(t, provider))
	push(t, reg, "org/provider-demo:v0.2.0", example(t, "provider-demo/v0.2.0"))
	push(t, reg, "org/other:v1.0.0", example(t, provider))
	reg.Reset()
	c := client(t, options(reg), "")
	ctx := context.Background()

	got, err := c.Tags(ctx, repository(t, reg.Host+"/org/provider-demo"))
	if err != nil {
		t.Fatalf("Tags: %v", err)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"v0.1.0", "v0.2.0"}, got); diff != "" {
		t.Errorf("Tags: -want +got:\n%s", diff)
	}
	got[0] = "changed by the caller"
	again, err := c.Tags(ctx, repository(t, reg.Host+"/org/provider-demo"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(again)
	if diff := cmp.Diff([]string{"v0.1.0", "v0.2.0"}, again); diff != "" {
		t.Errorf("second Tags (a caller's change must not leak): -want +got:\n%s", diff)
	}
	if n := reg.Count("GET", `^/v2/org/provider-demo/tags/list$`); n != 1 {
		t.Errorf("two Tags calls in one run: %d tag list requests, want 1\n%s", n, reg.Summary())
	}

	missing := reg.Host + "/org/missing"
	if _, err := c.Tags(ctx, repository(t, missing)); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Tags of a missing repository: got %v, want an error naming %s", err, missing)
	}
}

func TestPackageColdThenWarm(t *testing.T) {
	for _, pkg := range []string{provider, "function-demo/v0.2.0", "configuration-demo/v0.1.0"} {
		t.Run(pkg, func(t *testing.T) {
			reg := registry.New(t)
			img := example(t, pkg)
			repo := reg.Host + "/lockstep-examples/" + strings.Split(pkg, "/")[0]
			d := push(t, reg, strings.TrimPrefix(repo, reg.Host+"/")+":v1", img)
			reg.Reset()
			dir := t.TempDir()
			ctx := context.Background()
			want := &oci.Fetched{Digest: d, LayerDigest: baseLayer(t, img), Package: parsed(t, img)}

			cold := client(t, options(reg), dir)
			got, err := cold.Package(ctx, digestRef(t, repo, d))
			if err != nil {
				t.Fatalf("cold Package: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cold Package: -want +got:\n%s", diff)
			}
			counts := []int{reg.Count("GET", `/manifests/`), reg.Count("GET", `/blobs/`), reg.Count("HEAD", ``)}
			if diff := cmp.Diff([]int{1, 1, 0}, counts); diff != "" {
				t.Errorf("a cold pull is one manifest and one base layer (GET manifest, GET blob, HEAD): -want +got:\n%s\n%s", diff, reg.Summary())
			}
			m, _ := img.Manifest()
			wantFiles := []string{"blobs/sha256/" + d.Hex, "blobs/sha256/" + m.Layers[0].Digest.Hex}
			slices.Sort(wantFiles)
			if diff := cmp.Diff(wantFiles, cacheFiles(t, dir)); diff != "" {
				t.Errorf("cache files (manifest and base layer, no temporary file): -want +got:\n%s", diff)
			}

			before := len(reg.Requests())
			if again, err := cold.Package(ctx, digestRef(t, repo, d)); err != nil || again != got {
				t.Errorf("second Package in the same run: got %p, %v; want the same result %p", again, err, got)
			}
			if after := len(reg.Requests()); after != before {
				t.Errorf("second Package in the same run sent %d requests", after-before)
			}

			reg.Reset()
			warm := client(t, options(reg), dir)
			got, err = warm.Package(ctx, digestRef(t, repo, d))
			if err != nil {
				t.Fatalf("warm Package: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("warm Package: -want +got:\n%s", diff)
			}
			if n := len(reg.Requests()); n != 0 {
				t.Errorf("a warm cache makes no request, got %d:\n%s", n, reg.Summary())
			}
			if s := warm.Stats(); s.Requests() != 0 || s.Bytes != 0 {
				t.Errorf("warm Stats: got %s, want nothing", s)
			}

			// The cache alone gives the same package.
			cache, err := oci.NewCache(dir)
			if err != nil {
				t.Fatal(err)
			}
			offline, err := cache.Package(d)
			if err != nil {
				t.Fatalf("Cache.Package: %v", err)
			}
			if diff := cmp.Diff(want, offline); diff != "" {
				t.Errorf("Cache.Package: -want +got:\n%s", diff)
			}
		})
	}
}

func TestPackageDigestMismatch(t *testing.T) {
	img := example(t, provider)
	d, _ := img.Digest()
	layer := baseLayer(t, img)
	flip := func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }
	cases := map[string]struct {
		reason string
		opt    func(*fault) registry.Option
	}{
		"TamperedLayer": {
			reason: "a layer whose bytes do not match its digest is refused and not cached",
			opt: func(f *fault) registry.Option {
				return f.tamper(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/blobs/"+layer.String()) }, flip)
			},
		},
		"TruncatedLayer": {
			reason: "a short layer is refused and not cached",
			opt: func(f *fault) registry.Option {
				return f.tamper(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/blobs/"+layer.String()) }, func(b []byte) []byte { return b[:len(b)-10] })
			},
		},
		"TamperedManifest": {
			reason: "a manifest whose bytes do not match the digest asked for is refused and not cached",
			opt: func(f *fault) registry.Option {
				return f.tamper(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/manifests/"+d.String()) }, func(b []byte) []byte { return append(b, ' ') })
			},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			var f fault
			reg := registry.New(t, tc.opt(&f))
			push(t, reg, "org/provider-demo:v0.1.0", img)
			f.armed.Store(true)
			dir := t.TempDir()
			ref := digestRef(t, reg.Host+"/org/provider-demo", d)
			_, err := client(t, options(reg), dir).Package(context.Background(), ref)
			if err == nil {
				t.Fatalf("%s\nPackage: got no error", tc.reason)
			}
			if !strings.Contains(err.Error(), ref.String()) {
				t.Errorf("%s\nerror %q does not name %s", tc.reason, err, ref)
			}
			if files := cacheFiles(t, dir); len(files) != 0 {
				t.Errorf("%s\ncache holds %v after a mismatch, want nothing", tc.reason, files)
			}
		})
	}
}

func TestPackageConcurrent(t *testing.T) {
	reg := registry.New(t, registry.WithLatency(20*time.Millisecond))
	img := example(t, "configuration-demo/v0.2.0")
	d := push(t, reg, "org/configuration-demo:v0.2.0", img)
	reg.Reset()
	c := client(t, options(reg), "")
	ref := digestRef(t, reg.Host+"/org/configuration-demo", d)

	const callers = 16
	results := make([]*oci.Fetched, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { results[i], errs[i] = c.Package(context.Background(), ref) })
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if results[i] != results[0] {
			t.Errorf("caller %d got a different result", i)
		}
	}
	counts := []int{reg.Count("GET", `/manifests/`), reg.Count("GET", `/blobs/`)}
	if diff := cmp.Diff([]int{1, 1}, counts); diff != "" {
		t.Errorf("%d concurrent callers pull once (GET manifest, GET blob): -want +got:\n%s\n%s", callers, diff, reg.Summary())
	}
}

func TestPackageIndex(t *testing.T) {
	amd := example(t, provider)
	arm := example(t, "provider-demo/v0.2.0")
	cases := map[string]struct {
		reason    string
		manifests []mutate.IndexAddendum
		want      v1.Image // nil: an error naming the platforms
	}{
		"AMD64AfterARM64": {
			reason: "the linux/amd64 manifest is taken, wherever it is in the index (docs/crossplane-behaviour.md#package-image)",
			manifests: []mutate.IndexAddendum{
				{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
				{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
			},
			want: amd,
		},
		"NoPlatform": {
			reason: "a manifest without platform counts as linux/amd64, as in go-containerregistry's remote.Image",
			manifests: []mutate.IndexAddendum{
				{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
				{Add: amd},
			},
			want: amd,
		},
		"NoAMD64": {
			reason: "an index without linux/amd64 is an error, as in Crossplane",
			manifests: []mutate.IndexAddendum{
				{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
			},
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			reg := registry.New(t)
			idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), tc.manifests...)
			ref := reg.Ref(t, "org/provider-demo:v1")
			if err := remote.WriteIndex(ref, idx, reg.RemoteOptions()...); err != nil {
				t.Fatal(err)
			}
			idxDigest, _ := idx.Digest()
			armDigest, _ := arm.Digest()
			reg.Reset()
			dir := t.TempDir()
			ctx := context.Background()
			c := client(t, options(reg), dir)

			got, err := c.Digest(ctx, tag(t, ref.String()))
			if err != nil || got != idxDigest {
				t.Fatalf("Digest of a tag on an index: got %s, %v; want the index digest %s", got, err, idxDigest)
			}
			f, err := c.Package(ctx, digestRef(t, reg.Host+"/org/provider-demo", idxDigest))
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), "linux/arm64") {
					t.Errorf("%s\nPackage: got %v, want an error listing linux/arm64", tc.reason, err)
				}
				if files := cacheFiles(t, dir); len(files) != 0 {
					t.Errorf("%s\ncache holds %v, want nothing", tc.reason, files)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nPackage: %v", tc.reason, err)
			}
			want := &oci.Fetched{Digest: idxDigest, LayerDigest: baseLayer(t, tc.want), Package: parsed(t, tc.want)}
			if diff := cmp.Diff(want, f); diff != "" {
				t.Errorf("%s\nPackage: -want +got:\n%s", tc.reason, diff)
			}
			if n := reg.Count("", armDigest.String()); n != 0 {
				t.Errorf("%s\nthe arm64 manifest was fetched %d times", tc.reason, n)
			}
			if n := reg.Count("GET", `/manifests/sha256:`); n != 2 {
				t.Errorf("%s\nmanifest GETs: got %d, want 2 (index and linux/amd64)\n%s", tc.reason, n, reg.Summary())
			}

			reg.Reset()
			warm, err := client(t, options(reg), dir).Package(ctx, digestRef(t, reg.Host+"/org/provider-demo", idxDigest))
			if err != nil {
				t.Fatalf("warm Package: %v", err)
			}
			if diff := cmp.Diff(want, warm); diff != "" {
				t.Errorf("warm Package: -want +got:\n%s", diff)
			}
			if n := len(reg.Requests()); n != 0 {
				t.Errorf("a warm index makes no request, got:\n%s", reg.Summary())
			}
		})
	}
}

func TestPackageFlattened(t *testing.T) {
	pkgLayers, err := example(t, provider).Layers()
	if err != nil {
		t.Fatal(err)
	}
	other, err := random.Layer(512, types.OCILayer)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), other, pkgLayers[0])
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(t)
	d := push(t, reg, "org/legacy:v1", img)
	reg.Reset()
	dir := t.TempDir()
	ref := digestRef(t, reg.Host+"/org/legacy", d)
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	// Zero LayerDigest: no base layer; LayersDigest covers both layers.
	want := &oci.Fetched{Digest: d, LayersDigest: oci.LayersDigestOf(m.Layers), Package: parsed(t, img)}

	got, err := client(t, options(reg), dir).Package(context.Background(), ref)
	if err != nil {
		t.Fatalf("Package: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Package of an image without base layer: -want +got:\n%s", diff)
	}
	if n := reg.Count("GET", `/blobs/`); n != 2 {
		t.Errorf("without a base layer every layer is pulled: got %d blob GETs, want 2\n%s", n, reg.Summary())
	}
	reg.Reset()
	if _, err := client(t, options(reg), dir).Package(context.Background(), ref); err != nil {
		t.Fatalf("warm Package: %v", err)
	}
	if n := len(reg.Requests()); n != 0 {
		t.Errorf("warm Package made requests:\n%s", reg.Summary())
	}
}

func TestImageConfigRewrite(t *testing.T) {
	reg := registry.New(t)
	img := example(t, provider)
	want := push(t, reg, "upbound/provider-demo:v0.1.0", img)
	push(t, reg, "decoy/upbound/provider-demo:v0.1.0", example(t, "provider-demo/v0.2.0"))
	reg.Reset()
	ics := []pkgv1beta1.ImageConfig{
		imageConfig("registry", reg.Host+"/decoy", "xpkg.upbound.io"),
		imageConfig("upbound", reg.Host+"/upbound", "xpkg.upbound.io/upbound"),
	}
	ctx := context.Background()
	c := client(t, options(reg), "", ics...)

	const source = "xpkg.upbound.io/upbound/provider-demo"
	d, err := c.Digest(ctx, tag(t, source+":v0.1.0"))
	if err != nil {
		t.Fatalf("Digest: %v", err)
	}
	if d != want {
		t.Errorf("Digest through the longest-prefix ImageConfig: got %s, want %s (the decoy has another digest)", d, want)
	}
	tags, err := c.Tags(ctx, repository(t, source))
	if err != nil || !slices.Equal(tags, []string{"v0.1.0"}) {
		t.Errorf("Tags: got %v, %v; want [v0.1.0]", tags, err)
	}
	f, err := c.Package(ctx, digestRef(t, source, d))
	if err != nil {
		t.Fatalf("Package: %v", err)
	}
	if diff := cmp.Diff(&oci.Fetched{Digest: want, LayerDigest: baseLayer(t, img), Package: parsed(t, img)}, f); diff != "" {
		t.Errorf("Package: -want +got:\n%s", diff)
	}
	if n := reg.Count("", `^/v2/upbound/provider-demo/`); n < 4 {
		t.Errorf("requests to the rewritten repository: got %d, want HEAD, tags, manifest and blob\n%s", n, reg.Summary())
	}
	if n := reg.Count("", `decoy`); n != 0 {
		t.Errorf("the shorter-prefix ImageConfig was used %d times\n%s", n, reg.Summary())
	}
	if got := c.ImageConfig(source + ":v0.1.0").RewriteImageConfig; got != "upbound" {
		t.Errorf("ImageConfig: got rewrite by %q, want upbound", got)
	}

	// The rewritten host is plain HTTP only when it is listed.
	secure := options(reg)
	secure.InsecureRegistries = nil
	_, err = client(t, secure, "", ics...).Digest(ctx, tag(t, source+":v0.1.0"))
	if !errors.Is(err, oci.ErrPlainHTTP) {
		t.Errorf("Digest through a rewrite to an unlisted plain-HTTP host: got %v, want ErrPlainHTTP", err)
	}
	if err != nil && (!strings.Contains(err.Error(), source+":v0.1.0") || !strings.Contains(err.Error(), reg.Host+"/upbound/provider-demo:v0.1.0")) {
		t.Errorf("error %q does not name the reference and where it was pulled from", err)
	}
}

func TestRetry(t *testing.T) {
	img := example(t, provider)
	layer := baseLayer(t, img)
	failFirst := func(status int, match func(*http.Request) bool) func(*fault) registry.Option {
		var failed atomic.Bool
		return func(f *fault) registry.Option {
			return f.onRequest(func(w http.ResponseWriter, r *http.Request) bool {
				if match(r) && !failed.Swap(true) {
					w.WriteHeader(status)
					return true
				}
				return false
			})
		}
	}
	failAlways := func(status int, match func(*http.Request) bool) func(*fault) registry.Option {
		return func(f *fault) registry.Option {
			return f.onRequest(func(w http.ResponseWriter, r *http.Request) bool {
				if match(r) {
					w.WriteHeader(status)
					return true
				}
				return false
			})
		}
	}
	head := func(r *http.Request) bool { return r.Method == http.MethodHead && isManifest(r) }
	blob := func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/blobs/"+layer.String()) }
	cases := map[string]struct {
		reason  string
		opt     func(*fault) registry.Option
		tag     string
		wantErr bool
		method  string
		path    string
		want    int
		// wantGETs, when not negative, is the number of manifest GETs.
		wantGETs int
	}{
		"503OnceOnHEAD": {
			reason: "a 503 is transient: the HEAD is sent again and succeeds",
			opt:    failFirst(http.StatusServiceUnavailable, head), tag: "v0.1.0",
			method: "HEAD", path: `/manifests/v0.1.0$`, want: 2, wantGETs: 1,
		},
		"429OnceOnBlob": {
			reason: "a 429 is transient: the layer is fetched again and succeeds",
			opt:    failFirst(http.StatusTooManyRequests, blob), tag: "v0.1.0",
			method: "GET", path: `/blobs/`, want: 2, wantGETs: 1,
		},
		"404NotRetried": {
			reason: "a 404 is final: one HEAD (and Crossplane's one GET fallback), no retry",
			opt:    failAlways(http.StatusNotFound, isManifest), tag: "v0.1.0", wantErr: true,
			method: "HEAD", path: `/manifests/`, want: 1, wantGETs: 1,
		},
		"500Exhausted": {
			reason: "a lasting 500 is tried Retry.Steps times, then the GET fallback too, then reported",
			opt:    failAlways(http.StatusInternalServerError, isManifest), tag: "v0.1.0", wantErr: true,
			method: "HEAD", path: `/manifests/`, want: fastRetry.Steps, wantGETs: fastRetry.Steps,
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			var f fault
			reg := registry.New(t, tc.opt(&f))
			want := push(t, reg, "org/provider-demo:v0.1.0", img)
			f.armed.Store(true)
			reg.Reset()
			c := client(t, options(reg), "")
			ref := reg.Host + "/org/provider-demo:" + tc.tag
			got, err := c.Digest(context.Background(), tag(t, ref))
			if err == nil {
				_, err = c.Package(context.Background(), digestRef(t, reg.Host+"/org/provider-demo", got))
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\ngot error %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), ref) {
				t.Errorf("%s\nerror %q does not name %s", tc.reason, err, ref)
			}
			if err == nil && got != want {
				t.Errorf("%s\nDigest: got %s, want %s", tc.reason, got, want)
			}
			if n := reg.Count(tc.method, tc.path); n != tc.want {
				t.Errorf("%s\n%s %s requests: got %d, want %d\n%s", tc.reason, tc.method, tc.path, n, tc.want, reg.Summary())
			}
			if n := reg.Count("GET", `/manifests/`); n != tc.wantGETs {
				t.Errorf("%s\nmanifest GET requests: got %d, want %d\n%s", tc.reason, n, tc.wantGETs, reg.Summary())
			}
		})
	}
}

func TestJobsBound(t *testing.T) {
	for _, jobs := range []int{1, 2, 4} {
		t.Run("Jobs"+strconv.Itoa(jobs), func(t *testing.T) {
			var inFlight, peak atomic.Int64
			reg := registry.New(t, registry.WithLatency(30*time.Millisecond), registry.WithMiddleware(func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n := inFlight.Add(1)
					defer inFlight.Add(-1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() { //nolint:revive // the loop condition does the work
					}
					next.ServeHTTP(w, r)
				})
			}))
			img := example(t, provider)
			const tags = 8
			var pushes sync.WaitGroup
			pushErrs := make([]error, tags)
			for i := range tags {
				ref := reg.Ref(t, "org/provider-demo:v0."+strconv.Itoa(i)+".0")
				pushes.Go(func() { pushErrs[i] = remote.Write(ref, img, reg.RemoteOptions()...) })
			}
			pushes.Wait()
			if err := errors.Join(pushErrs...); err != nil {
				t.Fatal(err)
			}
			peak.Store(0)
			opts := options(reg)
			opts.Jobs = jobs
			c := client(t, opts, "")
			var wg sync.WaitGroup
			errs := make([]error, tags)
			for i := range tags {
				ref := tag(t, reg.Host+"/org/provider-demo:v0."+strconv.Itoa(i)+".0")
				wg.Go(func() { _, errs[i] = c.Digest(context.Background(), ref) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if got := peak.Load(); got != int64(jobs) {
				t.Errorf("Jobs=%d: at most %d requests were in flight, want exactly %d (bounded, and used)", jobs, got, jobs)
			}
		})
	}
}

func TestCorruptCacheEntry(t *testing.T) {
	img := example(t, provider)
	d, _ := img.Digest()
	layer := baseLayer(t, img)
	cases := map[string]struct {
		reason        string
		corrupt       v1.Hash
		change        func([]byte) []byte
		wantManifests int
		wantBlobs     int
	}{
		"LayerBitFlip": {
			reason:  "a layer that no longer matches its digest is removed and pulled again; the intact manifest is reused",
			corrupt: layer, change: func(b []byte) []byte { b[len(b)/2] ^= 1; return b },
			wantManifests: 0, wantBlobs: 1,
		},
		"LayerTruncated": {
			reason:  "a truncated layer is removed and pulled again",
			corrupt: layer, change: func(b []byte) []byte { return b[:len(b)/2] },
			wantManifests: 0, wantBlobs: 1,
		},
		"ManifestChanged": {
			reason:  "a manifest that no longer matches its digest is removed and pulled again; the intact layer is reused",
			corrupt: d, change: func(b []byte) []byte { return append(b, ' ') },
			wantManifests: 1, wantBlobs: 0,
		},
	}
	for n, tc := range cases {
		t.Run(n, func(t *testing.T) {
			reg := registry.New(t)
			push(t, reg, "org/provider-demo:v0.1.0", img)
			dir := t.TempDir()
			ref := digestRef(t, reg.Host+"/org/provider-demo", d)
			if _, err := client(t, options(reg), dir).Package(context.Background(), ref); err != nil {
				t.Fatal(err)
			}
			file := blobFile(dir, tc.corrupt)
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, tc.change(b), 0o600); err != nil {
				t.Fatal(err)
			}

			cache, err := oci.NewCache(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cache.Package(d); !errors.Is(err, oci.ErrCorrupt) {
				t.Errorf("%s\nCache.Package: got %v, want ErrCorrupt", tc.reason, err)
			}
			if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s\nthe corrupt blob is still in the cache (%v)", tc.reason, err)
			}
			if _, err := cache.Package(d); !errors.Is(err, oci.ErrNotCached) {
				t.Errorf("%s\nCache.Package after removal: got %v, want ErrNotCached", tc.reason, err)
			}

			reg.Reset()
			f, err := client(t, options(reg), dir).Package(context.Background(), ref)
			if err != nil {
				t.Fatalf("%s\nPackage after corruption: %v", tc.reason, err)
			}
			if diff := cmp.Diff(parsed(t, img), f.Package); diff != "" {
				t.Errorf("%s\nPackage after corruption: -want +got:\n%s", tc.reason, diff)
			}
			counts := []int{reg.Count("GET", `/manifests/`), reg.Count("GET", `/blobs/`)}
			if diff := cmp.Diff([]int{tc.wantManifests, tc.wantBlobs}, counts); diff != "" {
				t.Errorf("%s\nrepair requests (GET manifest, GET blob): -want +got:\n%s", tc.reason, diff)
			}
			if _, err := cache.Package(d); err != nil {
				t.Errorf("%s\nCache.Package after the repair: %v", tc.reason, err)
			}
		})
	}
}

func TestStats(t *testing.T) {
	reg := registry.New(t)
	img := example(t, provider)
	push(t, reg, "org/provider-demo:v0.1.0", img)
	reg.Reset()
	c := client(t, options(reg), "")
	ctx := context.Background()
	d, err := c.Digest(ctx, tag(t, reg.Host+"/org/provider-demo:v0.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tags(ctx, repository(t, reg.Host+"/org/provider-demo")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Package(ctx, digestRef(t, reg.Host+"/org/provider-demo", d)); err != nil {
		t.Fatal(err)
	}
	got := c.Stats()
	byKind := oci.Stats{
		Head:      reg.Count("HEAD", `/manifests/`),
		Tags:      reg.Count("GET", `/tags/list$`),
		Manifests: reg.Count("GET", `/manifests/`),
		Blobs:     reg.Count("", `/blobs/`),
		Bytes:     got.Bytes,
	}
	byKind.Other = len(reg.Requests()) - byKind.Head - byKind.Tags - byKind.Manifests - byKind.Blobs
	if diff := cmp.Diff(byKind, got); diff != "" {
		t.Errorf("Stats against the registry's own counts: -want +got:\n%s\n%s", diff, reg.Summary())
	}
	if diff := cmp.Diff([]int{1, 1, 1, 1}, []int{got.Head, got.Tags, got.Manifests, got.Blobs}); diff != "" {
		t.Errorf("Stats (HEAD, tags, manifest, blob): -want +got:\n%s", diff)
	}
	raw, _ := img.RawManifest()
	m, _ := img.Manifest()
	if min := int64(len(raw)) + m.Layers[0].Size; got.Bytes < min || got.Bytes > min+4096 {
		t.Errorf("Stats.Bytes: got %d, want the manifest and layer (%d bytes) plus small answers", got.Bytes, min)
	}
}

func TestErrorsRedactCredentials(t *testing.T) {
	const user, password = "robot", "hunter2-s3cret"
	var f fault
	f.armed.Store(true)
	reg := registry.New(t, f.onRequest(func(w http.ResponseWriter, _ *http.Request) bool {
		w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusUnauthorized)
		return true
	}))
	cfg := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	if err := os.WriteFile(cfg, []byte(`{"auths":{"`+reg.Host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := options(reg)
	opts.RegistryConfig = cfg
	c := client(t, opts, "")
	ref := reg.Host + "/org/private:v1"
	_, err := c.Digest(context.Background(), tag(t, ref))
	if err == nil {
		t.Fatal("Digest with refused credentials: got no error")
	}
	if !strings.Contains(err.Error(), ref) {
		t.Errorf("error %q does not name %s", err, ref)
	}
	if s := err.Error(); strings.Contains(s, password) || strings.Contains(s, auth) {
		t.Errorf("error %q reveals the credentials", s)
	}
}

// TestOnePingPerRegistry: go-containerregistry pings a registry before it
// talks to each repository; for a registry without token auth the Client
// shares one transport, so three repositories cost two pings (one to learn
// the auth scheme, one as go-containerregistry builds the transport), not
// three.
func TestOnePingPerRegistry(t *testing.T) {
	reg := registry.New(t)
	img := example(t, provider)
	for _, repo := range []string{"org/a", "org/b", "other/c"} {
		push(t, reg, repo+":v1", img)
	}
	reg.Reset()
	c := client(t, options(reg), "")
	for _, repo := range []string{"org/a", "org/b", "other/c"} {
		if _, err := c.Digest(context.Background(), tag(t, reg.Host+"/"+repo+":v1")); err != nil {
			t.Fatal(err)
		}
	}
	if n := reg.Count("GET", `^/v2/$`); n != 2 {
		t.Errorf("pings for three repositories on one registry: got %d, want 2\n%s", n, reg.Summary())
	}
}

// bearerAuth is a registry middleware that demands Docker token auth, as
// xpkg.upbound.io or ghcr.io do: /token exchanges basic credentials for a
// token naming the scopes asked for, and a repository request needs a token
// with that repository's pull scope, else it gets a 401 challenge naming
// the scope.
type bearerAuth struct {
	fault
	host, user, password string

	mu     sync.Mutex
	tokens [][]string // the scopes of every token issued
}

var repoPath = regexp.MustCompile(`^/v2/(.+)/(manifests|blobs|tags)/`)

func (a *bearerAuth) option() registry.Option {
	return a.onRequest(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/token" {
			if u, p, ok := r.BasicAuth(); !ok || u != a.user || p != a.password {
				w.WriteHeader(http.StatusUnauthorized)
				return true
			}
			scopes := r.URL.Query()["scope"]
			a.mu.Lock()
			a.tokens = append(a.tokens, scopes)
			a.mu.Unlock()
			tok := base64.RawURLEncoding.EncodeToString([]byte(strings.Join(scopes, " ")))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"token":"` + tok + `"}`))
			return true
		}
		challenge := `Bearer realm="http://` + a.host + `/token",service="test"`
		granted := ""
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			b, err := base64.RawURLEncoding.DecodeString(tok)
			if err == nil {
				granted = " " + string(b) + " "
			}
		}
		allowed := granted != ""
		if m := repoPath.FindStringSubmatch(r.URL.Path); m != nil {
			scope := "repository:" + m[1] + ":pull"
			challenge += `,scope="` + scope + `"`
			allowed = strings.Contains(granted, " "+scope+" ")
		}
		if allowed {
			return false
		}
		w.Header().Set("WWW-Authenticate", challenge)
		w.WriteHeader(http.StatusUnauthorized)
		return true
	})
}

func TestBearerTokenAuth(t *testing.T) {
	a := &bearerAuth{user: "robot", password: "hunter2-s3cret"}
	reg := registry.New(t, a.option())
	a.host = reg.Host
	img := example(t, provider)
	d := push(t, reg, "org/a:v1", img)
	push(t, reg, "org/b:v1", img)
	a.armed.Store(true)
	reg.Reset()

	cfg := filepath.Join(t.TempDir(), "config.json")
	auth := base64.StdEncoding.EncodeToString([]byte(a.user + ":" + a.password))
	if err := os.WriteFile(cfg, []byte(`{"auths":{"`+reg.Host+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := options(reg)
	opts.RegistryConfig = cfg
	c := client(t, opts, "")
	ctx := context.Background()
	for _, repo := range []string{"org/a", "org/b"} {
		got, err := c.Digest(ctx, tag(t, reg.Host+"/"+repo+":v1"))
		if err != nil {
			t.Fatalf("Digest %s: %v", repo, err)
		}
		if got != d {
			t.Errorf("Digest %s: got %s, want %s", repo, got, d)
		}
	}
	f, err := c.Package(ctx, digestRef(t, reg.Host+"/org/b", d))
	if err != nil {
		t.Fatalf("Package: %v", err)
	}
	if diff := cmp.Diff(parsed(t, img), f.Package); diff != "" {
		t.Errorf("Package: -want +got:\n%s", diff)
	}
	want := [][]string{{"repository:org/a:pull"}, {"repository:org/b:pull"}}
	if diff := cmp.Diff(want, a.tokens); diff != "" {
		t.Errorf("tokens issued (one per repository, each scoped to it alone): -want +got:\n%s", diff)
	}
	if n := reg.Count("GET", `^/v2/$`); n != 3 {
		t.Errorf("pings: got %d, want 3 (the auth scheme, then one per repository as go-containerregistry does for token auth)\n%s", n, reg.Summary())
	}

	wrong := filepath.Join(t.TempDir(), "config.json")
	bad := base64.StdEncoding.EncodeToString([]byte(a.user + ":wrong-" + a.password))
	if err := os.WriteFile(wrong, []byte(`{"auths":{"`+reg.Host+`":{"auth":"`+bad+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.RegistryConfig = wrong
	ref := reg.Host + "/org/a:v1"
	_, err = client(t, opts, "").Digest(ctx, tag(t, ref))
	if err == nil || !strings.Contains(err.Error(), ref) {
		t.Errorf("Digest with wrong credentials: got %v, want an error naming %s", err, ref)
	}
	if err != nil && (strings.Contains(err.Error(), a.password) || strings.Contains(err.Error(), bad)) {
		t.Errorf("error %q reveals the credentials", err)
	}
}
