package lockfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// memRegistry is an in-memory Registry for the resolver's unit tests: tags
// of repositories pointing at real packages built with xpkg.Build and parsed
// with xpkg.FromImage. It is a fake of the registry protocol only; the
// tests against sources/oci's Client and the in-process registry
// (oci_test.go) cover the real thing. It counts calls the way the real
// client counts requests: a Package call for a digest already fetched is a
// cache hit and costs nothing.
type memRegistry struct {
	mu       sync.Mutex
	repos    map[string]map[string]string // repository -> tag -> digest
	manifest map[string]map[string]bool   // repository -> digests pushed there
	pkgs     map[string]*Fetched          // digest -> package
	cached   map[string]bool              // digests in the "cache"
	calls    []string
	latency  time.Duration
	inflight int
	maxIn    int
}

func newMemRegistry() *memRegistry {
	return &memRegistry{
		repos:    map[string]map[string]string{},
		manifest: map[string]map[string]bool{},
		pkgs:     map[string]*Fetched{},
		cached:   map[string]bool{},
	}
}

// enter and leave track concurrency and apply the latency.
func (m *memRegistry) enter(call string) {
	m.mu.Lock()
	m.calls = append(m.calls, call)
	m.inflight++
	if m.inflight > m.maxIn {
		m.maxIn = m.inflight
	}
	m.mu.Unlock()
	if m.latency > 0 {
		time.Sleep(m.latency)
	}
}

func (m *memRegistry) leave() {
	m.mu.Lock()
	m.inflight--
	m.mu.Unlock()
}

func (m *memRegistry) Digest(_ context.Context, ref name.Tag) (v1.Hash, error) {
	m.enter("HEAD " + ref.Context().Name() + ":" + ref.TagStr())
	defer m.leave()
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.repos[ref.Context().Name()][ref.TagStr()]
	if !ok {
		return v1.Hash{}, fmt.Errorf("%s: MANIFEST_UNKNOWN", ref)
	}
	return v1.NewHash(d)
}

func (m *memRegistry) Tags(_ context.Context, repo name.Repository) ([]string, error) {
	m.enter("TAGS " + repo.Name())
	defer m.leave()
	m.mu.Lock()
	defer m.mu.Unlock()
	tags, ok := m.repos[repo.Name()]
	if !ok {
		return nil, fmt.Errorf("%s: NAME_UNKNOWN", repo)
	}
	out := make([]string, 0, len(tags))
	for t := range tags {
		out = append(out, t)
	}
	sort.Strings(out)
	return out, nil
}

func (m *memRegistry) Package(_ context.Context, ref name.Digest) (*Fetched, error) {
	m.mu.Lock()
	cached := m.cached[ref.DigestStr()]
	m.mu.Unlock()
	if !cached {
		m.enter("PULL " + ref.Context().Name() + "@" + ref.DigestStr())
		defer m.leave()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.manifest[ref.Context().Name()][ref.DigestStr()] && !cached {
		return nil, fmt.Errorf("%s: MANIFEST_UNKNOWN", ref)
	}
	p, ok := m.pkgs[ref.DigestStr()]
	if !ok {
		return nil, errors.New("unknown digest")
	}
	m.cached[ref.DigestStr()] = true
	return p, nil
}

// takeCalls returns the calls so far, sorted, and forgets them.
func (m *memRegistry) takeCalls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.calls
	m.calls = nil
	sort.Strings(out)
	return out
}

// coldCache forgets which packages were fetched.
func (m *memRegistry) coldCache() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cached = map[string]bool{}
}

// pkgSpec describes a synthetic package's crossplane.yaml.
type pkgSpec struct {
	kind       crossplane.Kind
	name       string
	crossplane string
	deps       []depSpec
	replaces   []string
	crds       int
}

// depSpec is one spec.dependsOn entry in the deprecated form real packages
// use (INDEX.md item 1) or, with apiVersion set, the newer form.
type depSpec struct {
	kind       crossplane.Kind
	pkg        string
	version    string
	apiVersion bool
}

func (s pkgSpec) yaml(version string) string {
	var b strings.Builder
	apiVersion := "meta.pkg.crossplane.io/v1"
	fmt.Fprintf(&b, "apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n  annotations:\n    lockstep.io/test-version: %q\nspec:\n", apiVersion, s.kind, s.name, version)
	if s.crossplane != "" {
		fmt.Fprintf(&b, "  crossplane:\n    version: %q\n", s.crossplane)
	}
	if len(s.deps) > 0 {
		b.WriteString("  dependsOn:\n")
		for _, d := range s.deps {
			if d.apiVersion {
				fmt.Fprintf(&b, "  - apiVersion: pkg.crossplane.io/v1\n    kind: %s\n    package: %s\n    version: %q\n", d.kind, d.pkg, d.version)
				continue
			}
			fmt.Fprintf(&b, "  - %s: %s\n    version: %q\n", strings.ToLower(string(d.kind)), d.pkg, d.version)
		}
	}
	if len(s.replaces) > 0 {
		b.WriteString("  replaces:\n")
		for _, r := range s.replaces {
			fmt.Fprintf(&b, "  - %s\n", r)
		}
	}
	return b.String()
}

const crdTemplate = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things%d.%s.lockstep.io
spec:
  group: %s.lockstep.io
  names: {kind: Thing%d, plural: things%d}
  scope: Cluster
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`

// buildPackage builds a package from files with xpkg.Build and parses it
// back, as the registry client would after a pull.
func buildPackage(t testing.TB, files map[string]string) *Fetched {
	t.Helper()
	return fetchedFromImage(t, buildImage(t, files))
}

// buildImage builds a package image from files with xpkg.Build.
func buildImage(t testing.TB, files map[string]string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img, err := xpkg.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func fetchedFromImage(t testing.TB, img v1.Image) *Fetched {
	t.Helper()
	p, err := xpkg.FromImage(img)
	if err != nil {
		t.Fatalf("parse built package: %v", err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return &Fetched{Digest: d, LayerDigest: m.Layers[0].Digest, Package: p}
}

// files returns the package directory of spec at version.
func (s pkgSpec) files(version string) map[string]string {
	files := map[string]string{"crossplane.yaml": s.yaml(version)}
	for i := 0; i < s.crds; i++ {
		files[fmt.Sprintf("crds/thing%d.yaml", i)] = fmt.Sprintf(crdTemplate, i, s.name, s.name, i, i)
	}
	return files
}

// push builds spec at version and tags it in repo; it returns the digest.
func (m *memRegistry) push(t testing.TB, repo, tag string, s pkgSpec) string {
	t.Helper()
	f := buildPackage(t, s.files(tag))
	m.put(repo, tag, f)
	return f.Digest.String()
}

// put tags a built package in repo.
func (m *memRegistry) put(repo, tag string, f *Fetched) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.repos[repo] == nil {
		m.repos[repo] = map[string]string{}
		m.manifest[repo] = map[string]bool{}
	}
	d := f.Digest.String()
	if tag != "" {
		m.repos[repo][tag] = d
	}
	m.manifest[repo][d] = true
	m.pkgs[d] = f
}

// declare writes declaration files into a new directory and loads them.
func declare(t testing.TB, files map[string]string) *declarations.Set {
	t.Helper()
	set, err := declarations.Load(writeDir(t, files))
	if err != nil {
		t.Fatalf("load declarations: %v", err)
	}
	return set
}

func writeDir(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// decl is a package declaration document.
func decl(kind, name, pkg string, extra ...string) string {
	s := fmt.Sprintf("apiVersion: pkg.crossplane.io/v1\nkind: %s\nmetadata:\n  name: %s\nspec:\n  package: %s\n", kind, name, pkg)
	for _, e := range extra {
		s += "  " + e + "\n"
	}
	return s
}

// versions summarises a lock as "Kind name source version" lines.
func versions(l *Lock) []string {
	var out []string
	for _, e := range l.Packages {
		out = append(out, fmt.Sprintf("%s %s %s %s", e.Kind, e.Name, e.Source, orElse(e.Version, "@"+e.Digest)))
	}
	return out
}

// resolve runs a Resolver with the given options.
func resolve(t testing.TB, reg Registry, set *declarations.Set, prev *Lock, opts Options) (*Result, error) {
	t.Helper()
	if opts.CrossplaneVersion == "" {
		opts.CrossplaneVersion = "v2.1.0"
	}
	return NewResolver(reg, opts).Resolve(context.Background(), set, prev)
}

// errorContains reports which of want are missing from err's text.
func errorMissing(err error, want []string) []string {
	if err == nil {
		return want
	}
	var missing []string
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			missing = append(missing, w)
		}
	}
	return missing
}
