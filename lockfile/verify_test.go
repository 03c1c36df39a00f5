package lockfile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/faulty"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// TestVerify: lock --verify's check of every pin against the in-process
// registry.
func TestVerify(t *testing.T) {
	// finding is what a case observes: "Kind name: kind".
	type finding struct{ Package, Kind string }
	cases := []struct {
		name   string
		reason string
		// setup changes the registry after the lock was written.
		setup func(t *testing.T, r *registry.Registry, digests map[string]string)
		edit  func(e *Entry, digests map[string]string)
		// hung points the client at a registry that never answers.
		hung    bool
		want    []finding
		wantMsg []string
	}{
		{
			name:   "Fresh",
			reason: "a lock just written verifies: every tag resolves to its digest and every pulled package is what the lock records",
		},
		{
			name:   "SwappedDigest",
			reason: "the issue's hand edit: the tag does not point to the swapped digest, and its content is not the recorded one",
			edit:   func(e *Entry, d map[string]string) { e.Digest = d["provider-demo:v0.1.0"] },
			want:   []finding{{"lockstep-examples-provider-demo", "TagMoved"}, {"lockstep-examples-provider-demo", "ContentMismatch"}},
			wantMsg: []string{
				"lockstep.lock: Provider lockstep-examples-provider-demo: tag v0.2.0 now points to sha256:",
				"holds payload.layer",
			},
		},
		{
			name:    "EditedPayload",
			reason:  "the digest is right but the payload summary was edited: content only",
			edit:    func(e *Entry, _ map[string]string) { e.Payload.Layer = "sha256:" + strings.Repeat("0", 64) },
			want:    []finding{{"lockstep-examples-provider-demo", "ContentMismatch"}},
			wantMsg: []string{"but the lock records sha256:000000"},
		},
		{
			name:   "TagMovedUpstream",
			reason: "upstream re-pushed provider-demo:v0.2.0 with other content; the pinned digest is still served and still what the lock records",
			setup: func(t *testing.T, r *registry.Registry, _ map[string]string) {
				pushImage(t, r, "lockstep-examples/provider-demo:v0.2.0", buildExample(t, "provider-demo", "v0.1.0"))
			},
			want:    []finding{{"lockstep-examples-provider-demo", "TagMoved"}},
			wantMsg: []string{"review the new image, then run lockstep lock --update lockstep-examples-provider-demo"},
		},
		{
			name:    "TagMissing",
			reason:  "a tag the registry no longer has is reported; the digest is still served",
			edit:    func(e *Entry, _ map[string]string) { e.Version = "v0.2.0-gone" },
			want:    []finding{{"lockstep-examples-provider-demo", "TagMissing"}},
			wantMsg: []string{"the registry no longer has tag v0.2.0-gone"},
		},
		{
			name:    "DigestMissing",
			reason:  "a digest-only pin the registry does not serve: no tag to check, and the package cannot be pulled",
			edit:    func(e *Entry, _ map[string]string) { e.Version, e.Digest = "", "sha256:"+strings.Repeat("1", 64) },
			want:    []finding{{"lockstep-examples-provider-demo", "DigestMissing"}},
			wantMsg: []string{"the registry no longer serves digest sha256:1111"},
		},
		{
			name:    "RegistryHangs",
			reason:  "a registry that never answers is a RegistryError per package within the registry timeout, not a verdict about the pins",
			hung:    true,
			want:    []finding{{"configuration-demo", "RegistryError"}, {"lockstep-examples-function-demo", "RegistryError"}, {"lockstep-examples-provider-demo", "RegistryError"}},
			wantMsg: []string{"cannot resolve tag v0.1.0 of " + configDemo},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, set, first, digests := examplesLocked(t, tc.setup)
			lock := edited(t, first, providerDemo, func(e *Entry) {
				if tc.edit != nil {
					tc.edit(e, digests)
				}
			})
			opts := oci.Options{
				InsecureRegistries: []string{r.Host},
				Transport:          r.Transport(),
				Retry:              remote.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 1},
			}
			if tc.hung {
				hung := faulty.New(t, faulty.Hang)
				set = declare(t, map[string]string{
					"platform.yaml":     decl("Configuration", "configuration-demo", configDemo+":v0.1.0"),
					"imageconfigs.yaml": strings.ReplaceAll(rewriteTo(r, "lockstep.example"), r.Host, hung.Host),
				})
				opts = oci.Options{InsecureRegistries: []string{hung.Host}, Timeout: 200 * time.Millisecond,
					Retry: remote.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 1}}
			}
			cache, err := oci.NewCache(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ics, err := declarations.CrossplaneImageConfigs(set.ImageConfigs)
			if err != nil {
				t.Fatal(err)
			}
			client, err := oci.NewClient(opts, cache, ics)
			if err != nil {
				t.Fatal(err)
			}
			fs, err := faulty.Within(t, 30*time.Second, "Verify", func() ([]Finding, error) {
				return Verify(context.Background(), FileName, lock, client, Options{}), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var got []finding
			var msgs []string
			for _, f := range fs {
				got = append(got, finding{f.Entry.Name, string(f.Kind)})
				msgs = append(msgs, f.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nVerify: -want +got:\n%s\n%s", tc.reason, diff, strings.Join(msgs, "\n"))
			}
			for _, w := range tc.wantMsg {
				if !strings.Contains(strings.Join(msgs, "\n"), w) {
					t.Errorf("%s\nno finding says %q:\n%s", tc.reason, w, strings.Join(msgs, "\n"))
				}
			}
		})
	}
}
