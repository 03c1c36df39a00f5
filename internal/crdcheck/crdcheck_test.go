package crdcheck_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/testdata"
)

// fieldManager is the field manager the tests apply as, lockstep's own.
const fieldManager = "lockstep"

// testCRD returns a valid CRD of group g and plural p whose version
// v1alpha1 has spec (the YAML of spec's schema, indented for its place)
// and extra lines appended to the CRD's spec.
func testCRD(g, p, spec, extra string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[2]ss.%[1]s
spec:
  group: %[1]s
  names: {kind: Thing, listKind: ThingList, plural: %[2]ss, singular: %[2]s}
  scope: Cluster
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
%[3]s
%[4]s`, g, p, spec, extra)
}

const okSpec = `            type: object
            properties:
              size: {type: integer, minimum: 1}`

// TestCheckCRDCreateAgreesWithServer: Create accepts and refuses
// the CRDs the real kube-apiserver accepts and refuses on create (a
// server-side dry-run), with the same invalid fields.
func TestCheckCRDCreateAgreesWithServer(t *testing.T) {
	env := envtest.Shared(t)
	const g = "crdcheck.lockstep.io"
	cases := map[string]struct {
		reason string
		crd    string
		// invalid says the server refuses it; the test checks it
		// against the server too.
		invalid bool
	}{
		"valid": {
			reason: "a valid CRD passes both",
			crd:    testCRD(g, "valid", okSpec, ""),
		},
		"valid with CEL and conversion": {
			reason: "CEL rules and a None conversion are accepted",
			crd: testCRD(g, "celok", `            type: object
            x-kubernetes-validations:
            - rule: "self.size > 0"
            properties:
              size: {type: integer}`, "  conversion: {strategy: None}"),
		},
		"name is not plural.group": {
			reason:  "metadata.name must be spec.names.plural+\".\"+spec.group",
			crd:     strings.Replace(testCRD(g, "badname", okSpec, ""), "name: badnames."+g, "name: other."+g, 1),
			invalid: true,
		},
		"unknown schema type": {
			reason:  "a property of an unknown type is refused",
			crd:     testCRD(g, "badtype", "            type: strin", ""),
			invalid: true,
		},
		"structural: property without type": {
			reason: "a structural schema gives every property a type",
			crd: testCRD(g, "notype", `            type: object
            properties:
              size: {minimum: 1}`, ""),
			invalid: true,
		},
		"default of the wrong type": {
			reason: "a default must validate against its schema",
			crd: testCRD(g, "baddefault", `            type: object
            properties:
              size: {type: integer, default: "ten"}`, ""),
			invalid: true,
		},
		"CEL rule does not compile": {
			reason: "x-kubernetes-validations rules are compiled",
			crd: testCRD(g, "badcel", `            type: object
            x-kubernetes-validations:
            - rule: "self.size >"
            properties:
              size: {type: integer}`, ""),
			invalid: true,
		},
		"list-type map without keys": {
			reason: "x-kubernetes-list-type map needs x-kubernetes-list-map-keys",
			crd: testCRD(g, "listmap", `            type: object
            properties:
              items:
                type: array
                x-kubernetes-list-type: map
                items: {type: object, properties: {name: {type: string}}}`, ""),
			invalid: true,
		},
		"conversion webhook without a webhook": {
			reason:  "a Webhook conversion needs spec.conversion.webhook",
			crd:     testCRD(g, "nowebhook", okSpec, "  conversion: {strategy: Webhook}"),
			invalid: true,
		},
		"conversion webhook with both url and service": {
			reason: "a webhook client config has a url or a service, not both",
			crd: testCRD(g, "twowebhook", okSpec, `  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        url: https://example.com/convert
        service: {name: conv, namespace: default}`),
			invalid: true,
		},
		"conversion review version unknown": {
			reason: "conversionReviewVersions must name a version the server knows",
			crd: testCRD(g, "reviewver", okSpec, `  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v9]
      clientConfig: {url: "https://example.com/convert"}`),
			invalid: true,
		},
		"no storage version": {
			reason:  "exactly one version is the storage version",
			crd:     strings.Replace(testCRD(g, "nostorage", okSpec, ""), "storage: true", "storage: false", 1),
			invalid: true,
		},
		"scope unknown": {
			reason:  "scope is Cluster or Namespaced",
			crd:     strings.Replace(testCRD(g, "scope", okSpec, ""), "scope: Cluster", "scope: Galactic", 1),
			invalid: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			body, err := yaml.YAMLToJSON([]byte(tc.crd))
			if err != nil {
				t.Fatal(err)
			}
			local := crdcheck.Create(ctx, body)
			u := &unstructured.Unstructured{}
			if err := utiljson.Unmarshal(body, &u.Object); err != nil {
				t.Fatal(err)
			}
			server := env.Client.Create(ctx, u, client.DryRunAll)
			if got := server != nil; got != tc.invalid {
				t.Fatalf("%s: the server's answer %v is not what the case expects (invalid=%v): fix the case", tc.reason, server, tc.invalid)
			}
			if diff := cmp.Diff(invalidFields(t, server), invalidFields(t, local)); diff != "" {
				t.Errorf("%s: in-process validation disagrees with the server on the invalid fields: -server +local\n%s\nserver: %v\nlocal: %v", tc.reason, diff, server, local)
			}
		})
	}
}

// invalidFields returns the sorted fields of an Invalid error's causes,
// nil for no error and ["<not Invalid>"] for another error.
func invalidFields(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) || !apierrors.IsInvalid(err) || se.ErrStatus.Details == nil {
		return []string{"<not Invalid: " + err.Error() + ">"}
	}
	var out []string
	for _, c := range se.ErrStatus.Details.Causes {
		out = append(out, c.Field)
	}
	sort.Strings(out)
	return out
}

// TestServerMinor: the kube-apiserver's minor version, with and without
// the "+" some distributions add.
func TestServerMinor(t *testing.T) {
	cases := map[string]struct {
		reason string
		minor  string
		want   int
		err    bool
	}{
		"plain":     {reason: "upstream reports the number", minor: "36", want: 36},
		"plus":      {reason: "GKE and EKS add a +", minor: "36+", want: 36},
		"not a num": {reason: "anything else is refused", minor: "x", err: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := crdcheck.ServerMinor(tc.minor)
			if (err != nil) != tc.err {
				t.Fatalf("%s: error %v, want error %v", tc.reason, err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want +got\n%s", tc.reason, diff)
			}
		})
	}
}

// TestValidationMinorMatchesGoMod: crdcheck.Minor is the minor version
// of the k8s.io/apiextensions-apiserver go.mod requires, so that a
// dependency bump cannot leave the version check behind.
func TestValidationMinorMatchesGoMod(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testdata.Root(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.ParseLax("go.mod", b, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, r := range f.Require {
		if r.Mod.Path == "k8s.io/apiextensions-apiserver" {
			got = semver.MajorMinor(r.Mod.Version)
		}
	}
	if diff := cmp.Diff(fmt.Sprintf("v0.%d", crdcheck.Minor), got); diff != "" {
		t.Errorf("crdcheck.Minor does not match go.mod's k8s.io/apiextensions-apiserver: -want +got\n%s", diff)
	}
}

// TestCheckCRDUpdateAgreesWithServer: Update accepts and refuses
// the server-side applies of a changed CRD that the real kube-apiserver
// accepts and refuses (a server-side dry-run apply as FieldManager with
// force, as the payload step sends), with the same invalid fields. Every
// case starts from a CRD lockstep applied (and, in the "other manager"
// cases, to which another field manager applied fields too), read back
// from the server once it is Established, as the apply's LIST would see it.
func TestCheckCRDUpdateAgreesWithServer(t *testing.T) {
	env := envtest.Shared(t)
	g := fmt.Sprintf("crdupdate%d.lockstep.io", time.Now().UnixNano())
	const celSpec = `            type: object
            x-kubernetes-validations:
            - rule: "self.size > 0"
            properties:
              size: {type: integer}`
	v1beta1 := func(crd string) string {
		return strings.Replace(crd, "  - name: v1alpha1", `  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object}
  - name: v1alpha1`, 1)
	}
	cases := map[string]struct {
		reason string
		// base is what lockstep applied; other, when set, what
		// another field manager applied on top of it.
		base, other string
		update      string
		invalid     bool
	}{
		"property added": {
			reason: "a valid change passes both",
			base:   testCRD(g, "added", okSpec, ""),
			update: testCRD(g, "added", okSpec+"\n              name: {type: string}", ""),
		},
		"CEL rule kept, property unchanged": {
			reason: "a CEL rule already there is ratcheted, a printer column added",
			base:   testCRD(g, "celkept", celSpec, ""),
			update: testCRD(g, "celkept", celSpec, "    additionalPrinterColumns: [{name: Size, type: integer, jsonPath: .spec.size}]"),
		},
		"stored version removed": {
			reason:  "a version in status.storedVersions must stay in spec.versions",
			base:    testCRD(g, "stored", okSpec, ""),
			update:  strings.Replace(testCRD(g, "stored", okSpec, ""), "name: v1alpha1", "name: v1beta1", 1),
			invalid: true,
		},
		"scope changed": {
			reason:  "spec.scope is immutable",
			base:    testCRD(g, "scope", okSpec, ""),
			update:  strings.Replace(testCRD(g, "scope", okSpec, ""), "scope: Cluster", "scope: Namespaced", 1),
			invalid: true,
		},
		"property made invalid": {
			reason:  "a property of an unknown type is refused on update too",
			base:    testCRD(g, "badtype", okSpec, ""),
			update:  testCRD(g, "badtype", "            type: strin", ""),
			invalid: true,
		},
		"names changed once Established": {
			reason:  "spec.names.kind cannot change once the CRD is Established",
			base:    testCRD(g, "kind", okSpec, ""),
			update:  strings.Replace(testCRD(g, "kind", okSpec, ""), "kind: Thing,", "kind: Other,", 1),
			invalid: true,
		},
		"other manager's version kept": {
			reason: "spec.versions is an atomic list: lockstep's update replaces it, dropping the version another manager added, which was never stored",
			base:   testCRD(g, "otherver", okSpec, ""),
			other:  v1beta1(testCRD(g, "otherver", okSpec, "")),
			update: testCRD(g, "otherver", okSpec+"\n              name: {type: string}", ""),
		},
		"other manager's version made the storage version": {
			reason:  "lockstep's update marks the version another manager added as storage too: two storage versions",
			base:    testCRD(g, "twostorage", okSpec, ""),
			other:   v1beta1(testCRD(g, "twostorage", okSpec, "")),
			update:  strings.Replace(v1beta1(testCRD(g, "twostorage", okSpec, "")), "storage: false", "storage: true", 1),
			invalid: true,
		},
		"other manager's CEL rule on a changed property": {
			reason: "another manager's CEL rule stays in the merge; once lockstep changes the property's type it no longer compiles, which an update ratchets as a rule already there",
			base:   testCRD(g, "othercel", okSpec, ""),
			other:  testCRD(g, "othercel", celSpec, ""),
			update: testCRD(g, "othercel", "            type: object\n            properties:\n              size: {type: string}", ""),
		},
		"conversion webhook another manager set": {
			reason: "lockstep's update sets conversion strategy None; the webhook another manager set stays in the merge, which the server refuses (the body alone is valid)",
			base:   testCRD(g, "conv", okSpec, ""),
			other: testCRD(g, "conv", okSpec, `  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {url: "https://example.com/convert"}`),
			update:  testCRD(g, "conv", okSpec, "  conversion: {strategy: None}"),
			invalid: true,
		},
		"version removed that another manager applied too": {
			reason:  "spec.versions is an atomic list: another manager's identical apply does not keep the version lockstep renames, status.storedVersions refuses it",
			base:    testCRD(g, "coowned", okSpec, ""),
			other:   testCRD(g, "coowned", okSpec, ""),
			update:  strings.Replace(testCRD(g, "coowned", okSpec, ""), "name: v1alpha1", "name: v1beta1", 1),
			invalid: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			base := crdObject(t, tc.base)
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), base.DeepCopy()) })
			if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(base.DeepCopy()), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
				t.Fatal(err)
			}
			if tc.other != "" {
				if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(crdObject(t, tc.other)), client.FieldOwner("someone-else"), client.ForceOwnership); err != nil {
					t.Fatal(err)
				}
			}
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(base.GroupVersionKind())
			for {
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(base), live); err != nil {
					t.Fatal(err)
				}
				if conditionStatus(live, "Established") == "True" {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("%s is not Established: %v", base.GetName(), ctx.Err())
				case <-time.After(100 * time.Millisecond):
				}
			}
			body, err := yaml.YAMLToJSON([]byte(tc.update))
			if err != nil {
				t.Fatal(err)
			}
			checked, local := crdcheck.Update(ctx, live, body, fieldManager)
			if !checked {
				t.Fatalf("%s: the update was not checked in-process (%v)", tc.reason, local)
			}
			server := env.Client.Patch(ctx, crdObject(t, tc.update), client.RawPatch(types.ApplyPatchType, body), client.FieldOwner(fieldManager),
				client.ForceOwnership, client.FieldValidation(metav1.FieldValidationIgnore), client.DryRunAll)
			if got := server != nil; got != tc.invalid {
				t.Fatalf("%s: the server's answer %v is not what the case expects (invalid=%v): fix the case", tc.reason, server, tc.invalid)
			}
			if diff := cmp.Diff(invalidFields(t, server), invalidFields(t, local)); diff != "" {
				t.Errorf("%s: in-process validation disagrees with the server on the invalid fields: -server +local\n%s\nserver: %v\nlocal: %v", tc.reason, diff, server, local)
			}
		})
	}
}

// crdObject decodes the YAML of a CRD.
func crdObject(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// conditionStatus returns the status of u's condition of type typ, or "".
func conditionStatus(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
