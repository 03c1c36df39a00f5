package render_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/render"
)

// TestDeletionProtection checks the policy and binding render.DeletionProtection
// returns: names and labels of the instance, the binding selecting the
// instance's objects, the identity quoted as a CEL string, and the
// refusals (docs/design/apply.md#deletion-protection).
func TestDeletionProtection(t *testing.T) {
	cases := []struct {
		name     string
		reason   string
		identity string
		deleters string
		wantErr  string
	}{
		{
			name:     "ServiceAccount",
			reason:   "the agent's ServiceAccount, the garbage collector and the controller manager may delete",
			identity: "system:serviceaccount:lockstep-system:lockstep",
			deleters: `["system:serviceaccount:lockstep-system:lockstep", "system:serviceaccount:kube-system:generic-garbage-collector", "system:kube-controller-manager"]`,
		},
		{
			name:     "Quoted",
			reason:   "a quote in a user name is escaped, so it cannot end the CEL string",
			identity: `o"brien`,
			deleters: `["o\"brien", "system:serviceaccount:kube-system:generic-garbage-collector", "system:kube-controller-manager"]`,
		},
		{
			name:    "Empty",
			reason:  "without a user name nobody but the garbage collector could delete",
			wantErr: "deletion protection: lockstep's user name is empty",
		},
		{
			name:     "Control",
			reason:   "a newline cannot be part of a user name",
			identity: "a\nb",
			wantErr:  `deletion protection: lockstep's user name "a\nb" holds a control character`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := render.DeletionProtection("prod", tc.identity)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("%s\nerror: got %v, want %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.GetKind()+"/"+o.GetName()+" "+o.GetLabels()[render.LabelInstance])
			}
			want := []string{"ValidatingAdmissionPolicy/lockstep-deletion-protection-prod prod", "ValidatingAdmissionPolicyBinding/lockstep-deletion-protection-prod prod"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("objects: -want +got\n%s", diff)
			}
			vars, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "variables")
			if diff := cmp.Diff(tc.deleters, vars[0].(map[string]any)["expression"]); diff != "" {
				t.Errorf("%s\ndeleters: -want +got\n%s", tc.reason, diff)
			}
			sel, _, _ := unstructured.NestedStringMap(objs[1].Object, "spec", "matchResources", "objectSelector", "matchLabels")
			if diff := cmp.Diff(map[string]string{render.LabelInstance: "prod"}, sel); diff != "" {
				t.Errorf("the binding must select the instance's objects only: -want +got\n%s", diff)
			}
			msg, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "validations")
			if m := msg[0].(map[string]any)["message"].(string); !strings.Contains(m, render.AnnotationAllowDelete+"=true") {
				t.Errorf("the message does not name the escape hatch: %s", m)
			}
		})
	}
}
