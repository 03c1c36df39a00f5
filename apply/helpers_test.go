package apply_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	shared "github.com/lockstep-gitops/lockstep/test/testdata"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(envtest.Main(m))
}

// requests counts the requests a client sends to the API server, through
// a round tripper on its rest.Config.
type requests struct {
	mu  sync.Mutex
	log []string // "METHOD path[ (dry-run)][ (watch)]"
	// cancelAfter, when positive, calls cancel once that many mutating
	// requests were sent.
	cancelAfter int64
	// cancelAfterPath, when set, calls cancel once a mutating request to a
	// path containing it succeeded: the object was written, and the apply
	// stops right after, as if lockstep had been killed.
	cancelAfterPath string
	cancel          func()
	mutating        atomic.Int64
	// fail, when set, answers a request it returns true for with a 500
	// Internal Server Error instead of sending it.
	fail func(*http.Request) bool
	// observe, when set, is called with every request before it is sent.
	observe func(*http.Request)
	// delay, when positive, holds every mutating request that long before
	// sending it, so that requests sent at once overlap.
	delay time.Duration
	// inFlight and maxInFlight count the mutating requests sent and not
	// answered yet, now and at most.
	inFlight, maxInFlight atomic.Int64
}

type countingTransport struct {
	next http.RoundTripper
	r    *requests
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	dry := req.URL.Query().Get("dryRun") != ""
	line := req.Method + " " + req.URL.Path
	if dry {
		line += " (dry-run)"
	}
	if req.URL.Query().Get("watch") == "true" {
		line += " (watch)"
	}
	t.r.mu.Lock()
	t.r.log = append(t.r.log, line)
	t.r.mu.Unlock()
	if isMutating(req.Method) && !dry {
		if n := t.r.mutating.Add(1); t.r.cancelAfter > 0 && n == t.r.cancelAfter && t.r.cancel != nil {
			t.r.cancel()
		}
	}
	if t.r.observe != nil {
		t.r.observe(req)
	}
	if isMutating(req.Method) {
		n := t.r.inFlight.Add(1)
		defer t.r.inFlight.Add(-1)
		for {
			m := t.r.maxInFlight.Load()
			if n <= m || t.r.maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(t.r.delay)
	}
	if t.r.fail != nil && t.r.fail(req) {
		body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the test","reason":"InternalError","code":500}`
		return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
	}
	resp, err := t.next.RoundTrip(req)
	if p := t.r.cancelAfterPath; p != "" && err == nil && resp.StatusCode < 300 && isMutating(req.Method) && !dry &&
		strings.Contains(req.URL.Path, p) && t.r.cancel != nil {
		t.r.cancel()
	}
	return resp, err
}

func isMutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// reset forgets the requests seen so far.
func (r *requests) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = nil
	r.mutating.Store(0)
}

// snapshot returns the requests seen since the last reset: all of them,
// and the mutating ones that were not dry-runs.
func (r *requests) snapshot() (all, mutating []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	all = append(all, r.log...)
	for _, l := range r.log {
		if isMutating(strings.Fields(l)[0]) && !strings.HasSuffix(l, "(dry-run)") {
			mutating = append(mutating, l)
		}
	}
	return all, mutating
}

// fixture is one test's view of the shared control plane: a namespace and
// lockstep instance of its own, and a client whose requests are counted.
type fixture struct {
	env       *envtest.Env
	c         client.Client
	cfg       *rest.Config
	reqs      *requests
	namespace string
	instance  string
	// prefix makes API groups and package names unique to the test, since
	// CRDs and packages are cluster-scoped.
	prefix  string
	standIn bool
}

var fixtureSeq atomic.Int64

// newFixture starts (or reuses) the control plane with Crossplane's CRDs
// ($LOCKSTEP_TESTDATA/crossplane-crds, or lockstep's stand-ins).
func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, envtest.Shared(t))
}

// newDedicatedFixture is newFixture on a control plane of the test's own,
// stopped when the test ends: for tests that install a real package whose
// cluster-scoped CRDs another test installs too (the AWS family's
// ProviderConfig CRDs). On a shared control plane, a CRD still Terminating
// from one test is controlled by that test's deleted revision, and the
// other test's apply is rightly refused ("is not lockstep's"); how long the
// deletion takes depends on the machine's load, so no wait is long enough.
func newDedicatedFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, envtest.Dedicated(t))
}

// newFixtureOn returns a fixture on env, with Crossplane's CRDs installed.
func newFixtureOn(t *testing.T, env *envtest.Env) *fixture {
	t.Helper()
	standIn, err := env.InstallCrossplaneCRDs()
	if err != nil {
		t.Fatal(err)
	}
	n := fixtureSeq.Add(1)
	f := &fixture{env: env, reqs: &requests{}, standIn: standIn,
		namespace: fmt.Sprintf("xp-%d", n), instance: fmt.Sprintf("test-%d", n), prefix: fmt.Sprintf("t%d", n)}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &countingTransport{next: rt, r: f.reqs} })
	f.cfg = cfg
	f.c, err = client.New(cfg, client.Options{Scheme: envtest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.namespace}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return f
}

// manager returns an apply.Manager for the fixture, with opts changed by
// mutate.
func (f *fixture) manager(t *testing.T, mutate func(*apply.Options)) *apply.Manager {
	t.Helper()
	o := apply.DefaultOptions()
	o.Namespace, o.Instance = f.namespace, f.instance
	o.WaitInterval = 200 * time.Millisecond
	o.WaitTimeout = time.Minute
	if mutate != nil {
		mutate(&o)
	}
	m, err := apply.NewManager(f.c, o, apply.WithRESTConfig(f.cfg))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// repoRoot is the module root, for the example packages.
func repoRoot(t *testing.T) string {
	t.Helper()
	return shared.Root(t)
}

// testdata returns $LOCKSTEP_TESTDATA or skips the test.
func testdata(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("LOCKSTEP_TESTDATA")
	if dir == "" {
		t.Skip("LOCKSTEP_TESTDATA is not set; set it to the shared testdata directory (e.g. ../shared/testdata) to install real Crossplane packages")
	}
	return dir
}

// pkgSpec describes a package to build for a test.
type pkgSpec struct {
	kind crossplane.Kind
	// name is the package object's name.
	name string
	// dir is the package folder to build from.
	dir string
	// groups maps API group names in the package's files to the test's
	// own (CRDs are cluster-scoped and tests share the control plane).
	groups map[string]string
	// edit changes the package's files (by relative path) before the
	// build, to make synthetic versions or add spec.replaces.
	edit func(files map[string]string)
	// tag is the version tag, source the repository.
	tag, source string
	// decl changes the declaration; nil means an undeclared dependency.
	decl func(*declarations.Declaration)
	// declared says the package has a declaration.
	declared bool
}

var (
	buildMu    sync.Mutex
	buildCache = map[string]render.Package{}
)

// build builds s into a render.Package with xpkg.Build and xpkg.FromImage.
func build(t testing.TB, s pkgSpec) render.Package {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(s.dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml") {
			return nil
		}
		rel, _ := filepath.Rel(s.dir, path)
		b, err := os.ReadFile(path)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	olds := make([]string, 0, len(s.groups))
	for o := range s.groups {
		olds = append(olds, o)
	}
	sort.Slice(olds, func(i, j int) bool { return len(olds[i]) > len(olds[j]) })
	for rel, c := range files {
		for _, o := range olds {
			c = strings.ReplaceAll(c, o, s.groups[o])
		}
		files[rel] = c
	}
	if s.edit != nil {
		s.edit(files)
	}
	tmp := t.TempDir()
	var keys []string
	for rel, c := range files {
		keys = append(keys, rel+"\x00"+c)
		p := filepath.Join(tmp, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(keys)
	cacheKey := strings.Join(keys, "\x01")
	buildMu.Lock()
	cached, ok := buildCache[cacheKey]
	buildMu.Unlock()
	var contents *xpkg.Package
	var digest string
	if ok {
		contents, digest = cached.Contents, cached.Digest
	} else {
		img, err := xpkg.Build(tmp)
		if err != nil {
			t.Fatalf("build %s: %v", s.dir, err)
		}
		h, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		contents, err = xpkg.FromImage(img)
		if err != nil {
			t.Fatalf("parse %s: %v", s.dir, err)
		}
		digest = h.String()
		buildMu.Lock()
		buildCache[cacheKey] = render.Package{Contents: contents, Digest: digest}
		buildMu.Unlock()
	}
	p := render.Package{Kind: s.kind, Name: s.name, Source: s.source, Version: s.tag, Digest: digest, Contents: contents}
	if s.declared || s.decl != nil {
		d := &declarations.Declaration{
			Kind:     s.kind,
			Name:     s.name,
			Spec:     declarations.PackageSpec{Package: s.source + ":" + s.tag},
			Location: declarations.Location{File: "packages.yaml", Line: 1},
		}
		if s.decl != nil {
			s.decl(d)
		}
		ref, err := declarations.ParsePackage(d.Spec.Package)
		if err != nil {
			t.Fatalf("declaration %s: %v", d, err)
		}
		d.Ref = ref
		declarations.ApplyDefaults(d)
		p.Declaration = d
	}
	return p
}

// demo returns the spec of an example package (provider-demo,
// function-demo or configuration-demo) at version, renamed for the
// fixture: API groups and the package name carry the fixture's prefix.
func (f *fixture) demo(t *testing.T, pkg, version string) pkgSpec {
	kinds := map[string]crossplane.Kind{"provider-demo": crossplane.KindProvider, "function-demo": crossplane.KindFunction, "configuration-demo": crossplane.KindConfiguration}
	return pkgSpec{
		kind: kinds[pkg],
		name: f.prefix + "-" + pkg,
		dir:  filepath.Join(repoRoot(t), "examples", "packages", pkg, version),
		groups: map[string]string{
			"demo.lockstep.io":                f.prefix + ".demo.lockstep.io",
			"demo.m.lockstep.io":              f.prefix + ".demo.m.lockstep.io",
			"platform.lockstep.io":            f.prefix + ".platform.lockstep.io",
			"lockstep-examples-function-demo": f.prefix + "-function-demo",
		},
		tag:      version,
		source:   "registry.lockstep.test/" + f.prefix + "/" + pkg,
		declared: true,
	}
}

// synthetic returns s changed into a distinct build n (a different
// digest): an annotation on the package metadata.
func synthetic(s pkgSpec, n int) pkgSpec {
	prev := s.edit
	s.edit = func(files map[string]string) {
		if prev != nil {
			prev(files)
		}
		files["crossplane.yaml"] = strings.Replace(files["crossplane.yaml"], "  annotations:\n", fmt.Sprintf("  annotations:\n    lockstep.io/test-build: %q\n", fmt.Sprint(n)), 1)
	}
	s.tag = fmt.Sprintf("v0.%d.0", n)
	return s
}

// render renders the packages for the fixture.
func (f *fixture) render(t *testing.T, pkgs ...render.Package) *render.Output {
	t.Helper()
	out, err := render.Render(render.Input{Namespace: f.namespace, Instance: f.instance, Packages: pkgs})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// apply applies out and fails the test on an error of Apply itself.
func (f *fixture) apply(t *testing.T, m *apply.Manager, out *render.Output, meta apply.Origin) *apply.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := m.Apply(ctx, out, meta)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

// mustSucceed fails the test when a package of res failed.
func mustSucceed(t *testing.T, res *apply.Result) {
	t.Helper()
	if err := res.Err(); err != nil {
		t.Fatalf("apply failed: %v", err)
	}
}

// get reads an object; nil when it does not exist.
func (f *fixture) get(t *testing.T, apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	gv, _ := schema.ParseGroupVersion(apiVersion)
	u.SetGroupVersionKind(gv.WithKind(kind))
	if err := f.env.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatalf("get %s %s: %v", kind, name, err)
	}
	return u
}

func (f *fixture) crd(t *testing.T, name string) *unstructured.Unstructured {
	return f.get(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", name)
}

func (f *fixture) revision(t *testing.T, kind crossplane.Kind, name string) *unstructured.Unstructured {
	return f.get(t, "pkg.crossplane.io/v1", string(kind)+"Revision", "", name)
}

// revisions returns the revisions of a package by name, with their
// spec.revision and spec.desiredState, "name#n:state".
func (f *fixture) revisions(t *testing.T, kind crossplane.Kind, pkg string) []string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "pkg.crossplane.io", Version: "v1", Kind: string(kind) + "RevisionList"})
	if err := f.env.Client.List(context.Background(), list, client.MatchingLabels{render.LabelParentPackage: pkg}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, it := range list.Items {
		n, _, _ := unstructured.NestedInt64(it.Object, "spec", "revision")
		s, _, _ := unstructured.NestedString(it.Object, "spec", "desiredState")
		out = append(out, fmt.Sprintf("%s#%d:%s", it.GetName(), n, s))
	}
	sort.Strings(out)
	return out
}

// ownerRefs returns an object's owner references as
// "Kind/name controller=<bool>".
func ownerRefs(u *unstructured.Unstructured) []string {
	var out []string
	for _, r := range u.GetOwnerReferences() {
		c := r.Controller != nil && *r.Controller
		out = append(out, fmt.Sprintf("%s/%s controller=%t", r.Kind, r.Name, c))
	}
	sort.Strings(out)
	return out
}

// cond returns "status/reason" of a condition, "" when absent.
func cond(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprintf("%s/%s", m["status"], m["reason"])
		}
	}
	return ""
}

// condMessage returns a condition's message.
func condMessage(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["message"].(string)
			return s
		}
	}
	return ""
}

// waitGone waits until the object is gone (a CRD being deleted takes a
// moment).
func (f *fixture) waitGone(t *testing.T, apiVersion, kind, namespace, name string) {
	t.Helper()
	// Three minutes: a CRD's deletion waits for the API server's cleanup of
	// its custom resources, which is slow under -race on a loaded machine.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		return f.get(t, apiVersion, kind, namespace, name) == nil, nil
	})
	if err != nil {
		t.Fatalf("%s %s was not deleted: %v", kind, name, err)
	}
}

// rawMerge is a JSON merge patch, as `kubectl patch --type merge` sends.
func rawMerge(b []byte) client.Patch { return client.RawPatch(types.MergePatchType, b) }

// fieldOwner names the field manager of a write.
func fieldOwner(name string) client.FieldOwner { return client.FieldOwner(name) }

// namespaceObject returns a Namespace to create.
func namespaceObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
