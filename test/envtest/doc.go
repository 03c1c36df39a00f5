// Package envtest starts the real control plane that lockstep's integration
// tests run against: etcd and kube-apiserver built by `make testbin` into
// bin/k8s, run through controller-runtime's envtest.
//
// KillAPIServer and RestartAPIServer crash kube-apiserver (SIGKILL) and
// bring it back on the same etcd data, port and certificates, for tests of
// what an API server lost in the middle of an apply leaves behind.
//
// There is no kubelet: Deployments never get pods here unless a test plays the
// kubelet's part.
package envtest
