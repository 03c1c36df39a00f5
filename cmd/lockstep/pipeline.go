package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/internal/declarations"
	"github.com/lockstep-gitops/lockstep/internal/lockfile"
	"github.com/lockstep-gitops/lockstep/internal/oci"
	"github.com/lockstep-gitops/lockstep/internal/render"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// renderFlags are the flags of every command that renders a declarations
// directory: render, apply and the agent.
type renderFlags struct {
	reg                registryFlags
	dir                string
	instance           string
	allowedPermissions string
}

func (f *renderFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.dir, "dir", ".", "directory of declarations and lockstep.lock")
	f.registerRender(fl)
}

// registerRender registers the rendering flags without --dir, for the agent,
// whose declarations come from --git-path.
func (f *renderFlags) registerRender(fl *pflag.FlagSet) {
	fl.StringVar(&f.instance, "instance", "lockstep", "name of this lockstep instance, recorded in a label on every object it renders")
	fl.StringVar(&f.allowedPermissions, "allowed-provider-permissions", "", "YAML `FILE` with a list of RBAC PolicyRules that v1-style providers may request with spec.controller.permissionRequests (default: none)")
}

// loaded is a declarations directory read, checked against its lock, and
// turned into render input with every locked package's contents.
type loaded struct {
	set   *declarations.Set
	lock  *lockfile.Lock
	input render.Input
	stats oci.Stats
}

// load reads dir, refuses a stale lock (lockstep never resolves versions at
// render or apply time), reads every locked package by digest (cache first),
// and returns the render input for namespace.
func (f *renderFlags) load(ctx context.Context, namespace string) (*loaded, error) {
	set, err := declarations.Load(f.dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(f.dir, lockfile.FileName)
	lock, err := lockfile.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read the lock (run lockstep lock first): %w", err)
	}
	if problems := lockfile.Check(set, lock, lockfile.Options{}); len(problems) > 0 {
		msgs := make([]string, len(problems))
		for i, p := range problems {
			msgs[i] = "  " + p.String()
		}
		return nil, &exitError{code: 1, err: fmt.Errorf("%s is stale; run lockstep lock:\n%s", path, strings.Join(msgs, "\n"))}
	}
	allowed, err := readPolicyRules(f.allowedPermissions)
	if err != nil {
		return nil, err
	}
	cache, err := oci.NewCache(f.reg.cacheDir)
	if err != nil {
		return nil, err
	}
	client, err := oci.NewClient(f.reg.options(), cache, set.ImageConfigs)
	if err != nil {
		return nil, err
	}
	fetched, err := lockfile.Fetch(ctx, lock, client, lockfile.Options{InsecureRegistries: f.reg.insecure})
	if err != nil {
		return nil, err
	}
	contents := make(map[string]*xpkg.Package, len(fetched))
	for src, fp := range fetched {
		contents[src] = fp.Package
	}
	pkgs, err := render.PackagesFromLock(set, lock, contents)
	if err != nil {
		return nil, err
	}
	return &loaded{
		set:  set,
		lock: lock,
		input: render.Input{
			Namespace:                  namespace,
			Instance:                   f.instance,
			Packages:                   pkgs,
			RuntimeConfigs:             set.RuntimeConfigs,
			ImageConfigs:               set.ImageConfigs,
			AllowedProviderPermissions: allowed,
		},
		stats: client.Stats(),
	}, nil
}

// readPolicyRules reads a YAML list of RBAC PolicyRules; "" gives none.
func readPolicyRules(path string) ([]rbacv1.PolicyRule, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--allowed-provider-permissions: %w", err)
	}
	var rules []rbacv1.PolicyRule
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		return nil, fmt.Errorf("--allowed-provider-permissions %s: %w", path, err)
	}
	return rules, nil
}
