package apply

import (
	"context"
	"fmt"
	"reflect"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/live"
)

// LockName is the name of Crossplane's one cluster-scoped Lock
// (pkg.crossplane.io/v1beta1, docs/crossplane-behaviour.md#the-lock).
const LockName = "lock"

// lockSubject is how change sets and errors name the Lock.
const lockSubject = crossplane.KindLock + "/" + LockName

// lockStep keeps Crossplane's Lock/lock in step with what this instance
// installed (docs/design/apply.md#crossplanes-lock): for each package of the
// output, the entry of its Active revision (the rendered one when the
// current revision is Active, the live one otherwise); no entry for a
// revision of these packages that is not Active, nor for the revisions of
// pruned packages. Entries of other packages (another instance's, or
// Crossplane's own) are kept as they are, in their order.
//
// A package that stopped before its records step (refused at preflight,
// or an adoption that failed) leaves the entry of its Active revision as
// it is, so a package Crossplane still runs keeps its place.
//
// Lock.packages is an atomic list (no list-type marker in Crossplane's
// CRD), so a server-side apply would take the whole list: the step reads
// the Lock and writes it back with an Update that carries the
// resourceVersion it read, retried on a conflict, as Crossplane's revision
// controller does (crossplane/crossplane
// internal/controller/pkg/revision/dependency.go). It creates the Lock when
// absent and writes nothing when the entries are already so. It leaves
// metadata (Crossplane's finalizer lock.pkg.crossplane.io) and status to
// Crossplane's resolver. A cluster that does not serve the Lock kind gets
// a warning and no Lock.
func (r *run) lockStep(ctx context.Context) {
	action := ssa.UnchangedAction
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		action, err = r.writeLock(ctx)
		return err
	})
	e := lockEntry(action)
	r.res.Lock = &e
	switch {
	case meta.IsNoMatchError(err):
		r.warn(nil, "%s was not written: the cluster does not serve %s %s (are Crossplane's CRDs installed?)", lockSubject, crossplane.RuntimeAPIVersion, crossplane.KindLock)
	case err != nil:
		r.res.LockErr = fmt.Errorf("%s: %w", lockSubject, err)
	}
}

// writeLock reads the Lock, computes its packages and writes them when they
// differ. It returns what it did.
func (r *run) writeLock(ctx context.Context) (ssa.Action, error) {
	u := lockObject()
	err := r.c.Get(ctx, client.ObjectKey{Name: LockName}, u)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return ssa.UnchangedAction, err
	}
	have, _, _ := unstructured.NestedSlice(u.Object, "packages")
	want := r.lockPackages(have)
	if exists && reflect.DeepEqual(normalizeJSON(have), normalizeJSON(want)) {
		return ssa.UnchangedAction, nil
	}
	if !exists && len(want) == 0 {
		return ssa.UnchangedAction, nil
	}
	if want == nil {
		want = []any{}
	}
	u.Object["packages"] = want
	opts := []client.UpdateOption{client.FieldOwner(FieldManager)}
	if !exists {
		copts := []client.CreateOption{client.FieldOwner(FieldManager)}
		if r.opts.DryRun {
			copts = append(copts, client.DryRunAll)
		}
		if err := r.c.Create(ctx, u, copts...); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Crossplane (or another instance) created it meanwhile:
				// read it again.
				return ssa.UnchangedAction, apierrors.NewConflict(schema.GroupResource{Group: crossplane.Group, Resource: "locks"}, LockName, err)
			}
			return ssa.UnchangedAction, err
		}
		r.wrote()
		return ssa.CreatedAction, nil
	}
	if r.opts.DryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := r.c.Update(ctx, u, opts...); err != nil {
		return ssa.UnchangedAction, err
	}
	r.wrote()
	return ssa.ConfiguredAction, nil
}

// lockPackages returns the Lock's packages after this apply: have, with
// the entries of this instance's revisions replaced or removed, and the
// entries of packages not yet in it appended in the output's order.
func (r *run) lockPackages(have []any) []any {
	// ours are the revisions of this instance's packages, present and
	// pruned, including those Crossplane made for a package lockstep
	// adopted; want their entries by revision name.
	ours := map[string]bool{}
	want := map[string]any{}
	var order []string
	byName := map[string]map[string]any{}
	for _, e := range have {
		if m, ok := e.(map[string]any); ok {
			byName[str(m["name"])] = m
		}
	}
	for _, p := range r.pkgs {
		ours[p.po.Revision.Name] = true
		for _, rev := range r.live.revisionsOf(p.key) {
			ours[rev.GetName()] = true
		}
		for _, rev := range p.others {
			ours[rev.GetName()] = true
		}
		active := p.res.ActiveRevision
		if active == "" {
			// The package stopped before its records step: the revision
			// that is Active (Crossplane's, when lockstep is adopting the
			// package) is still in charge and keeps its entry.
			for _, rev := range r.live.revisionsOf(p.key) {
				if live.DesiredState(rev) == crossplane.DesiredStateActive {
					active = rev.GetName()
				}
			}
		}
		switch {
		case active == "":
		case p.res.Paused:
			// A paused package keeps its entry as it is, like everything
			// else of it (docs/design/agent.md#pausing).
			if byName[active] != nil {
				want[active] = byName[active]
				order = append(order, active)
			}
		case active == p.po.Revision.Name:
			want[active] = p.po.Lock.Object()
			order = append(order, active)
		case byName[active] != nil:
			// The current revision awaits activation or failed: the
			// Active one keeps the entry it has.
			want[active] = byName[active]
			order = append(order, active)
		}
	}
	for _, pr := range r.res.Pruned {
		key := crossplane.Ref(pr.Kind, pr.Name)
		for _, rev := range r.live.revisionsOf(key) {
			ours[rev.GetName()] = true
		}
		if ip := r.loaded.Package(pr.Kind, pr.Name); ip != nil {
			for _, e := range ip.Entries {
				if e.Revision != "" {
					ours[e.Revision] = true
				}
			}
		}
	}
	out := make([]any, 0, len(have)+len(order))
	placed := map[string]bool{}
	for _, e := range have {
		m, _ := e.(map[string]any)
		n := str(m["name"])
		if !ours[n] {
			out = append(out, e)
			continue
		}
		if w, ok := want[n]; ok && !placed[n] {
			out = append(out, w)
			placed[n] = true
		}
	}
	for _, n := range order {
		if !placed[n] {
			out = append(out, want[n])
			placed[n] = true
		}
	}
	return out
}

// lockObject returns an empty Lock/lock, to read or write.
func lockObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(crossplane.RuntimeAPIVersion)
	u.SetKind(crossplane.KindLock)
	u.SetName(LockName)
	return u
}

// lockEntry returns the change set entry of the Lock with action a.
func lockEntry(a ssa.Action) ssa.ChangeSetEntry {
	return entry(lockObject(), a)
}
