// Package v1alpha1 holds the lockstep.io/v1alpha1 API: the Sync object a
// lockstep agent reports on. The CustomResourceDefinition in
// cmd/internal/agent/crds/lockstep.io_syncs.yaml and the DeepCopy methods in
// zz_generated.deepcopy.go are generated from these types by controller-gen
// (`make generate`); the kubebuilder markers on the types say what goes into
// the CRD (https://book.kubebuilder.io/reference/markers/crd).
//
// +kubebuilder:object:generate=true
// +groupName=lockstep.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is lockstep.io/v1alpha1.
var GroupVersion = schema.GroupVersion{Group: "lockstep.io", Version: "v1alpha1"}

// SyncKind is the kind of Sync; SyncGroupVersionKind is its full GVK.
const SyncKind = "Sync"

// SyncGroupVersionKind is the group, version and kind of Sync.
var SyncGroupVersionKind = GroupVersion.WithKind(SyncKind)

// AddToScheme registers Sync and SyncList with a runtime.Scheme, as
// client-go's generated AddToScheme functions do, so that typed clients and
// controller-runtime caches can read them.
var AddToScheme = schemeBuilder.AddToScheme

var schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Sync{}, &SyncList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
