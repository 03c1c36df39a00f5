// Package agent keeps a cluster equal to a Git repository: on every new
// commit, and on every interval to correct drift, it runs one reconcile in
// the named steps docs/design/agent.md#the-agent lists (lockstep never resolves
// versions in the cluster: the lock is checked, not resolved) and reports
// the outcome on a Sync object (lockstep.io/v1alpha1) that kubectl shows,
// with Flux-style Ready, Reconciling and Stalled conditions, as Kubernetes
// Events, and as Prometheus metrics. A failed step leaves the last good state
// applied (docs/design.md#flux-kustomize).
//
// Run hosts the reconciles on a controller-runtime Manager
// (sigs.k8s.io/controller-runtime pkg/manager): leader election on a
// Lease, /healthz and /readyz, the /metrics server, a controller of the
// Sync that requeues after each interval, and the scheduled registry polls
// as a leader-only runnable.
package agent
