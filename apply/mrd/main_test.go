package mrd_test

import (
	"os"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// TestMain stops the shared test control plane when the tests end.
func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }
