// Package e2e runs lockstep beside a real Crossplane: the lockstep binary,
// built from this module, against the test control plane (envtest) with
// kube-controller-manager, kube-scheduler and kwok playing the rest of a
// cluster (envtest.Workloads), and Crossplane core and its RBAC manager
// started as the Helm chart starts them (envtest.StartCrossplane). Packages
// come from the upstream packages under $LOCKSTEP_TESTDATA/packages,
// pushed to an in-process OCI registry that both lockstep and Crossplane
// pull from through an ImageConfig rewrite.
//
// What is not real: no container runs. A provider's or function's pod
// becomes Ready on kwok's simulated node, so a provider never reconciles a
// managed resource and a function never answers Crossplane's function
// runner.
//
// The tests run one at a time: Crossplane's RBAC manager binds :8080.
// They skip with a message when `make testbin` has not built Crossplane
// (and CI is unset), and when $LOCKSTEP_TESTDATA is unset.
package e2e
