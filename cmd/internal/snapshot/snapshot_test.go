package snapshot_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// demoDir is the example repository's cluster directory: three packages
// locked, an ImageConfig that mirrors lockstep.example/ to a local
// registry, and a DeploymentRuntimeConfig.
var demoDir = filepath.Join("..", "..", "..", "examples", "repo", "clusters", "demo")

// mirrorTo returns the CLI's fetcher (an oci.Client on a fresh cache) with
// the commit's ImageConfigs, their rewrite pointed at reg instead of the
// demo's 127.0.0.1:5055. It records the ImageConfig names it was given.
func mirrorTo(t *testing.T, reg *registry.Registry, seen *[]string) snapshot.NewFetcher {
	cache, err := oci.NewCache(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return func(ics []pkgv1beta1.ImageConfig) (snapshot.Fetcher, error) {
		var out []pkgv1beta1.ImageConfig
		for _, ic := range ics {
			*seen = append(*seen, ic.Name)
			if ic.Spec.RewriteImage != nil {
				ic.Spec.RewriteImage = &pkgv1beta1.ImageRewrite{Prefix: reg.Host + "/"}
			}
			out = append(out, ic)
		}
		return oci.NewClient(oci.Options{InsecureRegistries: []string{reg.Host}}, cache, out)
	}
}

// demoFS returns the demo directory as a MapFS, with files replaced or
// added by edits (a nil value removes the file).
func demoFS(t *testing.T, edits map[string][]byte) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	err := fs.WalkDir(os.DirFS(demoDir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(demoDir, p))
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, b := range edits {
		if b == nil {
			delete(m, p)
			continue
		}
		m[p] = &fstest.MapFile{Data: b}
	}
	return m
}

func readDemo(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(demoDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// got is what a case observes of a loaded snapshot.
type got struct {
	Packages      []string
	ImageConfigs  []string
	LockDigest    string
	Problems      []lockfile.ProblemKind
	Objects       bool
	Namespace     string
	Instance      string
	Fetched       int
	OutputStepErr snapshot.Step
}

func observe(t *testing.T, s *snapshot.Snapshot, seen []string) got {
	t.Helper()
	g := got{ImageConfigs: seen, LockDigest: s.LockDigest, Fetched: len(s.Contents)}
	for _, p := range s.Problems {
		g.Problems = append(g.Problems, p.Kind)
	}
	if s.Input != nil {
		g.Namespace, g.Instance = s.Input.Namespace, s.Input.Instance
		for _, p := range s.Input.Packages {
			g.Packages = append(g.Packages, string(p.Kind)+"/"+p.Name)
		}
	}
	out, err := s.Output()
	var se *snapshot.StepError
	switch {
	case errors.As(err, &se):
		g.OutputStepErr = se.Step
	case err != nil:
		t.Fatalf("Output: %v", err)
	case out != nil:
		g.Objects = len(out.Objects()) > 0
	}
	return g
}

func TestLoad(t *testing.T) {
	reg := registry.New(t)
	reg.PushExamples(t, filepath.Join("..", "..", ".."))
	lockBytes := readDemo(t, lockfile.FileName)
	sum := sha256.Sum256(lockBytes)
	demoDigest := "sha256:" + hex.EncodeToString(sum[:])
	demoPackages := []string{
		"Configuration/configuration-demo",
		"Function/lockstep-examples-function-demo",
		"Provider/lockstep-examples-provider-demo",
	}
	upgraded := []byte(strings.Replace(string(readDemo(t, "platform/configuration-demo.yaml")), "v0.1.0", "v0.2.0", 1))
	if string(upgraded) == string(readDemo(t, "platform/configuration-demo.yaml")) {
		t.Fatal("the demo declaration no longer pins v0.1.0; update the test")
	}

	// A hand-edited lock: provider-demo v0.2.0's digest
	// swapped for v0.1.0's, and, digest kept, its CRD count changed.
	const pinned = "sha256:6bac01cd39973a7aea167316d9bc385b00383eb3f2219ee9168f31e6b4a7dbce"
	if !strings.Contains(string(lockBytes), pinned) || !strings.Contains(string(lockBytes), "crds: 4\n") {
		t.Fatal("the demo lock no longer pins provider-demo v0.2.0 at " + pinned + " with 4 CRDs; update the test")
	}
	old, err := xpkg.Build(filepath.Join("..", "..", "..", "examples", "packages", "provider-demo", "v0.1.0"))
	if err != nil {
		t.Fatal(err)
	}
	oldDigest, err := old.Digest()
	if err != nil {
		t.Fatal(err)
	}
	swapped := []byte(strings.Replace(string(lockBytes), pinned, oldDigest.String(), 1))
	recounted := []byte(strings.Replace(string(lockBytes), "crds: 4\n", "crds: 3\n", 1))

	cases := []struct {
		name   string
		reason string
		dir    string // LoadDir when set, else Load of fsys
		fsys   fs.FS
		// fetcher: "mirror" (the in-process registry), "empty" (a
		// registry without the packages), "broken" (NewFetcher fails),
		// "" (none).
		fetcher string
		opts    []snapshot.Option
		want    got
		// wantStep is the step a failing Load names; "" for success.
		wantStep snapshot.Step
		// wantErr is a substring of the error.
		wantErr string
	}{
		{
			name:    "DemoDirectory",
			reason:  "the example repository loads: its lock is current, every package is fetched through the commit's ImageConfig, and it renders",
			dir:     demoDir,
			fetcher: "mirror",
			opts:    []snapshot.Option{snapshot.WithNamespace("crossplane-system"), snapshot.WithInstance("demo")},
			want: got{Packages: demoPackages, ImageConfigs: []string{"demo-mirror"}, LockDigest: demoDigest, Objects: true,
				Namespace: "crossplane-system", Instance: "demo", Fetched: 3},
		},
		{
			name:    "MapFS",
			reason:  "any fs.FS is a commit (a Git tree reads the same way): the same files in memory give the same snapshot, with the default namespace and instance",
			fsys:    demoFS(t, nil),
			fetcher: "mirror",
			want: got{Packages: demoPackages, ImageConfigs: []string{"demo-mirror"}, LockDigest: demoDigest, Objects: true,
				Namespace: "crossplane-system", Instance: "lockstep", Fetched: 3},
		},
		{
			name:    "Only",
			reason:  "Only keeps the named packages in the render input; the whole lock is still fetched",
			fsys:    demoFS(t, nil),
			fetcher: "mirror",
			opts:    []snapshot.Option{snapshot.Only("configuration-demo")},
			want: got{Packages: []string{"Configuration/configuration-demo"}, ImageConfigs: []string{"demo-mirror"}, LockDigest: demoDigest, Objects: true,
				Namespace: "crossplane-system", Instance: "lockstep", Fetched: 3},
		},
		{
			name:    "OnlyNoMatch",
			reason:  "Only naming no locked package fails the input step",
			fsys:    demoFS(t, nil),
			fetcher: "mirror",
			opts:    []snapshot.Option{snapshot.Only("provider-nop")},
			want:    got{}, wantStep: snapshot.StepInput, wantErr: "no locked package is named [provider-nop]",
		},
		{
			name:   "NoFetcher",
			reason: "without a fetcher Load stops after the check (lock --check, the updater): nothing fetched, and Output says so",
			fsys:   demoFS(t, nil),
			want:   got{LockDigest: demoDigest, OutputStepErr: snapshot.StepRender},
		},
		{
			name:     "StaleLock",
			reason:   "a declaration changed after locking: the check step fails with a StaleLockError, nothing is fetched",
			fsys:     demoFS(t, map[string][]byte{"platform/configuration-demo.yaml": upgraded}),
			fetcher:  "mirror",
			opts:     []snapshot.Option{snapshot.WithLockName("clusters/demo/lockstep.lock")},
			wantStep: snapshot.StepCheck,
			wantErr:  "check: clusters/demo/lockstep.lock is stale; run lockstep lock:\n  lockstep.lock: the declarations changed",
		},
		{
			name:    "StaleAllowed",
			reason:  "AllowStale records the problems and goes on with the lock as it is (lockstep diff)",
			fsys:    demoFS(t, map[string][]byte{"platform/configuration-demo.yaml": upgraded}),
			fetcher: "mirror",
			opts:    []snapshot.Option{snapshot.AllowStale()},
			want: got{Packages: demoPackages, ImageConfigs: []string{"demo-mirror"}, LockDigest: demoDigest, Objects: true,
				Namespace: "crossplane-system", Instance: "lockstep", Fetched: 3,
				Problems: []lockfile.ProblemKind{lockfile.DeclarationsChanged, lockfile.Unsatisfied}},
		},
		{
			name:     "CheckSettings",
			reason:   "WithCheck compares lock --check's --crossplane-version with the lock's",
			fsys:     demoFS(t, nil),
			opts:     []snapshot.Option{snapshot.WithCheck(lockfile.Options{CrossplaneVersion: "v2.2.0"})},
			wantStep: snapshot.StepCheck,
			wantErr:  "the lock was resolved for Crossplane v2.1.0, not v2.2.0",
		},
		{
			name:     "BadDeclarations",
			reason:   "a declaration the Crossplane schema refuses fails the declarations step, naming the file and line",
			fsys:     demoFS(t, map[string][]byte{"platform/bad.yaml": []byte("apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: bad\nspec:\n  package: 42\n")}),
			fetcher:  "mirror",
			wantStep: snapshot.StepDeclarations,
			wantErr:  "platform/bad.yaml:6",
		},
		{
			name:   "VerificationRefused",
			reason: "a keyless identity naming neither issuer nor subject, which would match any certificate, fails the declarations step (every command and the agent), naming the file, the ImageConfig and the field, instead of being accepted",
			fsys: demoFS(t, map[string][]byte{"registries/verify.yaml": []byte("apiVersion: pkg.crossplane.io/v1beta1\nkind: ImageConfig\nmetadata:\n  name: signed\nspec:\n  matchImages: [{prefix: lockstep.example/}]\n" +
				"  verification:\n    provider: Cosign\n    cosign:\n      authorities:\n      - name: ci\n        keyless:\n          identities: [{issuer: https://issuer.example, subject: ci}, {}]\n")}),
			fetcher:  "mirror",
			wantStep: snapshot.StepDeclarations,
			wantErr:  "registries/verify.yaml:1: ImageConfig signed: spec.verification.cosign.authorities[0].keyless.identities[1]: set issuer or issuerRegExp",
		},
		{
			name:     "MissingDirectory",
			reason:   "LoadDir of a directory that does not exist fails the declarations step naming it",
			dir:      filepath.Join(t.TempDir(), "nope"),
			wantStep: snapshot.StepDeclarations,
			wantErr:  "nope",
		},
		{
			name:     "MissingLock",
			reason:   "a commit without lockstep.lock fails the lock step, saying to run lockstep lock",
			fsys:     demoFS(t, map[string][]byte{lockfile.FileName: nil}),
			fetcher:  "mirror",
			wantStep: snapshot.StepLock,
			wantErr:  "cannot read lockstep.lock (run lockstep lock first)",
		},
		{
			name:    "MissingLockAllowed",
			reason:  "AllowMissingLock and AllowStale load a commit without a lock as nothing installed (lockstep diff adopting lockstep)",
			fsys:    demoFS(t, map[string][]byte{lockfile.FileName: nil}),
			fetcher: "mirror",
			opts:    []snapshot.Option{snapshot.AllowMissingLock(), snapshot.AllowStale()},
			want:    got{Problems: []lockfile.ProblemKind{lockfile.NoLock}},
		},
		{
			name:     "BadLock",
			reason:   "a lock that does not parse fails the lock step with its file and line",
			fsys:     demoFS(t, map[string][]byte{lockfile.FileName: []byte("apiVersion: lockstep.io/v1alpha1\nkind: Lock\nbogus: 1\n")}),
			wantStep: snapshot.StepLock,
			wantErr:  "lockstep.lock:3",
		},
		{
			name:     "SwappedDigest",
			reason:   "a digest swapped by hand for another version's is refused after the fetch, naming the lock, the package and the payload fields that disagree, so render, apply, diff and the agent never install v0.1.0 labelled v0.2.0",
			fsys:     demoFS(t, map[string][]byte{lockfile.FileName: swapped}),
			fetcher:  "mirror",
			opts:     []snapshot.Option{snapshot.WithLockName("clusters/demo/lockstep.lock")},
			wantStep: snapshot.StepPayload,
			wantErr:  "clusters/demo/lockstep.lock: Provider lockstep-examples-provider-demo: digest " + oldDigest.String() + " holds payload.layer sha256:",
		},
		{
			name:     "EditedPayload",
			reason:   "a payload summary edited by hand (digest kept) is refused the same way, naming the field",
			fsys:     demoFS(t, map[string][]byte{lockfile.FileName: recounted}),
			fetcher:  "mirror",
			wantStep: snapshot.StepPayload,
			wantErr:  "lockstep.lock: Provider lockstep-examples-provider-demo: digest " + pinned + " holds payload.crds 4 but the lock records 3 (was the digest edited by hand?",
		},
		{
			name:     "FetchFailure",
			reason:   "a registry that lacks the locked digests fails the fetch step naming the packages",
			fsys:     demoFS(t, nil),
			fetcher:  "empty",
			wantStep: snapshot.StepFetch,
			wantErr:  "cannot read the locked packages",
		},
		{
			name:     "RegistryFailure",
			reason:   "a fetcher that cannot be built for the commit's ImageConfigs fails the registry step",
			fsys:     demoFS(t, nil),
			fetcher:  "broken",
			wantStep: snapshot.StepRegistry,
			wantErr:  "no client",
		},
	}
	empty := registry.New(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seen []string
			opts := tc.opts
			switch tc.fetcher {
			case "mirror":
				opts = append(opts, snapshot.WithFetcher(mirrorTo(t, reg, &seen)), snapshot.WithInsecureRegistries([]string{reg.Host}))
			case "empty":
				opts = append(opts, snapshot.WithFetcher(mirrorTo(t, empty, &seen)), snapshot.WithInsecureRegistries([]string{empty.Host}))
			case "broken":
				opts = append(opts, snapshot.WithFetcher(func([]pkgv1beta1.ImageConfig) (snapshot.Fetcher, error) {
					return nil, errors.New("no client")
				}))
			}
			var (
				s   *snapshot.Snapshot
				err error
			)
			if tc.dir != "" {
				s, err = snapshot.LoadDir(context.Background(), tc.dir, opts...)
			} else {
				s, err = snapshot.Load(context.Background(), tc.fsys, opts...)
			}
			if tc.wantStep != "" {
				var se *snapshot.StepError
				if !errors.As(err, &se) || se.Step != tc.wantStep || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nLoad: got error %v, want a %s step error containing %q", tc.reason, err, tc.wantStep, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nLoad: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, observe(t, s, seen)); diff != "" {
				t.Errorf("%s\nLoad: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestStaleLockError pins the one message every command, the agent and
// the updater give for a stale lock.
func TestStaleLockError(t *testing.T) {
	cases := []struct {
		name   string
		reason string
		err    *snapshot.StaleLockError
		want   string
	}{
		{
			name:   "OneProblem",
			reason: "the lock is named as the caller named it, then each problem on its own indented line",
			err: &snapshot.StaleLockError{Lock: "clusters/prod/lockstep.lock", Problems: []lockfile.Problem{
				{Kind: lockfile.NoLock, Subject: "lockstep.lock", Message: "there is no lock; run lockstep lock"},
			}},
			want: "clusters/prod/lockstep.lock is stale; run lockstep lock:\n  lockstep.lock: there is no lock; run lockstep lock",
		},
		{
			name:   "TwoProblems",
			reason: "problems keep the order lockfile.Check gives them",
			err: &snapshot.StaleLockError{Lock: "lockstep.lock", Problems: []lockfile.Problem{
				{Kind: lockfile.DeclarationsChanged, Subject: "lockstep.lock", Message: "the declarations changed"},
				{Kind: lockfile.MissingEntry, Subject: "Provider p (a.yaml:1)", Message: "no entry"},
			}},
			want: "lockstep.lock is stale; run lockstep lock:\n  lockstep.lock: the declarations changed\n  Provider p (a.yaml:1): no entry",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.err.Error()); diff != "" {
				t.Errorf("%s\n-want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNew builds snapshots from parts already in memory, as lockstep
// diff's tests and tools that just resolved a lock do.
func TestNew(t *testing.T) {
	set, err := declarations.LoadFS(fstest.MapFS{"p.yaml": {Data: []byte("apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: p\nspec:\n  package: xpkg.example.org/p:v1.0.0\n")}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		reason   string
		set      *declarations.Set
		lock     *lockfile.Lock
		opts     []snapshot.Option
		wantErr  bool
		problems int
	}{
		{
			name:    "NilLockRefused",
			reason:  "a nil lock is stale (NoLock) unless AllowStale is given",
			set:     set,
			wantErr: true,
		},
		{
			name:     "NilLockAllowed",
			reason:   "with AllowStale a nil lock is a commit that installs nothing",
			set:      set,
			opts:     []snapshot.Option{snapshot.AllowStale()},
			problems: 1,
		},
		{
			name:     "NilSet",
			reason:   "a nil set is an empty one, and an empty lock for it is current",
			lock:     &lockfile.Lock{CrossplaneVersion: "v2.1.0", DeclarationsDigest: (&declarations.Set{}).Digest()},
			problems: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := snapshot.New(tc.set, tc.lock, nil, tc.opts...)
			if tc.wantErr {
				var stale *snapshot.StaleLockError
				if !errors.As(err, &stale) {
					t.Errorf("%s\nNew: got %v, want a StaleLockError", tc.reason, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nNew: %v", tc.reason, err)
			}
			if len(s.Problems) != tc.problems || s.Declarations == nil {
				t.Errorf("%s\nNew: problems %v, declarations %v; want %d problems", tc.reason, s.Problems, s.Declarations, tc.problems)
			}
		})
	}
}

// TestLoadProtectedGroup: a locked Provider whose payload ships a copy of
// Crossplane's own providers.pkg.crossplane.io CRD is refused after the
// fetch, naming the package and the CRD, so that render, apply, diff, the
// agent and lock --check all refuse it before anything is written.
func TestLoadProtectedGroup(t *testing.T) {
	td := os.Getenv("LOCKSTEP_TESTDATA")
	if td == "" {
		t.Skip("LOCKSTEP_TESTDATA is not set")
	}
	reg := registry.New(t)
	reg.PushExamples(t, filepath.Join("..", "..", ".."))

	// provider-demo v0.2.0 with Crossplane's Provider CRD added.
	src := filepath.Join("..", "..", "..", "examples", "packages", "provider-demo", "v0.2.0")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile(filepath.Join(td, "crossplane-crds", "pkg.crossplane.io_providers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "crds", "pkg.crossplane.io_providers.yaml"), crd, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := xpkg.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := xpkg.Push(context.Background(), img, reg.Ref(t, "lockstep-examples/provider-demo:evil"), reg.RemoteOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	const pinned = "sha256:6bac01cd39973a7aea167316d9bc385b00383eb3f2219ee9168f31e6b4a7dbce"
	lock := string(readDemo(t, lockfile.FileName))
	if !strings.Contains(lock, pinned) {
		t.Fatal("the demo lock no longer pins provider-demo v0.2.0 at " + pinned + "; update the test")
	}
	fsys := demoFS(t, map[string][]byte{lockfile.FileName: []byte(strings.Replace(lock, pinned, h.String(), 1))})

	var seen []string
	_, err = snapshot.Load(context.Background(), fsys,
		snapshot.WithFetcher(mirrorTo(t, reg, &seen)), snapshot.WithInsecureRegistries([]string{reg.Host}))
	var se *snapshot.StepError
	if !errors.As(err, &se) || se.Step != snapshot.StepPayload {
		t.Fatalf("Load: got error %v, want a %s step error", err, snapshot.StepPayload)
	}
	t.Logf("the user sees: %v", err)
	for _, want := range []string{"Provider lockstep-examples-provider-demo", "CustomResourceDefinition providers.pkg.crossplane.io", "pkg.crossplane.io"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %q", err, want)
		}
	}
}
