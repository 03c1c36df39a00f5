package agent

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Metrics are the agent's Prometheus metrics, all prefixed lockstep_.
type Metrics struct {
	// ReconcileDuration is the duration of each reconcile in seconds, by
	// result (success, stalled, failed).
	ReconcileDuration *prometheus.HistogramVec
	// LastAppliedTimestamp is when the last good commit was applied, in
	// Unix seconds; an idle reconcile (Outcome.Idle), which found it still
	// applied, moves it too, while the Sync's lastAppliedTime keeps the
	// last full apply's (docs/design/agent.md#the-agents-steady-state).
	LastAppliedTimestamp prometheus.Gauge
	// Packages counts the applied packages by health (kstatus status).
	Packages *prometheus.GaugeVec
	// RegistryRequests counts registry requests by kind (HEAD, tags,
	// manifest, blob, other).
	RegistryRequests *prometheus.CounterVec
	// APIRequests counts Kubernetes API requests by HTTP method and whether
	// they were server-side dry-runs.
	APIRequests *prometheus.CounterVec
	// Errors counts failed reconcile steps by step name.
	Errors *prometheus.CounterVec
	// UpdatePolls is the number of scheduled registry polls since the
	// agent started, by result (succeeded, failed).
	UpdatePolls *prometheus.GaugeVec
	// Conditions is 1 for each condition the Sync has now, by type
	// (Ready, Reconciling, Stalled), status and reason, as the Sync's
	// status says it after each reconcile; a condition that changed
	// leaves no series behind (Flux's former gotk_reconcile_condition).
	Conditions *prometheus.GaugeVec
	// DriftCorrections counts reconciles that wrote to the cluster to
	// bring an already applied commit back (a targeted restore, or a
	// re-apply of the same commit that sent writes): someone or something
	// changed what lockstep applied.
	DriftCorrections prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ReconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lockstep_reconcile_duration_seconds",
			Help:    "Duration of one reconcile, by result.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
		}, []string{"result"}),
		LastAppliedTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "lockstep_last_applied_timestamp_seconds",
			Help: "Unix time the last good commit was applied.",
		}),
		Packages: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockstep_packages",
			Help: "Applied packages by health.",
		}, []string{"health"}),
		RegistryRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_registry_requests_total",
			Help: "Registry requests by kind.",
		}, []string{"kind"}),
		APIRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_api_requests_total",
			Help: "Kubernetes API requests by method and dry-run.",
		}, []string{"method", "dry_run"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockstep_reconcile_errors_total",
			Help: "Failed reconcile steps by step.",
		}, []string{"step"}),
		UpdatePolls: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockstep_update_polls",
			Help: "Scheduled registry polls since the agent started, by result.",
		}, []string{"result"}),
		Conditions: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "lockstep_sync_condition",
			Help: "1 for each condition of the Sync, by type, status and reason.",
		}, []string{"type", "status", "reason"}),
		DriftCorrections: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockstep_drift_corrections_total",
			Help: "Reconciles that wrote to bring an applied commit back.",
		}),
	}
	reg.MustRegister(m.ReconcileDuration, m.LastAppliedTimestamp, m.Packages, m.RegistryRequests, m.APIRequests, m.Errors, m.UpdatePolls,
		m.Conditions, m.DriftCorrections)
	return m
}

// WrapTransport returns rt wrapped to count every API request in
// APIRequests. Use it as rest.Config.WrapTransport.
func (m *Metrics) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		dry := r.URL.Query().Get("dryRun") != ""
		m.APIRequests.WithLabelValues(r.Method, strconv.FormatBool(dry)).Inc()
		return rt.RoundTrip(r)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// observe records one reconcile's duration and result.
func (m *Metrics) observe(start time.Time, result string) {
	m.ReconcileDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
}

// setConditions makes Conditions the Sync's conditions conds.
func (m *Metrics) setConditions(conds []metav1.Condition) {
	m.Conditions.Reset()
	for _, c := range conds {
		m.Conditions.WithLabelValues(c.Type, string(c.Status), c.Reason).Set(1)
	}
}

// driftCorrected reports whether o wrote to bring back a commit that was
// already applied (prevApplied, the Sync's last applied commit before o):
// a targeted restore that wrote, a re-apply of a refused commit's last
// good render that wrote, or an apply of the same commit that wrote.
func driftCorrected(prevApplied string, o *Outcome) bool {
	switch {
	case o == nil:
		return false
	case o.Restore != nil:
		return o.Restore.Writes > 0
	case o.Result == nil || o.Result.Writes == 0:
		return false
	case o.Reapplied != "":
		return true
	default:
		return o.Applied && o.Commit != "" && o.Commit == prevApplied
	}
}
