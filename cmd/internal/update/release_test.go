package update_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/cmd/internal/update"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/lockfile"
)

// pushRelease pushes a Provider package named pkgName as
// lockstep-examples/<pkgName>:<tag> whose metadata names its source
// repository (meta.crossplane.io/source), as upstream packages do, and
// which ships one CRD with a field named after the tag (so each release has
// its own payload and digest). crossplane, when given, is its
// spec.crossplane.version constraint.
func (e *env) pushRelease(pkgName, tag string, crossplane ...string) string {
	e.t.Helper()
	xp := ">=v1.14.0-0"
	if len(crossplane) > 0 {
		xp = crossplane[0]
	}
	dir := e.t.TempDir()
	meta := fmt.Sprintf(`apiVersion: meta.pkg.crossplane.io/v1
kind: Provider
metadata:
  name: %s
  annotations:
    meta.crossplane.io/source: github.com/example-org/%s
spec:
  crossplane:
    version: %q
`, pkgName, pkgName, xp)
	crd := fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.%[1]s.example.org
spec:
  group: %[1]s.example.org
  names: {kind: Thing, listKind: ThingList, plural: things, singular: thing}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          %[2]s: {type: string}
`, pkgName, "release"+strings.NewReplacer("v", "", ".", "_").Replace(tag))
	for f, content := range map[string]string{"crossplane.yaml": meta, "crds.yaml": crd} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	return e.pushDir(dir, "lockstep-examples/"+pkgName+":"+tag)
}

// TestProposeReleases is the end-to-end test of `lockstep update
// --propose-releases` on a real Git remote and the in-process registry
// with provider-px v1.0.0, v1.0.1, v1.1.0 and v2.0.0 published: each
// policy proposes the newest release it allows, resolved as `lockstep
// lock --update` resolves it, on lockstep/release/provider-px, with only
// the tag of the user's file changed; a dependent's constraint holds it
// back; a second run pushes nothing.
func TestProposeReleases(t *testing.T) {
	pxFile := "# provider-px: the platform's provider\n" +
		"apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-px # team a\n%sspec:\n  package: lockstep.example/lockstep-examples/provider-px:v1.0.0 # see RELEASES.md\n"
	cases := map[string]struct {
		reason     string
		policy     declarations.ReleasePolicy
		annotation string
		dependent  string // the constraint of a Configuration on provider-px
		want       string
		held       []string
		newest     string
	}{
		"Minor": {
			reason: "minor proposes the newest release of the same major, and says v2.0.0 is out.",
			policy: declarations.ReleaseMinor,
			want:   "v1.1.0",
			newest: "v2.0.0",
		},
		"Patch": {
			reason: "patch proposes the newest release of the same major.minor.",
			policy: declarations.ReleasePatch,
			want:   "v1.0.1",
			newest: "v2.0.0",
		},
		"AnnotationOverridesFlag": {
			reason:     "lockstep.io/release-policy on the declaration overrides --propose-releases.",
			policy:     declarations.ReleaseMajor,
			annotation: "patch",
			want:       "v1.0.1",
			newest:     "v2.0.0",
		},
		"DependentConstraint": {
			reason:    "A dependent's constraint <v1.1.0 limits the proposal to v1.0.1 and says why v1.1.0 is not proposed.",
			policy:    declarations.ReleaseMinor,
			dependent: ">=v1.0.0 <v1.1.0",
			want:      "v1.0.1",
			held:      []string{`v1.1.0: platform requires ">=v1.0.0 <v1.1.0"`},
			newest:    "v2.0.0",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			v100 := e.pushRelease("provider-px", "v1.0.0")
			annotations := ""
			if tc.annotation != "" {
				annotations = "  annotations:\n    lockstep.io/release-policy: " + tc.annotation + "\n"
			}
			decls := map[string]string{"px.yaml": fmt.Sprintf(pxFile, annotations)}
			if tc.dependent != "" {
				e.pushSynthetic("Configuration", "platform", "v1.0.0", "1", "provider|lockstep.example/lockstep-examples/provider-px|"+tc.dependent)
				decls["platform.yaml"] = declaration("Configuration", "platform", "platform:v1.0.0", "")
			}
			wantFile := strings.Replace(decls["px.yaml"], "provider-px:v1.0.0", "provider-px:"+tc.want, 1)
			base, _ := e.commitLocked(decls)
			digests := map[string]string{"v1.0.0": v100}
			for _, v := range []string{"v1.0.1", "v1.1.0", "v2.0.0"} {
				digests[v] = e.pushRelease("provider-px", v)
			}

			u := e.updater(e.options())
			res, err := u.ProposeReleases(ctx, update.ReleaseOptions{Policy: tc.policy})
			if err != nil {
				t.Fatalf("%s\nfirst run: %v", tc.reason, err)
			}
			var pr update.Proposal
			for _, p := range res.Proposals {
				if p.Name == "provider-px" {
					pr = p
				}
			}
			if pr.NewVersion != tc.want || pr.NewDigest != digests[tc.want] || pr.OldDigest != v100 {
				t.Errorf("%s\nproposed %s@%s (from %s), want %s@%s", tc.reason, pr.NewVersion, pr.NewDigest, pr.OldDigest, tc.want, digests[tc.want])
			}
			if diff := cmp.Diff(tc.held, pr.Held); diff != "" {
				t.Errorf("%s\nheld -want +got:\n%s", tc.reason, diff)
			}
			if pr.Newest != tc.newest {
				t.Errorf("%s\nnewest %q, want %q", tc.reason, pr.Newest, tc.newest)
			}
			if len(res.Commits) != 1 || res.Commits[0].Outcome != update.Pushed || res.Commits[0].Branch != "lockstep/release/provider-px" {
				t.Fatalf("%s\ncommits %+v", tc.reason, res.Commits)
			}
			tip := e.remote.Ref(t, "refs/heads/lockstep/release/provider-px")
			if c := e.remote.CommitObject(t, tip); len(c.ParentHashes) != 1 || c.ParentHashes[0] != base {
				t.Errorf("the proposal is not one commit on main")
			}

			// The declaration: only the tag changed, comments kept.
			got, ok := e.remote.File(t, tip, declDir+"/px.yaml")
			if !ok {
				t.Fatal("no px.yaml on the proposal branch")
			}
			if diff := cmp.Diff(wantFile, string(got)); diff != "" {
				t.Errorf("the declaration file -want +got:\n%s", diff)
			}

			// The lock: what lockstep lock --update provider-px writes for
			// the new declarations, and it passes lock --check.
			proposed := e.lockAt(tip)
			dir := t.TempDir()
			for f, content := range decls {
				if f == "px.yaml" {
					content = wantFile
				}
				if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			set, err := declarations.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, prev := e.checkoutMain()
			want := e.resolve(set, prev, lockfile.Options{UpdatePackages: []string{exampleSource + "provider-px"}})
			gotLock, _ := e.remote.File(t, tip, lockPath)
			if diff := cmp.Diff(string(want), string(gotLock)); diff != "" {
				t.Errorf("the proposed lock differs from lockstep lock --update's:\n%s", diff)
			}
			if problems := lockfile.Check(set, proposed, lockfile.Options{}); len(problems) != 0 {
				t.Errorf("the proposed lock fails lock --check: %v", problems)
			}

			// The message.
			msg := e.remote.CommitObject(t, tip).Message
			subject, body, _ := strings.Cut(msg, "\n")
			if want := "provider-px: v1.0.0 → " + tc.want; subject != want {
				t.Errorf("subject %q, want %q", subject, want)
			}
			for _, want := range []string{
				"v1.0.0 " + v100 + " → " + tc.want + " " + digests[tc.want],
				"Release notes of provider-px " + tc.want + ": https://github.com/example-org/provider-px/releases/tag/" + tc.want,
				"<!-- lockstep-diff -->",
				"things.provider-px.example.org",
			} {
				if !strings.Contains(body, want) {
					t.Errorf("the message lacks %q:\n%s", want, msg)
				}
			}
			for _, h := range tc.held {
				if !strings.Contains(body, h) {
					t.Errorf("the message does not say %q:\n%s", h, msg)
				}
			}

			// A second run finds the same proposal on the branch and pushes
			// nothing.
			res, err = u.ProposeReleases(ctx, update.ReleaseOptions{Policy: tc.policy})
			if err != nil || len(res.Commits) != 1 || res.Commits[0].Outcome != update.AlreadyProposed {
				t.Fatalf("second run: %+v, %v", res.Commits, err)
			}
			if again := e.remote.Ref(t, "refs/heads/lockstep/release/provider-px"); again != tip {
				t.Errorf("the second run moved the branch from %s to %s", tip, again)
			}
			if e.remote.Ref(t, "refs/heads/main") != base {
				t.Errorf("main moved")
			}
		})
	}
}

// TestProposeReleasesGroupAndFallback: a release that does not resolve
// (its spec.crossplane.version excludes the lock's Crossplane) falls back
// to the next one and says why; --group-releases puts every proposal in
// one commit on lockstep/releases; update mode off pushes nothing; a
// second run leaves the branch alone.
func TestProposeReleasesGroupAndFallback(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.pushRelease("provider-px", "v1.0.0")
	e.pushRelease("provider-py", "v1.0.0")
	base, _ := e.commitLocked(map[string]string{
		"providers.yaml": declaration("Provider", "provider-px", "provider-px:v1.0.0", "") + "---\n" +
			declaration("Provider", "provider-py", "provider-py:v1.0.0", ""),
	})
	px101 := e.pushRelease("provider-px", "v1.0.1")
	e.pushRelease("provider-px", "v1.1.0", ">=v3.0.0")
	py110 := e.pushRelease("provider-py", "v1.1.0")
	opts := update.ReleaseOptions{Policy: declarations.ReleaseMinor, Group: true}

	off := e.options()
	off.Mode = update.ModeOff
	res, err := e.updater(off).ProposeReleases(ctx, opts)
	if err != nil || len(res.Commits) != 1 || res.Commits[0].Outcome != update.UpdateAvailable {
		t.Fatalf("update mode off: %+v, %v", res.Commits, err)
	}
	if got := e.remote.Ref(t, "refs/heads/"+update.DefaultReleaseGroupBranch); !got.IsZero() {
		t.Fatalf("update mode off pushed %s", got)
	}

	u := e.updater(e.options())
	res, err = u.ProposeReleases(ctx, opts)
	if err != nil || len(res.Commits) != 1 || res.Commits[0].Outcome != update.Pushed {
		t.Fatalf("grouped proposals: %+v, %v", res.Commits, err)
	}
	px := res.Proposals[0]
	if px.Name != "provider-px" || px.NewVersion != "v1.0.1" || len(px.Held) != 1 ||
		!strings.HasPrefix(px.Held[0], "v1.1.0: does not resolve: ") || !strings.Contains(px.Held[0], ">=v3.0.0") {
		t.Errorf("provider-px: %s, held %q; want v1.0.1, v1.1.0 held for its Crossplane version", px.NewVersion, px.Held)
	}
	tip := e.remote.Ref(t, "refs/heads/"+update.DefaultReleaseGroupBranch)
	commit := e.remote.CommitObject(t, tip)
	if subject, _, _ := strings.Cut(commit.Message, "\n"); subject != "lockstep: propose releases of 2 packages" || commit.ParentHashes[0] != base {
		t.Errorf("grouped commit %q on %v", subject, commit.ParentHashes)
	}
	for _, want := range []string{"provider-px: v1.0.0 → v1.0.1", "provider-py: v1.0.0 → v1.1.0", "v1.1.0: does not resolve: "} {
		if !strings.Contains(commit.Message, want) {
			t.Errorf("the grouped message lacks %q:\n%s", want, commit.Message)
		}
	}
	lock := e.lockAt(tip)
	if p := entry(t, lock, "provider-px"); p.Digest != px101 {
		t.Errorf("provider-px locked at %s, want v1.0.1 %s", p.Digest, px101)
	}
	if p := entry(t, lock, "provider-py"); p.Digest != py110 {
		t.Errorf("provider-py locked at %s, want v1.1.0 %s", p.Digest, py110)
	}
	decl, _ := e.remote.File(t, tip, declDir+"/providers.yaml")
	if !strings.Contains(string(decl), "provider-px:v1.0.1\n") || !strings.Contains(string(decl), "provider-py:v1.1.0\n") {
		t.Errorf("the grouped declarations:\n%s", decl)
	}

	res, err = u.ProposeReleases(ctx, opts)
	if err != nil || len(res.Commits) != 1 || res.Commits[0].Outcome != update.AlreadyProposed {
		t.Fatalf("second grouped run: %+v, %v", res.Commits, err)
	}
	if e.remote.Ref(t, "refs/heads/"+update.DefaultReleaseGroupBranch) != tip {
		t.Errorf("the second run moved the branch")
	}
}
