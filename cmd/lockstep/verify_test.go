package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// pushNop pushes $LOCKSTEP_TESTDATA/packages/provider-nop-<version> to reg
// as crossplane-contrib/provider-nop:<tag> and returns its digest.
func pushNop(t *testing.T, reg *registry.Registry, version, tag string) string {
	t.Helper()
	return pushUpstream(t, reg, "provider-nop-"+version, "crossplane-contrib/provider-nop", tag)
}

// TestLockSwappedDigest: provider-nop v0.4.0
// is locked, then its digest in lockstep.lock is swapped by hand for
// v0.2.1's. lock --check cannot see it (it reads no package); render and
// apply refuse it before writing anything, naming the lock, the package
// and the payload fields; lock refuses to rewrite the recorded content;
// lock --verify exits 5 listing the moved tag and the content; lock
// --update provider-nop restores the pin. Then upstream re-pushes the tag
// and lock --verify reports only the moved tag.
func TestLockSwappedDigest(t *testing.T) {
	reg := registry.New(t)
	old := pushNop(t, reg, "v0.2.1", "v0.2.1")
	cur := pushNop(t, reg, "v0.4.0", "v0.4.0")
	dir := writePackage(t, map[string]string{
		"providers.yaml": `apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata:
  name: provider-nop
spec:
  package: xpkg.upbound.io/crossplane-contrib/provider-nop:v0.4.0
`,
		"mirror.yaml": mirrorTo("xpkg.upbound.io", reg),
	})
	env, kubeconfig := cluster(t, "xp-swapped")
	regFlags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	lockPath := filepath.Join(dir, lockfile.FileName)
	if out, err := run(t, append([]string{"lock", "--crossplane-version", "v2.1.0"}, regFlags...)...); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	locked := mustRead(t, lockPath)
	if !strings.Contains(locked, cur) {
		t.Fatalf("the lock does not pin v0.4.0 at %s:\n%s", cur, locked)
	}
	swapped := strings.Replace(locked, cur, old, 1)
	if err := os.WriteFile(lockPath, []byte(swapped), 0o644); err != nil {
		t.Fatal(err)
	}
	// The error every command that pulls the package gives.
	content := []string{
		lockPath + ": Provider provider-nop: digest " + old + " holds payload.layer sha256:",
		"payload.other 0 but the lock records 1",
		"(was the digest edited by hand?",
	}
	cases := []struct {
		name     string
		reason   string
		args     []string
		wantCode int
		wantErr  []string
		wantOut  []string
	}{
		{
			name:    "CheckCannotSee",
			reason:  "lock --check reads no package: the swapped digest fits the declarations, and its help says so",
			args:    []string{"lock", "--check", "--dir", dir},
			wantOut: []string{"is up to date: 1 packages"},
		},
		{
			name:     "Render",
			reason:   "render refuses the swapped digest instead of rendering v0.2.1 labelled v0.4.0",
			args:     append([]string{"render"}, regFlags...),
			wantCode: exitFailure,
			wantErr:  content,
		},
		{
			name:   "Apply",
			reason: "apply refuses it before any write",
			args: append(append([]string{"apply", "--instance", "swapped"}, regFlags...),
				"--kubeconfig", kubeconfig, "--namespace", "xp-swapped"),
			wantCode: exitFailure,
			wantErr:  content,
		},
		{
			name:     "Lock",
			reason:   "lock keeps the pin but refuses to rewrite payload.layer to match the swapped image",
			args:     append([]string{"lock"}, regFlags...),
			wantCode: exitFailure,
			wantErr:  append([]string{"lockstep lock --update provider-nop"}, content[1:]...),
		},
		{
			name:     "Verify",
			reason:   "lock --verify, online, lists the package with the tag that does not point to the pin and the content that differs, and exits 5",
			args:     append([]string{"lock", "--verify"}, regFlags...),
			wantCode: exitVerify,
			wantErr:  []string{lockPath + ": 1 of 1 pin did not verify: Provider provider-nop (TagMoved, ContentMismatch)"},
			wantOut: []string{
				"FAILED  Provider provider-nop v0.4.0:",
				"TagMoved: " + lockPath + ": Provider provider-nop: tag v0.4.0 now points to " + cur + ", but the lock pins " + old,
				"ContentMismatch: " + content[0],
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(t, tc.args...)
			t.Logf("%s:\n%s\nerror: %v", tc.name, out, err)
			if code := exitCode(err); err != nil && code != tc.wantCode || err == nil && tc.wantCode != 0 {
				t.Fatalf("%s\n%v: got %v (exit %d), want exit %d", tc.reason, tc.args, err, code, tc.wantCode)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s\nthe error lacks %q", tc.reason, w)
				}
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("%s\nthe output lacks %q", tc.reason, w)
				}
			}
			if now := mustRead(t, lockPath); now != swapped {
				t.Errorf("%s\n%v changed the lock", tc.reason, tc.args)
			}
		})
	}
	if getObj(t, env, "pkg.crossplane.io/v1", "Provider", "provider-nop") != nil {
		t.Errorf("apply of the swapped lock wrote Provider provider-nop")
	}

	// --update provider-nop pins the tag's digest again and records its
	// content; the lock verifies.
	if out, err := run(t, append([]string{"lock", "--update", "provider-nop"}, regFlags...)...); err != nil {
		t.Fatalf("lock --update provider-nop: %v\n%s", err, out)
	}
	if now := mustRead(t, lockPath); now != locked {
		t.Errorf("lock --update provider-nop did not restore the lock:\n%s", now)
	}
	if out, err := run(t, append([]string{"lock", "--verify"}, regFlags...)...); err != nil || !strings.Contains(out, "ok  Provider provider-nop v0.4.0") {
		t.Errorf("lock --verify of the restored lock: %v\n%s", err, out)
	}

	// Upstream re-pushes v0.4.0 with v0.2.1's content: only the tag moved.
	pushNop(t, reg, "v0.2.1", "v0.4.0")
	out, err := run(t, append([]string{"lock", "--verify"}, regFlags...)...)
	if exitCode(err) != exitVerify || !strings.Contains(out, "TagMoved: ") || strings.Contains(out, "ContentMismatch") {
		t.Errorf("lock --verify after the tag moved upstream: got %v (exit %d), want exit 5 with TagMoved only:\n%s", err, exitCode(err), out)
	}
}
