package xplock

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func entry(name, version string) map[string]any {
	return map[string]any{"name": name, "source": "xpkg.example.com/" + name, "version": version}
}

func TestMerge(t *testing.T) {
	other := entry("crossplane-own-abc", "v1")
	cases := map[string]struct {
		reason string
		have   []any
		u      Update
		want   []any
	}{
		"Empty": {
			reason: "No Lock and nothing wanted is no entry.",
			want:   []any{},
		},
		"Append": {
			reason: "Wanted entries not in the Lock are appended in Order, after the entries of others.",
			have:   []any{other},
			u: Update{Owned: map[string]bool{"b-1": true, "a-1": true}, Entries: map[string]any{"a-1": entry("a-1", "v1"), "b-1": entry("b-1", "v1")},
				Order: []string{"b-1", "a-1"}},
			want: []any{other, entry("b-1", "v1"), entry("a-1", "v1")},
		},
		"ReplaceInPlace": {
			reason: "An owned entry is replaced by the wanted one where it is: an upgrade keeps the Lock's order.",
			have:   []any{entry("a-1", "v1"), other},
			u:      Update{Owned: map[string]bool{"a-1": true, "a-2": true}, Entries: map[string]any{"a-2": entry("a-2", "v2")}, Order: []string{"a-2"}},
			want:   []any{other, entry("a-2", "v2")},
		},
		"SameRevisionUpdated": {
			reason: "The same revision with another entry is replaced in its place.",
			have:   []any{entry("a-1", "v1"), other},
			u:      Update{Owned: map[string]bool{"a-1": true}, Entries: map[string]any{"a-1": entry("a-1", "v1.0.1")}, Order: []string{"a-1"}},
			want:   []any{entry("a-1", "v1.0.1"), other},
		},
		"Remove": {
			reason: "An owned entry neither wanted nor kept goes: a pruned package's, or an inactive revision's.",
			have:   []any{entry("a-1", "v1"), other},
			u:      Update{Owned: map[string]bool{"a-1": true}},
			want:   []any{other},
		},
		"Keep": {
			reason: "A kept entry stays as the Lock has it, in its place (a paused package).",
			have:   []any{entry("a-1", "v1"), other},
			u:      Update{Owned: map[string]bool{"a-1": true, "a-2": true}, Keep: map[string]bool{"a-1": true}},
			want:   []any{entry("a-1", "v1"), other},
		},
		"KeepAbsent": {
			reason: "Keeping an entry the Lock does not have adds none.",
			have:   []any{other},
			u:      Update{Owned: map[string]bool{"a-1": true}, Keep: map[string]bool{"a-1": true}},
			want:   []any{other},
		},
		"Duplicate": {
			reason: "A revision listed twice in the Lock is written once.",
			have:   []any{entry("a-1", "v1"), entry("a-1", "v1")},
			u:      Update{Owned: map[string]bool{"a-1": true}, Entries: map[string]any{"a-1": entry("a-1", "v1")}, Order: []string{"a-1"}},
			want:   []any{entry("a-1", "v1")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.u.Merge(tc.have)); diff != "" {
				t.Errorf("%s\nMerge(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
