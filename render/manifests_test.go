package render

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// manifestsInput is provider-demo (examples/packages) with the manifests
// of decls.
func manifestsInput(t *testing.T, decls string) Input {
	t.Helper()
	set := loadDecls(t, decls)
	d := declared(t, set, crossplane.KindProvider, "provider-demo")
	p := fromDecl(t, d, "v0.1.0", filepath.Join(repoRoot(t), "examples", "packages", "provider-demo", "v0.1.0"))
	return Input{Namespace: "crossplane-system", Instance: "lockstep", Packages: []Package{p}, Manifests: set.Manifests}
}

const demoProvider = `
apiVersion: pkg.crossplane.io/v1
kind: Provider
metadata: {name: provider-demo}
spec: {package: "registry.lockstep.example/demo/provider-demo:v0.1.0"}
`

func TestRenderManifests(t *testing.T) {
	in := manifestsInput(t, demoProvider+`---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-a, labels: {team: a}}
data: {size: small}
---
apiVersion: demo.lockstep.io/v1alpha1
kind: Queue
metadata:
  name: jobs
  resourceVersion: "42"
  uid: 0b1d2c3e-0000-0000-0000-000000000000
  creationTimestamp: "2026-01-01T00:00:00Z"
  managedFields: [{manager: kubectl}]
spec: {size: 3}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
`)
	out, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Object, At, JSON string }
	var got []row
	for _, m := range out.Manifests {
		got = append(got, row{m.Object.String(), m.Location.String(), string(m.Object.JSON())})
	}
	labels := `"labels":{"app.kubernetes.io/managed-by":"lockstep","lockstep.io/instance":"lockstep"`
	want := []row{
		// Apply order: cluster-scoped objects (the Namespace first), then
		// namespaced ones; the labels of the instance added, what only a
		// cluster sets removed.
		{"Namespace/team-a", "cluster.yaml:21", `{"apiVersion":"v1","kind":"Namespace","metadata":{` + labels + `},"name":"team-a"}}`},
		{"Queue/jobs", "cluster.yaml:11", `{"apiVersion":"demo.lockstep.io/v1alpha1","kind":"Queue","metadata":{` + labels + `},"name":"jobs"},"spec":{"size":3}}`},
		{"ConfigMap/team-a/settings", "cluster.yaml:6", `{"apiVersion":"v1","data":{"size":"small"},"kind":"ConfigMap","metadata":{` + labels + `,"team":"a"},"name":"settings","namespace":"team-a"}}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Output.Manifests: -want +got:\n%s", diff)
	}

	// The stream prints the packages as without manifests, then the
	// manifests, and is the same on every render.
	var with, again, without bytes.Buffer
	if err := out.WriteYAML(&with); err != nil {
		t.Fatal(err)
	}
	out2, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := out2.WriteYAML(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(with.Bytes(), again.Bytes()) {
		t.Errorf("WriteYAML differs between two renders of the same input")
	}
	in.Manifests = nil
	bare, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := bare.WriteYAML(&without); err != nil {
		t.Fatal(err)
	}
	rest, ok := bytes.CutPrefix(with.Bytes(), without.Bytes())
	if !ok {
		t.Fatalf("WriteYAML with manifests does not start with the packages' stream")
	}
	wantTail := "#\n# manifests: 3, applied after the packages whose definitions serve their kinds\n---\n# manifest: cluster.yaml:21\napiVersion: v1\nkind: Namespace\n"
	if !strings.HasPrefix(string(rest), wantTail) {
		t.Errorf("WriteYAML after the packages:\n%s\nwant it to start with\n%s", rest, wantTail)
	}
}

func TestRenderManifestCollides(t *testing.T) {
	// A manifest that is an object of a package would be written by two
	// owners; render refuses it, naming where it is declared.
	in := manifestsInput(t, demoProvider+`---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: queues.demo.lockstep.io}
spec: {}
`)
	_, err := Render(in)
	want := "cluster.yaml:6: CustomResourceDefinition/queues.demo.lockstep.io: Provider provider-demo renders the same object; remove the manifest"
	if err == nil || err.Error() != want {
		t.Errorf("Render(...): got error %v, want %q", err, want)
	}
}

// TestRenderManifestReserved: a manifest of an object lockstep or
// Crossplane runs on is refused, naming its file, line and why: applied
// with force and pruned when it left Git, it took over (and then deleted)
// the namespace with every runtime and inventory in it, Crossplane's own
// CRDs, or lockstep's deletion protection.
func TestRenderManifestReserved(t *testing.T) {
	cases := map[string]struct {
		reason, doc, want string
	}{
		"CrossplaneNamespace": {
			reason: "The namespace lockstep and Crossplane run in holds every runtime, TLS Secret, Lease and the inventory.",
			doc:    "apiVersion: v1\nkind: Namespace\nmetadata: {name: crossplane-system}\n",
			want:   "cluster.yaml:6: Namespace crossplane-system: may not be a manifest: it is the namespace lockstep and Crossplane run in",
		},
		"CrossplaneCRD": {
			reason: "Crossplane's own CRDs carry every package of every instance.",
			doc:    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: providers.pkg.crossplane.io}\nspec: {group: pkg.crossplane.io}\n",
			want:   "CustomResourceDefinition providers.pkg.crossplane.io: may not be a manifest: it is Crossplane's own API group",
		},
		"SyncCRD": {
			reason: "lockstep's own Sync CRD.",
			doc:    "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: syncs.lockstep.io}\nspec: {group: lockstep.io}\n",
			want:   "CustomResourceDefinition syncs.lockstep.io: may not be a manifest: it is lockstep's own API group",
		},
		"ProtectionBinding": {
			reason: "A binding of lockstep's deletion protection would let Git turn it off.",
			doc:    "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: lockstep-deletion-protection-lockstep}\nspec: {policyName: x, validationActions: [Audit]}\n",
			want:   "ValidatingAdmissionPolicyBinding lockstep-deletion-protection-lockstep: may not be a manifest: it is lockstep's deletion protection",
		},
		"Inventory": {
			reason: "The inventory ConfigMap is lockstep's memory of what it installed.",
			doc:    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lockstep-inventory-lockstep, namespace: crossplane-system}\n",
			want:   "ConfigMap crossplane-system/lockstep-inventory-lockstep: may not be a manifest: it is lockstep's inventory",
		},
		"WriteLease": {
			reason: "The write Lease keeps one writer per instance.",
			doc:    "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: lockstep-apply-lockstep, namespace: crossplane-system}\n",
			want:   "Lease crossplane-system/lockstep-apply-lockstep: may not be a manifest: it is a Lease of lockstep",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Render(manifestsInput(t, demoProvider+"---\n"+tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nRender: %v, want an error containing %q", tc.reason, err, tc.want)
			}
		})
	}
	// An ordinary namespace and ConfigMap are fine.
	if _, err := Render(manifestsInput(t, demoProvider+"---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n")); err != nil {
		t.Errorf("Render of an ordinary Namespace manifest: %v", err)
	}
}
