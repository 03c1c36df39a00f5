package render

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// renderer holds what every package's rendering shares.
type renderer struct {
	in             *Input
	labels         map[string]string // lockstep's labels
	images         imageConfigs
	runtimeConfigs map[string]*declarations.DeploymentRuntimeConfig
	providers      []*Package // every Provider, for family RBAC
	allowed        []rbacv1.PolicyRule
	converts       bool     // render MRDs (Input.Converts)
	policies       []policy // activation patterns, sorted by policy name
	// clusterPolicies are the patterns of Input.Cluster's policies.
	clusterPolicies []policy
}

// Render renders every object lockstep applies for in: per package its
// paused package record, and for its pinned digest a paused revision
// record, the payload, the runtime (Providers and Functions) and the RBAC
// (Providers), reproducing what Crossplane's package manager, revision,
// runtime and RBAC controllers would create
// (docs/crossplane-behaviour.md#package-reconcile, #provider-rbac) so that the
// rest of Crossplane keeps working
// (docs/crossplane-behaviour.md#what-other-components-read). See Output for
// what is left to
// apply.
//
// Render is a pure function: it reads only in (without modifying it), and
// the same inputs, in any order, give an Output whose WriteYAML bytes are
// identical.
//
// It returns an error naming the package, and where known the file and
// field, when the input is invalid: a bad namespace or instance, a package
// with a bad name, source, digest or tag, missing contents or contents of
// another kind, a declaration for another package or source, a package
// listed twice, a runtimeConfigRef to a DeploymentRuntimeConfig that is not
// declared, an ImageConfig rewrite to an invalid reference, a payload
// document that is not valid JSON, or two rendered objects with the same
// identity (a package that ships two webhook configurations of one kind, or
// a Provider and a Function with one name, whose Services collide). Two
// packages that ship the same CRD are not an error here: which one controls
// it depends on which arrived first, which apply checks. A refused
// permission request is not an error either: it is the revision's Problem
// (see Output.Err).
func Render(in Input) (*Output, error) {
	if err := validateInput(&in); err != nil {
		return nil, err
	}
	r := &renderer{
		in:             &in,
		labels:         InstanceLabels(in.Instance),
		runtimeConfigs: map[string]*declarations.DeploymentRuntimeConfig{},
		allowed:        in.AllowedProviderPermissions,
	}
	var err error
	if r.converts, err = in.Converts(); err != nil {
		return nil, err
	}
	if r.converts {
		if r.policies, err = activationPolicies(&in); err != nil {
			return nil, err
		}
		if in.Cluster != nil {
			r.clusterPolicies = patterns(in.Cluster.Policies)
		}
	}
	if r.images, err = newImageConfigs(in.ImageConfigs); err != nil {
		return nil, err
	}
	for i := range in.RuntimeConfigs {
		drc := &in.RuntimeConfigs[i]
		if prev, ok := r.runtimeConfigs[drc.Name]; ok {
			return nil, fmt.Errorf("DeploymentRuntimeConfig %s is declared twice (%s and %s)", drc.Name, prev.Location, drc.Location)
		}
		r.runtimeConfigs[drc.Name] = drc
	}

	pkgs := make([]*Package, len(in.Packages))
	for i := range in.Packages {
		pkgs[i] = &in.Packages[i]
	}
	sort.Slice(pkgs, func(i, j int) bool {
		a, b := pkgs[i], pkgs[j]
		if a.Kind.Rank() != b.Kind.Rank() {
			return a.Kind.Rank() < b.Kind.Rank()
		}
		return a.Name < b.Name
	})
	for _, p := range pkgs {
		if p.Kind.Descriptor().RBAC {
			r.providers = append(r.providers, p)
		}
	}

	out := &Output{Namespace: in.Namespace, Instance: in.Instance, Packages: make([]*PackageOutput, 0, len(pkgs)), Replaces: in.Replaces()}
	if !r.converts {
		for _, p := range in.ActivationPolicies {
			out.warnings = append(out.warnings, fmt.Sprintf("%s %s (%s): not evaluated: MRD conversion is off or the lock's Crossplane version %q has no MRDs, so every provider CRD is installed "+
				"(the lock's customToManagedResourceConversion; turn it on with lockstep lock --enable-custom-to-managed-resource-conversion=true)",
				crossplane.GroupKindMRAP.Kind, p.Name, p.Location, in.CrossplaneVersion))
		}
	}
	for _, p := range pkgs {
		po, err := r.renderPackage(p)
		if err != nil {
			return nil, err
		}
		out.Packages = append(out.Packages, po)
	}
	countDependencies(out)
	if err := checkIdentities(out); err != nil {
		return nil, err
	}
	if err := renderManifests(&in, r.labels, out); err != nil {
		return nil, err
	}
	return out, nil
}

// renderPackage renders one package, in the order of Crossplane's
// controllers: package record, revision record, payload, runtime, RBAC.
func (r *renderer) renderPackage(p *Package) (*PackageOutput, error) {
	d := declaration(p)
	po := &PackageOutput{
		Kind: p.Kind, Name: p.Name, Source: p.Source, Version: p.Version, Digest: p.Digest, namespace: r.in.Namespace,
		Revision: &RevisionOutput{
			Name:             RevisionName(p.Name, p.Digest),
			ActivationPolicy: d.Spec.RevisionActivationPolicy,
			Capabilities:     slices.Clone(p.Contents.Meta.Capabilities),
		},
	}
	rev := po.Revision
	po.Paused = p.Declaration != nil && p.Declaration.Paused()
	po.AllowBreakingUpgrade = p.Declaration != nil && p.Declaration.AllowsBreakingUpgrade()
	po.Lock = lockPackage(p, rev.Name, r.in.Packages)
	if !d.Spec.IgnoreCrossplaneConstraints {
		po.CrossplaneConstraint = p.Contents.Meta.CrossplaneVersion
	}
	if err := r.resolve(p, po); err != nil {
		return nil, err
	}
	kind := p.Kind.Descriptor()
	if rev.Capabilities == nil {
		rev.Capabilities = slices.Clone(kind.DefaultCapabilities)
	}
	if c := p.Contents.Meta.Controller; kind.MetaController && c != nil {
		rev.PermissionRequests = slices.Clone(c.PermissionRequests)
	}

	var err error
	if po.Record, err = r.packageRecord(p, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if rev.Record, err = r.revisionRecord(p, &d, po); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if rev.Payload, err = r.payload(p, &d, po); err != nil {
		return nil, err
	}
	if !kind.HasRuntime {
		return po, nil
	}

	image, resolved, err := r.runtimeImage(p)
	if err != nil {
		return nil, err
	}
	rev.Image = image
	drc, err := r.runtimeConfig(p, &d, resolved)
	if err != nil {
		return nil, err
	}
	ri := &runtimeInputs{p: p, d: &d, po: po, drc: drc, controllerImage: image != resolved}
	ri.pull, _ = r.images.pullSecret(resolved)
	var saName string
	if rev.Runtime, saName, err = r.runtime(ri); err != nil {
		return nil, err
	}
	if kind.Endpoint {
		svc := p.Name
		for _, o := range rev.Runtime {
			if o.Kind == "Service" {
				svc = o.Name
			}
		}
		rev.Endpoint = fmt.Sprintf("dns:///%s.%s:%d", svc, r.in.Namespace, GRPCPort)
		return po, nil
	}
	rev.RBAC, err = r.rbac(p, po, saName, !runtimeConfigured(drc))
	var perr *PermissionError
	if errors.As(err, &perr) {
		rev.Problem, rev.RBAC, err = perr, nil, nil
	}
	if err != nil {
		return nil, err
	}
	return po, nil
}

// checkIdentities returns an error when two rendered objects have the same
// group, kind, namespace and name, except for payload objects of different
// packages (see Render).
func checkIdentities(out *Output) error {
	type owner struct {
		pkg     *PackageOutput
		payload bool
	}
	seen := map[string]owner{}
	for _, p := range out.Packages {
		r := p.Revision
		groups := []struct {
			objs    []*Object
			payload bool
		}{{[]*Object{p.Record, r.Record}, false}, {r.Payload, true}, {r.ManagedCRDs, true}, {r.Runtime, false}, {r.RBAC, false}}
		for _, g := range groups {
			for _, o := range g.objs {
				id := o.ID()
				prev, ok := seen[id]
				switch {
				case !ok:
					seen[id] = owner{pkg: p, payload: g.payload}
				case prev.pkg == p:
					return fmt.Errorf("%s %s: renders %s twice", p.Kind, p.Name, o)
				case !(prev.payload && g.payload):
					return fmt.Errorf("%s %s and %s %s both render %s", prev.pkg.Kind, prev.pkg.Name, p.Kind, p.Name, o)
				}
			}
		}
	}
	return nil
}
