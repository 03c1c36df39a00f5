package agent_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lockstep-gitops/lockstep/cmd/internal/agent"
)

// The agent's metrics, registered with a registry of their own (the agent
// registers them with controller-runtime's, which its metrics endpoint
// serves). A series shows once it has a value.
func ExampleNewMetrics() {
	reg := prometheus.NewRegistry()
	m := agent.NewMetrics(reg)
	m.ReconcileDuration.WithLabelValues("success").Observe(1.5)
	m.Packages.WithLabelValues("healthy").Set(3)
	m.DriftCorrections.Inc()

	families, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range families {
		fmt.Printf("%s (%s): %d series\n", f.GetName(), f.GetType(), len(f.GetMetric()))
	}
	// Output:
	// lockstep_drift_corrections_total (COUNTER): 1 series
	// lockstep_last_applied_timestamp_seconds (GAUGE): 1 series
	// lockstep_packages (GAUGE): 1 series
	// lockstep_reconcile_duration_seconds (HISTOGRAM): 1 series
}
