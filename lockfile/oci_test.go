package lockfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// The resolver's Registry is sources/oci's Client.
var _ Registry = (*oci.Client)(nil)

// ociClient returns a real registry client for r with its package cache in
// cacheDir, applying the ImageConfigs of set.
func ociClient(t testing.TB, r *registry.Registry, cacheDir string, set *declarations.Set) *oci.Client {
	t.Helper()
	cache, err := oci.NewCache(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	ics, err := declarations.CrossplaneImageConfigs(set.ImageConfigs)
	if err != nil {
		t.Fatal(err)
	}
	c, err := oci.NewClient(oci.Options{
		InsecureRegistries: []string{r.Host},
		Transport:          r.Transport(),
		Retry:              remote.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 2},
	}, cache, ics)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rewriteTo is an ImageConfig declaration that sends every reference
// starting with prefix to the in-process registry, as a mirror would.
func rewriteTo(r *registry.Registry, prefix string) string {
	return fmt.Sprintf(`apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: test-registry
spec:
  matchImages:
  - prefix: %s/
  rewriteImage:
    prefix: %s/
`, prefix, r.Host)
}

// pushImage pushes img to r as repoTag ("org/name:tag").
func pushImage(t testing.TB, r *registry.Registry, repoTag string, img v1.Image) string {
	t.Helper()
	d, err := pushImageErr(r, repoTag, img)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// pushImageErr is pushImage for other goroutines than the test's.
func pushImageErr(r *registry.Registry, repoTag string, img v1.Image) (string, error) {
	ref, err := name.ParseReference(r.Host+"/"+repoTag, name.Insecure)
	if err != nil {
		return "", err
	}
	d, err := xpkg.Push(context.Background(), img, ref, r.RemoteOptions()...)
	if err != nil {
		return "", fmt.Errorf("push %s: %w", repoTag, err)
	}
	return d.String(), nil
}

// requests summarises the registry's requests by kind, as the issue counts
// them: HEAD per tag, tag lists, manifest GETs and blob GETs (a pull is a
// manifest and its package.yaml layer).
type requests struct{ Head, Tags, Manifests, Blobs, All int }

func countRequests(r *registry.Registry) requests {
	return requests{
		Head:      r.Count("HEAD", `/manifests/`),
		Tags:      r.Count("GET", `/tags/list$`),
		Manifests: r.Count("GET", `/manifests/`),
		Blobs:     r.Count("GET", `/blobs/`),
		All:       len(r.Requests()),
	}
}

// testdataFolder maps a folder of $LOCKSTEP_TESTDATA/packages to the
// repository its dependents name on xpkg.upbound.io (INDEX.md): functions
// and provider-nop under crossplane-contrib, provider-grafana under grafana,
// everything else (Upbound's Configurations, the upjet-aws providers, and
// the provider-helm and provider-kubernetes re-publishes) under upbound.
// Folders without a version suffix are not published packages.
var testdataFolder = regexp.MustCompile(`^(.+)-(v\d+\.\d+\.\d+)$`)

func testdataRepository(folder string) (repo, tag string, ok bool) {
	m := testdataFolder.FindStringSubmatch(folder)
	if m == nil {
		return "", "", false
	}
	org := "upbound"
	switch {
	case strings.HasPrefix(m[1], "function-"), m[1] == "provider-nop":
		org = "crossplane-contrib"
	case m[1] == "provider-grafana":
		org = "grafana"
	}
	return org + "/" + m[1], m[2], true
}

var (
	testdataOnce sync.Once
	testdataImgs map[string]v1.Image // "org/name:tag" -> image
	testdataErr  error
)

// testdataImages builds every versioned package folder once per test
// binary.
func testdataImages(t testing.TB) map[string]v1.Image {
	t.Helper()
	root := os.Getenv("LOCKSTEP_TESTDATA")
	if root == "" {
		t.Skip("LOCKSTEP_TESTDATA is not set: the real Crossplane packages (../shared/testdata) are needed; make test sets it")
	}
	testdataOnce.Do(func() {
		dirs, err := os.ReadDir(filepath.Join(root, "packages"))
		if err != nil {
			testdataErr = err
			return
		}
		testdataImgs = map[string]v1.Image{}
		for _, d := range dirs {
			repo, tag, ok := testdataRepository(d.Name())
			if !d.IsDir() || !ok {
				continue
			}
			img, err := xpkg.Build(filepath.Join(root, "packages", d.Name()))
			if err != nil {
				testdataErr = fmt.Errorf("build %s: %w", d.Name(), err)
				return
			}
			testdataImgs[repo+":"+tag] = img
		}
	})
	if testdataErr != nil {
		t.Fatal(testdataErr)
	}
	return testdataImgs
}

// TestLockRealPackages locks real Configurations with their whole
// dependency trees from an in-process registry holding every package of
// $LOCKSTEP_TESTDATA/packages under the source its dependents name, mapped
// onto the registry with an ImageConfig rewrite of xpkg.upbound.io. The
// locked versions are the ones INDEX.md says the constraints allow,
// including the cross-major family resolution (item 3) and the upbound
// re-publishes of provider-helm and provider-kubernetes.
func TestLockRealPackages(t *testing.T) {
	imgs := testdataImages(t)
	r := registry.New(t)
	keys := make([]string, 0, len(imgs))
	for k := range imgs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		pushImage(t, r, k, imgs[k])
	}

	network := []string{
		"Configuration configuration-aws-network xpkg.upbound.io/upbound/configuration-aws-network v0.23.0",
		"Function crossplane-contrib-function-auto-ready xpkg.upbound.io/crossplane-contrib/function-auto-ready v0.4.2",
		"Function crossplane-contrib-function-go-templating xpkg.upbound.io/crossplane-contrib/function-go-templating v0.9.2",
		"Function crossplane-contrib-function-kcl xpkg.upbound.io/crossplane-contrib/function-kcl v0.11.2",
		"Provider upbound-provider-aws-ec2 xpkg.upbound.io/upbound/provider-aws-ec2 v1.23.0",
		"Provider upbound-provider-family-aws xpkg.upbound.io/upbound/provider-family-aws v2.6.0",
	}
	platform := []string{
		"Configuration platform-ref-aws xpkg.upbound.io/upbound/platform-ref-aws v1.4.0",
		"Configuration upbound-configuration-app xpkg.upbound.io/upbound/configuration-app v0.11.0",
		"Configuration upbound-configuration-aws-database xpkg.upbound.io/upbound/configuration-aws-database v0.15.0",
		"Configuration upbound-configuration-aws-eks xpkg.upbound.io/upbound/configuration-aws-eks v0.16.0",
		"Configuration upbound-configuration-aws-eks-pod-identity xpkg.upbound.io/upbound/configuration-aws-eks-pod-identity v0.5.0",
		"Configuration upbound-configuration-aws-lb-controller xpkg.upbound.io/upbound/configuration-aws-lb-controller v0.3.0",
		"Configuration upbound-configuration-aws-network xpkg.upbound.io/upbound/configuration-aws-network v0.23.0",
		"Configuration upbound-configuration-gitops-flux xpkg.upbound.io/upbound/configuration-gitops-flux v0.10.0",
		"Configuration upbound-configuration-observability-oss xpkg.upbound.io/upbound/configuration-observability-oss v0.9.0",
		"Function crossplane-contrib-function-auto-ready xpkg.upbound.io/crossplane-contrib/function-auto-ready v0.4.2",
		"Function crossplane-contrib-function-cel-filter xpkg.upbound.io/crossplane-contrib/function-cel-filter v0.1.1",
		"Function crossplane-contrib-function-go-templating xpkg.upbound.io/crossplane-contrib/function-go-templating v0.9.2",
		"Function crossplane-contrib-function-kcl xpkg.upbound.io/crossplane-contrib/function-kcl v0.11.2",
		"Function crossplane-contrib-function-patch-and-transform xpkg.upbound.io/crossplane-contrib/function-patch-and-transform v0.8.2",
		"Function crossplane-contrib-function-sequencer xpkg.upbound.io/crossplane-contrib/function-sequencer v0.2.2",
		"Provider grafana-provider-grafana xpkg.upbound.io/grafana/provider-grafana v0.8.0",
		"Provider upbound-provider-aws-ec2 xpkg.upbound.io/upbound/provider-aws-ec2 v1.23.0",
		"Provider upbound-provider-aws-eks xpkg.upbound.io/upbound/provider-aws-eks v1.23.0",
		"Provider upbound-provider-aws-iam xpkg.upbound.io/upbound/provider-aws-iam v1.23.0",
		"Provider upbound-provider-aws-rds xpkg.upbound.io/upbound/provider-aws-rds v1.23.0",
		"Provider upbound-provider-family-aws xpkg.upbound.io/upbound/provider-family-aws v2.6.0",
		"Provider upbound-provider-helm xpkg.upbound.io/upbound/provider-helm v0.21.0",
		"Provider upbound-provider-kubernetes xpkg.upbound.io/upbound/provider-kubernetes v0.18.0",
	}
	cases := map[string]struct {
		reason string
		name   string
		ref    string
		want   []string
	}{
		"ConfigurationAwsNetwork": {
			reason: "INDEX.md: v1 picks provider-aws-ec2 v1.23.0 over v2.6.0, and its family dependency >= 0.0.0 picks the v2.6.0 family (item 3).",
			name:   "configuration-aws-network",
			ref:    "xpkg.upbound.io/upbound/configuration-aws-network:v0.23.0",
			want:   network,
		},
		"PlatformRefAws": {
			reason: "INDEX.md: the closure of platform-ref-aws v1.4.0 is 9 Configurations, 8 Providers and 6 Functions; v0 picks provider-helm v0.21.0 and provider-kubernetes v0.18.0.",
			name:   "platform-ref-aws",
			ref:    "xpkg.upbound.io/upbound/platform-ref-aws:v1.4.0",
			want:   platform,
		},
	}
	for caseName, tc := range cases {
		t.Run(caseName, func(t *testing.T) {
			set := declare(t, map[string]string{
				"platform.yaml":     decl("Configuration", tc.name, tc.ref),
				"imageconfigs.yaml": rewriteTo(r, "xpkg.upbound.io"),
			})
			cacheDir := t.TempDir()
			r.Reset()
			res, err := resolve(t, ociClient(t, r, cacheDir, set), set, nil, Options{})
			if err != nil {
				t.Fatalf("%s\nResolve: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, versions(res.Lock)); diff != "" {
				t.Errorf("%s\nlocked: -want +got:\n%s", tc.reason, diff)
			}
			n := len(tc.want)
			// Cold: one HEAD per tag (the declaration's and each chosen
			// dependency version's), one tag list per dependency source, one
			// pull (manifest + package.yaml layer) per digest.
			want := requests{Head: n, Tags: n - 1, Manifests: n, Blobs: n}
			got := countRequests(r)
			got.All = 0
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("cold requests: -want +got:\n%s\n%s", diff, r.Summary())
			}

			// Digests and payloads are the registry's and the packages'.
			for _, e := range res.Lock.Packages {
				repo := strings.TrimPrefix(e.Source, "xpkg.upbound.io/")
				img := imgs[repo+":"+e.Version]
				if d, _ := img.Digest(); d.String() != e.Digest {
					t.Errorf("%s: digest %s, want the pushed %s", e.Source, e.Digest, d)
				}
			}
			if e := res.Lock.Entry("xpkg.upbound.io/upbound/provider-family-aws"); e.Payload.CRDs != 5 || e.CrossplaneConstraint != ">=v1.12.1-0" {
				t.Errorf("provider-family-aws v2.6.0: %d CRDs, crossplane %q; INDEX.md says 5 and >=v1.12.1-0", e.Payload.CRDs, e.CrossplaneConstraint)
			}
			if e := res.Lock.Entry("xpkg.upbound.io/upbound/configuration-aws-network"); e.Payload.XRDs != 1 || e.Payload.Compositions != 1 || len(e.Dependencies) != 4 {
				t.Errorf("configuration-aws-network: %+v, want 1 XRD, 1 Composition, 4 dependencies", e)
			}

			// Compositions call functions by the names the lock gives them
			// (INDEX.md item 12).
			c := ociClient(t, r, cacheDir, set)
			for _, e := range res.Lock.Packages {
				if e.Kind != crossplane.KindConfiguration {
					continue
				}
				ref, err := name.NewDigest(e.Source+"@"+e.Digest, name.StrictValidation)
				if err != nil {
					t.Fatal(err)
				}
				f, err := c.Package(context.Background(), ref)
				if err != nil {
					t.Fatal(err)
				}
				for _, fn := range functionRefs(t, f.Package) {
					if !lockHasName(res.Lock, crossplane.KindFunction, fn) {
						t.Errorf("%s calls function %q, which the lock does not install under that name", e.Source, fn)
					}
				}
			}

			// Warm and unchanged: zero requests, the same lock.
			r.Reset()
			again, err := resolve(t, ociClient(t, r, cacheDir, set), set, res.Lock, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Requests(); len(got) != 0 {
				t.Errorf("warm unchanged lock sent %d requests, want 0:\n%s", len(got), r.Summary())
			}
			if diff := cmp.Diff(res.Lock, again.Lock); diff != "" {
				t.Errorf("warm lock differs: -cold +warm:\n%s", diff)
			}
			if again.Kept != n {
				t.Errorf("kept %d pins, want all %d", again.Kept, n)
			}

			// A lock and an empty cache: no HEAD, no tag list, one pull per
			// digest.
			r.Reset()
			if _, err := resolve(t, ociClient(t, r, t.TempDir(), set), set, res.Lock, Options{}); err != nil {
				t.Fatal(err)
			}
			got = countRequests(r)
			got.All = 0
			if diff := cmp.Diff(requests{Manifests: n, Blobs: n}, got); diff != "" {
				t.Errorf("locked, cold cache: -want +got:\n%s\n%s", diff, r.Summary())
			}
		})
	}
}

// functionRefs returns the functionRef names of a package's Compositions.
func functionRefs(t testing.TB, p *xpkg.Package) []string {
	t.Helper()
	var out []string
	for _, o := range p.Objects {
		if o.GroupKind() != crossplane.GroupKindComposition {
			continue
		}
		u, err := o.Unstructured()
		if err != nil {
			t.Fatal(err)
		}
		steps, _, _ := unstructuredSlice(u.Object, "spec", "pipeline")
		for _, s := range steps {
			if m, ok := s.(map[string]any); ok {
				if ref, ok := m["functionRef"].(map[string]any); ok {
					if n, ok := ref["name"].(string); ok {
						out = append(out, n)
					}
				}
			}
		}
	}
	return out
}

func unstructuredSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

func lockHasName(l *Lock, kind crossplane.Kind, n string) bool {
	for _, e := range l.Packages {
		if e.Kind == kind && e.Name == n {
			return true
		}
	}
	return false
}

// TestLockExamples locks lockstep's example packages through the real
// client and registry: a dependency chosen from tags, a tag whose digest
// changes upstream (the lock keeps the old pin until --update), and the
// request counts of each run. It needs no $LOCKSTEP_TESTDATA.
func TestLockExamples(t *testing.T) {
	r := registry.New(t)
	build := func(pkg, version string) v1.Image {
		img, err := xpkg.Build(filepath.Join("..", "examples", "packages", pkg, version))
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	digests := map[string]string{}
	for _, pkg := range []string{"provider-demo", "function-demo", "configuration-demo"} {
		for _, v := range []string{"v0.1.0", "v0.2.0"} {
			digests[pkg+":"+v] = pushImage(t, r, "lockstep-examples/"+pkg+":"+v, build(pkg, v))
		}
	}
	dir := writeDir(t, map[string]string{
		"platform.yaml":     decl("Configuration", "configuration-demo", "lockstep.example/lockstep-examples/configuration-demo:v0.1.0"),
		"imageconfigs.yaml": rewriteTo(r, "lockstep.example"),
	})
	set, err := declarations.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	lockAt := func(prev *Lock, opts Options) (*Lock, requests) {
		t.Helper()
		r.Reset()
		res, err := resolve(t, ociClient(t, r, cacheDir, set), set, prev, opts)
		if err != nil {
			t.Fatal(err)
		}
		got := countRequests(r)
		return res.Lock, got
	}
	pins := func(l *Lock) []string {
		var out []string
		for _, e := range l.Packages {
			out = append(out, e.Name+" "+e.Version+" "+e.Digest)
		}
		return out
	}

	first, cold := lockAt(nil, Options{})
	want := []string{
		"configuration-demo v0.1.0 " + digests["configuration-demo:v0.1.0"],
		"lockstep-examples-function-demo v0.2.0 " + digests["function-demo:v0.2.0"],
		"lockstep-examples-provider-demo v0.2.0 " + digests["provider-demo:v0.2.0"],
	}
	if diff := cmp.Diff(want, pins(first)); diff != "" {
		t.Errorf("cold lock: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff(requests{Head: 3, Tags: 2, Manifests: 3, Blobs: 3}, withoutAll(cold)); diff != "" {
		t.Errorf("cold requests: -want +got:\n%s", diff)
	}

	// Upstream moves the tag provider-demo:v0.2.0 to other content.
	moved := pushImage(t, r, "lockstep-examples/provider-demo:v0.2.0", build("provider-demo", "v0.1.0"))

	kept, warm := lockAt(first, Options{})
	if diff := cmp.Diff(pins(first), pins(kept)); diff != "" {
		t.Errorf("after the tag moved, lock without --update changed: -want +got:\n%s", diff)
	}
	if warm.All != 0 {
		t.Errorf("warm unchanged lock sent %d requests, want 0:\n%s", warm.All, r.Summary())
	}

	updated, upd := lockAt(kept, Options{UpdatePackages: []string{"lockstep-examples-provider-demo"}})
	if got := updated.Entry("lockstep.example/lockstep-examples/provider-demo").Digest; got != moved {
		t.Errorf("--update provider-demo pinned %s, want the moved tag's %s", got, moved)
	}
	if diff := cmp.Diff(pins(first)[:2], pins(updated)[:2]); diff != "" {
		t.Errorf("--update provider-demo changed other pins: -want +got:\n%s", diff)
	}
	// The moved tag points at provider-demo v0.1.0's image, already pulled?
	// No: v0.1.0 was never locked, so it is one new pull.
	if diff := cmp.Diff(requests{Head: 1, Tags: 1, Manifests: 1, Blobs: 1}, withoutAll(upd)); diff != "" {
		t.Errorf("--update provider-demo requests: -want +got:\n%s\n%s", diff, r.Summary())
	}
}

func withoutAll(r requests) requests {
	r.All = 0
	return r
}
