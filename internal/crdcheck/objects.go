package crdcheck

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// Breakage reasons, what Breakage.Reason holds.
const (
	// ReasonVersionNotServed: the object's version is not served by the
	// new CRD (removed, or served: false); reading or writing it at that
	// version fails.
	ReasonVersionNotServed = "VersionNotServed"
	// ReasonSchema: the object fails the new version's OpenAPI schema
	// (type, enum, pattern, required, bounds, ...).
	ReasonSchema = "Schema"
	// ReasonRule: the object fails an x-kubernetes-validations CEL rule of
	// the new version.
	ReasonRule = "Rule"
	// ReasonPruned: the new structural schema no longer has the field, so
	// the API server drops it from the object at its next write: data
	// lost without an error.
	ReasonPruned = "Pruned"
)

// Breakage is one way a new CustomResourceDefinition breaks an existing
// custom resource.
type Breakage struct {
	// Object is the custom resource, "Kind namespace/name" or "Kind name".
	Object string `json:"object"`
	// Version is the version the object was read at.
	Version string `json:"version"`
	// Reason is ReasonVersionNotServed, ReasonSchema, ReasonRule or
	// ReasonPruned.
	Reason string `json:"reason"`
	// Field is the field path ("spec.forProvider.region"), "" for the
	// whole object.
	Field string `json:"field,omitempty"`
	// Rule is the CEL rule an object fails (ReasonRule).
	Rule string `json:"rule,omitempty"`
	// Message says why, in the API server's words.
	Message string `json:"message"`
}

// String formats b as "Kind ns/name (version): field: message".
func (b Breakage) String() string {
	s := b.Object + " (" + b.Version + ")"
	if b.Field != "" {
		s += ": " + b.Field
	}
	return s + ": " + b.Message
}

// versionCheck is what a Checker validates one version with.
type versionCheck struct {
	served     bool
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaCreateValidator
	rules      *cel.Validator
}

// Checker checks existing custom resources against a new version of
// their CustomResourceDefinition, in-process, with the validation the API
// server runs on a custom resource's create
// (k8s.io/apiextensions-apiserver pkg/registry/customresource/validator.go):
// the OpenAPI schema and the x-kubernetes-validations rules with their
// cost limits, of the version the object is read at. Transition rules
// (those reading oldSelf) are not evaluated: they apply to a change of
// the object, not to what it holds. Ratcheting, which lets an update keep
// a field that a tightened schema no longer accepts as long as the update
// leaves it unchanged, is not modelled either: an object reported here
// is one that fails on its next create or full replace, and whose next
// update of the failing field fails. It also reports the fields the new
// structural schema would prune (ReasonPruned).
type Checker struct {
	kind     string
	versions map[string]*versionCheck
}

// NewChecker returns a Checker for next, the CustomResourceDefinition as
// it would be applied. An error means next itself is invalid (a schema
// that is not structural, a CEL rule that does not compile): Create
// reports that.
func NewChecker(next *apiextensionsv1.CustomResourceDefinition) (*Checker, error) {
	v1 := next.DeepCopy()
	crdScheme.Default(v1)
	crd := &apiextensions.CustomResourceDefinition{}
	if err := crdScheme.Convert(v1, crd, nil); err != nil {
		return nil, fmt.Errorf("CustomResourceDefinition %s: %w", next.Name, err)
	}
	c := &Checker{kind: crd.Spec.Names.Kind, versions: map[string]*versionCheck{}}
	for _, v := range crd.Spec.Versions {
		vc := &versionCheck{served: v.Served}
		props := crd.Spec.Validation
		if v.Schema != nil {
			props = v.Schema
		}
		if props != nil && props.OpenAPIV3Schema != nil {
			s, err := structuralschema.NewStructural(props.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("CustomResourceDefinition %s version %s: %w", next.Name, v.Name, err)
			}
			vc.structural = s
			validator, _, err := apiservervalidation.NewSchemaValidator(props.OpenAPIV3Schema)
			if err != nil {
				return nil, fmt.Errorf("CustomResourceDefinition %s version %s: %w", next.Name, v.Name, err)
			}
			vc.schema = validator
			vc.rules = cel.NewValidator(s, true, celconfig.PerCallLimit)
		}
		c.versions[v.Name] = vc
	}
	return c, nil
}

// Check returns how the new CustomResourceDefinition breaks obj, a custom
// resource as the API server returned it (at the version its apiVersion
// names), in field order; nil when it does not.
func (c *Checker) Check(ctx context.Context, obj *unstructured.Unstructured) []Breakage {
	version := obj.GroupVersionKind().Version
	id := c.kind + " " + obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		id = c.kind + " " + ns + "/" + obj.GetName()
	}
	vc, ok := c.versions[version]
	if !ok || !vc.served {
		return []Breakage{{Object: id, Version: version, Reason: ReasonVersionNotServed,
			Message: fmt.Sprintf("version %s is not served by the new CustomResourceDefinition", version)}}
	}
	if vc.structural == nil {
		return nil
	}
	var out []Breakage
	add := func(reason string, errs field.ErrorList) {
		for _, e := range errs {
			b := Breakage{Object: id, Version: version, Reason: reason, Field: e.Field, Message: e.ErrorBody()}
			if reason == ReasonRule {
				b.Rule = ruleOf(e)
			}
			out = append(out, b)
		}
	}
	add(ReasonSchema, apiservervalidation.ValidateCustomResource(nil, obj.UnstructuredContent(), vc.schema))
	if vc.rules != nil {
		errs, _ := vc.rules.Validate(ctx, nil, vc.structural, obj.UnstructuredContent(), nil, celconfig.RuntimeCELCostBudget)
		add(ReasonRule, errs)
	}
	pruned := runtime.DeepCopyJSON(obj.UnstructuredContent())
	paths := pruning.PruneWithOptions(pruned, vc.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	slices.Sort(paths)
	for _, p := range paths {
		if p == "metadata" || strings.HasPrefix(p, "metadata.") || p == "status" || strings.HasPrefix(p, "status.") {
			// metadata is the API server's, and status is written by the
			// provider, which knows the new schema.
			continue
		}
		out = append(out, Breakage{Object: id, Version: version, Reason: ReasonPruned, Field: p,
			Message: "field not in the new schema: dropped at the object's next write"})
	}
	return out
}

// ruleOf returns the CEL rule a validation error is about, when its detail
// names one.
func ruleOf(e *field.Error) string {
	if e.Detail != "" && strings.Contains(e.Detail, "failed rule:") {
		_, r, _ := strings.Cut(e.Detail, "failed rule:")
		return strings.TrimSpace(r)
	}
	return ""
}
