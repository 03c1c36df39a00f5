package xpkg

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// testdataDir returns $LOCKSTEP_TESTDATA, the shared real-package test data,
// or skips the test when it is unset.
func testdataDir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("LOCKSTEP_TESTDATA")
	if dir == "" {
		tb.Skip("LOCKSTEP_TESTDATA is not set; set it to the shared testdata directory (e.g. ../shared/testdata) to run tests against real Crossplane packages")
	}
	return dir
}

// indexDependency is one dependsOn entry as INDEX.md lists it.
type indexDependency struct {
	Form, Package, Constraint string
}

// indexRow is what INDEX.md says about one package folder, or what the
// package built from that folder shows. Fields the notes column mentions
// only for some packages are compared only where it mentions them; see
// parseIndex.
type indexRow struct {
	Kind              crossplane.Kind
	Name              string
	MetaAPIVersion    string
	DependsOn         []indexDependency
	CRDs, XRDs, Comps int
	OtherKinds        map[string]int
	CrossplaneVersion string
	Capabilities      []string
	Labels            map[string]string
	XRDsWithClaims    int
	XRDAPIVersion     string   // only where noted
	FunctionRefs      []string // only where noted
	APIGroups         int      // only where noted
}

var (
	reDependency   = regexp.MustCompile("^`(provider|configuration|function):` (\\S+) `([^`]*)`")
	reCapabilities = regexp.MustCompile("capabilities: ((?:`[^`]*`(?:, )?)+)")
	reXPVersion    = regexp.MustCompile("crossplane\\.version `([^`]*)`")
	reLabels       = regexp.MustCompile("labels: ((?:`[^`]*`(?:, )?)+)")
	reOther        = regexp.MustCompile(`other objects: ((?:\w+×\d+(?:, )?)+)`)
	reOtherItem    = regexp.MustCompile(`(\w+)×(\d+)`)
	reXRDVersion   = regexp.MustCompile("XRD apiVersion `([^`]*)`")
	reClaims       = regexp.MustCompile(`(\d+) XRD\(s\) with claimNames`)
	reFunctionRefs = regexp.MustCompile("pipeline functionRefs: ((?:`[^`]*`(?:, )?)+)")
	reAPIGroups    = regexp.MustCompile(`(\d+) API groups`)
	reTicked       = regexp.MustCompile("`([^`]*)`")
)

// ticked returns the backticked items of s.
func ticked(s string) []string {
	var out []string
	for _, m := range reTicked.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// parseIndex reads the "Packages" table of INDEX.md into rows keyed by
// folder. It parses the columns folder, kind, name, meta apiVersion,
// dependsOn (form, package, constraint), CRDs, XRDs and Comps, and these
// notes: capabilities, crossplane.version, labels, other objects, XRD
// apiVersion, "N XRD(s) with claimNames", pipeline functionRefs and "N API
// groups". It does not use "published as", files and bytes.
func parseIndex(t *testing.T, path string) map[string]indexRow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]indexRow{}
	atoi := func(s string) int {
		n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
		if err != nil {
			t.Fatalf("INDEX.md: %q is not a number", s)
		}
		return n
	}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			section = line
		}
		if section != "## Packages" || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) != 14 {
			t.Fatalf("INDEX.md: want 12 columns, got %d in %q", len(cells)-2, line)
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		folder := strings.Trim(cells[1], "`")
		r := indexRow{
			Kind:           crossplane.Kind(cells[2]),
			Name:           strings.Trim(cells[3], "`"),
			MetaAPIVersion: crossplane.MetaGroup + "/" + strings.Trim(cells[5], "`"),
			CRDs:           atoi(cells[7]),
			XRDs:           atoi(cells[8]),
			Comps:          atoi(cells[9]),
		}
		if cells[6] != "—" {
			for _, d := range strings.Split(cells[6], "<br>") {
				m := reDependency.FindStringSubmatch(d)
				if m == nil {
					t.Fatalf("INDEX.md %s: cannot parse dependency %q", folder, d)
				}
				r.DependsOn = append(r.DependsOn, indexDependency{Form: m[1], Package: m[2], Constraint: m[3]})
			}
		}
		notes := cells[12]
		if m := reCapabilities.FindStringSubmatch(notes); m != nil {
			r.Capabilities = ticked(m[1])
		}
		if m := reXPVersion.FindStringSubmatch(notes); m != nil {
			r.CrossplaneVersion = m[1]
		}
		if m := reLabels.FindStringSubmatch(notes); m != nil {
			r.Labels = map[string]string{}
			for _, kv := range ticked(m[1]) {
				k, v, _ := strings.Cut(kv, ": ")
				r.Labels[k] = v
			}
		}
		if m := reOther.FindStringSubmatch(notes); m != nil {
			r.OtherKinds = map[string]int{}
			for _, o := range reOtherItem.FindAllStringSubmatch(m[1], -1) {
				r.OtherKinds[o[1]] = atoi(o[2])
			}
		}
		if m := reXRDVersion.FindStringSubmatch(notes); m != nil {
			r.XRDAPIVersion = m[1]
		}
		if m := reClaims.FindStringSubmatch(notes); m != nil {
			r.XRDsWithClaims = atoi(m[1])
		}
		if m := reFunctionRefs.FindStringSubmatch(notes); m != nil {
			r.FunctionRefs = ticked(m[1])
		}
		if m := reAPIGroups.FindStringSubmatch(notes); m != nil {
			r.APIGroups = atoi(m[1])
		}
		rows[folder] = r
	}
	return rows
}

// describe summarises p the way INDEX.md describes a package. Fields that
// want leaves unset (noted only for some packages) are left unset.
func describe(t *testing.T, p *Package, want indexRow) indexRow {
	t.Helper()
	s := p.Summary()
	got := indexRow{
		Kind:              p.Meta.Kind,
		Name:              p.Meta.Name,
		MetaAPIVersion:    p.Meta.APIVersion,
		CRDs:              s.CRDs,
		XRDs:              s.XRDs,
		Comps:             s.Compositions,
		CrossplaneVersion: p.Meta.CrossplaneVersion,
		Capabilities:      p.Meta.Capabilities,
		Labels:            p.Meta.Labels,
	}
	for _, d := range p.Meta.DependsOn {
		k, repo, err := d.Target()
		if err != nil {
			t.Errorf("dependency %+v: Target(): %v", d, err)
		}
		form := map[crossplane.Kind]string{crossplane.KindProvider: "provider", crossplane.KindConfiguration: "configuration", crossplane.KindFunction: "function"}[k]
		if d.APIVersion != "" {
			form = "apiVersion"
		}
		got.DependsOn = append(got.DependsOn, indexDependency{Form: form, Package: repo, Constraint: d.Version})
	}
	xrdVersions := map[string]bool{}
	refs := map[string]bool{}
	groups := map[string]bool{}
	for _, o := range p.Objects {
		var body struct {
			Spec struct {
				Group      string           `json:"group"`
				ClaimNames *json.RawMessage `json:"claimNames"`
				Pipeline   []struct {
					FunctionRef struct {
						Name string `json:"name"`
					} `json:"functionRef"`
				} `json:"pipeline"`
			} `json:"spec"`
		}
		switch o.GroupKind() {
		case crossplane.GroupKindCRD:
			if want.APIGroups == 0 {
				continue // decoding 98 MB of CRDs is only worth it where INDEX.md counts groups
			}
		case crossplane.GroupKindXRD, crossplane.GroupKindComposition:
		default:
			if got.OtherKinds == nil {
				got.OtherKinds = map[string]int{}
			}
			got.OtherKinds[o.Kind]++
			continue
		}
		if err := json.Unmarshal(o.Raw, &body); err != nil {
			t.Fatalf("document %d (%s %s): %v", o.Index, o.Kind, o.Name, err)
		}
		switch o.GroupKind() {
		case crossplane.GroupKindCRD:
			groups[body.Spec.Group] = true
		case crossplane.GroupKindXRD:
			xrdVersions[o.APIVersion] = true
			if body.Spec.ClaimNames != nil {
				got.XRDsWithClaims++
			}
		case crossplane.GroupKindComposition:
			for _, step := range body.Spec.Pipeline {
				refs[step.FunctionRef.Name] = true
			}
		}
	}
	if want.XRDAPIVersion != "" {
		var vs []string
		for v := range xrdVersions {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		got.XRDAPIVersion = strings.Join(vs, ", ")
	}
	if want.FunctionRefs != nil {
		for r := range refs {
			got.FunctionRefs = append(got.FunctionRefs, r)
		}
		sort.Strings(got.FunctionRefs)
	}
	if want.APIGroups != 0 {
		got.APIGroups = len(groups)
	}
	return got
}

// TestPackagesIndex builds every package folder of the shared test data,
// reads the image back and compares the package with INDEX.md, the
// upstream-derived description of those folders.
func TestPackagesIndex(t *testing.T) {
	root := filepath.Join(testdataDir(t), "packages")
	want := parseIndex(t, filepath.Join(root, "INDEX.md"))

	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, e := range entries {
		if e.IsDir() {
			folders = append(folders, e.Name())
		}
	}
	var indexed []string
	for f := range want {
		indexed = append(indexed, f)
	}
	sort.Strings(indexed)
	if diff := cmp.Diff(folders, indexed); diff != "" {
		t.Fatalf("INDEX.md must list every package folder exactly once: -folders, +INDEX.md:\n%s", diff)
	}

	for _, folder := range folders {
		t.Run(folder, func(t *testing.T) {
			reason := "The package built from " + folder + " must match its INDEX.md row."
			img, err := Build(filepath.Join(root, folder))
			if err != nil {
				t.Fatalf("%s\nBuild(): %v", reason, err)
			}
			p, err := FromImage(img)
			if err != nil {
				t.Fatalf("%s\nFromImage(): %v", reason, err)
			}
			w := want[folder]
			if diff := cmp.Diff(w, describe(t, p, w), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\n-INDEX.md, +package:\n%s", reason, diff)
			}
		})
	}
}

// TestCrossplaneFixtures parses package metadata fixtures from Crossplane's
// own tests.
func TestCrossplaneFixtures(t *testing.T) {
	root := filepath.Join(testdataDir(t), "crossplane-e2e")
	cases := map[string]struct {
		reason string
		path   string
		want   Meta
	}{
		"ProviderMetaWithController": {
			reason: "v1alpha1 Provider metadata with the legacy spec.controller.image (internal/xpkg/testdata).",
			path:   "internal/xpkg/testdata/provider_meta.yaml",
			want: Meta{APIVersion: "meta.pkg.crossplane.io/v1alpha1", Kind: crossplane.KindProvider, Name: "provider-aws",
				Controller: &Controller{Image: "crossplane/provider-aws-controller:v0.20.0"}},
		},
		"NewDependencyForm": {
			reason: "The apiVersion + kind + package dependency form (e2e configuration/dependency).",
			path:   "test/e2e/manifests/pkg/configuration/dependency/package/crossplane.yaml",
			want: Meta{APIVersion: "meta.pkg.crossplane.io/v1", Kind: crossplane.KindConfiguration, Name: "e2e-depends-on-provider-nop",
				DependsOn: []Dependency{{APIVersion: "pkg.crossplane.io/v1", Kind: "Provider", Package: "xpkg.upbound.io/crossplane-contrib/provider-nop", Version: "=v0.3.1"}}},
		},
		"UnknownSpecField": {
			reason: "The unknown spec.repository is ignored, as Crossplane's decoder drops it (e2e dependency-upgrade/downgrade).",
			path:   "test/e2e/manifests/pkg/dependency-upgrade/downgrade/package/crossplane.yaml",
			want: Meta{APIVersion: "meta.pkg.crossplane.io/v1", Kind: crossplane.KindConfiguration, Name: "e2e-nested-configuration",
				DependsOn: []Dependency{
					{Provider: "xpkg.upbound.io/crossplane-contrib/provider-nop", Version: "<=v0.4.0"},
					{Configuration: "xpkg.crossplane.io/crossplane/e2e-depends-on-provider-nop", Version: "v0.3.1"},
				}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join(root, filepath.FromSlash(tc.path)))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			p, err := Parse(f)
			if err != nil {
				t.Fatalf("%s\nParse(): %v", tc.reason, err)
			}
			// Annotations are long and not what these cases are about.
			p.Meta.Annotations = nil
			if diff := cmp.Diff(tc.want, p.Meta); diff != "" {
				t.Errorf("%s\nMeta: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
