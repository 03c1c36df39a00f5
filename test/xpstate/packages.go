package xpstate

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// Package is one package version the captured scenarios installed: the
// folder of its source under $LOCKSTEP_TESTDATA/packages, the repository
// and tag Crossplane pulled (with the registry address left out), and the
// first 12 hex digits of the digest, which end the revision's name.
type Package struct {
	Folder     string
	Repository string
	Tag        string
	Digest12   string
}

// Packages are the package versions of the scenarios, as in the table
// "Registry and image rewriting" of the capture's README.md.
var Packages = []Package{
	{Folder: "provider-nop-v0.4.0", Repository: "crossplane-contrib/provider-nop", Tag: "v0.4.0", Digest12: "47fa8bc932a3"},
	{Folder: "provider-nop-v0.2.1", Repository: "crossplane-contrib/provider-nop", Tag: "v0.2.1", Digest12: "98189b406ff0"},
	{Folder: "function-auto-ready-v0.7.0", Repository: "crossplane-contrib/function-auto-ready", Tag: "v0.7.0", Digest12: "0ab7dc585b02"},
	{Folder: "function-auto-ready-v0.2.1", Repository: "crossplane-contrib/function-auto-ready", Tag: "v0.2.1", Digest12: "caa751519d22"},
	{Folder: "provider-kubernetes-v0.18.0", Repository: "crossplane-contrib/provider-kubernetes", Tag: "v0.18.0", Digest12: "9a0a3cd84f1f"},
	{Folder: "provider-kubernetes-v1.2.1", Repository: "crossplane-contrib/provider-kubernetes", Tag: "v1.2.1", Digest12: "e70334b7798e"},
	{Folder: "function-patch-and-transform-v0.8.2", Repository: "crossplane-contrib/function-patch-and-transform", Tag: "v0.8.2", Digest12: "9d4e77074e1b"},
	{Folder: "function-patch-and-transform-v0.10.8", Repository: "crossplane-contrib/function-patch-and-transform", Tag: "v0.10.8", Digest12: "64021f7611b3"},
	{Folder: "function-kcl-v0.8.0", Repository: "crossplane-contrib/function-kcl", Tag: "v0.8.0", Digest12: "fcf666ce9a75"},
	{Folder: "provider-family-aws-v2.6.0", Repository: "upbound/provider-family-aws", Tag: "v2.6.0", Digest12: "03fcca327fa6"},
	{Folder: "provider-aws-ec2-v2.6.0", Repository: "upbound/provider-aws-ec2", Tag: "v2.6.0", Digest12: "6be24336d15c"},
	{Folder: "configuration-getting-started-v0.2.0", Repository: "upbound/configuration-getting-started", Tag: "v0.2.0", Digest12: "54add1008252"},
}

// PushPackages builds each package of pkgs from its folder under
// $LOCKSTEP_TESTDATA/packages with xpkg.Build (what `lockstep xpkg push`
// runs, and what built the captured images) and pushes it to r as
// <Repository>:<Tag>. It returns the pushed digests ("sha256:…") by
// Folder. It skips tb when LOCKSTEP_TESTDATA is unset and fails it when a
// build or push fails. Because the builds are reproducible, the digests are
// the ones the captured revision names end in.
func PushPackages(tb testing.TB, r *registry.Registry, pkgs ...Package) map[string]string {
	tb.Helper()
	td := os.Getenv("LOCKSTEP_TESTDATA")
	if td == "" {
		tb.Skip("LOCKSTEP_TESTDATA is unset: no upstream packages to push (see CONTRIBUTING.md)")
	}
	out := map[string]string{}
	for _, p := range pkgs {
		img, err := xpkg.Build(filepath.Join(td, "packages", p.Folder))
		if err != nil {
			tb.Fatalf("build %s: %v", p.Folder, err)
		}
		h, err := xpkg.Push(context.Background(), img, r.Ref(tb, p.Repository+":"+p.Tag), r.RemoteOptions()...)
		if err != nil {
			tb.Fatalf("push %s: %v", p.Folder, err)
		}
		out[p.Folder] = h.String()
	}
	return out
}
