package manifests

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/owners"
	"github.com/lockstep-gitops/lockstep/render"
)

// ForeignError is the error of CheckOwners when manifests name objects
// that exist and that lockstep did not create, and the manifests do not
// opt in to adopting them (render.AnnotationAdopt). An apply returns it
// before it writes anything of the commit.
type ForeignError struct {
	// Objects are the refused manifests, each "FILE:LINE: Kind/name: it
	// is ... (field managers: ...)".
	Objects []string
}

// Error lists every refused manifest and says how to opt in.
func (e *ForeignError) Error() string {
	return fmt.Sprintf("%d manifest(s) name objects that exist and that lockstep did not create; lockstep would delete them when their manifest leaves Git, so it takes them over only when the manifest says %s: \"true\":\n  %s",
		len(e.Objects), render.AnnotationAdopt, strings.Join(e.Objects, "\n  "))
}

// CheckOwners reads every manifest of out that listed (the inventory's
// manifests) does not hold yet, one metadata GET each (a manifest the
// inventory lists was created or adopted by an earlier apply, so a steady
// state reads nothing here), and returns a *ForeignError naming those that
// exist, do not carry the instance's label, and whose manifest lacks
// render.AnnotationAdopt "true". A kind the cluster does not serve yet has
// no objects to adopt. Any other read error is returned, naming the
// manifest.
func (s *Step) CheckOwners(ctx context.Context, out *render.Output, listed []inventory.Entry) error {
	have := map[string]bool{}
	for _, e := range listed {
		have[e.ID] = true
	}
	var refused []string
	for _, mo := range out.Manifests {
		o := mo.Object
		if have[o.ID()] {
			continue
		}
		u, err := o.Unstructured()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", mo.Location, o, err)
		}
		if u.GetAnnotations()[render.AnnotationAdopt] == "true" {
			continue
		}
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(schema.FromAPIVersionAndKind(o.APIVersion, o.Kind))
		err = s.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, live)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue
		case err != nil:
			return fmt.Errorf("%s: %s: cannot read it to tell whether lockstep created it: %w", mo.Location, o, err)
		}
		inst := live.GetLabels()[render.LabelInstance]
		if inst == s.Instance {
			continue
		}
		refused = append(refused, fmt.Sprintf("%s: %s: exists and lockstep did not create it: %s", mo.Location, o, heldBy(live, inst)))
	}
	if len(refused) > 0 {
		return &ForeignError{Objects: refused}
	}
	return nil
}

// heldBy describes who holds live, which carries the label of lockstep
// instance inst ("" for none): its controller or owners and its field
// managers.
func heldBy(live *metav1.PartialObjectMetadata, inst string) string {
	managers := owners.Managers(live.ManagedFields)
	desc := owners.Uncontrolled(live.OwnerReferences, managers)
	if c := owners.Controller(live.OwnerReferences); c != nil {
		desc = "it is controlled by " + owners.Describe(*c)
		if len(managers) > 0 {
			desc += " (field managers: " + strings.Join(managers, ", ") + ")"
		}
	}
	if inst != "" {
		desc = "it belongs to lockstep instance " + inst + "; " + desc
	}
	return desc
}
