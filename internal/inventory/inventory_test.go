package inventory

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func TestSort(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     Inventory
		want   Inventory
	}{
		"PackagesByKindThenName": {
			reason: "packages are ordered by kind, then name",
			in: Inventory{Packages: []Package{
				{Kind: crossplane.KindProvider, Name: "b"}, {Kind: crossplane.KindFunction, Name: "z"}, {Kind: crossplane.KindProvider, Name: "a"},
			}},
			want: Inventory{Packages: []Package{
				{Kind: crossplane.KindFunction, Name: "z"}, {Kind: crossplane.KindProvider, Name: "a"}, {Kind: crossplane.KindProvider, Name: "b"},
			}},
		},
		"DuplicateEntriesLastWins": {
			reason: "entries are sorted by ID and a repeated ID keeps its last entry",
			in: Inventory{Packages: []Package{{Kind: crossplane.KindProvider, Name: "a", Entries: []Entry{
				{ID: "_b__K", Role: RolePayload}, {ID: "_a__K", Role: RoleRecord}, {ID: "_b__K", Role: RoleRuntime},
			}}}},
			want: Inventory{Packages: []Package{{Kind: crossplane.KindProvider, Name: "a", Entries: []Entry{
				{ID: "_a__K", Role: RoleRecord}, {ID: "_b__K", Role: RoleRuntime},
			}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.Sort()
			if diff := cmp.Diff(tc.want, tc.in); diff != "" {
				t.Errorf("%s\nSort(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestEntry(t *testing.T) {
	cases := map[string]struct {
		reason  string
		entry   Entry
		wantGK  schema.GroupKind
		wantGVK schema.GroupVersionKind
		wantNS  string
		wantErr bool
	}{
		"Namespaced": {
			reason:  "a namespaced ID yields its namespace, group and kind, the version comes from the entry",
			entry:   Entry{ID: "crossplane-system_sa_apps_Deployment", Version: "v1"},
			wantGK:  schema.GroupKind{Group: "apps", Kind: "Deployment"},
			wantGVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			wantNS:  "crossplane-system",
		},
		"Malformed": {
			reason:  "an ID that is not a cli-utils object ID is an error and has no group kind",
			entry:   Entry{ID: "nonsense"},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantGK, tc.entry.GroupKind()); diff != "" {
				t.Errorf("%s\nGroupKind(): -want, +got:\n%s", tc.reason, diff)
			}
			u, err := tc.entry.Object()
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nObject(): err = %v, want error %t", tc.reason, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.wantGVK, u.GroupVersionKind()); diff != "" {
				t.Errorf("%s\nObject() GVK: -want, +got:\n%s", tc.reason, diff)
			}
			if u.GetNamespace() != tc.wantNS {
				t.Errorf("%s\nObject() namespace = %q, want %q", tc.reason, u.GetNamespace(), tc.wantNS)
			}
		})
	}
}

func TestWithout(t *testing.T) {
	in := []Entry{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	got := Without(in, map[string]bool{"b": true})
	if diff := cmp.Diff([]Entry{{ID: "a"}, {ID: "c"}}, got); diff != "" {
		t.Errorf("Without drops exactly the named IDs, in order: -want, +got:\n%s", diff)
	}
}

// TestEncodeLeavesInventory: Encode returns the sorted form but never
// changes the inventory it encodes. Apply encodes its view of the cluster's
// inventory while packages running in parallel read that view (the race
// detector caught Encode sorting it in place during a CI run).
func TestEncodeLeavesInventory(t *testing.T) {
	in := Inventory{Instance: "i", Packages: []Package{
		{Kind: crossplane.KindProvider, Name: "b", Entries: []Entry{{ID: "_b__K"}, {ID: "_a__K"}}},
		{Kind: crossplane.KindFunction, Name: "z"},
	}, Manifests: []Entry{{ID: "_y__K"}, {ID: "_x__K"}}}
	before := Inventory{Instance: "i", Packages: []Package{
		{Kind: crossplane.KindProvider, Name: "b", Entries: []Entry{{ID: "_b__K"}, {ID: "_a__K"}}},
		{Kind: crossplane.KindFunction, Name: "z"},
	}, Manifests: []Entry{{ID: "_y__K"}, {ID: "_x__K"}}}
	got, err := in.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, in); diff != "" {
		t.Errorf("Encode changed the inventory: -before +after:\n%s", diff)
	}
	sorted := before
	sorted.Packages = []Package{before.Packages[1], {Kind: crossplane.KindProvider, Name: "b", Entries: []Entry{{ID: "_a__K"}, {ID: "_b__K"}}}}
	sorted.Manifests = []Entry{{ID: "_x__K"}, {ID: "_y__K"}}
	want, err := sorted.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("Encode of an unsorted inventory differs from the sorted one's: -want +got:\n%s", diff)
	}
}

// TestPackageVersion reads the version as lockstep writes it now, and as
// it wrote it before the field was named version ("tag"), and checks that
// the encoding writes only "version".
func TestPackageVersion(t *testing.T) {
	cases := map[string]struct {
		reason string
		json   string
		want   string
	}{
		"Version": {
			reason: "An inventory written now names the version version.",
			json:   `{"kind":"Provider","name":"p","source":"xpkg.example.com/p","version":"v1.2.0","digest":"sha256:aa","entries":[]}`,
			want:   "v1.2.0",
		},
		"Tag": {
			reason: "An inventory written before keeps its version, read from tag.",
			json:   `{"kind":"Provider","name":"p","source":"xpkg.example.com/p","tag":"v1.1.0","digest":"sha256:aa","entries":[]}`,
			want:   "v1.1.0",
		},
		"Both": {
			reason: "version wins over a stale tag.",
			json:   `{"kind":"Provider","name":"p","tag":"v1.1.0","version":"v1.2.0","entries":[]}`,
			want:   "v1.2.0",
		},
		"Neither": {
			reason: "A package applied without a version has none.",
			json:   `{"kind":"Provider","name":"p","entries":[]}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var p Package
			if err := json.Unmarshal([]byte(tc.json), &p); err != nil {
				t.Fatalf("%s\nUnmarshal: %v", tc.reason, err)
			}
			if p.Version != tc.want {
				t.Errorf("%s\nVersion: got %q, want %q", tc.reason, p.Version, tc.want)
			}
			if p.Kind != crossplane.KindProvider || p.Name != "p" {
				t.Errorf("%s\nthe other fields were lost: %+v", tc.reason, p)
			}
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), `"tag"`) {
				t.Errorf("%s\nMarshal: %s still writes tag", tc.reason, b)
			}
		})
	}
}

// TestConfigMap: the inventory's ConfigMap is named after the instance,
// carries the labels given and holds the sorted encoding under DataKey.
func TestConfigMap(t *testing.T) {
	inv := &Inventory{Instance: "prod", Packages: []Package{{Kind: "Provider", Name: "b"}, {Kind: "Provider", Name: "a"}}}
	cm, b, err := inv.ConfigMap("lockstep-system", "prod", map[string]string{"app.kubernetes.io/managed-by": "lockstep"})
	if err != nil {
		t.Fatal(err)
	}
	if inv.Packages[0].Name != "a" {
		t.Errorf("packages %v, want them sorted in place", inv.Packages)
	}
	want := map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata": map[string]any{
			"name":      "lockstep-inventory-prod",
			"namespace": "lockstep-system",
			"labels":    map[string]any{"app.kubernetes.io/managed-by": "lockstep"},
		},
		"data": map[string]any{DataKey: string(b)},
	}
	if diff := cmp.Diff(want, cm.Object); diff != "" {
		t.Errorf("ConfigMap: -want +got\n%s", diff)
	}
	enc, err := inv.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(enc), string(b)); diff != "" {
		t.Errorf("data: -Encode +got\n%s", diff)
	}
}
