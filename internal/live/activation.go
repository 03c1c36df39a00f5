package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// mrdVersion is the version of ManagedResourceDefinition and
// ManagedResourceActivationPolicy Crossplane v2 serves.
const mrdVersion = "v1alpha1"

// tableAccept asks the API server for its Table rendering of a LIST, the
// one kubectl get prints: the columns of the CRD's additionalPrinterColumns
// (for MRDs: STATE, ESTABLISHED, AGE) without the objects
// (https://kubernetes.io/docs/reference/using-api/api-concepts/#receiving-resources-as-tables).
const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io"

// ReadActivation reads the cluster's activation state for render
// (declarations.ClusterActivation): the ManagedResourceActivationPolicies that
// the lockstep instance does not apply (without its instance label, or
// with another instance's), and the names of the MRDs whose spec.state is
// Active. It costs one LIST of policies and one LIST of MRDs in the
// API server's Table form (name and state, not the MRDs' schemas), 500 a
// page. A cluster without Crossplane v2's API (the kinds are not served)
// has neither and gives an empty state, no error. c reads the policies;
// cfg reaches the API server for the MRD table. Errors name what could
// not be read.
func ReadActivation(ctx context.Context, c client.Reader, cfg *rest.Config, own map[string]string) (*declarations.ClusterActivation, error) {
	policies, err := ReadPolicies(ctx, c, own)
	if err != nil {
		return nil, err
	}
	out := &declarations.ClusterActivation{Policies: policies, ActiveMRDs: map[string]bool{}}
	active, err := activeMRDs(ctx, cfg)
	if err != nil {
		return nil, err
	}
	for _, n := range active {
		out.ActiveMRDs[n] = true
	}
	return out, nil
}

// ReadPolicies returns the cluster's ManagedResourceActivationPolicies
// that the lockstep instance does not apply (those that lack one of the
// labels own, or hold another value), with one LIST; none, and no error, where
// the kind is not served. ReadActivation's policies.
func ReadPolicies(ctx context.Context, c client.Reader, own map[string]string) ([]declarations.ActivationPolicy, error) {
	gvk := crossplane.GroupKindMRAP.WithVersion(mrdVersion)
	list, err := ListAll(ctx, c, gvk, "", nil)
	if err != nil && !notServed(err) {
		return nil, fmt.Errorf("cannot list %ss: %w", gvk.Kind, err)
	}
	ours := labels.SelectorFromSet(own)
	var out []declarations.ActivationPolicy
	for _, u := range list {
		if ours.Matches(labels.Set(u.GetLabels())) {
			continue
		}
		acts, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "activate")
		out = append(out, declarations.NewActivationPolicy(u.GetName(), acts...))
	}
	return out, nil
}

// notServed reports whether err says the kind is not served.
func notServed(err error) bool {
	return meta.IsNoMatchError(err) || apierrors.IsNotFound(err)
}

// activeMRDs lists the names of the Active MRDs from the API server's
// Table of ManagedResourceDefinitions, PageSize rows a page. A Table
// without a State column is an error; a kind not served gives none.
func activeMRDs(ctx context.Context, cfg *rest.Config) ([]string, error) {
	gv := schema.GroupVersion{Group: crossplane.APIExtensionsGroup, Version: mrdVersion}
	rc := rest.CopyConfig(cfg)
	rc.GroupVersion = &gv
	rc.APIPath = "/apis"
	rc.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	cl, err := rest.RESTClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("cannot list ManagedResourceDefinitions: %w", err)
	}
	var out []string
	cont := ""
	for {
		req := cl.Get().Resource("managedresourcedefinitions").SetHeader("Accept", tableAccept).
			Param("includeObject", "None").Param("limit", fmt.Sprint(PageSize))
		if cont != "" {
			req = req.Param("continue", cont)
		}
		raw, err := req.DoRaw(ctx)
		if err != nil {
			if apierrors.IsNotFound(err) && cont == "" {
				return nil, nil
			}
			return nil, fmt.Errorf("cannot list ManagedResourceDefinitions: %w", err)
		}
		var t metav1.Table
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("ManagedResourceDefinitions: cannot decode the API server's table: %w", err)
		}
		names, err := activeRows(&t)
		if err != nil {
			return nil, fmt.Errorf("ManagedResourceDefinitions: %w", err)
		}
		out = append(out, names...)
		if cont = t.Continue; cont == "" {
			return out, nil
		}
	}
}

// activeRows returns the names (first cell) of the Table's rows whose State
// cell is Active.
func activeRows(t *metav1.Table) ([]string, error) {
	state := -1
	for i, c := range t.ColumnDefinitions {
		if strings.EqualFold(c.Name, "state") {
			state = i
		}
	}
	if state < 0 {
		return nil, errors.New("the API server's table has no State column")
	}
	var out []string
	for _, r := range t.Rows {
		if len(r.Cells) <= state {
			continue
		}
		name, _ := r.Cells[0].(string)
		if s, _ := r.Cells[state].(string); s == crossplane.MRDStateActive && name != "" {
			out = append(out, name)
		}
	}
	return out, nil
}
