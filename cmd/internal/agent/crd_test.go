package agent_test

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
	"github.com/lockstep-gitops/lockstep/cmd/internal/agent/api/v1alpha1"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }

// syncCRD is the embedded Sync CRD.
func syncCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(agent.SyncCRD, crd); err != nil {
		t.Fatalf("the embedded Sync CRD: %v", err)
	}
	return crd
}

// TestSyncCRDMatchesTypes: the committed CRD (`make generate`) describes
// the Go types of cmd/internal/agent/api/v1alpha1 — the same group, version
// and kind, and the same fields with the same types and the same required
// ones, both ways — so a field added to or removed from the types without
// regenerating fails here.
func TestSyncCRDMatchesTypes(t *testing.T) {
	crd := syncCRD(t)
	gvk := v1alpha1.SyncGroupVersionKind
	if crd.Spec.Group != gvk.Group || crd.Spec.Names.Kind != gvk.Kind || len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != gvk.Version {
		t.Fatalf("the Sync CRD serves %s %s %+v, want %s", crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Versions, gvk)
	}
	v := crd.Spec.Versions[0]
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("the Sync CRD has no status subresource; the agent writes its status through it")
	}
	schema := v.Schema.OpenAPIV3Schema
	for _, field := range []string{"spec", "status"} {
		typ, _ := reflect.TypeFor[v1alpha1.Sync]().FieldByName(strings.ToUpper(field[:1]) + field[1:])
		got := map[string]bool{}
		fromSchema(field, schema.Properties[field], false, got)
		want := map[string]bool{}
		fromType(field, typ.Type, false, want)
		if diff := cmp.Diff(sorted(want), sorted(got)); diff != "" {
			t.Errorf("%s fields in the CRD (+) and in the Go types (-) differ; run make generate:\n%s", field, diff)
		}
	}
}

// fromSchema records "path type" for s and every property under it, with
// " required" when its parent requires it.
func fromSchema(path string, s apiextensionsv1.JSONSchemaProps, required bool, out map[string]bool) {
	out[field(path, s.Type, required)] = true
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	for name, p := range s.Properties {
		fromSchema(path+"."+name, p, req[name], out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		fromSchema(path+"[]", *s.Items.Schema, false, out)
	}
}

// fromType records what fromSchema would for the Go type t, following its
// json tags: fields without omitempty are required.
func fromType(path string, t reflect.Type, required bool, out map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[metav1.Time]():
		out[field(path, "string", required)] = true
	case t.Kind() == reflect.Struct:
		out[field(path, "object", required)] = true
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || name == "" {
				continue
			}
			fromType(path+"."+name, f.Type, !strings.Contains(opts, "omitempty"), out)
		}
	case t.Kind() == reflect.Slice:
		out[field(path, "array", required)] = true
		fromType(path+"[]", t.Elem(), false, out)
	case t.Kind() == reflect.String:
		out[field(path, "string", required)] = true
	case t.Kind() == reflect.Bool:
		out[field(path, "boolean", required)] = true
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		out[field(path, "integer", required)] = true
	default:
		out[field(path, t.Kind().String(), required)] = true
	}
}

func field(path, typ string, required bool) string {
	if required {
		return path + " " + typ + " required"
	}
	return path + " " + typ
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// fullSync is a Sync with every field of its spec and status set.
func fullSync(ns string) *v1alpha1.Sync {
	t := metav1.NewTime(time.Date(2026, 11, 24, 20, 0, 0, 0, time.UTC))
	return &v1alpha1.Sync{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ns},
		Spec: v1alpha1.SyncSpec{URL: "https://git.example/platform.git", Ref: "main", Path: "clusters/dev", Interval: "1m0s", Suspend: true,
			ServiceAccountName: "manifests", ManifestKinds: []string{"crossplane", "/Namespace"}, Verify: "HEAD"},
		Status: v1alpha1.SyncStatus{
			ObservedGeneration: 1,
			Conditions: []metav1.Condition{{
				Type: agent.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1,
				LastTransitionTime: t, Reason: agent.ReasonSucceeded, Message: "Applied commit 0123456789ab: 1 packages healthy",
			}},
			LastAppliedCommit: "0123456789abcdef", LastAttemptedCommit: "fedcba9876543210", LockDigest: "sha256:0a", LastAppliedTime: &t,
			Packages: []v1alpha1.PackageHealth{{
				Kind: "Provider", Name: "provider-demo", Version: "v0.1.0", Digest: "sha256:0b",
				Revision: "provider-demo-0b", Health: "InProgress", Message: "Deployment is not Available",
			}},
			DriftCorrections: []metav1.Time{t},
			LastDeletions:    &v1alpha1.DeletionRecord{Commit: "0123456789abcdef", Time: t, Count: 3, Objects: []string{"Provider/provider-old", "ConfigMap/apps/settings"}},
			Updates: &v1alpha1.UpdateStatus{
				Mode: "branch", Schedule: "@every 15m", LastPollTime: &t, LastPollResult: "1 change",
				LastPushedCommit: "0c", LastPushBranch: "lockstep/update", Polls: 2, FailedPolls: 1,
			},
		},
	}
}

// unset returns the paths of the fields of v that hold their zero value.
func unset(path string, v reflect.Value) []string {
	if v.IsZero() {
		return []string{path}
	}
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	var out []string
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[metav1.Time]() {
			return nil
		}
		for i := range v.NumField() {
			out = append(out, unset(path+"."+v.Type().Field(i).Name, v.Field(i))...)
		}
	case reflect.Slice:
		for i := range v.Len() {
			out = append(out, unset(path+"[]", v.Index(i))...)
		}
	}
	return out
}

// TestSyncRoundTrip writes a Sync with every field set through the real API
// server with the embedded CRD and reads it back unchanged: the CRD's
// structural schema would prune a field it does not know and reject one
// of another type.
func TestSyncRoundTrip(t *testing.T) {
	env := envtest.Shared(t)
	ctx := envtest.Context(t, time.Minute)
	const ns = "agent-roundtrip"
	if err := agent.Prepare(ctx, env.Client, env.Config, ns); err != nil {
		t.Fatal(err)
	}
	s := envtest.Scheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	want := fullSync(ns)
	if missing := unset("Sync", reflect.ValueOf(want.Spec)); len(missing) > 0 {
		t.Fatalf("fullSync leaves spec fields unset: %v", missing)
	}
	if missing := unset("Sync", reflect.ValueOf(want.Status)); len(missing) > 0 {
		t.Fatalf("fullSync leaves status fields unset: %v", missing)
	}
	obj := want.DeepCopy()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	obj.Status = *want.Status.DeepCopy()
	if err := c.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.Sync{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Errorf("Sync spec after a round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Status, got.Status); diff != "" {
		t.Errorf("Sync status after a round trip (-want +got):\n%s", diff)
	}
}

// TestPrepareServesSync: on a cluster without the Sync CRD, Prepare
// returns only once discovery lists lockstep.io/v1alpha1 syncs, so the
// agent's manager, whose REST mapper reads discovery once it starts, can
// always map the Sync. An Established CRD is not enough: discovery lists it
// a moment later, and a first start failed in one of two runs with "no
// matches for lockstep.io/v1alpha1". Five fresh control planes, each
// mapped at once by a new discovery-based mapper right after Prepare.
func TestPrepareServesSync(t *testing.T) {
	for i := range 5 {
		env := envtest.Dedicated(t)
		ctx := envtest.Context(t, time.Minute)
		if err := agent.Prepare(ctx, env.Client, env.Config, "agent-prepare"); err != nil {
			t.Fatal(err)
		}
		hc, err := rest.HTTPClientFor(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		mapper, err := apiutil.NewDynamicRESTMapper(env.Config, hc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mapper.RESTMapping(v1alpha1.SyncGroupVersionKind.GroupKind(), v1alpha1.GroupVersion.Version); err != nil {
			t.Fatalf("install %d: right after Prepare the Sync cannot be mapped: %v", i+1, err)
		}
	}
}
