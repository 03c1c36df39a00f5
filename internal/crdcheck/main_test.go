package crdcheck_test

import (
	"os"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }
