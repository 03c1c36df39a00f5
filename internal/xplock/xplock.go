// Package xplock keeps Crossplane's Lock (pkg.crossplane.io/v1beta1
// Lock/lock, docs/crossplane-behaviour.md#the-lock) in step with what one
// lockstep instance installed: the entries of its packages' revisions are
// replaced or removed, every other entry (another instance's, Crossplane's
// own) stays as it is, in its order.
//
// Merge is pure; Write reads the Lock, merges and writes it back.
// Lock.packages is an atomic list (Crossplane's CRD gives it no list-type
// marker), so a server-side apply would take the whole list: Write sends
// an Update carrying the resourceVersion it read, retried on a conflict,
// as Crossplane's revision controller does (crossplane/crossplane
// internal/controller/pkg/revision/dependency.go).
package xplock

import (
	"context"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/jsonvalue"
)

// Name is the name of Crossplane's one cluster-scoped Lock.
const Name = "lock"

// Object returns an empty Lock/lock, to read or write.
func Object() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(crossplane.RuntimeAPIVersion)
	u.SetKind(crossplane.KindLock)
	u.SetName(Name)
	return u
}

// Update is one instance's part of the Lock.
type Update struct {
	// Owned are the names of the revisions whose entries are the
	// instance's: of its packages, present and pruned, including the
	// revisions Crossplane made for a package lockstep adopted. An owned
	// entry not in Entries is removed.
	Owned map[string]bool
	// Entries are the entries the instance wants (Lock.packages items), by
	// revision name; every name must also be in Owned and in Order.
	Entries map[string]any
	// Keep are owned revisions whose entry, when the Lock has one, stays
	// as it is, in its place (a paused package's, or the Active revision's
	// while the current one awaits activation or failed).
	Keep map[string]bool
	// Order is the order in which entries not yet in the Lock are
	// appended.
	Order []string
}

// Merge returns the Lock's packages after u: have with each owned entry
// replaced by the wanted one in its place, kept when u keeps it, or
// removed, every other entry kept in its order, and the wanted entries not
// yet in have appended in Order. have is not modified.
func (u Update) Merge(have []any) []any {
	out := make([]any, 0, len(have)+len(u.Order))
	placed := map[string]bool{}
	for _, e := range have {
		m, _ := e.(map[string]any)
		n, _ := m["name"].(string)
		if !u.Owned[n] {
			out = append(out, e)
			continue
		}
		switch w, ok := u.Entries[n]; {
		case placed[n]:
		case ok:
			out = append(out, w)
			placed[n] = true
		case u.Keep[n]:
			out = append(out, e)
			placed[n] = true
		}
	}
	for _, n := range u.Order {
		if !placed[n] {
			out = append(out, u.Entries[n])
			placed[n] = true
		}
	}
	return out
}

// Option configures Write.
type Option func(*options)

type options struct {
	fieldManager string
	dryRun       bool
}

// WithFieldManager names the field manager of Write's requests.
func WithFieldManager(m string) Option { return func(o *options) { o.fieldManager = m } }

// WithDryRun makes Write's create or update a server-side dry run.
func WithDryRun(dryRun bool) Option { return func(o *options) { o.dryRun = dryRun } }

// Write reads the Lock, merges it with u (Update.Merge) and writes the
// packages when they differ: an Update with the resourceVersion read, or a
// Create when the Lock is absent and some entry is wanted, retried on a
// conflict (retry.DefaultRetry; a Create that finds the Lock created
// meanwhile reads it again). It leaves metadata (Crossplane's finalizer)
// and status to Crossplane. It returns what it did: ssa.CreatedAction,
// ssa.ConfiguredAction, or ssa.UnchangedAction with no write. The error is
// the API server's; a cluster that does not serve the Lock kind gives a
// meta.NoKindMatchError.
func Write(ctx context.Context, c client.Client, u Update, opts ...Option) (ssa.Action, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	action := ssa.UnchangedAction
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		action, err = write(ctx, c, u, o)
		return err
	})
	return action, err
}

func write(ctx context.Context, c client.Client, u Update, o options) (ssa.Action, error) {
	obj := Object()
	err := c.Get(ctx, client.ObjectKey{Name: Name}, obj)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return ssa.UnchangedAction, err
	}
	have, _, _ := unstructured.NestedSlice(obj.Object, "packages")
	want := u.Merge(have)
	switch {
	case exists && jsonvalue.Equal(have, want):
		return ssa.UnchangedAction, nil
	case !exists && len(want) == 0:
		return ssa.UnchangedAction, nil
	}
	obj.Object["packages"] = want
	if !exists {
		copts := []client.CreateOption{client.FieldOwner(o.fieldManager)}
		if o.dryRun {
			copts = append(copts, client.DryRunAll)
		}
		if err := c.Create(ctx, obj, copts...); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Crossplane (or another instance) created it meanwhile:
				// read it again.
				return ssa.UnchangedAction, apierrors.NewConflict(schema.GroupResource{Group: crossplane.Group, Resource: "locks"}, Name, err)
			}
			return ssa.UnchangedAction, err
		}
		return ssa.CreatedAction, nil
	}
	uopts := []client.UpdateOption{client.FieldOwner(o.fieldManager)}
	if o.dryRun {
		uopts = append(uopts, client.DryRunAll)
	}
	if err := c.Update(ctx, obj, uopts...); err != nil {
		return ssa.UnchangedAction, err
	}
	return ssa.ConfiguredAction, nil
}
