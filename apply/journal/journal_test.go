package journal_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/apply/journal"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

const instance = "journal-test"

// entries returns one payload entry per ID.
func entries(ids ...string) []inventory.Entry {
	var out []inventory.Entry
	for _, id := range ids {
		out = append(out, inventory.Entry{ID: id, Version: "v1", Role: inventory.RolePayload})
	}
	return out
}

// provider is the inventory entry of Provider name with ids.
func provider(name string, ids ...string) inventory.Package {
	return inventory.Package{Kind: crossplane.KindProvider, Name: name, Source: "xpkg.example.org/" + name, Version: "v1.0.0", Entries: entries(ids...)}
}

// TestRecordPackage records one package's intent on a real API server.
func TestRecordPackage(t *testing.T) {
	env := envtest.Shared(t)
	cases := map[string]struct {
		reason string
		dryRun bool
		// before is the inventory in the cluster, nil for none.
		before *inventory.Inventory
		// intended is what provider-a is about to write.
		intended []string
		// writes is how many writes the record costs; want the inventory
		// afterwards, nil for none.
		writes int64
		want   *inventory.Inventory
	}{
		"New": {
			reason:   "a package the inventory does not list is recorded with what it is about to write",
			intended: []string{"_a__A", "_b__B"},
			writes:   1,
			want:     &inventory.Inventory{Instance: instance, Packages: []inventory.Package{provider("provider-a", "_a__A", "_b__B")}},
		},
		"Listed": {
			reason:   "a package whose entry lists everything it is about to write costs no request",
			before:   &inventory.Inventory{Instance: instance, Packages: []inventory.Package{provider("provider-a", "_a__A", "_b__B")}},
			intended: []string{"_b__B"},
			want:     &inventory.Inventory{Instance: instance, Packages: []inventory.Package{provider("provider-a", "_a__A", "_b__B")}},
		},
		"Missing": {
			reason:   "a package gains what it lacks; what it listed and other packages stay",
			before:   &inventory.Inventory{Instance: instance, Packages: []inventory.Package{provider("provider-a", "_a__A"), provider("provider-b", "_x__X")}},
			intended: []string{"_a__A", "_c__C"},
			writes:   1,
			want:     &inventory.Inventory{Instance: instance, Packages: []inventory.Package{provider("provider-a", "_a__A", "_c__C"), provider("provider-b", "_x__X")}},
		},
		"DryRun": {
			reason:   "a dry run records nothing",
			dryRun:   true,
			intended: []string{"_a__A"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := envtest.Context(t, time.Minute)
			ns := env.Namespace(t, "journal")
			inv, exists := &inventory.Inventory{Instance: instance}, false
			if tc.before != nil {
				if err := journal.New(journal.Config{Writer: writer.New(env.Client, false), Namespace: ns, Instance: instance, FieldManager: "test"}, inv, false).Write(ctx, tc.before); err != nil {
					t.Fatal(err)
				}
				var err error
				if inv, exists, err = inventory.ReadExisting(ctx, env.Client, ns, instance); err != nil || !exists {
					t.Fatalf("the inventory written before: %v, %v", exists, err)
				}
			}
			w := writer.New(env.Client, tc.dryRun)
			j := journal.New(journal.Config{Writer: w, Namespace: ns, Instance: instance, FieldManager: "lockstep"}, inv, exists)
			fresh := provider("provider-a")
			if err := j.RecordPackage(ctx, fresh, entries(tc.intended...)); err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if w.Writes() != tc.writes {
				t.Errorf("%s: %d writes, want %d", tc.reason, w.Writes(), tc.writes)
			}
			got, exists, err := inventory.ReadExisting(ctx, env.Client, ns, instance)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if exists {
					t.Errorf("%s: an inventory was written: %+v", tc.reason, got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: the inventory -want +got\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(got, j.Inventory()); diff != "" {
				t.Errorf("%s: the journal's inventory is not the cluster's -cluster +journal\n%s", tc.reason, diff)
			}
		})
	}
}

// TestGroupCommit records ten packages at once while the first write is
// held: the other nine share the second write, and every package's entry
// is in the inventory.
func TestGroupCommit(t *testing.T) {
	env := envtest.Shared(t)
	ctx := envtest.Context(t, time.Minute)
	ns := env.Namespace(t, "journal")
	const n = 10
	var first sync.Once
	w := writer.New(env.Client, false)
	j := journal.New(journal.Config{Writer: w, Namespace: ns, Instance: instance, FieldManager: "lockstep",
		BeforeWrite: func(queued func() int) {
			first.Do(func() {
				for queued() < n-1 && ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
			})
		}}, &inventory.Inventory{Instance: instance}, false)
	errs := make([]error, n)
	var wg sync.WaitGroup
	started := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				<-started
			}
			p := provider(fmt.Sprintf("provider-%02d", i))
			if i == 0 {
				// The first commit is in flight once its hook runs.
				go func() {
					time.Sleep(50 * time.Millisecond)
					close(started)
				}()
			}
			errs[i] = j.RecordPackage(ctx, p, entries(fmt.Sprintf("_o%02d__O", i)))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("package %d: %v", i, err)
		}
	}
	if w.Writes() != 2 {
		t.Errorf("%d writes for %d packages, want 2: one, then the nine that waited for it", w.Writes(), n)
	}
	got, _, err := inventory.ReadExisting(ctx, env.Client, ns, instance)
	if err != nil {
		t.Fatal(err)
	}
	want := &inventory.Inventory{Instance: instance}
	for i := range n {
		want.Packages = append(want.Packages, provider(fmt.Sprintf("provider-%02d", i), fmt.Sprintf("_o%02d__O", i)))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the inventory -want +got\n%s", diff)
	}
}

// TestRecordManifests records manifests' intent beside packages.
func TestRecordManifests(t *testing.T) {
	env := envtest.Shared(t)
	ctx := envtest.Context(t, time.Minute)
	ns := env.Namespace(t, "journal")
	w := writer.New(env.Client, false)
	before := &inventory.Inventory{Instance: instance, Packages: []inventory.Package{provider("provider-a", "_a__A")}}
	j := journal.New(journal.Config{Writer: w, Namespace: ns, Instance: instance, FieldManager: "lockstep"}, &inventory.Inventory{Instance: instance}, false)
	if err := j.Write(ctx, before); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := j.RecordManifests(ctx, entries("ns_cm__ConfigMap")); err != nil {
			t.Fatal(err)
		}
	}
	if w.Writes() != 2 {
		t.Errorf("%d writes, want 2: the inventory, then the manifest once", w.Writes())
	}
	got, _, err := inventory.ReadExisting(ctx, env.Client, ns, instance)
	if err != nil {
		t.Fatal(err)
	}
	want := &inventory.Inventory{Instance: instance, Packages: before.Packages, Manifests: entries("ns_cm__ConfigMap")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the inventory -want +got\n%s", diff)
	}
}
