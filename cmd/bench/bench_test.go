package main

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name, reason        string
		method, path, ctype string
		wantVerb            string
		wantDry             bool
		wantResource        string
	}{
		{"get cluster-scoped", "a named GET is a get", "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/buckets.demo.lockstep.io", "", verbGet, false, "customresourcedefinitions"},
		{"list cluster-scoped", "a GET of a collection is a list", "GET", "/apis/pkg.crossplane.io/v1/providers?limit=500", "", verbList, false, "providers"},
		{"list namespaced", "namespaces/NS/RESOURCE is a collection", "GET", "/api/v1/namespaces/crossplane-system/secrets", "", verbList, false, "secrets"},
		{"get namespaced", "namespaces/NS/RESOURCE/NAME is one object", "GET", "/api/v1/namespaces/crossplane-system/configmaps/lockstep-inventory", "", verbGet, false, "configmaps"},
		{"get namespace", "namespaces/NAME is the namespace itself", "GET", "/api/v1/namespaces/crossplane-system", "", verbGet, false, "namespaces"},
		{"list namespaces", "", "GET", "/api/v1/namespaces", "", verbList, false, "namespaces"},
		{"watch", "watch=true makes a GET of a collection a watch", "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=true&resourceVersion=12", "", verbWatch, false, "customresourcedefinitions"},
		{"apply", "an apply patch is counted as apply", "PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x?fieldManager=lockstep&force=true", "application/apply-patch+yaml", verbApply, false, "customresourcedefinitions"},
		{"dry-run apply", "dryRun=All marks a dry-run", "PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x?dryRun=All&fieldManager=lockstep", "application/apply-patch+yaml", verbApply, true, "customresourcedefinitions"},
		{"json patch", "other patches are patch", "PATCH", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x", "application/json-patch+json", verbPatch, false, "customresourcedefinitions"},
		{"status apply", "a subresource is still one object", "PATCH", "/apis/pkg.crossplane.io/v1/providerrevisions/x/status", "application/apply-patch+yaml", verbApply, false, "providerrevisions/status"},
		{"create", "", "POST", "/api/v1/namespaces/crossplane-system/events", "application/json", verbCreate, false, "events"},
		{"update", "", "PUT", "/api/v1/namespaces/crossplane-system/configmaps/x", "application/json", verbUpdate, false, "configmaps"},
		{"delete", "", "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x", "", verbDelete, false, "customresourcedefinitions"},
		{"delete collection", "a DELETE of a collection", "DELETE", "/api/v1/namespaces/ns/secrets", "", verbDeleteCollection, false, "secrets"},
		{"discovery group", "API discovery is not a resource request", "GET", "/apis/pkg.crossplane.io/v1", "", verbDiscovery, false, ""},
		{"discovery root", "", "GET", "/apis", "", verbDiscovery, false, ""},
		{"openapi", "", "GET", "/openapi/v3", "", verbDiscovery, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			verb, resource, dry := classify(tc.method, u, tc.ctype)
			if verb != tc.wantVerb || dry != tc.wantDry || resource != tc.wantResource {
				t.Errorf("%s\nclassify(%s %s) = %s %q, dry-run %t; want %s %q, dry-run %t", tc.reason, tc.method, tc.path, verb, resource, dry, tc.wantVerb, tc.wantResource, tc.wantDry)
			}
		})
	}
}

func TestAPICounts(t *testing.T) {
	var c APICounts
	for i, r := range []struct {
		verb, resource string
		dry            bool
	}{{verbApply, "crds", false}, {verbApply, "crds", true}, {verbGet, "crds", false}, {verbList, "crds", false}, {verbDelete, "crds", false}, {verbDiscovery, "", false}, {verbApply, "crds", true},
		{verbCreate, "selfsubjectreviews", false}, {verbCreate, "selfsubjectaccessreviews", false}} {
		c.add(r.verb, r.resource, r.dry, float64(i))
	}
	// A review (whoami, access) is a POST that stores nothing: a read.
	want := APICounts{Total: 9, Mutating: 2, DryRun: 2, Reads: 4, Discovery: 1,
		ByVerb:     map[string]int{"apply": 1, "apply (dry-run)": 2, "get": 1, "list": 1, "delete": 1, "discovery": 1, "create": 2},
		Timeline:   map[string][2]float64{"apply crds": {0, 0}, "apply (dry-run) crds": {1, 6}, "get crds": {2, 2}, "list crds": {3, 3}, "delete crds": {4, 4}, "discovery": {5, 5}, "create selfsubjectreviews": {7, 7}, "create selfsubjectaccessreviews": {8, 8}},
		ByResource: map[string]int{"apply crds": 1, "apply (dry-run) crds": 2, "get crds": 1, "list crds": 1, "delete crds": 1, "discovery": 1, "create selfsubjectreviews": 1, "create selfsubjectaccessreviews": 1}}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("counts: -want +got\n%s", diff)
	}
	if got, want := c.String(), "apply=1 apply(dry-run)=2 create=2 delete=1 discovery=1 get=1 list=1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// TestWriteMonolith generates the synthetic monolith and checks that it
// has the requested CRD count, total size and size distribution, that
// xpkg builds and parses it as a Provider with that many CRDs, and that
// every CRD is small enough for etcd once compact JSON.
func TestWriteMonolith(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 98 MB")
	}
	dir := t.TempDir()
	total, err := WriteMonolith(dir, "provider-aws", awsMonolith)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != awsMonolith.CRDs {
		t.Fatalf("%d CRD files, want %d", len(files), awsMonolith.CRDs)
	}
	var sizes []int
	var sum int64
	empty := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(b))
		sum += int64(len(b))
		empty += emptyDescriptions(string(b))
	}
	// The API server drops empty strings: a CRD with an empty description
	// would differ from the package forever, and lockstep's no-op would
	// dry-run it every time.
	if empty > 0 {
		t.Errorf("%d empty descriptions", empty)
	}
	if sum != total {
		t.Errorf("WriteMonolith reported %d bytes, the files hold %d", total, sum)
	}
	if d := float64(sum-awsMonolith.TotalBytes) / float64(awsMonolith.TotalBytes); d > 0.01 || d < -0.01 {
		t.Errorf("total %d bytes, want %d within 1%%", sum, awsMonolith.TotalBytes)
	}
	sort.Ints(sizes)
	for _, q := range awsMonolith.Quantiles {
		got := sizes[int(q.Fraction*float64(len(sizes)-1)+0.5)]
		if d := float64(got-q.Bytes) / float64(q.Bytes); d > 0.05 || d < -0.05 {
			t.Errorf("size at %.1f%%: %d bytes, want %d within 5%%", q.Fraction*100, got, q.Bytes)
		}
	}

	img, err := xpkg.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := xpkg.FromImage(img)
	if err != nil {
		t.Fatalf("the synthetic package does not parse: %v", err)
	}
	if pkg.Meta.Kind != crossplane.KindProvider || pkg.Meta.Name != "provider-aws" {
		t.Errorf("meta: %s %s, want Provider provider-aws", pkg.Meta.Kind, pkg.Meta.Name)
	}
	if n := pkg.Count(crossplane.GroupKindCRD); n != awsMonolith.CRDs {
		t.Errorf("parsed %d CRDs, want %d", n, awsMonolith.CRDs)
	}
	groups := map[string]bool{}
	names := map[string]bool{}
	var largest int
	for _, o := range pkg.Objects {
		names[o.Name] = true
		groups[o.Name[strings.Index(o.Name, ".")+1:]] = true
		largest = max(largest, len(o.Raw))
	}
	if len(names) != awsMonolith.CRDs {
		t.Errorf("%d distinct CRD names, want %d", len(names), awsMonolith.CRDs)
	}
	if len(groups) != awsMonolith.Groups {
		t.Errorf("%d API groups, want %d", len(groups), awsMonolith.Groups)
	}
	// etcd refuses requests over 1.5 MiB; the real largest CRD is 850 kB
	// of JSON.
	if largest > 1<<20 {
		t.Errorf("the largest CRD is %d bytes of JSON, more than 1 MiB", largest)
	}
}

// emptyDescriptions counts "description: |-" block scalars without a line.
func emptyDescriptions(yamlText string) int {
	lines := strings.Split(yamlText, "\n")
	n := 0
	for i, l := range lines {
		if strings.TrimSpace(l) != "description: |-" || i+1 >= len(lines) {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		next := lines[i+1]
		if len(next)-len(strings.TrimLeft(next, " ")) <= indent {
			n++
		}
	}
	return n
}

// TestWriteCRDStructural checks that a generated CRD decodes as YAML into a
// CRD whose every property has a type, as the API server's structural
// schema check demands.
func TestWriteCRDStructural(t *testing.T) {
	for _, size := range []int{3174, 27779, 400000} {
		var b strings.Builder
		writeCRD(&b, synthCRD{Group: "svc001.aws.bench.lockstep.io", Kind: "Thing0001", Plural: "thing0001s"}, size, newRand(1))
		if d := float64(b.Len()-size) / float64(size); d > 0.05 || d < -0.05 {
			t.Errorf("size %d: wrote %d bytes", size, b.Len())
		}
		var crd map[string]any
		if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(b.String())), 4096).Decode(&crd); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		versions := crd["spec"].(map[string]any)["versions"].([]any)
		schema := versions[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
		var walk func(path string, s map[string]any)
		walk = func(path string, s map[string]any) {
			if _, ok := s["type"]; !ok {
				t.Errorf("size %d: %s has no type", size, path)
			}
			// The API server drops empty strings; an empty description
			// would make the stored CRD differ from the package.
			if d, ok := s["description"]; ok && d == "" {
				t.Errorf("size %d: %s has an empty description", size, path)
			}
			props, _ := s["properties"].(map[string]any)
			for k, v := range props {
				walk(path+"."+k, v.(map[string]any))
			}
		}
		walk("openAPIV3Schema", schema)
	}
}

func TestRatio(t *testing.T) {
	cases := []struct {
		name   string
		a, b   float64
		ok     bool
		want   string
		reason string
	}{
		{"plain", 12, 10, true, "1.20×", "two decimals"},
		{"large", 1234, 10, true, "123×", "no decimals from 100×"},
		{"small", 1, 1000, true, "0.001×", "three decimals below 0.01×"},
		{"missing", 1, 1, false, "–", "a missing figure has no ratio"},
		{"both zero", 0, 0, true, "–", "0/0 is no ratio"},
		{"zero base", 3, 0, true, "∞", "a figure over a zero baseline"},
	}
	for _, tc := range cases {
		if got := ratio(tc.a, tc.b, tc.ok); got != tc.want {
			t.Errorf("%s: %s: ratio(%v, %v) = %q, want %q", tc.name, tc.reason, tc.a, tc.b, got, tc.want)
		}
	}
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestEvaluate checks the targets against the median runs of a workload.
func TestEvaluate(t *testing.T) {
	run := func(tool, sc string, wall float64, mut, total, regReq, other int, rss int64) *Run {
		r := &Run{Measurement: Measurement{Tool: tool, Scenario: sc, WallSeconds: wall, PeakRSSBytes: rss, API: APICounts{Total: total, Mutating: mut}}}
		if tool == toolLockstep {
			r.Registry = &RegistryFigures{Requests: regReq, OtherRepos: other}
		}
		return r
	}
	w := &WorkloadReport{Key: "monolith", Objects: map[string]int{stateInstall: 2054}, PackageYAMLBytes: 100e6, Runs: []*Run{
		// Three cold installs: the median wall time (60) decides.
		run(toolLockstep, "cold install", 55, 0, 0, 3, 0, 300e6),
		run(toolLockstep, "cold install", 60, 0, 0, 3, 0, 500e6),
		run(toolLockstep, "cold install", 90, 0, 0, 3, 0, 300e6),
		run(toolFloor, "cold install", 50, 0, 0, 0, 0, 0),
		run(toolLockstep, "no-op", 1, 0, 20, 0, 0, 0),
		run(toolLockstep, "upgrade", 130, 0, 0, 2, 1, 0),
		run(toolFloor, "upgrade", 100, 0, 0, 0, 0, 0),
	}}
	got := map[string]string{}
	for _, tg := range evaluate(w) {
		status := "none"
		if tg.Met != nil {
			status = map[bool]string{true: "met", false: "missed"}[*tg.Met]
		}
		got[tg.Target] = status
	}
	want := map[string]string{
		"cold install wall time":                                  "met",    // 60/50 = 1.2
		"no-op: zero mutating requests":                           "met",    // 0
		"no-op: API requests < objects/50":                        "met",    // 20 < 41.08
		"warm cache: no-op registry requests":                     "met",    // 0
		"upgrade wall time (floor: new revision's objects alone)": "missed", // 1.3
		"warm cache: upgrade requests for other packages":         "missed", // 1
		"monolith install peak RSS < 4× package.yaml":             "missed", // 500 MB / 100 MB
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("targets: -want +got\n%s", diff)
	}
}

func TestTimelineText(t *testing.T) {
	got := timelineText(map[string][2]float64{
		"apply customresourcedefinitions":           {3, 98.71},
		"apply (dry-run) customresourcedefinitions": {2.8, 41},
		"list customresourcedefinitions":            {0.1, 137},
		"apply providers":                           {0, 1},
	})
	if want := "CRD dry-runs 2.80–41.0, CRD applies 3.00–98.7, CRD lists 0.10–137.0"; got != want {
		t.Errorf("timelineText = %q, want %q", got, want)
	}
	if got := timelineText(nil); got != "" {
		t.Errorf("timelineText(nil) = %q, want empty", got)
	}
}

func TestParsers(t *testing.T) {
	stat := "1234 (kube apiserver) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	if got := parseStatCPU(stat); got != 3.0 {
		t.Errorf("parseStatCPU = %v, want 3 (300 ticks)", got)
	}
	status := "Name:\tbench\nVmPeak:\t  900000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t  100000 kB\n"
	if got := parseVMHWM(status); got != 123456*1024 {
		t.Errorf("parseVMHWM = %d, want %d", got, 123456*1024)
	}
	for path, want := range map[string]string{
		"/v2/": "",
		"/v2/upbound/provider-aws/manifests/v2.6.0": "upbound/provider-aws",
		"/v2/upbound/provider-aws/blobs/sha256:ab":  "upbound/provider-aws",
		"/v2/bench/provider-demo-0/tags/list":       "bench/provider-demo-0",
	} {
		if got := repoOfPath(path); got != want {
			t.Errorf("repoOfPath(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestCheckActivation checks that prepare refuses a render whose MRDs and
// activations are not what the workload measures.
func TestCheckActivation(t *testing.T) {
	cases := map[string]struct {
		reason       string
		w            workload
		mrds, active int
		wantErr      string
	}{
		"PlainCRDs":    {reason: "Without conversion no MRD is rendered.", w: workload{Key: "monolith"}},
		"MRDsUnwanted": {reason: "MRDs without conversion are an error.", w: workload{Key: "monolith"}, mrds: 3, wantErr: "monolith: 3 MRDs rendered without conversion"},
		"NoMRDs":       {reason: "Conversion on but nothing converted (a v1 lock).", w: workload{Key: mrd10Key, MRDs: true}, wantErr: "monolith-mrd10: conversion on but no MRD rendered (is the lock's crossplaneVersion v2?)"},
		"Ten":          {reason: "Ten Active MRDs as the policy asks.", w: workload{Key: mrd10Key, MRDs: true, ExpectActive: 10}, mrds: 2038, active: 10},
		"TenWrong":     {reason: "A policy naming kinds that do not exist activates fewer.", w: workload{Key: mrd10Key, MRDs: true, ExpectActive: 10}, mrds: 2038, active: 8, wantErr: "monolith-mrd10: 8 of 2038 MRDs Active, want 10"},
		"All":          {reason: "Every MRD Active.", w: workload{Key: mrdAllKey, MRDs: true, ExpectActive: -1}, mrds: 2038, active: 2038},
		"AllButOne":    {reason: "One MRD left inactive under \"*\" is an error.", w: workload{Key: mrdAllKey, MRDs: true, ExpectActive: -1}, mrds: 2038, active: 2037, wantErr: "monolith-mrd: 2037 of 2038 MRDs Active, want all"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := checkActivation(&tc.w, tc.mrds, tc.active)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, got); diff != "" {
				t.Errorf("%s\ncheckActivation: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}
