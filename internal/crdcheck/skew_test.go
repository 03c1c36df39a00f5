package crdcheck_test

import (
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
)

func crdWithRule(rule string) string {
	return `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","spec":{"versions":[{"name":"v1","schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","x-kubernetes-validations":[{"rule":` + rule + `}]}}}}}]}}`
}

// TestSkewDifference: which CRDs Kubernetes 1.37's validation judges as
// an older server does, by the differences of 1.33–1.37.
func TestSkewDifference(t *testing.T) {
	cases := map[string]struct {
		reason string
		crd    string
		minor  int
		want   string // a part of the reason; "" for none
	}{
		"NoRules":             {reason: "a schema without rules or the new formats is judged alike", crd: `{"spec":{"versions":[{"schema":{"openAPIV3Schema":{"type":"object"}}}]}}`, minor: 33},
		"PlainRule":           {reason: "a rule with functions every release has", crd: crdWithRule(`"self.size \u003c= 10 \u0026\u0026 has(self.region)"`), minor: 33},
		"Semver133":           {reason: "semver on 1.33: its compatibility version (1.32) lacks the library", crd: crdWithRule(`"isSemver(self.version)"`), minor: 33, want: "the semver library"},
		"Semver134":           {reason: "semver on 1.34 compiles", crd: crdWithRule(`"isSemver(self.version)"`), minor: 34},
		"ListsSort134":        {reason: "cel-go's sort() on 1.34 does not compile", crd: crdWithRule(`"self.items.sort() == self.items"`), minor: 34, want: "cel-go's list library"},
		"ListsRange135":       {reason: "lists.range on 1.35 compiles", crd: crdWithRule(`"lists.range(3).size() == 3"`), minor: 35},
		"Metadata136":         {reason: "a rule over metadata.name costs otherwise before 1.37", crd: crdWithRule(`"self.metadata.name.size() \u003c 10"`), minor: 36, want: "reads metadata"},
		"Metadata137":         {reason: "the same minor judges alike", crd: crdWithRule(`"self.metadata.name.size() \u003c 10"`), minor: 37},
		"Format133":           {reason: "k8s-short-name is unknown to 1.33", crd: `{"spec":{"versions":[{"schema":{"openAPIV3Schema":{"type":"string","format":"k8s-short-name"}}}]}}`, minor: 33, want: "k8s-short-name"},
		"SelectableFields134": {reason: "selectableFields ratchet from 1.35", crd: `{"spec":{"versions":[{"selectableFields":[{"jsonPath":".spec.a"}]}]}}`, minor: 34, want: "selectableFields"},
		"TooOld":              {reason: "1.32 was not compared", crd: `{}`, minor: 32, want: "older than the releases compared"},
		"Newer":               {reason: "a newer server was not compared either", crd: `{}`, minor: 38, want: "newer than lockstep's validation"},
		"EscapedQuote":        {reason: "a rule with an escaped quote is read whole", crd: crdWithRule(`"self.name == \"x\" \u0026\u0026 isSemver(self.v)"`), minor: 33, want: "the semver library"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := crdcheck.SkewDifference([]byte(c.crd), c.minor)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("%s: SkewDifference = %q, want %q", c.reason, got, c.want)
			}
		})
	}
}
