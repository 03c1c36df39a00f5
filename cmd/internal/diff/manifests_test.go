package diff

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCompareManifests: manifests added, removed and changed are listed
// with their fields, and make the verdict "changes".
func TestCompareManifests(t *testing.T) {
	base := testState(t, "base", exampleSpecs(t, "v0.2.0", "v0.2.0"), map[string]string{"apps.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-a}
data: {size: small}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-old}
`})
	head := testState(t, "head", exampleSpecs(t, "v0.2.0", "v0.2.0"), map[string]string{"apps.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-a}
data: {size: large}
---
apiVersion: apiextensions.crossplane.io/v1beta1
kind: EnvironmentConfig
metadata: {name: env}
data: {region: eu}
`})
	r, err := Compare(base, head, Options{})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name   string
		Change Change
		Fields []FieldChange
	}
	var got []row
	for _, m := range r.Manifests {
		got = append(got, row{m.Name, m.Change, m.Fields})
	}
	want := []row{
		{"ConfigMap team-a/settings", ChangeChanged, []FieldChange{{Field: "data.size", Base: "small", Head: "large"}}},
		{"EnvironmentConfig.apiextensions.crossplane.io env", ChangeAdded, []FieldChange{
			{Field: "apiVersion", Head: "apiextensions.crossplane.io/v1beta1"},
			{Field: "data.region", Head: "eu"},
			{Field: "kind", Head: "EnvironmentConfig"},
			{Field: "metadata.name", Head: "env"},
		}},
		{"Namespace team-old", ChangeRemoved, []FieldChange{
			{Field: "apiVersion", Base: "v1"},
			{Field: "kind", Base: "Namespace"},
			{Field: "metadata.name", Base: "team-old"},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Report.Manifests: -want +got:\n%s", diff)
	}
	if r.Summary.Verdict != VerdictChanges {
		t.Errorf("verdict %s, want %s: manifests changed", r.Summary.Verdict, VerdictChanges)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"Manifests (3 changed)", "+ manifest EnvironmentConfig.apiextensions.crossplane.io env added", "- manifest Namespace team-old removed", "~ manifest ConfigMap team-a/settings"} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("WriteText does not say %q:\n%s", line, text.String())
		}
	}
}
