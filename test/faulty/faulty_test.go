package faulty_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lockstep-gitops/lockstep/test/faulty"
)

// TestServer: each mode misbehaves as documented, and Close unblocks a
// client that waits on a hung server.
func TestServer(t *testing.T) {
	cases := map[string]struct {
		reason string
		mode   faulty.Mode
		want   string // status and body, or a part of the error
	}{
		"Status500": {
			reason: "every request gets 500",
			mode:   faulty.Status500,
			want:   "500 faulty: internal server error\n",
		},
		"Wrong": {
			reason: "every request gets 200 with content that was not asked for",
			mode:   faulty.Wrong,
			want:   "200 not what you asked for",
		},
		"Reset": {
			reason: "the connection is reset before any answer",
			mode:   faulty.Reset,
			want:   "connection reset by peer",
		},
		"HangUntilClose": {
			reason: "a hung server never answers; Close ends the wait with an EOF",
			mode:   faulty.Hang,
			want:   "EOF",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := faulty.New(t, tc.mode)
			if tc.mode == faulty.Hang {
				time.AfterFunc(200*time.Millisecond, s.Close)
			}
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			done := make(chan string, 1)
			go func() {
				resp, err := client.Get(s.URL + "/v2/")
				if err != nil {
					done <- err.Error()
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				done <- strings.TrimSuffix(resp.Status, " "+http.StatusText(resp.StatusCode)) + " " + string(b)
			}()
			select {
			case got := <-done:
				if !strings.Contains(got, tc.want) {
					t.Errorf("%s\nGET: %q, want it to contain %q", tc.reason, got, tc.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s\nGET has not returned after 10s", tc.reason)
			}
			if s.Accepted() < 1 {
				t.Errorf("%s\nAccepted() = %d, want at least 1", tc.reason, s.Accepted())
			}
		})
	}
}
