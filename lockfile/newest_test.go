package lockfile

import "testing"

func TestNewestInRange(t *testing.T) {
	tags := []string{"latest", "v0.1.0", "v0.2.0", "v0.3.0-rc.1", "v1.0.0", "v1", "0.2.5", "main"}
	cases := map[string]struct {
		reason      string
		constraints []string
		want        string
		ok          bool
		err         bool
	}{
		"Open":         {"The highest complete version wins; v1 is not complete.", []string{">=v0.1.0"}, "v1.0.0", true, false},
		"Capped":       {"Every constraint must hold.", []string{">=v0.1.0", "<v1.0.0"}, "0.2.5", true, false},
		"NoPrerelease": {"A prerelease matches only a constraint with a prerelease part.", []string{">=v0.2.9 <v1.0.0"}, "", false, false},
		"Prerelease":   {"...which this one has.", []string{">=v0.3.0-0 <v1.0.0"}, "v0.3.0-rc.1", true, false},
		"None":         {"Nothing in range.", []string{">=v2.0.0"}, "", false, false},
		"BadRange":     {"A bad constraint is an error.", []string{"not a range"}, "", false, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok, err := NewestInRange(tags, tc.constraints)
			if (err != nil) != tc.err || got != tc.want || ok != tc.ok {
				t.Errorf("%s\nNewestInRange(%v) = %q, %v, %v; want %q, %v, error %v", tc.reason, tc.constraints, got, ok, err, tc.want, tc.ok, tc.err)
			}
		})
	}
	for tag, want := range map[string]bool{"v1.2.3": true, "1.2.3": true, "v1.2.3-rc.1": true, "latest": false, "v1.2": false, "main": false} {
		if got := IsVersionTag(tag); got != want {
			t.Errorf("IsVersionTag(%q) = %v, want %v", tag, got, want)
		}
	}
}
