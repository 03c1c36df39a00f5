package apply

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// compactKinds are the kinds whose live objects apply keeps compact: their
// header decoded, the rest as digests (liveSummary). They are the bulk of
// a provider's payload (a monolith's 2,000 CRDs list as ~70 MB of JSON,
// ~10 times that decoded), and apply reads their content only to compare
// it with what it applies.
var compactKinds = map[schema.GroupKind]bool{
	crossplane.GroupKindCRD: true, crossplane.GroupKindMRD: true, crossplane.GroupKindXRD: true, crossplane.GroupKindComposition: true,
}

// isNotServed reports whether err says the kind is not served (yet).
func isNotServed(err error) bool {
	var se *apierrors.StatusError
	return meta.IsNoMatchError(err) || (errors.As(err, &se) && se.ErrStatus.Code == http.StatusNotFound)
}
