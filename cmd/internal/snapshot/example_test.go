package snapshot_test

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
)

// ExampleConfig_BindFlags binds the pipeline's settings to a command's
// flags once; what the command line gives is in the Config that Load
// takes (snapshot.WithConfig). The MRD conversion stays nil, the lock's
// decision, until the flag is given.
func ExampleConfig_BindFlags() {
	cfg := snapshot.DefaultConfig()
	fs := pflag.NewFlagSet("render", pflag.ContinueOnError)
	cfg.BindFlags(fs)
	fmt.Println(cfg.Instance, cfg.Namespace, cfg.ExpectMRDConversion == nil)

	if err := fs.Parse([]string{"--instance", "edge", "--" + snapshot.MRDConversionFlag + "=false"}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Instance, *cfg.ExpectMRDConversion)
	// Output:
	// lockstep crossplane-system true
	// edge false
}
