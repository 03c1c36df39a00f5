package render

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

func twoPackages(t *testing.T) *Output {
	t.Helper()
	p := Package{Kind: crossplane.KindProvider, Name: "provider-test", Source: "registry.lockstep.example/test/provider-test", Version: "v1.0.0", Digest: digestA, Contents: parsed(t, webhookStream)}
	f := Package{Kind: crossplane.KindFunction, Name: "function-test", Source: "registry.lockstep.example/test/function-test", Digest: digestB, Contents: parsed(t, functionStream)}
	out, err := Render(testInput(f, p))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWriteYAMLStream checks that the stream holds every object once, in
// Objects order, each document decoding to the rendered object.
func TestWriteYAMLStream(t *testing.T) {
	out := twoPackages(t)
	var b bytes.Buffer
	if err := out.WriteYAML(&b); err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(b.String(), "\n---\n")[1:]
	objs := out.Objects()
	if len(docs) != len(objs) {
		t.Fatalf("%d documents for %d objects", len(docs), len(objs))
	}
	for i, o := range objs {
		var got, want map[string]any
		if err := yaml.Unmarshal([]byte(docs[i]), &got); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if err := yaml.Unmarshal(o.JSON(), &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("document %d (%s) is not the object: -want, +got:\n%s", i, o, diff)
		}
	}
	// Stream order: per package, CRDs, then cluster-scoped, then namespaced.
	var order []string
	for _, o := range out.Package(crossplane.KindProvider, "provider-test").Objects() {
		order = append(order, o.Kind)
	}
	want := []string{"CustomResourceDefinition", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRoleBinding", "Provider", "ProviderRevision", "MutatingWebhookConfiguration", "ServiceAccount", "Secret", "Secret", "Service", "Deployment"}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("objects are in the staged order of fluxcd/pkg/ssa: -want, +got:\n%s", diff)
	}
}

func TestWriteDir(t *testing.T) {
	out := twoPackages(t)
	dir := filepath.Join(t.TempDir(), "rendered")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := out.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"function.function-test.yaml", "keep.txt", "provider.provider-test.yaml"}, names); diff != "" {
		t.Errorf("WriteDir writes one file per package and leaves other files: -want, +got:\n%s", diff)
	}
	for _, p := range out.Packages {
		got, err := os.ReadFile(filepath.Join(dir, p.FileName()))
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := p.WriteYAML(&want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s differs from PackageOutput.WriteYAML", p.FileName())
		}
		if !bytes.Contains(got, []byte("# "+string(p.Kind)+" "+p.Name+"\n")) {
			t.Errorf("%s lacks its package header", p.FileName())
		}
	}
}
