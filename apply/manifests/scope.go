package manifests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
)

// Values of Options.Kinds besides GROUP/KIND patterns.
const (
	// KindsCrossplane allows what a Crossplane user declares: every
	// kind a package of the output defines (ProviderConfigs and managed
	// resources from CRDs and MRDs, composite resources and claims from
	// XRDs) and Crossplane's own kinds outside pkg.crossplane.io
	// (crossplane.CoreKinds: EnvironmentConfig, Usage, Composition, ...).
	KindsCrossplane = "crossplane"
	// KindsAll allows every kind.
	KindsAll = "*"
)

// DefaultKinds is Options.Kinds when it is empty.
var DefaultKinds = []string{KindsCrossplane}

// ValidKinds returns an error naming a pattern of kinds that is
// neither a preset nor "GROUP/KIND" (path.Match syntax in each part; the
// core group is empty: "/Namespace", "/*").
func ValidKinds(kinds []string) error {
	for _, k := range kinds {
		if k == KindsCrossplane || k == KindsAll {
			continue
		}
		group, kind, ok := strings.Cut(k, "/")
		if !ok || kind == "" || strings.Contains(kind, "/") {
			return fmt.Errorf("manifest kind %q is not %s, %s or GROUP/KIND (\"/Namespace\" for the core group)", k, KindsCrossplane, KindsAll)
		}
		for _, p := range []string{group, kind} {
			if _, err := path.Match(p, ""); err != nil {
				return fmt.Errorf("manifest kind %q: %w", k, err)
			}
		}
	}
	return nil
}

// allowsKind reports whether the patterns allow gk, given the kinds the
// output's packages define.
func allowsKind(patterns []string, gk schema.GroupKind, defined map[schema.GroupKind]string) bool {
	if len(patterns) == 0 {
		patterns = DefaultKinds
	}
	for _, p := range patterns {
		switch p {
		case KindsAll:
			return true
		case KindsCrossplane:
			if _, ok := defined[gk]; ok || crossplane.IsCoreKind(gk) {
				return true
			}
		default:
			group, kind, _ := strings.Cut(p, "/")
			gm, _ := path.Match(group, gk.Group)
			km, _ := path.Match(kind, gk.Kind)
			if gm && km {
				return true
			}
		}
	}
	return false
}

// definedKinds maps every kind the output's packages define to its plural:
// their CRDs and MRDs, and of their XRDs the composite and the claim.
func definedKinds(out *render.Output) map[schema.GroupKind]string {
	defined := map[schema.GroupKind]string{}
	for _, p := range out.Packages {
		for _, n := range revisionDefinitions(p.Revision) {
			defined[n.kind] = n.plural
		}
	}
	return defined
}

// definedName is a kind a definition defines, with its plural; xrd says
// the definition is an XRD, whose CRD Crossplane makes.
type definedName struct {
	kind   schema.GroupKind
	plural string
	xrd    bool
}

// definitionHead is what definitionNames reads of a definition.
type definitionHead struct {
	Spec struct {
		Group      string `json:"group"`
		Names      struct{ Kind, Plural string }
		ClaimNames *struct{ Kind, Plural string }
	}
}

// revisionDefinitions returns the kinds the payload and managed CRDs of
// rev define (definitionNames); nil for a nil rev.
func revisionDefinitions(rev *render.RevisionOutput) []definedName {
	if rev == nil {
		return nil
	}
	var out []definedName
	for _, objs := range [][]*render.Object{rev.Payload, rev.ManagedCRDs} {
		for _, o := range objs {
			out = append(out, definitionNames(o)...)
		}
	}
	return out
}

// definitionNames returns the kinds o defines when it is a CRD or MRD (its
// kind) or an XRD (its composite and claim kinds); nil otherwise. It
// decodes only the names of o's JSON, not the whole object.
func definitionNames(o *render.Object) []definedName {
	gk := o.GroupKind()
	if gk != crossplane.GroupKindCRD && gk != crossplane.GroupKindMRD && gk != crossplane.GroupKindXRD {
		return nil
	}
	var h definitionHead
	if err := json.Unmarshal(o.JSON(), &h); err != nil {
		return nil
	}
	xrd := gk == crossplane.GroupKindXRD
	var out []definedName
	for _, n := range []*struct{ Kind, Plural string }{&h.Spec.Names, h.Spec.ClaimNames} {
		if n != nil && n.Kind != "" {
			out = append(out, definedName{kind: schema.GroupKind{Group: h.Spec.Group, Kind: n.Kind}, plural: n.Plural, xrd: xrd})
		}
	}
	return out
}

// ScopeError is the error of CheckScope when manifests fall outside the
// instance's scope: a kind Options.Kinds does not allow, or an object the
// ServiceAccount (Step.As) may not create or update. An apply returns it
// before it writes anything of the commit.
type ScopeError struct {
	// Objects are the refused manifests, each "FILE:LINE: Kind/name: why".
	Objects []string
}

// Error lists every refused manifest.
func (e *ScopeError) Error() string {
	return fmt.Sprintf("%d manifest(s) outside the scope of this instance:\n  %s", len(e.Objects), strings.Join(e.Objects, "\n  "))
}

// manifestVerbs are what applying a manifest needs: server-side apply
// creates it (create) or updates it (patch).
var manifestVerbs = []string{"create", "patch"}

// CheckScope is run before anything of the commit is written: each
// manifest of out must have a kind Options.Kinds allows, and with As that
// ServiceAccount must be allowed to create and patch it, asked with a
// SelfSubjectAccessReview made as the ServiceAccount (one per resource,
// namespace and verb). A kind the cluster does not serve yet is looked up
// among the kinds the output's packages define. It returns a *ScopeError
// naming every refused manifest, or the error that kept it from asking.
func (s *Step) CheckScope(ctx context.Context, out *render.Output) error {
	if len(out.Manifests) == 0 {
		return nil
	}
	defined := definedKinds(out)
	kinds := s.Kinds
	if len(kinds) == 0 {
		kinds = DefaultKinds
	}
	var refused []string
	asked := map[string]error{}
	for _, mo := range out.Manifests {
		o := mo.Object
		gvk := schema.FromAPIVersionAndKind(o.APIVersion, o.Kind)
		if !allowsKind(kinds, gvk.GroupKind(), defined) {
			refused = append(refused, fmt.Sprintf("%s: %s: kind %s of group %q is not among the manifest kinds of instance %s (%s); add %s/%s to allow it",
				mo.Location, o, o.Kind, gvk.Group, s.Instance, strings.Join(kinds, ","), gvk.Group, o.Kind))
			continue
		}
		if s.As == nil {
			continue
		}
		resource, err := s.resourceOf(gvk, defined)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", mo.Location, o, err)
		}
		for _, verb := range manifestVerbs {
			key := verb + " " + resource.String() + " " + o.Namespace
			err, done := asked[key]
			if !done {
				err = s.As.allowed(ctx, verb, resource, o.Namespace)
				asked[key] = err
			}
			if err != nil {
				refused = append(refused, fmt.Sprintf("%s: %s: %v", mo.Location, o, err))
				break
			}
		}
	}
	if len(refused) > 0 {
		return &ScopeError{Objects: refused}
	}
	return nil
}

// resourceOf returns the resource of gvk: from the cluster's RESTMapper,
// or, for a kind the cluster does not serve yet, from the packages that
// define it.
func (s *Step) resourceOf(gvk schema.GroupVersionKind, defined map[schema.GroupKind]string) (schema.GroupResource, error) {
	mapping, err := s.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		return mapping.Resource.GroupResource(), nil
	}
	if plural, ok := defined[gvk.GroupKind()]; ok && meta.IsNoMatchError(err) {
		return schema.GroupResource{Group: gvk.Group, Resource: plural}, nil
	}
	return schema.GroupResource{}, fmt.Errorf("cannot tell the resource of %s: %w", gvk.Kind, err)
}

// ServiceAccount writes manifests as a ServiceAccount, as Flux's
// kustomize-controller does with spec.serviceAccountName: through a
// client that impersonates it.
type ServiceAccount struct {
	// sa is "system:serviceaccount:NAMESPACE:NAME".
	sa string
	c  client.Client
}

// Impersonate returns the ServiceAccount sa ("NAME" in namespace, or
// "NAMESPACE/NAME") with a client made from cfg that impersonates it
// (user system:serviceaccount:NAMESPACE:NAME), sharing c's scheme and
// RESTMapper. It needs the impersonate permission on that ServiceAccount
// at request time; it fails only on a malformed name or config.
func Impersonate(cfg *rest.Config, c client.Client, namespace, sa string) (*ServiceAccount, error) {
	ns, name, ok := strings.Cut(sa, "/")
	if !ok {
		ns, name = namespace, sa
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("manifest service account %q: want NAME or NAMESPACE/NAME", sa)
	}
	imp := rest.CopyConfig(cfg)
	imp.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + name}
	ic, err := client.New(imp, client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("manifest service account %s/%s: %w", ns, name, err)
	}
	return &ServiceAccount{sa: ns + "/" + name, c: ic}, nil
}

// allowed asks, as the ServiceAccount, whether it may verb the resource in
// namespace (cluster-wide when ""), and returns an error saying it may not.
func (w *ServiceAccount) allowed(ctx context.Context, verb string, gr schema.GroupResource, namespace string) error {
	review := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
		"spec": map[string]any{"resourceAttributes": map[string]any{
			"verb": verb, "group": gr.Group, "resource": gr.Resource, "namespace": namespace,
		}},
	}}
	if err := w.c.Create(ctx, review); err != nil {
		return fmt.Errorf("cannot ask whether ServiceAccount %s may %s %s: %w", w.sa, verb, gr, err)
	}
	if ok, _, _ := unstructured.NestedBool(review.Object, "status", "allowed"); ok {
		return nil
	}
	where := "cluster-wide"
	if namespace != "" {
		where = "in namespace " + namespace
	}
	reason, _, _ := unstructured.NestedString(review.Object, "status", "reason")
	msg := fmt.Sprintf("ServiceAccount %s may not %s %s %s", w.sa, verb, gr, where)
	if reason != "" {
		msg += " (" + reason + ")"
	}
	return errors.New(msg)
}
