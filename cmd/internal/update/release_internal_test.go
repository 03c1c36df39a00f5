package update

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// TestReleaseCandidates: which tags a release policy proposes, newest
// first, and the newest release it leaves out.
func TestReleaseCandidates(t *testing.T) {
	tags := []string{"latest", "v1.0.0", "v1.0.1", "v1.1.0", "v1.2.0-rc.1", "v2.0.0", "v2.1.0-rc.1", "v0.9.0", "1.1.1", "v1.1"}
	cases := map[string]struct {
		reason  string
		current string
		policy  declarations.ReleasePolicy
		want    []string
		newest  string
	}{
		"Patch": {
			reason:  "patch keeps major.minor; channel tags, incomplete versions and pre-releases are never proposed from a release.",
			current: "v1.0.0", policy: declarations.ReleasePatch,
			want: []string{"v1.0.1"}, newest: "v2.0.0",
		},
		"Minor": {
			reason:  "minor keeps the major; a tag without the v prefix is a version too.",
			current: "v1.0.0", policy: declarations.ReleaseMinor,
			want: []string{"1.1.1", "v1.1.0", "v1.0.1"}, newest: "v2.0.0",
		},
		"Major": {
			reason:  "major allows any newer release, and nothing newer is left out.",
			current: "v1.0.0", policy: declarations.ReleaseMajor,
			want: []string{"v2.0.0", "1.1.1", "v1.1.0", "v1.0.1"},
		},
		"FromPreRelease": {
			reason:  "From a pre-release, newer pre-releases are proposed too.",
			current: "v1.2.0-rc.0", policy: declarations.ReleaseMajor,
			want: []string{"v2.1.0-rc.1", "v2.0.0", "v1.2.0-rc.1"},
		},
		"UpToDate": {
			reason:  "Nothing newer: nothing proposed, nothing left out.",
			current: "v2.0.0", policy: declarations.ReleaseMinor,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, newest := releaseCandidates(tags, tc.current, tc.policy)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\ncandidates -want +got:\n%s", tc.reason, diff)
			}
			if newest != tc.newest {
				t.Errorf("%s\nnewest %q, want %q", tc.reason, newest, tc.newest)
			}
		})
	}
}

// TestReleaseNotes: the release notes link from meta.crossplane.io/source.
func TestReleaseNotes(t *testing.T) {
	cases := map[string]struct {
		reason, source, want string
	}{
		"GitHub":   {"A GitHub repository links to the tag's release page.", "github.com/crossplane-contrib/provider-helm", "https://github.com/crossplane-contrib/provider-helm/releases/tag/v1.2.0"},
		"Scheme":   {"A scheme and a .git suffix are accepted.", "https://github.com/org/repo.git", "https://github.com/org/repo/releases/tag/v1.2.0"},
		"GitLab":   {"GitLab has its own release path.", "gitlab.com/org/repo", "https://gitlab.com/org/repo/-/releases/v1.2.0"},
		"Other":    {"Elsewhere the repository itself is linked.", "git.example.com/org/repo", "https://git.example.com/org/repo"},
		"Template": {"An unrendered template (upstream provider-upjet packages) links nothing.", "github.com/crossplane-contrib/provider-upjet-{{ .ProviderName }}", ""},
		"Missing":  {"No annotation, no link.", "", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := releaseNotes(tc.source, "v1.2.0"); got != tc.want {
				t.Errorf("%s\nreleaseNotes(%q) = %q, want %q", tc.reason, tc.source, got, tc.want)
			}
		})
	}
}
