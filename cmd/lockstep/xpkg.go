package main

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/spf13/cobra"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

func newXpkgCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "xpkg",
		Short: "Build and push Crossplane package images",
	}
	cmd.AddCommand(newXpkgBuildCommand(), newXpkgPushCommand())
	return cmd
}

func newXpkgBuildCommand() *cobra.Command {
	var out, tag string
	cmd := &cobra.Command{
		Use:   "build DIR -o FILE",
		Short: "Build a package image from a package directory into an image tarball",
		Long: `Build reads crossplane.yaml and every YAML file below DIR, checks them as
Crossplane's package parser would, and writes one image whose single layer,
annotated io.crossplane.xpkg: base, holds package.yaml. The same files always
give the same digest.`,
		Example: `  lockstep xpkg build examples/packages/provider-demo -o provider-demo.xpkg`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			img, pkg, err := buildPackage(args[0])
			if err != nil {
				return err
			}
			ref, err := name.NewTag(tag, name.StrictValidation)
			if err != nil {
				return fmt.Errorf("--tag: %w", err)
			}
			if err := tarball.WriteToFile(out, ref, img); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			d, _ := img.Digest()
			fmt.Fprintf(cmd.OutOrStdout(), "built %s %s (%d objects) %s -> %s\n", pkg.Meta.Kind, pkg.Meta.Name, len(pkg.Objects), d, out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "image tarball `FILE` to write")
	cmd.Flags().StringVar(&tag, "tag", "lockstep.local/package:latest", "image reference recorded in the tarball")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func newXpkgPushCommand() *cobra.Command {
	var reg registryFlags
	var insecure bool
	cmd := &cobra.Command{
		Use:   "push DIR REF",
		Short: "Build a package image from a package directory and push it",
		Example: `  lockstep xpkg push examples/packages/provider-demo registry.example.com/acme/provider-demo:v0.1.0
  lockstep xpkg push --insecure-registry 127.0.0.1:5000 ./pkg 127.0.0.1:5000/acme/pkg:v1.0.0`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			img, pkg, err := buildPackage(args[0])
			if err != nil {
				return err
			}
			o := reg.options()
			ref, err := o.ParseReference(args[1])
			if err != nil {
				return err
			}
			if insecure {
				o.InsecureRegistries = append(o.InsecureRegistries, ref.Context().RegistryStr())
				if ref, err = o.ParseReference(args[1]); err != nil {
					return err
				}
			}
			ropts, err := o.RemoteOptions(cmd.Context())
			if err != nil {
				return err
			}
			d, err := xpkg.Push(cmd.Context(), img, ref, ropts...)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pushed %s %s to %s@%s\n", pkg.Meta.Kind, pkg.Meta.Name, ref.Name(), d)
			return nil
		},
	}
	reg.registerPush(cmd)
	// --insecure predates the shared --insecure-registry; it stays, hidden
	// and warning, so old scripts keep working.
	cmd.Flags().BoolVar(&insecure, "insecure", false, "push to REF's registry over plain HTTP (deprecated: use --insecure-registry HOST)")
	_ = cmd.Flags().MarkDeprecated("insecure", "use --insecure-registry HOST, the flag every registry command takes")
	return cmd
}

// buildPackage builds the image for dir and parses it back, so a package that
// Crossplane would refuse is never written or pushed.
func buildPackage(dir string) (img v1.Image, pkg *xpkg.Package, err error) {
	img, err = xpkg.Build(dir)
	if err != nil {
		return nil, nil, err
	}
	pkg, err = xpkg.FromImage(img)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	return img, pkg, nil
}
