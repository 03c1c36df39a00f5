package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/sources/bundle"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

func newBundleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bundle",
		Short: "Carry the locked packages into an air-gapped cluster",
		Long: `An air-gapped install in three steps (docs/supply-chain.md#air-gapped-installs):
bundle create writes every package a lock pins into one OCI image layout
archive where the registries are reachable; bundle load fills the package
cache that render, apply and the agent read (--cache-dir), so packages with
packagePullPolicy: Never, and every other cached package, need no registry;
bundle push copies the bundle to a mirror registry that an ImageConfig's
rewriteImage then points at.`,
	}
	cmd.AddCommand(newBundleCreateCommand(), newBundleLoadCommand(), newBundlePushCommand())
	return cmd
}

func newBundleCreateCommand() *cobra.Command {
	var (
		reg      registryFlags
		dir, out string
	)
	cmd := &cobra.Command{
		Use:   "create [--dir DIR] -o FILE",
		Short: "Write every package of a lock into one OCI image layout archive",
		Long: `create reads DIR's declarations and lockstep.lock (a stale lock is refused),
pulls every locked package by its digest, complete (every platform, config
and layer), from where the ImageConfigs send it, and writes them into FILE,
a tar archive of an OCI image layout; each manifest is named by the
annotation org.opencontainers.image.ref.name = source:tag@digest. Each
package's cosign signatures (the sha256-<hex>.sig image, or its OCI 1.1
referrers) go with it, so an ImageConfig's spec.verification holds in the
air-gapped cluster; a package an ImageConfig requires to be signed but
that has no signature is bundled and pointed out.`,
		Example: `  lockstep bundle create --dir clusters/prod -o prod.bundle.tar`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			s, err := snapshot.LoadDir(ctx, dir, snapshot.WithInsecureRegistries(reg.insecure))
			var stale *snapshot.StaleLockError
			if errors.As(err, &stale) {
				return &exitError{code: exitStale, err: err}
			}
			if err != nil {
				return err
			}
			cache, err := oci.NewCache(reg.cacheDir)
			if err != nil {
				return err
			}
			client, err := newRegistryClient(reg.options(), cache, s.Declarations.ImageConfigs)
			if err != nil {
				return err
			}
			var refs []string
			for _, e := range s.Lock.Packages {
				r := e.Source
				if e.Version != "" {
					r += ":" + e.Version
				}
				refs = append(refs, r+"@"+e.Digest)
			}
			entries, err := bundle.Write(ctx, client, refs, out)
			if err != nil {
				return err
			}
			for _, e := range entries {
				fmt.Fprintf(cmd.OutOrStdout(), "bundled %s%s\n", e.Ref, bundledSignatures(e))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d packages written to %s; %s\n", len(entries), out, client.Stats())
			return nil
		},
	}
	reg.register(cmd)
	cmd.Flags().StringVar(&dir, "dir", ".", "directory of declarations and lockstep.lock")
	cmd.Flags().StringVarP(&out, "output", "o", "", "bundle `FILE` to write")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func newBundleLoadCommand() *cobra.Command {
	var cacheDir string
	cmd := &cobra.Command{
		Use:   "load FILE [--cache-dir DIR]",
		Short: "Fill the package cache from a bundle, without a registry",
		Long: `load writes every package of the bundle FILE into the package cache
--cache-dir, verifying each blob against its digest, exactly as a pull
would, and their cosign signatures; render, apply and the agent (with the
same --cache-dir) then read and verify them without contacting a
registry. It sends no network request.`,
		Example: `  lockstep bundle load prod.bundle.tar --cache-dir /var/cache/lockstep`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := bundle.Open(args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			cache, err := oci.NewCache(cacheDir)
			if err != nil {
				return err
			}
			if err := b.Load(cache); err != nil {
				return err
			}
			for _, e := range b.Entries {
				fmt.Fprintf(cmd.OutOrStdout(), "loaded %s%s\n", e.Ref, bundledSignatures(e))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d packages loaded into %s\n", len(b.Entries), cache.Dir())
			return nil
		},
	}
	cmd.Flags().StringVar(&cacheDir, "cache-dir", defaultCacheDir(), "directory of the content-addressed package cache")
	return cmd
}

// bundledSignatures describes the signatures and attestations e carries
// for a bundle command's line: the number of their manifests, or a
// warning when an ImageConfig requires a signature and there is none.
func bundledSignatures(e bundle.Entry) string {
	switch n := len(e.Signatures); {
	case e.RequiresSignature != "" && !e.Signed:
		return fmt.Sprintf(" (WARNING: no signature, and ImageConfig %s requires one: installing it from this bundle will be refused)", e.RequiresSignature)
	case n > 0:
		return fmt.Sprintf(" (%d %s)", n, plural(n, "signature or attestation manifest", "signature and attestation manifests"))
	}
	return ""
}

func newBundlePushCommand() *cobra.Command {
	var (
		reg registryFlags
		to  string
	)
	cmd := &cobra.Command{
		Use:   "push FILE --to PREFIX",
		Short: "Copy a bundle's packages to a mirror registry",
		Long: `push copies every package of the bundle FILE to the mirror PREFIX (a
registry host and optional path): a package whose source is REGISTRY/PATH
goes to PREFIX/PATH under its locked tag (by digest when it has none), and
the mirror must answer with the locked digest; its signatures go next to
it, as the sha256-<hex>.sig image or as referrers, as they were found. Point an ImageConfig at the
mirror (matchImages prefix REGISTRY/, rewriteImage prefix PREFIX/) and lock,
render, apply and the agent pull from it while the lock keeps the original
sources. Credentials for the mirror come from --registry-config.`,
		Example: `  lockstep bundle push prod.bundle.tar --to mirror.internal:5000/xpkg`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := bundle.Open(args[0])
			if err != nil {
				return err
			}
			defer b.Close()
			pushed, err := b.Push(cmd.Context(), reg.options(), to)
			for _, p := range pushed {
				fmt.Fprintf(cmd.OutOrStdout(), "pushed %s\n", p)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d packages pushed to %s\n", len(pushed), to)
			return nil
		},
	}
	reg.registerPush(cmd)
	cmd.Flags().StringVar(&to, "to", "", "mirror `PREFIX`: registry host and optional path")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}
