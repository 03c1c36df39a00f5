package diff

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// widgetCRD is a small synthetic CRD with one field per kind of
// constraint, the base of the schema change cases.
const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.org
spec:
  group: example.org
  scope: Namespaced
  names: {kind: Widget, listKind: WidgetList, plural: widgets, shortNames: [wg]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        description: A widget.
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - rule: self.size <= 10
              message: too big
            properties:
              size: {type: integer, minimum: 1, maximum: 10, description: How big.}
              name: {type: string, minLength: 1, maxLength: 63, pattern: "^[a-z]+$"}
              mode: {type: string, enum: [Fast, Slow], default: Fast}
              tags: {type: array, maxItems: 5, items: {type: string}}
              labels: {type: object, additionalProperties: {type: string}}
              free: {type: object, x-kubernetes-preserve-unknown-fields: true}
              ratio: {type: integer}
              note: {type: string, nullable: true}
              endpoint: {type: string}
              ports:
                type: array
                items: {type: object, properties: {port: {type: integer}}}
          status:
            type: object
            properties:
              phase: {type: string}
              ready: {type: boolean}
`

// decodeYAML returns a YAML document as a JSON-compatible map.
func decodeYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func toJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// change is the part of a SchemaChange the cases assert.
type change struct {
	Path     string
	Change   SchemaChangeType
	Breaking bool
}

// changesOf flattens a definition change's schema and definition-wide
// changes, and its version changes as "version <name>" entries.
func changesOf(d *DefinitionChange) []change {
	if d == nil {
		return nil
	}
	var out []change
	for _, f := range d.Fields {
		out = append(out, change{f.Path, f.Change, f.Breaking})
	}
	for _, v := range d.Versions {
		if v.Change != ChangeChanged {
			out = append(out, change{"version " + v.Name, SchemaChangeType(v.Change), v.Breaking})
			continue
		}
		if v.Base != nil && v.Head != nil && v.Base.Served != v.Head.Served {
			out = append(out, change{"version " + v.Name + " served", DefinitionChanged, v.Breaking})
		}
		for _, s := range v.Schema {
			out = append(out, change{s.Path, s.Change, s.Breaking})
		}
	}
	return out
}

// TestSchemaChanges changes one thing of the widget CRD per case and checks
// the changes reported and whether each is breaking.
func TestSchemaChanges(t *testing.T) {
	spec := func(t *testing.T, crd map[string]any) map[string]any {
		return at(t, schemaOf(t, crd, 0), "properties", "spec")
	}
	prop := func(t *testing.T, crd map[string]any, name string) map[string]any {
		return at(t, spec(t, crd), "properties", name)
	}
	cases := []struct {
		name   string
		reason string
		mutate func(t *testing.T, crd map[string]any)
		want   []change
	}{
		// Breaking.
		{"field removed", "stored values are pruned and clients that set it are refused",
			func(t *testing.T, c map[string]any) { delete(at(t, spec(t, c), "properties"), "endpoint") },
			[]change{{"spec.endpoint", FieldRemoved, true}}},
		{"type changed", "a string field becomes an integer",
			func(t *testing.T, c map[string]any) { prop(t, c, "endpoint")["type"] = "integer" },
			[]change{{"spec.endpoint", TypeChanged, true}}},
		{"new required field", "objects without it are refused",
			func(t *testing.T, c map[string]any) {
				at(t, spec(t, c), "properties")["zone"] = map[string]any{"type": "string"}
				spec(t, c)["required"] = []any{"size", "zone"}
			},
			[]change{{"spec.zone", RequiredFieldAdded, true}}},
		{"existing field required", "objects that left it out are refused",
			func(t *testing.T, c map[string]any) { spec(t, c)["required"] = []any{"size", "endpoint"} },
			[]change{{"spec.endpoint", FieldRequired, true}}},
		{"enum values removed", "Slow is no longer accepted",
			func(t *testing.T, c map[string]any) { prop(t, c, "mode")["enum"] = []any{"Fast"} },
			[]change{{"spec.mode", EnumValuesRemoved, true}}},
		{"enum introduced", "a free string is limited to a list",
			func(t *testing.T, c map[string]any) { prop(t, c, "endpoint")["enum"] = []any{"a", "b"} },
			[]change{{"spec.endpoint", EnumAdded, true}}},
		{"lower maxLength", "longer names are refused",
			func(t *testing.T, c map[string]any) { prop(t, c, "name")["maxLength"] = 32 },
			[]change{{"spec.name", ValidationTightened, true}}},
		{"new maxLength", "a bound where there was none",
			func(t *testing.T, c map[string]any) { prop(t, c, "endpoint")["maxLength"] = 253 },
			[]change{{"spec.endpoint", ValidationTightened, true}}},
		{"higher minLength", "shorter names are refused",
			func(t *testing.T, c map[string]any) { prop(t, c, "name")["minLength"] = 3 },
			[]change{{"spec.name", ValidationTightened, true}}},
		{"lower maximum", "sizes 6 to 10 are refused",
			func(t *testing.T, c map[string]any) { prop(t, c, "size")["maximum"] = 5 },
			[]change{{"spec.size", ValidationTightened, true}}},
		{"higher minimum", "size 1 is refused",
			func(t *testing.T, c map[string]any) { prop(t, c, "size")["minimum"] = 2 },
			[]change{{"spec.size", ValidationTightened, true}}},
		{"exclusive maximum", "size 10 is refused",
			func(t *testing.T, c map[string]any) { prop(t, c, "size")["exclusiveMaximum"] = true },
			[]change{{"spec.size", ValidationTightened, true}}},
		{"lower maxItems", "lists of 4 or 5 tags are refused",
			func(t *testing.T, c map[string]any) { prop(t, c, "tags")["maxItems"] = 3 },
			[]change{{"spec.tags", ValidationTightened, true}}},
		{"new minItems", "empty tag lists are refused",
			func(t *testing.T, c map[string]any) { prop(t, c, "tags")["minItems"] = 1 },
			[]change{{"spec.tags", ValidationTightened, true}}},
		{"unique items", "duplicate tags are refused",
			func(t *testing.T, c map[string]any) { prop(t, c, "tags")["uniqueItems"] = true },
			[]change{{"spec.tags", ValidationTightened, true}}},
		{"new pattern", "endpoints must now match",
			func(t *testing.T, c map[string]any) { prop(t, c, "endpoint")["pattern"] = "^https://" },
			[]change{{"spec.endpoint", PatternChanged, true}}},
		{"changed pattern", "a different expression cannot be proven looser",
			func(t *testing.T, c map[string]any) { prop(t, c, "name")["pattern"] = "^[a-z0-9]+$" },
			[]change{{"spec.name", PatternChanged, true}}},
		{"new format", "endpoints must now be URIs",
			func(t *testing.T, c map[string]any) { prop(t, c, "endpoint")["format"] = "uri" },
			[]change{{"spec.endpoint", FormatChanged, true}}},
		{"new CEL rule", "a rule may refuse existing objects",
			func(t *testing.T, c map[string]any) {
				spec(t, c)["x-kubernetes-validations"] = []any{
					map[string]any{"rule": "self.size <= 10", "message": "too big"},
					map[string]any{"rule": "has(self.name)"},
				}
			},
			[]change{{"spec", RuleAdded, true}}},
		{"unknown fields pruned", "free-form content is dropped",
			func(t *testing.T, c map[string]any) {
				delete(prop(t, c, "free"), "x-kubernetes-preserve-unknown-fields")
			},
			[]change{{"spec.free", UnknownFieldsPruned, true}}},
		{"nullable dropped", "null notes are refused",
			func(t *testing.T, c map[string]any) { delete(prop(t, c, "note"), "nullable") },
			[]change{{"spec.note", ValidationTightened, true}}},
		{"map values constrained", "label values must now be integers",
			func(t *testing.T, c map[string]any) {
				prop(t, c, "labels")["additionalProperties"] = map[string]any{"type": "integer"}
			},
			[]change{{"spec.labels{*}", TypeChanged, true}}},
		{"list becomes a map", "port entries must now be unique by port",
			func(t *testing.T, c map[string]any) {
				prop(t, c, "ports")["x-kubernetes-list-type"] = "map"
				prop(t, c, "ports")["x-kubernetes-list-map-keys"] = []any{"port"}
				at(t, prop(t, c, "ports"), "items")["required"] = []any{"port"}
			},
			[]change{{"spec.ports", MergeStrategyChanged, true}, {"spec.ports[*].port", FieldRequired, true}}},
		{"nested field removed", "items lose a field",
			func(t *testing.T, c map[string]any) {
				delete(at(t, prop(t, c, "ports"), "items", "properties"), "port")
			},
			[]change{{"spec.ports[*].port", FieldRemoved, true}}},
		{"status field removed", "Compositions that patch from status.phase lose it",
			func(t *testing.T, c map[string]any) {
				delete(at(t, schemaOf(t, c, 0), "properties", "status", "properties"), "phase")
			},
			[]change{{"status.phase", FieldRemoved, true}}},
		{"version removed", "objects of v1 are no longer served",
			func(t *testing.T, c map[string]any) {
				v := at(t, c, "spec", "versions", 0)
				v["name"] = "v2"
			},
			[]change{{"version v2", "added", false}, {"version v1", "removed", true}}},
		{"version no longer served", "clients of v1 get 404",
			func(t *testing.T, c map[string]any) { at(t, c, "spec", "versions", 0)["served"] = false },
			[]change{{"version v1 served", DefinitionChanged, true}}},
		{"scope changed", "existing objects cannot change scope",
			func(t *testing.T, c map[string]any) { at(t, c, "spec")["scope"] = "Cluster" },
			[]change{{"spec.scope", DefinitionChanged, true}}},
		{"kind renamed", "clients that name the kind break",
			func(t *testing.T, c map[string]any) { at(t, c, "spec", "names")["kind"] = "Gadget" },
			[]change{{"spec.names.kind", DefinitionChanged, true}}},
		{"status subresource removed", "status writes through /status fail",
			func(t *testing.T, c map[string]any) { delete(at(t, c, "spec", "versions", 0), "subresources") },
			[]change{{"subresources.status", DefinitionChanged, true}}},

		// Not breaking.
		{"new optional field", "old objects stay valid",
			func(t *testing.T, c map[string]any) {
				at(t, spec(t, c), "properties")["zone"] = map[string]any{"type": "string", "enum": []any{"a"}}
			},
			[]change{{"spec.zone", FieldAdded, false}}},
		{"widened enum", "more values are accepted",
			func(t *testing.T, c map[string]any) { prop(t, c, "mode")["enum"] = []any{"Fast", "Slow", "Turbo"} },
			[]change{{"spec.mode", EnumValuesAdded, false}}},
		{"relaxed maxLength", "longer names are accepted",
			func(t *testing.T, c map[string]any) { prop(t, c, "name")["maxLength"] = 128 },
			[]change{{"spec.name", ValidationRelaxed, false}}},
		{"maxLength dropped", "any length is accepted",
			func(t *testing.T, c map[string]any) { delete(prop(t, c, "name"), "maxLength") },
			[]change{{"spec.name", ValidationRelaxed, false}}},
		{"lower minimum", "size 0 is accepted",
			func(t *testing.T, c map[string]any) { prop(t, c, "size")["minimum"] = 0 },
			[]change{{"spec.size", ValidationRelaxed, false}}},
		{"pattern dropped", "any name is accepted",
			func(t *testing.T, c map[string]any) { delete(prop(t, c, "name"), "pattern") },
			[]change{{"spec.name", PatternRemoved, false}}},
		{"rule dropped", "the size rule no longer applies",
			func(t *testing.T, c map[string]any) { delete(spec(t, c), "x-kubernetes-validations") },
			[]change{{"spec", RuleRemoved, false}}},
		{"integer to number", "every integer is a number",
			func(t *testing.T, c map[string]any) { prop(t, c, "ratio")["type"] = "number" },
			[]change{{"spec.ratio", TypeWidened, false}}},
		{"required field optional", "objects may leave it out",
			func(t *testing.T, c map[string]any) { delete(spec(t, c), "required") },
			[]change{{"spec.size", FieldOptional, false}}},
		{"default changed", "new objects get another default, old ones stay valid",
			func(t *testing.T, c map[string]any) { prop(t, c, "mode")["default"] = "Slow" },
			[]change{{"spec.mode", DefaultChanged, false}}},
		{"new served version", "a version is added beside v1",
			func(t *testing.T, c map[string]any) {
				versions := at(t, c, "spec")["versions"].([]any)
				v2 := map[string]any{}
				for k, v := range at(t, versions, 0) {
					v2[k] = v
				}
				v2["name"], v2["storage"] = "v2", false
				at(t, c, "spec")["versions"] = append(versions, v2)
			},
			[]change{{"version v2", "added", false}}},
		{"status constraint tightened", "the controller writes status; it ships with the schema",
			func(t *testing.T, c map[string]any) {
				at(t, schemaOf(t, c, 0), "properties", "status", "properties", "phase")["enum"] = []any{"Ready"}
			},
			[]change{{"status.phase", EnumAdded, false}}},
		{"short name added", "a new kubectl alias",
			func(t *testing.T, c map[string]any) { at(t, c, "spec", "names")["shortNames"] = []any{"wg", "wdg"} },
			[]change{{"spec.names.shortNames", DefinitionChanged, false}}},
	}
	base := toJSON(t, decodeYAML(t, widgetCRD))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			crd := decodeYAML(t, widgetCRD)
			c.mutate(t, crd)
			d, err := CompareDefinition(base, toJSON(t, crd))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, changesOf(d)); diff != "" {
				t.Errorf("%s\nCompareDefinition: changes differ (-want, +got):\n%s", c.reason, diff)
			}
			wantBreaking := false
			for _, w := range c.want {
				wantBreaking = wantBreaking || w.Breaking
			}
			if d.Breaking != wantBreaking {
				t.Errorf("%s\nDefinitionChange.Breaking = %v, want %v", c.reason, d.Breaking, wantBreaking)
			}
		})
	}
}

// TestDescriptionOnlyChange: descriptions, titles and examples are not
// changes at all.
func TestDescriptionOnlyChange(t *testing.T) {
	crd := decodeYAML(t, widgetCRD)
	s := schemaOf(t, crd, 0)
	s["description"] = "A widget, described again."
	at(t, s, "properties", "spec", "properties", "size")["description"] = "Size in units."
	at(t, s, "properties", "spec", "properties", "name")["title"] = "Name"
	d, err := CompareDefinition(toJSON(t, decodeYAML(t, widgetCRD)), toJSON(t, crd))
	if err != nil {
		t.Fatal(err)
	}
	if d != nil {
		t.Errorf("a description-only change reported %+v, want nil", d)
	}
}

// TestStorageVersionChange: moving storage to a new version is a
// migration, not a breaking change; the old version stays served.
func TestStorageVersionChange(t *testing.T) {
	base := decodeYAML(t, widgetCRD)
	head := decodeYAML(t, widgetCRD)
	versions := at(t, head, "spec")["versions"].([]any)
	v2 := map[string]any{}
	for k, v := range at(t, versions, 0) {
		v2[k] = v
	}
	v2["name"] = "v2"
	at(t, versions, 0)["storage"] = false
	at(t, head, "spec")["versions"] = append(versions, v2)
	d, err := CompareDefinition(toJSON(t, base), toJSON(t, head))
	if err != nil {
		t.Fatal(err)
	}
	if d == nil || d.StorageVersion == nil || d.StorageVersion.Base != "v1" || d.StorageVersion.Head != "v2" {
		t.Fatalf("storage version change: %+v, want v1 → v2", d)
	}
	if d.Breaking {
		t.Errorf("a storage move with v1 still served is reported breaking: %+v", d)
	}
	if d.Versions[0].Name != "v2" {
		t.Errorf("versions %+v: want the newest (v2) first", d.Versions)
	}
}

// TestXRDv1ToV2 moves an XRD from apiextensions.crossplane.io/v1 to v2
// under the same name: the apiVersion change is reported, the implicit
// LegacyCluster scope becoming Namespaced and the claim names going away
// are breaking.
func TestXRDv1ToV2(t *testing.T) {
	const v1 = `
apiVersion: apiextensions.crossplane.io/v1
kind: CompositeResourceDefinition
metadata: {name: xnetworks.platform.example.org}
spec:
  group: platform.example.org
  names: {kind: XNetwork, plural: xnetworks}
  claimNames: {kind: Network, plural: networks}
  versions:
  - name: v1alpha1
    served: true
    referenceable: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              region: {type: string}
`
	head := decodeYAML(t, v1)
	head["apiVersion"] = "apiextensions.crossplane.io/v2"
	spec := at(t, head, "spec")
	delete(spec, "claimNames")
	spec["scope"] = "Namespaced"
	at(t, spec, "versions", 0, "schema", "openAPIV3Schema", "properties", "spec", "properties")["zone"] = map[string]any{"type": "string"}
	d, err := CompareDefinition(toJSON(t, decodeYAML(t, v1)), toJSON(t, head))
	if err != nil {
		t.Fatal(err)
	}
	if d.Category != CategoryXRD || d.APIVersionChange == nil || d.APIVersionChange.Head != "apiextensions.crossplane.io/v2" {
		t.Fatalf("XRD change %+v: want an XRD whose apiVersion moves to v2", d)
	}
	want := []change{
		{"spec.scope", DefinitionChanged, true},
		{"spec.claimNames.kind", DefinitionChanged, true},
		{"spec.zone", FieldAdded, false},
	}
	if diff := cmp.Diff(want, changesOf(d)); diff != "" {
		t.Errorf("changes differ (-want, +got):\n%s", diff)
	}
}

// TestCompareDefinitionErrors: input that is not a definition, or two
// different definitions, is an error naming the side.
func TestCompareDefinitionErrors(t *testing.T) {
	crd := toJSON(t, decodeYAML(t, widgetCRD))
	other := decodeYAML(t, widgetCRD)
	at(t, other, "metadata")["name"] = "gadgets.example.org"
	for name, c := range map[string]struct{ a, b []byte }{
		"not JSON":             {[]byte("{"), crd},
		"not a definition":     {crd, []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)},
		"different definition": {crd, toJSON(t, other)},
	} {
		if _, err := CompareDefinition(c.a, c.b); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestKubeVersionOrder orders versions as Kubernetes prioritises them.
func TestKubeVersionOrder(t *testing.T) {
	got := sortedVersions(map[string]*definitionVersion{"v1alpha1": nil, "v1": nil, "v2beta1": nil, "v1beta2": nil, "foo": nil, "v1beta1": nil}, nil)
	want := []string{"v1", "v2beta1", "v1beta2", "v1beta1", "v1alpha1", "foo"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("version order (-want, +got):\n%s", diff)
	}
}
