package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/test/testdata"
)

// TestAlertRules parses every expression of examples/prometheus/alerts.yaml
// with Prometheus's PromQL parser and checks that each metric it selects
// is one the agent exports (NewMetrics), with the labels it filters on.
func TestAlertRules(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testdata.Root(t), "examples", "prometheus", "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct{ Alert, Expr string }
			}
		}
	}
	if err := yaml.Unmarshal(b, &rule); err != nil {
		t.Fatalf("examples/prometheus/alerts.yaml: %v", err)
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	// Every vector gets a series so that Gather lists it.
	m.ReconcileDuration.WithLabelValues("success").Observe(1)
	m.Packages.WithLabelValues("Current").Set(1)
	m.RegistryRequests.WithLabelValues("blob").Inc()
	m.APIRequests.WithLabelValues("GET", "false").Inc()
	m.Errors.WithLabelValues("apply").Inc()
	m.UpdatePolls.WithLabelValues("succeeded").Set(1)
	m.Conditions.WithLabelValues("Ready", "True", "ReconciliationSucceeded").Set(1)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]bool{}
	for _, f := range families {
		names := map[string]bool{"__name__": true}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				names[l.GetName()] = true
			}
		}
		labels[f.GetName()] = names
	}
	n := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			n++
			expr, err := parser.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
				continue
			}
			parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
				vs, ok := node.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				have, ok := labels[vs.Name]
				if !ok {
					t.Errorf("alert %s: metric %s is not one the agent exports", r.Alert, vs.Name)
					return nil
				}
				for _, lm := range vs.LabelMatchers {
					if !have[lm.Name] {
						t.Errorf("alert %s: metric %s has no label %s", r.Alert, vs.Name, lm.Name)
					}
				}
				return nil
			})
		}
	}
	if n < 3 {
		t.Errorf("examples/prometheus/alerts.yaml has %d rules, want the stalled, signature and drift alerts at least", n)
	}
}

// TestDriftCorrected: which reconciles count as a drift correction.
func TestDriftCorrected(t *testing.T) {
	wrote := func(n int64) *apply.Result { return &apply.Result{Writes: n} }
	cases := map[string]struct {
		reason string
		prev   string
		o      *Outcome
		want   bool
	}{
		"NewCommit":      {reason: "Applying a new commit is no drift.", prev: "aaa", o: &Outcome{Commit: "bbb", Applied: true, Result: wrote(5)}},
		"SameNoWrites":   {reason: "A re-apply that wrote nothing found no drift.", prev: "aaa", o: &Outcome{Commit: "aaa", Applied: true, Result: wrote(0)}},
		"SameWrites":     {reason: "A re-apply of the applied commit that wrote corrected drift.", prev: "aaa", o: &Outcome{Commit: "aaa", Applied: true, Result: wrote(2)}, want: true},
		"Restore":        {reason: "A targeted restore that wrote corrected drift.", prev: "aaa", o: &Outcome{Commit: "aaa", Restore: wrote(1)}, want: true},
		"RestoreNothing": {reason: "A targeted restore that wrote nothing did not.", prev: "aaa", o: &Outcome{Commit: "aaa", Restore: wrote(0)}},
		"Reapplied":      {reason: "Re-applying the last good render under a refused commit, with writes, corrected drift.", prev: "aaa", o: &Outcome{Commit: "ccc", Reapplied: "aaa", Result: wrote(3)}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := driftCorrected(tc.prev, tc.o); got != tc.want {
				t.Errorf("%s\ndriftCorrected: %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}
