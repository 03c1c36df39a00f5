package apply_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/render"
)

// TestInvalidCRDInstallsNothing: a provider whose payload holds one CRD the
// API server refuses (a property of an unknown type) installs none of its
// payload or runtime, in both preflight modes, and the error names the CRD
// and the field. In local mode the CRD is refused by the in-process
// validation (the test fails if the run fell back to server-side dry-runs).
func TestInvalidCRDInstallsNothing(t *testing.T) {
	cases := map[string]struct {
		reason string
		mode   apply.PreflightMode
		want   string
	}{
		"local": {
			reason: "in-process validation refuses the CRD before the first write",
			mode:   apply.PreflightLocal,
			want:   "in-process validation (--preflight=local) failed",
		},
		"server": {
			reason: "the server-side dry-run refuses the CRD before the first write",
			mode:   apply.PreflightServer,
			want:   "dry-run failed",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			// The shared control plane runs Kubernetes 1.36, lockstep's
			// validation is 1.37's: a skew of one minor.
			m := f.manager(t, func(o *apply.Options) { o.Preflight, o.PreflightSkew = tc.mode, 1 })
			s := f.demo(t, "provider-demo", "v0.1.0")
			s.edit = func(files map[string]string) {
				files["crds/demo.lockstep.io_widgets.yaml"] = strings.NewReplacer("queues", "widgets", "queue", "widget", "Queue", "Widget",
					"size: {type: integer, minimum: 1, maximum: 100}", "size: {type: strin}").Replace(files["crds/demo.lockstep.io_queues.yaml"])
			}
			pkg := build(t, s)
			rev := render.RevisionName(pkg.Name, pkg.Digest)
			res := f.apply(t, m, f.render(t, pkg), apply.Origin{})
			if len(res.Packages) != 1 || res.Packages[0].Err == nil {
				t.Fatalf("%s: the package installed: %v", tc.reason, res.Err())
			}
			p := res.Packages[0]
			if diff := cmp.Diff("preflight", p.Step); diff != "" {
				t.Errorf("%s: failed step -want +got\n%s", tc.reason, diff)
			}
			widgets := "widgets." + f.prefix + ".demo.lockstep.io"
			for _, want := range []string{"CustomResourceDefinition/" + widgets, "properties[forProvider].properties[size].type: Unsupported value: \"strin\"", tc.want} {
				if !strings.Contains(p.Err.Error(), want) {
					t.Errorf("%s: the error %q does not say %q", tc.reason, p.Err, want)
				}
			}
			for _, w := range res.Warnings {
				if strings.Contains(w, "--preflight=local") {
					t.Errorf("%s: local validation was not used: %s", tc.reason, w)
				}
			}
			for _, obj := range [][3]string{
				{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "buckets." + f.prefix + ".demo.lockstep.io"},
				{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "queues." + f.prefix + ".demo.lockstep.io"},
				{"apiextensions.k8s.io/v1", "CustomResourceDefinition", widgets},
				{"apps/v1", "Deployment", rev},
				{"v1", "ServiceAccount", rev},
			} {
				ns := ""
				if obj[1] != "CustomResourceDefinition" {
					ns = f.namespace
				}
				if f.get(t, obj[0], obj[1], ns, obj[2]) != nil {
					t.Errorf("%s: the refused package created %s %s", tc.reason, obj[1], obj[2])
				}
			}
		})
	}
}

// TestCRDUpdateValidatedInProcess: with --preflight=local, the upgrade of
// a package whose CRD changes validates the change in-process
// (checkCRDUpdate) instead of dry-running the CRD on the server, from the
// live CRD its LIST returned (no GET); a change
// the API server would refuse (a changed scope) stops the package at
// preflight with the server's error, and the live CRD stays as it was.
func TestCRDUpdateValidatedInProcess(t *testing.T) {
	cases := map[string]struct {
		reason  string
		from    string
		to      string
		wantErr string
	}{
		"valid change": {
			reason: "a raised maximum is applied without a dry-run of the CRD",
			from:   "maximum: 100}",
			to:     "maximum: 200}",
		},
		"scope changed": {
			reason:  "spec.scope is immutable: the in-process check refuses it before the first payload write",
			from:    "scope: Cluster",
			to:      "scope: Namespaced",
			wantErr: "in-process validation (--preflight=local) failed: CustomResourceDefinition.apiextensions.k8s.io \"queues.",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			m := f.manager(t, func(o *apply.Options) { o.Preflight, o.PreflightSkew = apply.PreflightLocal, 1 })
			s := f.demo(t, "provider-demo", "v0.1.0")
			mustSucceed(t, f.apply(t, m, f.render(t, build(t, s)), apply.Origin{}))
			queues := "queues." + f.prefix + ".demo.lockstep.io"
			before := f.crd(t, queues)

			s = synthetic(s, 7)
			s.edit = func(files map[string]string) {
				files["crds/demo.lockstep.io_queues.yaml"] = strings.Replace(files["crds/demo.lockstep.io_queues.yaml"], tc.from, tc.to, 1)
			}
			f.reqs.reset()
			res := f.apply(t, m, f.render(t, build(t, s)), apply.Origin{})
			all, _ := f.reqs.snapshot()
			for _, l := range all {
				if strings.Contains(l, "/customresourcedefinitions/") && strings.HasSuffix(l, "(dry-run)") {
					t.Errorf("%s: the CRD was dry-run on the server: %s", tc.reason, l)
				}
				if l == "GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+queues {
					t.Errorf("%s: the changed CRD was read again after the LIST, which holds it: %s", tc.reason, l)
				}
			}
			for _, w := range res.Warnings {
				if strings.Contains(w, "--preflight=local") {
					t.Errorf("%s: local validation was not used: %s", tc.reason, w)
				}
			}
			if tc.wantErr == "" {
				mustSucceed(t, res)
				if f.crd(t, queues).GetGeneration() == before.GetGeneration() {
					t.Errorf("%s: the CRD was not updated", tc.reason)
				}
				return
			}
			if len(res.Packages) != 1 || res.Packages[0].Err == nil {
				t.Fatalf("%s: the package upgraded: %v", tc.reason, res.Err())
			}
			p := res.Packages[0]
			if diff := cmp.Diff("preflight", p.Step); diff != "" {
				t.Errorf("%s: failed step -want +got\n%s", tc.reason, diff)
			}
			for _, want := range []string{tc.wantErr, "spec.scope: Invalid value: \"Namespaced\": field is immutable"} {
				if !strings.Contains(p.Err.Error(), want) {
					t.Errorf("%s: the error %q does not say %q", tc.reason, p.Err, want)
				}
			}
			after := f.crd(t, queues)
			if diff := cmp.Diff(before.GetResourceVersion(), after.GetResourceVersion()); diff != "" {
				t.Errorf("%s: the refused upgrade wrote the CRD: -before +after\n%s", tc.reason, diff)
			}
		})
	}
}

// TestFirstInstallListsOnce: on a first install (the inventory
// lists no package) apply reads the cluster in one round, the labelled
// LISTs and the metadata LISTs of objects without lockstep's label at
// once, before its first write; before, each package's preflight sent the
// metadata LISTs after the package's records were written.
func TestFirstInstallListsOnce(t *testing.T) {
	f := newFixture(t)
	m := f.manager(t, func(o *apply.Options) { o.Preflight, o.PreflightSkew = apply.PreflightLocal, 1 })
	s := f.demo(t, "provider-demo", "v0.1.0")
	f.reqs.reset()
	mustSucceed(t, f.apply(t, m, f.render(t, build(t, s)), apply.Origin{}))
	all, _ := f.reqs.snapshot()
	firstWrite := -1
	for i, l := range all {
		method := strings.Fields(l)[0]
		if method == http.MethodPatch && !strings.HasSuffix(l, "(dry-run)") && !strings.Contains(l, "/validatingadmissionpolicies") && !strings.Contains(l, "/validatingadmissionpolicybindings") {
			firstWrite = i
			break
		}
	}
	if firstWrite < 0 {
		t.Fatalf("the install wrote nothing: %q", all)
	}
	for _, l := range all[firstWrite:] {
		if strings.HasPrefix(l, "GET ") && !strings.HasSuffix(l, "(watch)") && isListPath(l) {
			t.Errorf("a LIST after the first write (%s): %s", all[firstWrite], l)
		}
	}
}

// isListPath reports whether the request line l ("METHOD path") reads a
// collection: its path ends in a resource, not a name.
func isListPath(l string) bool {
	p := strings.Split(strings.Fields(l)[1], "/")
	switch {
	case len(p) >= 2 && p[1] == "api": // /api/v1/RESOURCE[/NAME] or /api/v1/namespaces/NS/RESOURCE[/NAME]
		p = p[3:]
	case len(p) >= 2 && p[1] == "apis": // /apis/GROUP/VERSION/...
		p = p[4:]
	default:
		return false
	}
	if len(p) >= 2 && p[0] == "namespaces" && len(p) != 2 {
		p = p[2:]
	}
	return len(p) == 1
}
