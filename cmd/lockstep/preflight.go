package main

import (
	"github.com/spf13/pflag"

	"github.com/lockstep-gitops/lockstep/apply"
)

// preflightFlags are --preflight and --preflight-skew, shared by apply and
// agent (docs/design/apply.md#preflight-modes).
type preflightFlags struct {
	mode string
	skew int
}

func (f *preflightFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.mode, "preflight", string(apply.DefaultOptions().Preflight), "how new CRDs and new runtime objects are checked before a package's first write: local (CRDs in-process, with the Kubernetes validation lockstep carries, when the kube-apiserver runs that minor version, or runs 1.33 or later and the CRD uses nothing that release judges otherwise, else as server; runtime and RBAC objects rendered from lockstep's defaults against the authorizer, without a dry-run) or server (a server-side dry-run of every changed object)")
	fl.IntVar(&f.skew, "preflight-skew", 0, "with --preflight=local, validate every CRD in-process also when the kube-apiserver is up to this many minor versions older than lockstep's validation, without checking it for what the older release judges otherwise (a CRD the newer validation accepts but the server refuses then fails at its create, after other CRDs of the package were written)")
}

// set copies the flags into opts; opts.Validate checks them.
func (f *preflightFlags) set(opts *apply.Options) {
	opts.Preflight, opts.PreflightSkew = apply.PreflightMode(f.mode), f.skew
}
