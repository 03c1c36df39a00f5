package render

import (
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

const reviewNS = "crossplane-system"

// decodeAs decodes a rendered object into a typed API object.
func decodeAs(t *testing.T, o *Object, into any) {
	t.Helper()
	u, err := o.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("%s: %v", o, err)
	}
}

// check runs one named rule as a subtest.
func check(t *testing.T, name string, f func(t *testing.T)) { t.Helper(); t.Run(name, f) }

func wantLockstepLabels(t *testing.T, labels map[string]string) {
	t.Helper()
	if labels[LabelManagedBy] != ManagedByValue || labels[LabelInstance] != "golden" {
		t.Errorf("labels %v lack %s=%s and %s=golden", labels, LabelManagedBy, ManagedByValue, LabelInstance)
	}
}

func wantController(t *testing.T, o *Object, want Reference) {
	t.Helper()
	if o.Controller == nil || *o.Controller != want {
		t.Errorf("%s: controller = %v, want %v", o, o.Controller, want)
	}
}

// TestReview checks every rendered Deployment, Service, ClusterRole and
// ClusterRoleBinding of every case against the rules of
// docs/crossplane-behaviour.md#runtime-reconcile (runtime)
// and docs/crossplane-behaviour.md#provider-rbac (RBAC), one named subtest per rule.
func TestReview(t *testing.T) {
	for _, c := range renderCases() {
		t.Run(c.name, func(t *testing.T) {
			in := caseInput(t, c)
			out, err := Render(in)
			if err != nil {
				t.Fatalf("Render(...): %v", err)
			}
			pkgs := map[string]*Package{}
			for i := range in.Packages {
				pkgs[in.Packages[i].Name] = &in.Packages[i]
			}
			for _, po := range out.Packages {
				p, e := pkgs[po.Name], c.expects[po.Name]
				d := declaration(p)
				var deployment *appsv1.Deployment
				for _, o := range po.Revision.Runtime {
					switch o.Kind {
					case "Deployment":
						deployment = &appsv1.Deployment{}
						decodeAs(t, o, deployment)
						t.Run(po.Name+"/Deployment", func(t *testing.T) { reviewDeployment(t, p, &d, po, o, e) })
					case "Service":
						t.Run(po.Name+"/Service", func(t *testing.T) { reviewService(t, p, po, o, e) })
					}
				}
				if p.Kind.Descriptor().HasRuntime && deployment == nil {
					t.Errorf("%s: no Deployment rendered", p)
				}
				if !p.Kind.Descriptor().HasRuntime && len(po.Revision.Runtime) > 0 {
					t.Errorf("%s: a Configuration has no runtime, got %d objects", p, len(po.Revision.Runtime))
				}
				if p.Kind != crossplane.KindProvider {
					if len(po.Revision.RBAC) > 0 {
						t.Errorf("%s: only Providers get RBAC, got %d objects", p, len(po.Revision.RBAC))
					}
					continue
				}
				t.Run(po.Name+"/RBAC", func(t *testing.T) { reviewRBAC(t, p, pkgs, po, deployment, e) })
			}
		})
	}
}

func reviewDeployment(t *testing.T, p *Package, d *declarations.Declaration, po *PackageOutput, o *Object, e expect) {
	var dep appsv1.Deployment
	decodeAs(t, o, &dep)
	rev := po.Revision.Name
	ps := dep.Spec.Template.Spec
	var c corev1.Container
	if len(ps.Containers) > 0 {
		c = ps.Containers[0]
	}
	kind := p.Kind.Lower()

	check(t, "named after the revision in the Crossplane namespace", func(t *testing.T) {
		if dep.Name != rev || dep.Namespace != reviewNS {
			t.Errorf("Deployment %s/%s, want %s/%s", dep.Namespace, dep.Name, reviewNS, rev)
		}
		wantLockstepLabels(t, dep.Labels)
	})
	check(t, "controlled by the revision", func(t *testing.T) {
		wantController(t, o, po.revisionRef())
		if len(o.Owners) != 0 || !o.RevisionUID {
			t.Errorf("owners %v, RevisionUID %v; want no other owners and REVISION_UID bound", o.Owners, o.RevisionUID)
		}
		if len(dep.OwnerReferences) != 0 {
			t.Errorf("rendered ownerReferences %v; they are bound by apply", dep.OwnerReferences)
		}
	})
	check(t, "package-runtime container first", func(t *testing.T) {
		if c.Name != RuntimeContainerName {
			t.Errorf("first container %q, want %q", c.Name, RuntimeContainerName)
		}
	})
	check(t, "image pinned by digest, rewritten, or spec.controller.image", func(t *testing.T) {
		want := p.Source + "@" + p.Digest
		switch {
		case strings.HasSuffix(e.image, "@"):
			want = e.image + p.Digest
		case e.image != "":
			want = e.image
		}
		if c.Image != want || po.Revision.Image != want {
			t.Errorf("image %q (RevisionOutput.Image %q), want %q", c.Image, po.Revision.Image, want)
		}
	})
	check(t, "replicas default 1 unless the runtime config sets them", func(t *testing.T) {
		want := int32(1)
		if e.replicas != 0 {
			want = e.replicas
		}
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != want {
			t.Errorf("replicas %v, want %d", dep.Spec.Replicas, want)
		}
	})
	check(t, "pod security context default", func(t *testing.T) {
		want := &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(2000)), RunAsGroup: ptr.To(int64(2000))}
		if diff := cmp.Diff(want, ps.SecurityContext); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	check(t, "container security context default", func(t *testing.T) {
		want := &corev1.SecurityContext{RunAsUser: ptr.To(int64(2000)), RunAsGroup: ptr.To(int64(2000)),
			AllowPrivilegeEscalation: ptr.To(false), Privileged: ptr.To(false), RunAsNonRoot: ptr.To(true)}
		if diff := cmp.Diff(want, c.SecurityContext); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	check(t, "imagePullPolicy is the package's packagePullPolicy", func(t *testing.T) {
		if c.ImagePullPolicy != d.Spec.PackagePullPolicy {
			t.Errorf("imagePullPolicy %q, want %q", c.ImagePullPolicy, d.Spec.PackagePullPolicy)
		}
	})
	check(t, "service account", func(t *testing.T) {
		want := rev
		if e.serviceAccount != "" {
			want = e.serviceAccount
		}
		if ps.ServiceAccountName != want {
			t.Errorf("serviceAccountName %q, want %q", ps.ServiceAccountName, want)
		}
		var sa *Object
		for _, o := range po.Revision.Runtime {
			if o.Kind == "ServiceAccount" {
				sa = o
			}
		}
		if sa == nil || sa.Name != want || sa.Namespace != reviewNS {
			t.Errorf("ServiceAccount %v, want %s/%s rendered", sa, reviewNS, want)
		} else {
			wantController(t, sa, po.revisionRef())
		}
	})
	check(t, "selector is the revision and package labels, merged into the pod labels", func(t *testing.T) {
		sel := map[string]string{LabelRevision: rev, "pkg.crossplane.io/" + kind: p.Name}
		if dep.Spec.Selector == nil || !cmp.Equal(dep.Spec.Selector.MatchLabels, sel) {
			t.Errorf("matchLabels %v, want %v", dep.Spec.Selector, sel)
		}
		want := map[string]string{}
		for k, v := range e.podLabels {
			want[k] = v
		}
		for k, v := range sel {
			want[k] = v
		}
		if diff := cmp.Diff(want, dep.Spec.Template.Labels); diff != "" {
			t.Errorf("pod labels -want, +got:\n%s", diff)
		}
	})
	check(t, "image pull secrets are the package's, then the ImageConfig's", func(t *testing.T) {
		var want []corev1.LocalObjectReference
		for _, s := range e.pullSecrets {
			want = append(want, corev1.LocalObjectReference{Name: s})
		}
		if diff := cmp.Diff(want, ps.ImagePullSecrets); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	check(t, "ports", func(t *testing.T) {
		want := []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}, {Name: "webhook", ContainerPort: 9443}}
		if p.Kind == crossplane.KindFunction {
			want[1] = corev1.ContainerPort{Name: "grpc", ContainerPort: 9443}
		}
		if diff := cmp.Diff(want, c.Ports); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	check(t, "environment", func(t *testing.T) {
		field := func(path string) *corev1.EnvVarSource {
			return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
		}
		want := []corev1.EnvVar{
			{Name: "TLS_CLIENT_CERTS_DIR", Value: "/tls/client"},
			{Name: "TLS_SERVER_CERTS_DIR", Value: "/tls/server"},
			{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")},
			{Name: "PROVIDER_NAME", ValueFrom: field("metadata.labels['pkg.crossplane.io/provider']")},
			{Name: "REVISION_NAME", ValueFrom: field("metadata.labels['pkg.crossplane.io/revision']")},
			{Name: "REVISION_UID"},
			{Name: "WEBHOOK_TLS_CERT_DIR", Value: "$(TLS_SERVER_CERTS_DIR)"},
		}
		if p.Kind == crossplane.KindFunction {
			want = []corev1.EnvVar{
				{Name: "TLS_SERVER_CERTS_DIR", Value: "/tls/server"},
				{Name: "FUNCTION_NAME", ValueFrom: field("metadata.labels['pkg.crossplane.io/function']")},
				{Name: "REVISION_NAME", ValueFrom: field("metadata.labels['pkg.crossplane.io/revision']")},
				{Name: "REVISION_UID"},
			}
		}
		if diff := cmp.Diff(want, c.Env); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	check(t, "TLS volumes and read-only mounts", func(t *testing.T) {
		items := []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}, {Key: "ca.crt", Path: "ca.crt"}}
		vol := func(name, secret string) corev1.Volume {
			return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, Items: items}}}
		}
		wantVols := []corev1.Volume{vol("tls-client-certs", p.Name+"-tls-client"), vol("tls-server-certs", p.Name+"-tls-server")}
		wantMounts := []corev1.VolumeMount{{Name: "tls-client-certs", ReadOnly: true, MountPath: "/tls/client"}, {Name: "tls-server-certs", ReadOnly: true, MountPath: "/tls/server"}}
		if p.Kind == crossplane.KindFunction {
			wantVols, wantMounts = wantVols[1:], wantMounts[1:]
		}
		if diff := cmp.Diff(wantVols, ps.Volumes); diff != "" {
			t.Errorf("volumes -want, +got:\n%s", diff)
		}
		if diff := cmp.Diff(wantMounts, c.VolumeMounts); diff != "" {
			t.Errorf("mounts -want, +got:\n%s", diff)
		}
	})
	check(t, "TLS Secret requests", func(t *testing.T) {
		want := map[string]certs.TLSRequest{}
		svc := p.Name
		if e.serviceName != "" {
			svc = e.serviceName
		}
		want[p.Name+"-tls-server"] = certs.TLSRequest{Usage: certs.TLSServer, DNSNames: []string{svc, svc + "." + reviewNS, svc + "." + reviewNS + ".svc"}, CASecretName: certs.RootCASecretName}
		if p.Kind == crossplane.KindProvider {
			want[p.Name+"-tls-client"] = certs.TLSRequest{Usage: certs.TLSClient, DNSNames: []string{rev}, CASecretName: certs.RootCASecretName}
		}
		got := map[string]certs.TLSRequest{}
		for _, o := range po.Revision.Runtime {
			if o.Kind != "Secret" {
				continue
			}
			if o.TLS == nil {
				t.Errorf("Secret %s is not a TLS request", o)
				continue
			}
			got[o.Name] = *o.TLS
			// Every TLS Secret is controlled by the revision, a Provider's
			// as a Function's (docs/crossplane-behaviour.md#runtime-objects).
			wantController(t, o, po.revisionRef())
			if strings.Contains(string(o.JSON()), `"data"`) {
				t.Errorf("Secret %s carries data; render never generates keys", o)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	check(t, "Prometheus scrape annotations on provider pods only", func(t *testing.T) {
		var want map[string]string
		if p.Kind == crossplane.KindProvider {
			want = map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080", "prometheus.io/path": "/metrics"}
		}
		if diff := cmp.Diff(want, dep.Spec.Template.Annotations); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	check(t, "Bind sets the controller reference and REVISION_UID", func(t *testing.T) {
		ref := po.revisionRef()
		u, err := o.Bind(Binding{UIDs: map[Reference]types.UID{ref: "rev-uid"}})
		if err != nil {
			t.Fatal(err)
		}
		want := []metav1.OwnerReference{{APIVersion: "pkg.crossplane.io/v1", Kind: ref.Kind, Name: rev, UID: "rev-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		if diff := cmp.Diff(want, u.GetOwnerReferences()); diff != "" {
			t.Errorf("ownerReferences -want, +got:\n%s", diff)
		}
		var bound appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &bound); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, env := range bound.Spec.Template.Spec.Containers[0].Env {
			if env.Name == "REVISION_UID" {
				found = env.Value == "rev-uid"
			}
		}
		if !found {
			t.Errorf("REVISION_UID is not rev-uid after Bind")
		}
	})
}

func reviewService(t *testing.T, p *Package, po *PackageOutput, o *Object, e expect) {
	var svc corev1.Service
	decodeAs(t, o, &svc)
	want := p.Name
	if e.serviceName != "" {
		want = e.serviceName
	}
	check(t, "named after the package in the Crossplane namespace", func(t *testing.T) {
		if svc.Name != want || svc.Namespace != reviewNS {
			t.Errorf("Service %s/%s, want %s/%s", svc.Namespace, svc.Name, reviewNS, want)
		}
		wantLockstepLabels(t, svc.Labels)
	})
	check(t, "controlled by the revision", func(t *testing.T) { wantController(t, o, po.revisionRef()) })
	check(t, "selects the revision's pods", func(t *testing.T) {
		sel := map[string]string{LabelRevision: po.Revision.Name, p.Kind.Descriptor().LabelKey(): p.Name}
		if !cmp.Equal(sel, svc.Spec.Selector) {
			t.Errorf("selector %v, want %v", svc.Spec.Selector, sel)
		}
	})
	check(t, "ports and headlessness", func(t *testing.T) {
		wantPorts := []corev1.ServicePort{{Name: "webhook", Protocol: corev1.ProtocolTCP, Port: 9443, TargetPort: intstr.FromString("webhook")}}
		wantIP := ""
		if p.Kind == crossplane.KindFunction {
			wantPorts = []corev1.ServicePort{{Name: "grpc", Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("tls"), Port: 9443, TargetPort: intstr.FromString("grpc")}}
			wantIP = corev1.ClusterIPNone
		}
		if diff := cmp.Diff(wantPorts, svc.Spec.Ports); diff != "" {
			t.Errorf("ports -want, +got:\n%s", diff)
		}
		if svc.Spec.ClusterIP != wantIP {
			t.Errorf("clusterIP %q, want %q", svc.Spec.ClusterIP, wantIP)
		}
	})
	if p.Kind == crossplane.KindFunction {
		check(t, "the function endpoint names the Service", func(t *testing.T) {
			if w := "dns:///" + want + "." + reviewNS + ":9443"; po.Revision.Endpoint != w {
				t.Errorf("endpoint %q, want %q", po.Revision.Endpoint, w)
			}
		})
	}
}

// expectedRules computes, independently of rbac.go, the per-group resource
// rules of docs/crossplane-behaviour.md#provider-rbac for the CRDs of the given packages: sorted by
// plural+group, each group's resources with their /status subresource.
func expectedRules(pkgs ...*Package) (groups []string, rules []rbacv1.PolicyRule) {
	type res struct{ plural, group string }
	seen := map[res]bool{}
	var all []res
	for _, p := range pkgs {
		for _, o := range p.Contents.Objects {
			if o.GroupKind() != crossplane.GroupKindCRD && o.GroupKind() != crossplane.GroupKindMRD {
				continue
			}
			i := strings.Index(o.Name, ".")
			r := res{o.Name[:i], o.Name[i+1:]}
			if !seen[r] {
				seen[r] = true
				all = append(all, r)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].plural+all[i].group < all[j].plural+all[j].group })
	idx := map[string]int{}
	for _, r := range all {
		i, ok := idx[r.group]
		if !ok {
			i = len(rules)
			idx[r.group] = i
			groups = append(groups, r.group)
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{r.group}})
		}
		rules[i].Resources = append(rules[i].Resources, r.plural, r.plural+"/status")
	}
	return groups, rules
}

func reviewRBAC(t *testing.T, p *Package, pkgs map[string]*Package, po *PackageOutput, dep *appsv1.Deployment, e expect) {
	rev := po.Revision.Name
	if e.refused {
		check(t, "refused permission requests render no RBAC and name the rule", func(t *testing.T) {
			if len(po.Revision.RBAC) != 0 {
				t.Errorf("rendered %d RBAC objects, want none", len(po.Revision.RBAC))
			}
			var perr *PermissionError
			if !errors.As(po.Revision.Problem, &perr) {
				t.Fatalf("Problem = %v, want a *PermissionError", po.Revision.Problem)
			}
			if perr.Package != p.Name || perr.Revision != rev || len(perr.Refused) == 0 {
				t.Errorf("PermissionError %+v does not name %s, %s and the refused rules", perr, p.Name, rev)
			}
		})
		return
	}
	roles := map[string]*rbacv1.ClusterRole{}
	var binding *rbacv1.ClusterRoleBinding
	for _, o := range po.Revision.RBAC {
		check(t, o.Kind+" "+o.Name+" is controlled by the revision", func(t *testing.T) { wantController(t, o, po.revisionRef()) })
		switch o.Kind {
		case "ClusterRole":
			cr := &rbacv1.ClusterRole{}
			decodeAs(t, o, cr)
			roles[cr.Name] = cr
		case "ClusterRoleBinding":
			binding = &rbacv1.ClusterRoleBinding{}
			decodeAs(t, o, binding)
		}
	}
	edit := roles["crossplane:provider:"+rev+":aggregate-to-edit"]
	view := roles["crossplane:provider:"+rev+":aggregate-to-view"]
	system := roles["crossplane:provider:"+rev+":system"]
	check(t, "three ClusterRoles and one binding", func(t *testing.T) {
		if len(roles) != 3 || edit == nil || view == nil || system == nil || binding == nil {
			t.Fatalf("roles %v, binding %v; want aggregate-to-edit, aggregate-to-view, system and a binding", slicesOfKeys(roles), binding != nil)
		}
	})
	if edit == nil || view == nil || system == nil || binding == nil {
		return
	}
	check(t, "aggregation labels", func(t *testing.T) {
		for _, tc := range []struct {
			role *rbacv1.ClusterRole
			keys map[string]string
		}{
			{edit, map[string]string{"rbac.crossplane.io/aggregate-to-crossplane": "true", "rbac.crossplane.io/aggregate-to-admin": "true", "rbac.crossplane.io/aggregate-to-edit": "true"}},
			{view, map[string]string{"rbac.crossplane.io/aggregate-to-view": "true"}},
			{system, map[string]string{"rbac.crossplane.io/system": rev}},
		} {
			wantLockstepLabels(t, tc.role.Labels)
			for k, v := range tc.keys {
				if tc.role.Labels[k] != v {
					t.Errorf("%s: label %s=%q, want %q", tc.role.Name, k, tc.role.Labels[k], v)
				}
			}
		}
	})
	members := []*Package{p}
	for _, m := range e.rbacFrom {
		members = append(members, pkgs[m])
	}
	groups, resourceRules := expectedRules(members...)
	withVerbs := func(verbs ...string) []rbacv1.PolicyRule {
		out := make([]rbacv1.PolicyRule, len(resourceRules))
		for i, r := range resourceRules {
			out[i] = rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: r.Resources, Verbs: verbs}
		}
		return out
	}
	check(t, "aggregate-to-edit: every resource and its status, all verbs, sorted", func(t *testing.T) {
		if diff := cmp.Diff(withVerbs("*"), edit.Rules); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	check(t, "aggregate-to-view: get, list, watch", func(t *testing.T) {
		if diff := cmp.Diff(withVerbs("get", "list", "watch"), view.Rules); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	check(t, "system: resources, finalizers, core extras, safe-start, permission requests", func(t *testing.T) {
		want := withVerbs("get", "list", "watch", "update", "patch", "create")
		want = append(want,
			rbacv1.PolicyRule{APIGroups: groups, Resources: []string{"*/finalizers"}, Verbs: []string{"update"}},
			rbacv1.PolicyRule{APIGroups: []string{"", "coordination.k8s.io"}, Resources: []string{"secrets", "configmaps", "events", "leases"}, Verbs: []string{"*"}},
		)
		for _, c := range p.Contents.Meta.Capabilities {
			if strings.EqualFold(strings.ReplaceAll(c, "-", ""), "safestart") {
				want = append(want, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}})
			}
		}
		if c := p.Contents.Meta.Controller; c != nil {
			want = append(want, c.PermissionRequests...)
		}
		if diff := cmp.Diff(want, system.Rules); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
	})
	check(t, "binding: the system role to the Deployment's ServiceAccount", func(t *testing.T) {
		want := rbacv1.ClusterRoleBinding{
			TypeMeta:   binding.TypeMeta,
			ObjectMeta: metav1.ObjectMeta{Name: "crossplane:provider:" + rev + ":system", Labels: binding.Labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "crossplane:provider:" + rev + ":system"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: dep.Spec.Template.Spec.ServiceAccountName, Namespace: reviewNS}},
		}
		if diff := cmp.Diff(want, *binding); diff != "" {
			t.Errorf("-want, +got:\n%s", diff)
		}
		wantLockstepLabels(t, binding.Labels)
	})
}

func slicesOfKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
