package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// buildImage builds lockstep's image for this machine with cmd/image (what
// make image runs), at the version bin reports, pushes it to the registry
// at host, signs it with a key generated in work (as cosign sign --key
// does) and returns it by digest.
func buildImage(ctx context.Context, bin, host, work string) (string, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	keyPEM, err := cryptoutils.MarshalPrivateKeyToPEM(priv)
	if err != nil {
		return "", err
	}
	pubPEM, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		return "", err
	}
	keyFile := filepath.Join(work, "image-signing.key")
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(work, "image-signing.pub"), pubPEM, 0o644); err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, bin, "version", "-o", "json").Output()
	if err != nil {
		return "", fmt.Errorf("lockstep version: %w", err)
	}
	var v struct{ Version string }
	if err := json.Unmarshal(out, &v); err != nil {
		return "", fmt.Errorf("lockstep version -o json: %w", err)
	}
	args := []string{"run", "./cmd/image", "--repo", host + "/lockstep", "--insecure", "--version", v.Version, "--platform", "linux/" + runtime.GOARCH,
		"--sign-key", keyFile}
	fmt.Printf("$ go %s\n", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the image: %w", err)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// deployPinned renders examples/deploy with kustomize's images transformer
// pinning the agent's image to image (REPO@sha256:...), as a platform team's
// overlay does, server-side applies it and prints the Deployment's image.
func deployPinned(ctx context.Context, env *envtest.Env, image string) error {
	repo, digest, ok := strings.Cut(image, "@")
	if !ok {
		return fmt.Errorf("image %q is not pinned by digest", image)
	}
	// kustomize takes no absolute paths: the base and the overlay go
	// into an in-memory file system, as /base and /overlay.
	fs := filesys.MakeFsInMemory()
	entries, err := os.ReadDir(filepath.Join("examples", "deploy"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("examples", "deploy", e.Name()))
		if err != nil {
			return err
		}
		if err := fs.WriteFile("/base/"+e.Name(), b); err != nil {
			return err
		}
	}
	k := kustypes.Kustomization{
		Resources: []string{"../base"},
		Images:    []kustypes.Image{{Name: "ghcr.io/lockstep-gitops/lockstep", NewName: repo, Digest: digest}},
	}
	b, err := yaml.Marshal(k)
	if err != nil {
		return err
	}
	if err := fs.WriteFile("/overlay/kustomization.yaml", b); err != nil {
		return err
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/overlay")
	if err != nil {
		return fmt.Errorf("kustomize build of examples/deploy: %w", err)
	}
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("lockstep-demo"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		if u.GetKind() == "Deployment" {
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			if len(cs) > 0 {
				fmt.Printf("Deployment %s/%s: image %v\n", u.GetNamespace(), u.GetName(), cs[0].(map[string]any)["image"])
			}
		}
	}
	return nil
}
