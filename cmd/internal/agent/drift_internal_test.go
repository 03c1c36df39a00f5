package agent

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRecentCorrections: the Sync keeps the drift corrections of the last
// hour, at most maxDriftCorrections of them, newest last.
func TestRecentCorrections(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(at.Add(-d)) }
	many := make([]metav1.Time, maxDriftCorrections)
	for i := range many {
		many[i] = ago(time.Duration(maxDriftCorrections-i) * time.Second)
	}
	cases := map[string]struct {
		reason    string
		prev      []metav1.Time
		corrected bool
		want      []metav1.Time
	}{
		"Appended":  {reason: "a correction is recorded at the reconcile's time", prev: []metav1.Time{ago(time.Minute)}, corrected: true, want: []metav1.Time{ago(time.Minute), metav1.NewTime(at)}},
		"AgedOut":   {reason: "corrections older than an hour leave", prev: []metav1.Time{ago(2 * time.Hour), ago(59 * time.Minute)}, want: []metav1.Time{ago(59 * time.Minute)}},
		"Bounded":   {reason: "at most maxDriftCorrections, the oldest leave first", prev: many, corrected: true, want: append(append([]metav1.Time(nil), many[1:]...), metav1.NewTime(at))},
		"NoneAtAll": {reason: "nothing corrected, nothing kept", want: nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := recentCorrections(c.prev, c.corrected, at)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("%s: -want +got\n%s", c.reason, diff)
			}
		})
	}
}
