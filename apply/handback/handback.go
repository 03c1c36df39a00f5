// Package handback hands a package that a lockstep instance manages back
// to Crossplane's package manager, while the instance keeps managing the
// others (docs/migrating.md#handing-one-package-back): the inverse of
// adoption.
package handback

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/render"
)

// Result is what Run did.
type Result struct {
	// Released are the objects that lost lockstep's labels (and, for the
	// package and revision records, Crossplane's pause annotation), as
	// "Kind name" or "Kind namespace/name".
	Released []string
	// Shared are the package's objects another package of the inventory
	// still lists: they keep lockstep's labels.
	Shared []string
	// Missing are inventory entries whose object no longer exists.
	Missing []string
}

// Run stops lockstep instance from managing the package kind/name
// while it keeps managing the others, and hands it to Crossplane's package
// manager (docs/migrating.md#handing-one-package-back): every object the
// inventory lists for the package loses lockstep's labels
// (render.LabelInstance, render.LabelManagedBy), so that deletion protection
// no longer covers it and prune never deletes it; the package and its
// revisions also lose crossplane.io/paused, so Crossplane's package,
// revision and runtime controllers reconcile them again, as if its package
// manager had installed them; last, the package leaves the inventory. An
// object another package of the inventory also lists keeps its labels.
//
// The package must be gone from the declarations the instance applies
// before its next apply, or that apply adopts it again. With dryRun
// nothing is written. It returns an error naming the package when the
// inventory does not list it, and the object when a write fails; a write
// that failed leaves the package in the inventory, so Run can run
// again.
func Run(ctx context.Context, c client.Client, namespace, instance string, kind crossplane.Kind, name string, dryRun bool) (*Result, error) {
	inv, exists, err := inventory.ReadExisting(ctx, c, namespace, instance)
	if err != nil {
		return nil, err
	}
	pkg := inv.Package(kind, name)
	if !exists || pkg == nil {
		return nil, fmt.Errorf("%s %s: instance %q does not manage it (not in its inventory ConfigMap %s/%s)", kind, name, instance, namespace, inventory.ConfigMapName(instance))
	}
	others := map[string]bool{}
	for _, p := range inv.Packages {
		if p.Kind == kind && p.Name == name {
			continue
		}
		for _, e := range p.Entries {
			others[e.ID] = true
		}
	}
	res := &Result{}
	for _, e := range pkg.Entries {
		if err := releaseEntry(ctx, c, e, others[e.ID], dryRun, res); err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind, name, err)
		}
	}
	if dryRun {
		return res, nil
	}
	inv.Packages = slices.DeleteFunc(inv.Packages, func(p inventory.Package) bool { return p.Kind == kind && p.Name == name })
	cm, _, err := inv.ConfigMap(namespace, instance, render.InstanceLabels(instance))
	if err != nil {
		return nil, err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(cm), client.FieldOwner(apply.FieldManager), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("%s %s: released, but cannot remove it from the inventory ConfigMap %s/%s (run handback again): %w",
			kind, name, namespace, inventory.ConfigMapName(instance), err)
	}
	return res, nil
}

// releaseEntry releases the object of one inventory entry into res: it
// is Shared when another package lists it (it keeps its labels), Missing
// when it is gone, Released otherwise, after releasePatch and, unless
// dryRun, unmarkPatch. The error names the entry or the object.
func releaseEntry(ctx context.Context, c client.Client, e inventory.Entry, shared, dryRun bool, res *Result) error {
	u, err := e.Object()
	if err != nil {
		return fmt.Errorf("inventory entry %s: %w", e.ID, err)
	}
	what := describeEntry(u)
	if shared {
		res.Shared = append(res.Shared, what)
		return nil
	}
	patch, err := releasePatch(e.Role == inventory.RoleRecord)
	if err != nil {
		return err
	}
	var opts []client.PatchOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch), opts...); err != nil {
		if apierrors.IsNotFound(err) {
			res.Missing = append(res.Missing, what)
			return nil
		}
		return fmt.Errorf("cannot release %s: %w", what, err)
	}
	if !dryRun {
		if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, unmarkPatch)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("released %s, but cannot remove its %s annotation: %w", what, render.AnnotationAllowDelete, err)
		}
	}
	res.Released = append(res.Released, what)
	return nil
}

// releasePatch is the JSON merge patch that removes lockstep's labels and,
// for a package or revision record, Crossplane's pause annotation. It sets
// render.AnnotationAllowDelete in the same request: deletion protection
// denies removing the instance label otherwise, to any user but the one
// lockstep applies as (render.DeletionProtection), and handback may run as
// someone else. unmarkPatch removes the annotation afterwards.
func releasePatch(record bool) ([]byte, error) {
	annotations := map[string]any{render.AnnotationAllowDelete: "true"}
	meta := map[string]any{"labels": map[string]any{render.LabelInstance: nil, render.LabelManagedBy: nil}, "annotations": annotations}
	if record {
		annotations[crossplane.AnnotationPaused] = nil
	}
	return json.Marshal(map[string]any{"metadata": meta})
}

// unmarkPatch removes the render.AnnotationAllowDelete that releasePatch
// set, once the object no longer carries the instance label.
var unmarkPatch = []byte(`{"metadata":{"annotations":{"` + render.AnnotationAllowDelete + `":null}}}`)

// describeEntry is "Kind name" or "Kind namespace/name".
func describeEntry(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}
