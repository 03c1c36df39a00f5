package diff

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestRuleChanges classifies RBAC rule changes into new API groups, new
// resources in known groups and new verbs on known resources, with
// wildcards covering what they match.
func TestRuleChanges(t *testing.T) {
	rule := func(groups, resources, verbs []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs}
	}
	s := func(v ...string) []string { return v }
	cases := []struct {
		name   string
		reason string
		a, b   []rbacv1.PolicyRule
		want   *RuleChanges
	}{
		{
			name:   "new group, resource and verb",
			reason: "each kind of gain is classified once",
			a:      []rbacv1.PolicyRule{rule(s("ec2.aws.upbound.io"), s("vpcs"), s("get", "list"))},
			b: []rbacv1.PolicyRule{
				rule(s("ec2.aws.upbound.io"), s("vpcs", "subnets"), s("get", "list", "watch")),
				rule(s(""), s("secrets"), s("get")),
			},
			want: &RuleChanges{
				APIGroupsAdded: []GroupGrant{{Group: "", Resources: s("secrets"), Verbs: s("get")}},
				ResourcesAdded: []ResourceGrant{{Group: "ec2.aws.upbound.io", Resource: "subnets", Verbs: s("get", "list", "watch")}},
				VerbsAdded:     []ResourceGrant{{Group: "ec2.aws.upbound.io", Resource: "vpcs", Verbs: s("watch")}},
			},
		},
		{
			name:   "wildcard covers",
			reason: "narrowing * to get gains nothing and loses the other verbs",
			a:      []rbacv1.PolicyRule{rule(s("apps"), s("deployments"), s("*"))},
			b:      []rbacv1.PolicyRule{rule(s("apps"), s("deployments"), s("get"))},
			want: &RuleChanges{
				VerbsRemoved: []ResourceGrant{{Group: "apps", Resource: "deployments", Verbs: s("*")}},
			},
		},
		{
			name:   "same permissions in other rules",
			reason: "splitting or merging rules changes nothing",
			a:      []rbacv1.PolicyRule{rule(s("a", "b"), s("x"), s("get", "list"))},
			b:      []rbacv1.PolicyRule{rule(s("b"), s("x"), s("list", "get")), rule(s("a"), s("x"), s("get")), rule(s("a"), s("x"), s("list"))},
			want:   nil,
		},
		{
			name:   "resource names and URLs",
			reason: "a grant limited to a name is a new resource grant; non-resource URLs are listed",
			a:      []rbacv1.PolicyRule{rule(s(""), s("configmaps"), s("get"))},
			b: []rbacv1.PolicyRule{
				{APIGroups: s(""), Resources: s("configmaps"), Verbs: s("get")},
				{APIGroups: s(""), Resources: s("secrets"), ResourceNames: s("creds"), Verbs: s("get")},
				{NonResourceURLs: s("/metrics"), Verbs: s("get")},
				{NonResourceURLs: s("/healthz/*"), Verbs: s("get")},
			},
			want: &RuleChanges{
				ResourcesAdded:       []ResourceGrant{{Group: "", Resource: "secrets", ResourceName: "creds", Verbs: s("get")}},
				NonResourceURLsAdded: s("get /healthz/*", "get /metrics"),
			},
		},
		{
			name:   "URL prefix covers",
			reason: "a /healthz/* grant covers /healthz/ready",
			a:      []rbacv1.PolicyRule{{NonResourceURLs: s("/healthz/*"), Verbs: s("get")}},
			b:      []rbacv1.PolicyRule{{NonResourceURLs: s("/healthz/ready"), Verbs: s("get")}},
			want:   &RuleChanges{NonResourceURLsRemoved: s("get /healthz/*")},
		},
		{
			name:   "group dropped",
			reason: "a group no longer granted is listed with its resources",
			a:      []rbacv1.PolicyRule{rule(s("old.example.org"), s("things", "things/status"), s("get"))},
			b:      nil,
			want: &RuleChanges{
				APIGroupsRemoved: []GroupGrant{{Group: "old.example.org", Resources: s("things", "things/status"), Verbs: s("get")}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, ruleChanges(c.a, c.b)); diff != "" {
				t.Errorf("%s\nruleChanges (-want, +got):\n%s", c.reason, diff)
			}
		})
	}
}

// TestCompareCompositions reports functionRef and input changes per
// pipeline step.
func TestCompareCompositions(t *testing.T) {
	const base = `{"apiVersion":"apiextensions.crossplane.io/v1","kind":"Composition","metadata":{"name":"c"},
"spec":{"compositeTypeRef":{"apiVersion":"x.example.org/v1","kind":"XThing"},"mode":"Pipeline","pipeline":[
{"step":"render","functionRef":{"name":"function-patch-and-transform"},"input":{"apiVersion":"pt.fn.crossplane.io/v1beta1","kind":"Resources","resources":[]}},
{"step":"ready","functionRef":{"name":"function-auto-ready"}}]}}`
	const head = `{"apiVersion":"apiextensions.crossplane.io/v1","kind":"Composition","metadata":{"name":"c","labels":{"a":"b"}},
"spec":{"compositeTypeRef":{"apiVersion":"x.example.org/v2","kind":"XThing"},"mode":"Pipeline","pipeline":[
{"step":"render","functionRef":{"name":"function-kcl"},"input":{"apiVersion":"krm.kcl.dev/v1alpha1","kind":"KCLInput","spec":{}}},
{"step":"ready","functionRef":{"name":"function-auto-ready"}},
{"step":"tag","functionRef":{"name":"function-tag"}}]}}`
	got, err := compareCompositions("c", []byte(base), []byte(head))
	if err != nil {
		t.Fatal(err)
	}
	want := &CompositionChange{
		Name:             "c",
		Fields:           []FieldChange{{Field: "spec.compositeTypeRef", Base: "x.example.org/v1 XThing", Head: "x.example.org/v2 XThing"}},
		FunctionsAdded:   []string{"function-kcl", "function-tag"},
		FunctionsRemoved: []string{"function-patch-and-transform"},
		Steps: []StepChange{
			{Step: "render", Change: ChangeChanged, BaseFunction: "function-patch-and-transform", HeadFunction: "function-kcl",
				BaseInput: "pt.fn.crossplane.io/v1beta1 Resources", HeadInput: "krm.kcl.dev/v1alpha1 KCLInput", InputChanged: true},
			{Step: "tag", Change: ChangeAdded, HeadFunction: "function-tag"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("compareCompositions (-want, +got):\n%s", diff)
	}
	c := &comparer{headFunctions: map[string]bool{"function-kcl": true, "function-auto-ready": true}}
	if got := c.missingFunctions([]byte(head)); !cmp.Equal(got, []string{"function-tag"}) {
		t.Errorf("missingFunctions = %v, want [function-tag]", got)
	}
	// Only metadata changes: nothing to report.
	same, err := compareCompositions("c", []byte(base), []byte(`{"metadata":{"labels":{"x":"y"}},`+base[1:]))
	if err != nil || same != nil {
		t.Errorf("a label-only change: %+v, %v; want nil", same, err)
	}
}

// TestDiffLeaves lists changed fields in path order, bounded, and shows an
// empty map that gains fields by its fields.
func TestDiffLeaves(t *testing.T) {
	a := []byte(`{"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"c","args":[],"resources":{}}]}}}}`)
	b := []byte(`{"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"c","args":["--debug"],"resources":{"limits":{"cpu":"1"}}}]}}}}`)
	got, more, err := diffJSON(a, b, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []FieldChange{
		{Field: "spec.replicas", Base: "1", Head: "2"},
		{Field: "spec.template.spec.containers[0].args[0]", Head: "--debug"},
		{Field: "spec.template.spec.containers[0].resources.limits.cpu", Head: "1"},
	}
	if diff := cmp.Diff(want, got); diff != "" || more != 0 {
		t.Errorf("diffJSON (-want, +got), more %d:\n%s", more, diff)
	}
	got, more, _ = diffJSON(a, b, 1, "spec.replicas")
	if len(got) != 1 || got[0].Field != "spec.template.spec.containers[0].args[0]" || more != 1 {
		t.Errorf("bounded to 1 without spec.replicas: %+v, %d more; want args[0] and 1 more", got, more)
	}
}
