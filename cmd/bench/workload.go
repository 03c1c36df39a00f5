package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/lockstep-gitops/lockstep/cmd/internal/snapshot"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/lockfile"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/sources/oci"
)

// Package states of a workload: what is declared in Git for each scenario.
const (
	stateInstall   = "install"   // cold install and no-op
	stateUpgrade   = "upgrade"   // one package at a newer version
	stateUninstall = "uninstall" // nothing declared
)

// Scenarios, in the order they run on one cluster.
var scenarios = []string{"cold install", "no-op", "upgrade", "uninstall"}

// pkgVersion is one declared package at one version.
type pkgVersion struct {
	Kind crossplane.Kind
	// Name is the package object's name (the declaration's metadata.name).
	Name string
	// Source is the repository as declared, for example
	// xpkg.upbound.io/upbound/provider-aws; an ImageConfig sends it to the
	// harness's registry.
	Source string
	// Tag is the version.
	Tag string
	// Dir is the package root to build.
	Dir string
}

// workload is a set of packages installed, upgraded and removed together.
type workload struct {
	// Key names the workload in flags and JSON: monolith, family, small.
	Key string
	// Title describes it in the table.
	Title string
	// Install are the declared packages of the cold install and the no-op;
	// Upgrade those after the upgrade.
	Install, Upgrade []pkgVersion
	// Upgraded is the package the upgrade changes.
	Upgraded string
	// Prefix is the registry prefix of every source ("xpkg.upbound.io/"),
	// which an ImageConfig rewrites to the harness's registry.
	Prefix string
	// Synthetic says the packages were generated (no $LOCKSTEP_TESTDATA).
	Synthetic bool
	// Notes are printed under the workload's table.
	Notes []string
	// MRDs renders and applies with Crossplane v2's CRD-to-MRD conversion
	// on: the lock records it (lockstep lock
	// --enable-custom-to-managed-resource-conversion=true) and the run asserts
	// it (snapshot.ExpectMRDConversion).
	MRDs bool
	// Activate, when set, is the spec.activate of a
	// ManagedResourceActivationPolicy declared beside the packages.
	Activate []string
	// ExpectActive is how many MRDs the policy must activate in the
	// install state (prepare checks it); -1 for all of them, 0 unchecked.
	ExpectActive int
}

// prepared is a workload built, pushed, locked and rendered.
type prepared struct {
	*workload
	// DeclDirs maps each state to a declarations directory with its
	// lockstep.lock.
	DeclDirs map[string]string
	// ObjectFiles are the baselines' inputs, JSON lines of bound objects:
	// "install" and "upgrade" (every object lockstep renders in that state,
	// after the Crossplane namespace), "upgrade-new" (the upgraded
	// package's objects alone, for the floor) and "uninstall" (everything
	// to delete).
	ObjectFiles map[string]string
	// Objects counts, per state, every object lockstep applies (records,
	// payload, runtime, RBAC).
	Objects map[string]int
	// BaselineObjects counts the objects per ObjectFiles key.
	BaselineObjects map[string]int
	// CRDs are the CRD names per state.
	CRDs map[string][]string
	// PackageYAML is the largest package.yaml of the cold install, in
	// bytes.
	PackageYAML int64
	// PackageYAMLName names that package.
	PackageYAMLName string
	// UpgradedRepo is the registry repository of the upgraded package.
	UpgradedRepo string
}

// repoOf returns the registry repository of a source: the source without
// the workload prefix.
func (w *workload) repoOf(source string) string { return strings.TrimPrefix(source, w.Prefix) }

// prepare builds every package version of w, pushes it to reg, writes a
// declarations directory per state under dir, locks each with a cache of its
// own (so the measured runs start cold), and writes the baselines' objects.
func prepare(ctx context.Context, w *workload, reg *registryServer, dir string) (*prepared, error) {
	p := &prepared{workload: w, DeclDirs: map[string]string{}, ObjectFiles: map[string]string{},
		Objects: map[string]int{}, BaselineObjects: map[string]int{}, CRDs: map[string][]string{}}
	if err := p.push(ctx, reg); err != nil {
		return nil, err
	}
	outputs, err := p.lockStates(ctx, reg, dir)
	if err != nil {
		return nil, err
	}
	if err := p.writeBaselines(outputs, dir); err != nil {
		return nil, err
	}
	return p, nil
}

// push builds every package version of the workload once and pushes it
// to reg, and records the largest package.yaml installed and the
// upgraded package's repository.
func (p *prepared) push(ctx context.Context, reg *registryServer) error {
	w := p.workload
	pushed := map[string]bool{}
	installed := map[string]bool{}
	for _, v := range w.Install {
		installed[v.Source+":"+v.Tag] = true
	}
	for _, v := range append(append([]pkgVersion(nil), w.Install...), w.Upgrade...) {
		key := v.Source + ":" + v.Tag
		if pushed[key] {
			continue
		}
		pushed[key] = true
		img, err := xpkg.Build(v.Dir)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if _, err := reg.push(ctx, img, w.repoOf(v.Source), v.Tag); err != nil {
			return fmt.Errorf("push %s: %w", key, err)
		}
		n, err := packageYAMLSize(img)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if installed[key] && n > p.PackageYAML {
			p.PackageYAML, p.PackageYAMLName = n, v.Name+" "+v.Tag
		}
		if v.Name == w.Upgraded {
			p.UpgradedRepo = w.repoOf(v.Source)
		}
	}

	return nil
}

// lockStates writes a declarations directory per state under dir, locks
// and renders each with one cache (lock-cache; the measured runs have
// caches of their own, so they start cold), and counts the objects and
// CRDs of each state; the install state must render the MRDs and
// activations the workload is about (checkActivation).
func (p *prepared) lockStates(ctx context.Context, reg *registryServer, dir string) (map[string]*render.Output, error) {
	w := p.workload
	lockCache, err := oci.NewCache(filepath.Join(dir, "lock-cache"))
	if err != nil {
		return nil, err
	}
	opts := oci.Options{InsecureRegistries: []string{reg.Host}}
	states := map[string][]pkgVersion{stateInstall: w.Install, stateUpgrade: w.Upgrade, stateUninstall: nil}
	outputs := map[string]*render.Output{}
	for _, state := range []string{stateInstall, stateUpgrade, stateUninstall} {
		d := filepath.Join(dir, "git", state)
		if err := writeDeclarations(d, w.Prefix, reg.Host, states[state], w.Activate); err != nil {
			return nil, err
		}
		out, err := lockAndRender(ctx, d, lockCache, opts, reg.Host, w.MRDs)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", w.Key, state, err)
		}
		p.DeclDirs[state] = d
		outputs[state] = out
		mrds, active := p.count(state, out)
		if state == stateInstall {
			if err := checkActivation(w, mrds, active); err != nil {
				return nil, err
			}
		}
	}
	return outputs, nil
}

// count records the objects and CRDs of a state's render output (with the
// CRDs of its Active MRDs), and returns how many MRDs it renders and how
// many of them are Active.
func (p *prepared) count(state string, out *render.Output) (mrds, active int) {
	p.Objects[state] = len(out.Objects())
	for _, o := range out.Objects() {
		if o.Kind == "CustomResourceDefinition" {
			p.CRDs[state] = append(p.CRDs[state], o.Name)
		}
	}
	for _, po := range out.Packages {
		mrds += len(po.Revision.MRDs)
		active += len(po.Revision.ManagedCRDs)
		p.Objects[state] += len(po.Revision.ManagedCRDs)
		for _, o := range po.Revision.ManagedCRDs {
			p.CRDs[state] = append(p.CRDs[state], o.Name)
		}
	}
	return mrds, active
}

// writeBaselines writes the baselines' object files under dir.
func (p *prepared) writeBaselines(outputs map[string]*render.Output, dir string) error {
	w := p.workload
	// The baselines' inputs: every object lockstep renders, bound as
	// lockstep binds it; the namespace first where objects are applied.
	var upgradedPkg *render.PackageOutput
	for _, po := range outputs[stateUpgrade].Packages {
		if po.Name == w.Upgraded {
			upgradedPkg = po
		}
	}
	if upgradedPkg == nil {
		return fmt.Errorf("%s: the upgraded package %s is not in the render output", w.Key, w.Upgraded)
	}
	inputs := []struct {
		key       string
		namespace bool
		parts     []objectSet
	}{
		{"install", true, []objectSet{{outputs[stateInstall].Packages, ""}}},
		{"upgrade", true, []objectSet{{outputs[stateUpgrade].Packages, w.Upgraded}}},
		{"upgrade-new", true, []objectSet{{[]*render.PackageOutput{upgradedPkg}, w.Upgraded}}},
		// Uninstall deletes everything the install and the upgrade applied,
		// but not the namespace (lockstep keeps it too).
		{"uninstall", false, []objectSet{{outputs[stateUpgrade].Packages, w.Upgraded}, {outputs[stateInstall].Packages, ""}}},
	}
	for _, in := range inputs {
		path := filepath.Join(dir, "objects-"+in.key+".jsonl")
		n, err := writeObjects(path, in.namespace, in.parts)
		if err != nil {
			return fmt.Errorf("%s, %s objects: %w", w.Key, in.key, err)
		}
		p.ObjectFiles[in.key], p.BaselineObjects[in.key] = path, n
	}
	return nil
}

// checkActivation returns an error when the install state of w did not
// render the MRDs and activations the workload is about: none without
// conversion, and with it ExpectActive Active MRDs (-1: every one).
func checkActivation(w *workload, mrds, active int) error {
	switch {
	case !w.MRDs && mrds > 0:
		return fmt.Errorf("%s: %d MRDs rendered without conversion", w.Key, mrds)
	case w.MRDs && mrds == 0:
		return fmt.Errorf("%s: conversion on but no MRD rendered (is the lock's crossplaneVersion v2?)", w.Key)
	case w.ExpectActive == -1 && active != mrds:
		return fmt.Errorf("%s: %d of %d MRDs Active, want all", w.Key, active, mrds)
	case w.ExpectActive > 0 && active != w.ExpectActive:
		return fmt.Errorf("%s: %d of %d MRDs Active, want %d", w.Key, active, mrds, w.ExpectActive)
	}
	return nil
}

// packageYAMLSize returns the size of an image's package.yaml in bytes.
func packageYAMLSize(img v1.Image) (int64, error) {
	rc, err := xpkg.ExtractPackageYAML(img)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}

// mirrorImageConfig is the YAML of the ImageConfig that pulls every
// source under prefix from the harness's registry at host, as a platform
// team with a mirror would.
func mirrorImageConfig(prefix, host string) string {
	return fmt.Sprintf(`apiVersion: pkg.crossplane.io/v1beta1
kind: ImageConfig
metadata:
  name: bench-mirror
spec:
  matchImages:
  - type: Prefix
    prefix: %s
  rewriteImage:
    prefix: %s/
`, prefix, host)
}

// writeDeclarations writes the declarations of pkgs into dir, plus an
// ImageConfig that pulls every source under prefix from the harness's
// registry at host, as a platform team with a mirror would, and, when
// activate is set and a package is declared, a
// ManagedResourceActivationPolicy with that spec.activate beside them.
func writeDeclarations(dir, prefix, host string, pkgs []pkgVersion, activate []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "mirror.yaml"), []byte(mirrorImageConfig(prefix, host)), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	for i, v := range pkgs {
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "apiVersion: pkg.crossplane.io/v1\nkind: %s\nmetadata:\n  name: %s\nspec:\n  package: %s:%s\n", v.Kind, v.Name, v.Source, v.Tag)
	}
	if len(activate) > 0 && len(pkgs) > 0 {
		fmt.Fprintf(&b, "---\napiVersion: %s/%s\nkind: %s\nmetadata:\n  name: %s\nspec:\n  activate:\n",
			crossplane.APIExtensionsGroup, declarations.ActivationPolicyVersion, crossplane.GroupKindMRAP.Kind, mrdActivationPolicy)
		for _, a := range activate {
			fmt.Fprintf(&b, "  - %q\n", a)
		}
	}
	return os.WriteFile(filepath.Join(dir, "packages.yaml"), []byte(b.String()), 0o644)
}

// lockAndRender resolves the declarations in dir into dir/lockstep.lock, as
// `lockstep lock --crossplane-version v2.1.0
// --enable-custom-to-managed-resource-conversion=MRDS` does, and renders
// the lock for the baselines through the snapshot stage, as `lockstep
// render` does.
func lockAndRender(ctx context.Context, dir string, cache *oci.Cache, opts oci.Options, host string, mrds bool) (*render.Output, error) {
	decls, err := snapshot.LoadDir(ctx, dir, snapshot.AllowMissingLock(), snapshot.AllowStale())
	if err != nil {
		return nil, err
	}
	ics, err := declarations.CrossplaneImageConfigs(decls.Declarations.ImageConfigs)
	if err != nil {
		return nil, err
	}
	client, err := oci.NewClient(opts, cache, ics)
	if err != nil {
		return nil, err
	}
	res, err := lockfile.NewResolver(client, lockfile.Options{CrossplaneVersion: "v2.1.0", CustomToManagedResourceConversion: new(mrds), InsecureRegistries: []string{host}}).Resolve(ctx, decls.Declarations, nil)
	if err != nil {
		return nil, err
	}
	if err := lockfile.WriteFile(filepath.Join(dir, lockfile.FileName), res.Lock); err != nil {
		return nil, err
	}
	snap, err := snapshot.LoadDir(ctx, dir,
		snapshot.WithFetcher(func([]pkgv1beta1.ImageConfig) (snapshot.Fetcher, error) { return client, nil }),
		snapshot.WithConfig(benchConfig([]string{host}, mrds)))
	if err != nil {
		return nil, err
	}
	return snap.Output()
}

// objectSet is the rendered packages of one state; upgraded names the
// package whose revision is the second one (spec.revision 2).
type objectSet struct {
	pkgs     []*render.PackageOutput
	upgraded string
}

// benchBind returns o bound as lockstep binds it for an active revision
// (spec.revision 2 for the upgraded package, else 1), with made-up UIDs
// and the CA bundle ca, as JSON.
func benchBind(o *render.Object, ca []byte, upgraded bool) ([]byte, error) {
	b := render.Binding{UIDs: map[render.Reference]types.UID{}, CABundle: ca, Revision: 1}
	if upgraded {
		b.Revision = 2
	}
	if o.Controller != nil {
		b.UIDs[*o.Controller] = fakeUID(o.Controller.String())
	}
	for _, r := range o.Owners {
		b.UIDs[r] = fakeUID(r.String())
	}
	u, err := o.Bind(b)
	if err != nil {
		return nil, err
	}
	return u.MarshalJSON()
}

// writeObjects writes to path, as JSON lines, every object of the sets
// (each object once, the first set winning) and the CRDs of their Active
// MRDs (render.RevisionOutput.ManagedCRDs), bound as lockstep binds it for
// an active revision: owner references, spec.revision (1, or 2 for the
// upgraded package), REVISION_UID, CA bundles, with made-up UIDs and a
// throwaway CA, since the baselines create objects but run no package
// manager. With namespace, the Crossplane namespace comes first. It
// returns the number of objects.
func writeObjects(path string, namespace bool, sets []objectSet) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	ca, err := benchCABundle()
	if err != nil {
		return 0, err
	}
	n := 0
	if namespace {
		fmt.Fprintf(w, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`+"\n", benchNamespace)
		n++
	}
	seen := map[string]bool{}
	for _, set := range sets {
		for _, po := range set.pkgs {
			for _, o := range append(po.Objects(), po.Revision.ManagedCRDs...) {
				if seen[o.ID()] {
					continue
				}
				seen[o.ID()] = true
				j, err := benchBind(o, ca, po.Name == set.upgraded)
				if err != nil {
					return 0, err
				}
				// MarshalJSON ends with a newline already.
				w.Write(bytes.TrimSpace(j))
				w.WriteByte('\n')
				n++
			}
		}
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return n, f.Close()
}

// fakeUID returns a UID made from s, stable across runs.
func fakeUID(s string) types.UID {
	h := sha256.Sum256([]byte(s))
	x := hex.EncodeToString(h[:16])
	return types.UID(x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32])
}

// benchConfig is the pipeline configuration of every benchmark render: the
// benchmark's namespace and instance, insecure the registries reached over
// plain HTTP, and the lock expected to decide the MRD conversion as mrds.
func benchConfig(insecure []string, mrds bool) snapshot.Config {
	return snapshot.Config{Namespace: benchNamespace, Instance: benchInstance, InsecureRegistries: insecure, ExpectMRDConversion: &mrds}
}
