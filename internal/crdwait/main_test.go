package crdwait

import (
	"os"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// TestMain stops the shared test control plane when the tests end; without
// it, its etcd and kube-apiserver outlived the test binary.
func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }
