package render

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// Deletion protection (docs/design/apply.md#deletion-protection; lockstep issue
// 15, item 10). Deleting a package record by hand makes the garbage
// collector delete its revisions and, through their owner references, its
// CRDs and every custom resource of them (crossplane/crossplane#6001). A
// ValidatingAdmissionPolicy that lockstep installs per instance denies such
// deletes to everyone but lockstep itself.
const (
	// AnnotationAllowDelete is the escape hatch of deletion protection: an
	// object annotated with it set to "true" may be deleted by anyone whose
	// RBAC allows it (`kubectl annotate provider x lockstep.io/allow-delete=true`).
	AnnotationAllowDelete = "lockstep.io/allow-delete"

	// GarbageCollectorUser and ControllerManagerUser are the identities
	// Kubernetes' garbage collector deletes dependents with: its own
	// ServiceAccount when kube-controller-manager runs with
	// --use-service-account-credentials, the controller manager's user
	// otherwise (kubernetes/kubernetes
	// pkg/controller/garbagecollector/garbagecollector.go). The collector
	// deletes an object only once every owner is gone, and every owner of a
	// protected object is itself protected, so letting it through lets
	// lockstep's own deletes cascade without opening a way around the
	// policy.
	GarbageCollectorUser  = "system:serviceaccount:kube-system:generic-garbage-collector"
	ControllerManagerUser = "system:kube-controller-manager"
)

// DeletionProtectionName returns the name of the ValidatingAdmissionPolicy
// and of its binding for instance: "lockstep-deletion-protection-<instance>".
func DeletionProtectionName(instance string) string {
	return protectionPrefix + instance
}

// DeletionProtection renders the admissionregistration.k8s.io/v1
// ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding that deny
// the DELETE of instance's package records (Provider, Configuration,
// Function), their revisions, and its CRDs, MRDs and XRDs — every object
// of those kinds labelled LabelInstance=instance — unless the request's
// user is identity (lockstep's own user name, as a SelfSubjectReview
// returns it), the garbage collector (GarbageCollectorUser,
// ControllerManagerUser), or the object is annotated
// AnnotationAllowDelete="true". Since the binding selects by that label,
// an UPDATE that removes or changes it is denied on the same terms (the
// annotation may be set by the same update), or the protection could be
// bypassed by unlabelling the object first; a binding's object selector
// matches an update when the old or the new object matches
// (k8s.io/api admissionregistration/v1 MatchResources.ObjectSelector). The policy is CEL evaluated in the API
// server (Kubernetes 1.30+, where ValidatingAdmissionPolicy is GA); no
// webhook runs. It returns the policy, then the binding, as unstructured
// objects for server-side apply, and an error when identity is empty or
// holds a control character.
func DeletionProtection(instance, identity string) ([]*unstructured.Unstructured, error) {
	if identity == "" {
		return nil, errors.New("deletion protection: lockstep's user name is empty")
	}
	if strings.ContainsFunc(identity, unicode.IsControl) {
		return nil, fmt.Errorf("deletion protection: lockstep's user name %q holds a control character", identity)
	}
	name := DeletionProtectionName(instance)
	labels := InstanceLabels(instance)
	var records []string
	for _, k := range crossplane.PackageKinds() {
		records = append(records, plural(string(k.Kind)), plural(k.RevisionKind))
	}
	rule := func(group string, resources ...string) admissionregistrationv1.NamedRuleWithOperations {
		return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources},
		}}
	}
	fail := admissionregistrationv1.Fail
	// CEL string literals share Go's quoted form for printable text.
	deleters := "[" + strings.Join([]string{strconv.Quote(identity), strconv.Quote(GarbageCollectorUser), strconv.Quote(ControllerManagerUser)}, ", ") + "]"
	allowKey := strconv.Quote(AnnotationAllowDelete)
	instanceKey := strconv.Quote(LabelInstance)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				rule(crossplane.Group, records...),
				rule(crossplane.GroupKindCRD.Group, plural(crossplane.GroupKindCRD.Kind)),
				rule(crossplane.APIExtensionsGroup, plural(crossplane.GroupKindXRD.Kind), plural(crossplane.GroupKindMRD.Kind)),
			}},
			Variables: []admissionregistrationv1.Variable{
				{Name: "deleters", Expression: deleters},
				{Name: "allowDelete", Expression: "has(oldObject.metadata.annotations) && " + allowKey + " in oldObject.metadata.annotations && oldObject.metadata.annotations[" + allowKey + "] == 'true'"},
				// An update may set the annotation and drop the label in one
				// request (lockstep handback does).
				{Name: "allowDeleteNew", Expression: "request.operation == 'UPDATE' && has(object.metadata.annotations) && " + allowKey + " in object.metadata.annotations && object.metadata.annotations[" + allowKey + "] == 'true'"},
				{Name: "labelKept", Expression: "request.operation == 'UPDATE' && has(object.metadata.labels) && " + instanceKey + " in object.metadata.labels && object.metadata.labels[" + instanceKey + "] == " + strconv.Quote(instance)},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "request.operation != 'UPDATE' || variables.labelKept || request.userInfo.username in variables.deleters || variables.allowDelete || variables.allowDeleteNew",
				Message: fmt.Sprintf("lockstep instance %q manages this object and deletion protection allows only %s to remove or change its %s label, which would take it out of that protection. "+
					"Run lockstep handback to give the package back to Crossplane, or annotate the object %s=true first", instance, identity, LabelInstance, AnnotationAllowDelete),
				Reason: ptrTo(metav1.StatusReasonForbidden),
			}, {
				Expression: "request.operation != 'DELETE' || request.userInfo.username in variables.deleters || variables.allowDelete",
				Message: fmt.Sprintf("lockstep instance %q manages this object and deletion protection allows only %s to delete it: deleting it by hand can delete CRDs and every resource of them (crossplane/crossplane#6001). "+
					"Remove the package from Git to uninstall it, or annotate the object %s=true to delete it anyway", instance, identity, AnnotationAllowDelete),
				Reason: ptrTo(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelInstance: instance}},
			},
		},
	}
	var out []*unstructured.Unstructured
	for _, o := range []runtime.Object{policy, binding} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("deletion protection: %w", err)
		}
		// Neither object has a status lockstep sets, nor a creation time.
		delete(m, "status")
		unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// plural returns the resource name of a kind whose plural adds an s, as
// every kind deletion protection matches does.
func plural(kind string) string { return strings.ToLower(kind) + "s" }

func ptrTo[T any](v T) *T { return &v }

// protectionPrefix starts ProtectionName.
const protectionPrefix = "lockstep-deletion-protection-"

// AnnotationAdopt is how a manifest opts in to taking over an object that
// exists and that lockstep did not create: set to "true" on the manifest in
// Git. Without it, an apply that finds such an object refuses the whole
// commit before it writes anything, naming the object's owner and field
// managers (docs/design/manifests.md#manifests), since the object would be deleted
// when its manifest leaves Git. Flux and Argo CD take such objects over
// silently; lockstep asks first.
const AnnotationAdopt = "lockstep.io/adopt"
