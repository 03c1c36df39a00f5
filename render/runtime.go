package render

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/google/go-containerregistry/pkg/name"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/declarations"
)

// Environment variables, volumes and paths of the runtime container
// (docs/crossplane-behaviour.md#runtime-deployment; crossplane/crossplane
// internal/controller/pkg/runtime).
const (
	envTLSServerCertsDir  = "TLS_SERVER_CERTS_DIR"
	envTLSClientCertsDir  = "TLS_CLIENT_CERTS_DIR"
	envWebhookTLSCertDir  = "WEBHOOK_TLS_CERT_DIR"
	volumeTLSServerCerts  = "tls-server-certs"
	volumeTLSClientCerts  = "tls-client-certs"
	pathTLSServerCerts    = "/tls/server"
	pathTLSClientCerts    = "/tls/client"
	annotationScrape      = "prometheus.io/scrape"
	annotationScrapePort  = "prometheus.io/port"
	annotationScrapePath  = "prometheus.io/path"
	defaultRuntimeUserID  = int64(2000)
	defaultRuntimeGroupID = int64(2000)
)

// runtimeInputs are what a package's runtime objects are rendered from.
type runtimeInputs struct {
	p    *Package
	d    *declarations.Declaration
	po   *PackageOutput
	drc  *declarations.DeploymentRuntimeConfig
	pull string // the ImageConfig pull secret for the runtime image, "" for none
	// controllerImage says v1-style metadata's spec.controller.image is
	// the image, which shapes the Deployment (Object.FromDefaults).
	controllerImage bool
}

// runtimeImage returns the image of the runtime container and the resolved
// package reference it is derived from
// (docs/crossplane-behaviour.md#digest-resolution, #runtime-deployment,
// #imageconfig-rewrite): the pinned
// reference source@digest rewritten by the best-matching ImageConfig with a
// rewriteImage section, or spec.controller.image of v1-style provider
// metadata, which is used as it is. Unlike Crossplane, which runs the tag
// unless spec.package is a digest, the package image always runs by digest
// here because lockstep's spec.package is a digest (docs/design/differences.md#differences-from-crossplane).
// The rewritten reference is parsed as an image reference
// (name.StrictValidation) and resolved is its canonical form, so the
// Deployment's image is one the API server accepts.
func (r *renderer) runtimeImage(p *Package) (image, resolved string, err error) {
	rewritten, config, err := r.images.rewrite(p.ref())
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", p, err)
	}
	ref, err := name.ParseReference(rewritten, name.StrictValidation)
	if err != nil {
		return "", "", fmt.Errorf("%s: ImageConfig %s rewrites %s to %q, which is not a valid image reference: %w", p, config, p.ref(), rewritten, err)
	}
	resolved = ref.Name()
	image = resolved
	if c := p.Contents.Meta.Controller; p.Kind.Descriptor().MetaController && c != nil && c.Image != "" {
		image = c.Image
	}
	return image, resolved, nil
}

// runtimeConfig returns the DeploymentRuntimeConfig that shapes the
// package's runtime (docs/crossplane-behaviour.md#runtime-reconcile step 3,
// docs/crossplane-behaviour.md#imageconfig-runtime): the one named by the
// best-matching ImageConfig runtime.configRef for the resolved image if any,
// else by the declaration's runtimeConfigRef (default "default"). A missing
// "default" is an empty config, as Crossplane's init step creates it empty;
// any other missing name is an error naming who referenced it.
func (r *renderer) runtimeConfig(p *Package, d *declarations.Declaration, resolved string) (*declarations.DeploymentRuntimeConfig, error) {
	ref, field := d.RuntimeConfigRef, "spec.runtimeConfigRef"
	if d.Location.File != "" {
		field += " (" + d.Location.String() + ")"
	}
	if icRef, ic := r.images.runtimeConfig(resolved); icRef != nil {
		ref, field = icRef, "ImageConfig "+ic+" spec.runtime.configRef"
	}
	if ref.Kind != crossplane.KindDeploymentRuntimeConfig || ref.APIVersion != crossplane.RuntimeAPIVersion {
		return nil, fmt.Errorf("%s: %s: runtime config %s %s is not a %s %s", p, field, ref.APIVersion, ref.Kind, crossplane.RuntimeAPIVersion, crossplane.KindDeploymentRuntimeConfig)
	}
	if drc, ok := r.runtimeConfigs[ref.Name]; ok {
		return drc, nil
	}
	if ref.Name == declarations.DefaultRuntimeConfigName {
		return &declarations.DeploymentRuntimeConfig{}, nil
	}
	return nil, fmt.Errorf("%s: %s: DeploymentRuntimeConfig %q is not declared", p, field, ref.Name)
}

// runtime renders a Provider's or Function's runtime objects: the TLS
// Secrets, the Service, the ServiceAccount (only when the Deployment runs as
// it, docs/crossplane-behaviour.md#runtime-reconcile step 9) and the
// Deployment. It also returns the name of the
// ServiceAccount the Deployment runs as, the subject of the provider's
// ClusterRoleBinding.
func (r *renderer) runtime(ri *runtimeInputs) ([]*Object, string, error) {
	p, po := ri.p, ri.po
	rev := po.revisionRef()
	var out []*Object
	add := func(obj any, controller Reference) (*Object, error) {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: cannot convert runtime object: %w", p, err)
		}
		delete(m, "status")
		// The typed objects encode an unset creationTimestamp as null, at the
		// top and in a pod template; the API server sets it.
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		if tmpl, ok := asMap(m["spec"])["template"].(map[string]any); ok {
			if meta, ok := tmpl["metadata"].(map[string]any); ok {
				delete(meta, "creationTimestamp")
			}
		}
		o, err := newObject(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		o.Controller = &controller
		out = append(out, o)
		return o, nil
	}

	// TLS Secrets, named after the package and controlled by the revision
	// that runs, as Crossplane's runtime controller makes them; an upgrade
	// hands them to the new revision (docs/crossplane-behaviour.md#runtime-objects,
	// checked against what Crossplane v2.3.4 made in
	// $LOCKSTEP_TESTDATA/crossplane-installed).
	svcName := p.Name
	if t := ri.drc.Spec.ServiceTemplate; t != nil && t.Metadata != nil && t.Metadata.Name != nil && *t.Metadata.Name != "" {
		svcName = *t.Metadata.Name
	}
	server := r.tlsSecret(tlsServerSecretName(p.Name))
	o, err := add(server, rev)
	if err != nil {
		return nil, "", err
	}
	o.TLS = &certs.TLSRequest{Usage: certs.TLSServer, DNSNames: serviceDNSNames(svcName, r.in.Namespace), CASecretName: certs.RootCASecretName}
	if p.Kind.Descriptor().TLSClient {
		o, err := add(r.tlsSecret(tlsClientSecretName(p.Name)), rev)
		if err != nil {
			return nil, "", err
		}
		o.TLS = &certs.TLSRequest{Usage: certs.TLSClient, DNSNames: []string{po.Revision.Name}, CASecretName: certs.RootCASecretName}
	}

	svc := r.service(ri, svcName)
	if _, err := add(svc, rev); err != nil {
		return nil, "", err
	}

	sa := r.serviceAccount(ri)
	dep := r.deployment(ri, sa.Name)
	if sa.Name == dep.Spec.Template.Spec.ServiceAccountName {
		if _, err := add(sa, rev); err != nil {
			return nil, "", err
		}
	}
	o, err = add(dep, rev)
	if err != nil {
		return nil, "", err
	}
	o.RevisionUID = true
	markDefaults(out, ri, len(r.in.CrossplanePullSecrets) > 0)
	sortObjects(out)
	return out, dep.Spec.Template.Spec.ServiceAccountName, nil
}

// runtimeConfigured reports whether the DeploymentRuntimeConfig has a
// template, which may shape the Service, the ServiceAccount, the
// Deployment and the ClusterRoleBinding's subject.
func runtimeConfigured(drc *declarations.DeploymentRuntimeConfig) bool {
	s := drc.Spec
	return s.DeploymentTemplate != nil || s.ServiceTemplate != nil || s.ServiceAccountTemplate != nil
}

// markDefaults sets Object.FromDefaults on runtime objects that no input
// other than lockstep's defaults shaped. A TLS Secret has only its name
// and labels. The DeploymentRuntimeConfig's templates may shape the
// Service, the ServiceAccount and the Deployment; the declared pull
// secrets the ServiceAccount and the Deployment, and Crossplane's own pull
// secrets (extraPullSecrets) the ServiceAccount; an ImageConfig's pull
// secret and spec.controller.image the Deployment. An ImageConfig's
// rewrite does not: runtimeImage parses the rewritten image as an image
// reference (name.StrictValidation) and the Deployment runs its canonical
// form, which the API server accepts (a container image must be set and
// carry no surrounding whitespace). The package name, which names the
// Secrets and the Service, must also be a valid name for each kind (a
// Service's is a DNS-1035 label).
func markDefaults(objs []*Object, ri *runtimeInputs, extraPullSecrets bool) {
	drc := runtimeConfigured(ri.drc)
	pullSecrets := len(ri.d.Spec.PackagePullSecrets) > 0
	for _, o := range objs {
		var shaped bool
		switch o.Kind {
		case "Secret":
		case "Service":
			shaped = drc
		case "ServiceAccount":
			shaped = drc || pullSecrets || extraPullSecrets
		case "Deployment":
			shaped = drc || pullSecrets || ri.pull != "" || ri.controllerImage
		default:
			shaped = true
		}
		o.FromDefaults = !shaped && validName(o.Kind, o.Name)
	}
}

// validName reports whether the API server accepts name for an object of
// kind: a DNS-1035 label for a Service, a path segment for RBAC objects,
// a DNS-1123 subdomain otherwise (k8s.io/apimachinery/pkg/api/validation
// NameIsDNSSubdomain, NameIsDNS1035Label; rbac's ValidateRBACName).
func validName(kind, name string) bool {
	switch kind {
	case "Service":
		return len(validation.IsDNS1035Label(name)) == 0
	case "ClusterRole", "ClusterRoleBinding":
		return len(content.IsPathSegmentName(name)) == 0
	}
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

// serviceDNSNames are the DNS names of a server certificate for a Service
// (docs/crossplane-behaviour.md#tls).
func serviceDNSNames(svc, ns string) []string {
	return []string{svc, svc + "." + ns, svc + "." + ns + ".svc"}
}

// objectMeta returns metadata in the Crossplane namespace with lockstep's
// labels over labels.
func (r *renderer) objectMeta(name string, labels, annotations map[string]string) metav1.ObjectMeta {
	l := maps.Clone(labels)
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, r.labels)
	return metav1.ObjectMeta{Name: name, Namespace: r.in.Namespace, Labels: l, Annotations: maps.Clone(annotations)}
}

func (r *renderer) tlsSecret(name string) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: r.objectMeta(name, nil, nil),
	}
}

// podSelectors are the labels that select a revision's pods
// (docs/crossplane-behaviour.md#runtime-objects).
func podSelectors(p *Package, rev string) map[string]string {
	return map[string]string{
		LabelRevision:                  rev,
		p.Kind.Descriptor().LabelKey(): p.Name,
	}
}

// service renders the package's Service
// (docs/crossplane-behaviour.md#runtime-objects): named after the
// package unless the runtime config's serviceTemplate names it, selecting
// the revision's pods; a Provider's serves the webhook port, a Function's is
// headless and serves gRPC.
func (r *renderer) service(ri *runtimeInputs, svcName string) *corev1.Service {
	var labels, annotations map[string]string
	if t := ri.drc.Spec.ServiceTemplate; t != nil && t.Metadata != nil {
		labels, annotations = t.Metadata.Labels, t.Metadata.Annotations
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: r.objectMeta(svcName, labels, annotations),
		Spec:       corev1.ServiceSpec{Selector: podSelectors(ri.p, ri.po.Revision.Name)},
	}
	if ri.p.Kind.Descriptor().Endpoint {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.Ports = []corev1.ServicePort{{
			Name:        GRPCPortName,
			Protocol:    corev1.ProtocolTCP,
			Port:        GRPCPort,
			AppProtocol: ptr.To("tls"),
			TargetPort:  intstr.FromString(GRPCPortName),
		}}
		return svc
	}
	svc.Spec.Ports = []corev1.ServicePort{{
		Name:       WebhookPortName,
		Protocol:   corev1.ProtocolTCP,
		Port:       WebhookPort,
		TargetPort: intstr.FromString(WebhookPortName),
	}}
	return svc
}

// serviceAccount renders the runtime's ServiceAccount
// (docs/crossplane-behaviour.md#runtime-objects): from
// the runtime config's serviceAccountTemplate, named after the revision
// unless the template names it, with the package's pull secrets and then
// those of Crossplane's own ServiceAccount (Input.CrossplanePullSecrets),
// in Crossplane's order, duplicates kept as Crossplane keeps them.
func (r *renderer) serviceAccount(ri *runtimeInputs) *corev1.ServiceAccount {
	saName := ri.po.Revision.Name
	var labels, annotations map[string]string
	if t := ri.drc.Spec.ServiceAccountTemplate; t != nil && t.Metadata != nil {
		if t.Metadata.Name != nil && *t.Metadata.Name != "" {
			saName = *t.Metadata.Name
		}
		labels, annotations = t.Metadata.Labels, t.Metadata.Annotations
	}
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: r.objectMeta(saName, labels, annotations),
	}
	sa.ImagePullSecrets = append(sa.ImagePullSecrets, ri.d.Spec.PackagePullSecrets...)
	sa.ImagePullSecrets = append(sa.ImagePullSecrets, r.in.CrossplanePullSecrets...)
	return sa
}

// deployment renders the runtime Deployment in the order of Crossplane's
// DeploymentRuntimeBuilder.Deployment, later steps winning
// (docs/crossplane-behaviour.md#runtime-deployment):
//
//  1. the runtime config's deploymentTemplate (metadata and a copy of spec);
//  2. the package-runtime container exists and is first;
//  3. defaults for unset fields: name (the revision), replicas 1, the pod
//     and container security contexts (uid/gid 2000, non-root, no
//     privilege escalation), imagePullPolicy IfNotPresent, and the
//     ServiceAccount;
//  4. forced: namespace, the revision as controller, selectors (matchLabels
//     replaced, merged into the pod labels), imagePullSecrets = the
//     package's (replacing the template's), the metrics port 8080 unless a
//     port of that name exists;
//  5. the ImageConfig pull secret appended;
//  6. imagePullPolicy = packagePullPolicy;
//  7. TLS volumes, mounts and directory variables (client, then server);
//  8. per kind: a Provider's POD_NAMESPACE, PROVIDER_NAME, REVISION_NAME and
//     REVISION_UID, Prometheus scrape annotations unless
//     prometheus.io/scrape is set, the image unless set, the webhook port
//     and WEBHOOK_TLS_CERT_DIR; a Function's grpc port, FUNCTION_NAME,
//     REVISION_NAME, REVISION_UID and the image unless set.
//
// Safe-start's scale to zero (docs/crossplane-behaviour.md#safe-start):
// when the revision is AwaitingActivation (a safe-start provider whose MRDs
// are all inactive, locked for a Crossplane that scales such a runtime to
// zero: ScalesToZero, v2.4.0 and later) the Deployment has 0 replicas,
// whatever the DeploymentRuntimeConfig says, as Crossplane does. Earlier
// releases keep the configured replicas (1 by default), and so does
// lockstep when the lock names one of them.
func (r *renderer) deployment(ri *runtimeInputs, saName string) *appsv1.Deployment {
	p, revName := ri.p, ri.po.Revision.Name
	d := &appsv1.Deployment{}
	if t := ri.drc.Spec.DeploymentTemplate; t != nil {
		if m := t.Metadata; m != nil {
			if m.Name != nil {
				d.Name = *m.Name
			}
			d.Labels, d.Annotations = maps.Clone(m.Labels), maps.Clone(m.Annotations)
		}
		if t.Spec != nil {
			d.Spec = *t.Spec.DeepCopy()
		}
	}
	d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	ps := &d.Spec.Template.Spec

	// 2. The runtime container, first.
	idx := -1
	for i := range ps.Containers {
		if ps.Containers[i].Name == RuntimeContainerName {
			idx = i
			break
		}
	}
	switch {
	case idx < 0:
		ps.Containers = append([]corev1.Container{{Name: RuntimeContainerName}}, ps.Containers...)
	case idx > 0:
		c := ps.Containers[idx]
		rest := append(append([]corev1.Container{}, ps.Containers[:idx]...), ps.Containers[idx+1:]...)
		ps.Containers = append([]corev1.Container{c}, rest...)
	}
	c := &ps.Containers[0]

	// 3. Defaults.
	if d.Name == "" {
		d.Name = revName
	}
	if ri.po.Revision.AwaitingActivation {
		// Safe-start with no active MRD: no replica, whatever the
		// DeploymentRuntimeConfig says (docs/crossplane-behaviour.md#safe-start).
		d.Spec.Replicas = ptr.To(int32(0))
	}
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To(int32(1))
	}
	if ps.SecurityContext == nil {
		ps.SecurityContext = &corev1.PodSecurityContext{
			RunAsNonRoot: ptr.To(true),
			RunAsUser:    ptr.To(defaultRuntimeUserID),
			RunAsGroup:   ptr.To(defaultRuntimeGroupID),
		}
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = corev1.PullIfNotPresent
	}
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{
			RunAsUser:                ptr.To(defaultRuntimeUserID),
			RunAsGroup:               ptr.To(defaultRuntimeGroupID),
			AllowPrivilegeEscalation: ptr.To(false),
			Privileged:               ptr.To(false),
			RunAsNonRoot:             ptr.To(true),
		}
	}
	if ps.ServiceAccountName == "" {
		ps.ServiceAccountName = saName
	}

	// 4. Forced fields. The controller reference is the Object's intent.
	d.Namespace = r.in.Namespace
	sel := podSelectors(p, revName)
	if d.Spec.Selector == nil {
		d.Spec.Selector = &metav1.LabelSelector{}
	}
	d.Spec.Selector.MatchLabels = sel
	if d.Spec.Template.Labels == nil {
		d.Spec.Template.Labels = map[string]string{}
	}
	maps.Copy(d.Spec.Template.Labels, sel)
	ps.ImagePullSecrets = append([]corev1.LocalObjectReference(nil), ri.d.Spec.PackagePullSecrets...)
	addPorts(c, corev1.ContainerPort{Name: MetricsPortName, ContainerPort: MetricsPort})

	// 5. The ImageConfig pull secret.
	if ri.pull != "" {
		ps.ImagePullSecrets = append(ps.ImagePullSecrets, corev1.LocalObjectReference{Name: ri.pull})
	}

	// 6. The package's pull policy wins over the runtime config's.
	c.ImagePullPolicy = ri.d.Spec.PackagePullPolicy

	// 7. TLS: a Function has no client Secret.
	if p.Kind.Descriptor().TLSClient {
		mountTLS(d, tlsClientSecretName(p.Name), volumeTLSClientCerts, pathTLSClientCerts, envTLSClientCertsDir)
	}
	mountTLS(d, tlsServerSecretName(p.Name), volumeTLSServerCerts, pathTLSServerCerts, envTLSServerCertsDir)
	c = &ps.Containers[0]

	// 8. Per kind.
	if hook := deploymentHooks[p.Kind]; hook != nil {
		hook(d, c, ri)
	}

	d.Labels = maps.Clone(d.Labels)
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	maps.Copy(d.Labels, r.labels)
	return d
}

// deploymentHooks set the per-kind part of a runtime Deployment (step 8 of
// deployment), the way Crossplane's per-kind runtime hooks do
// (crossplane/crossplane internal/controller/pkg/revision/runtime_provider.go
// NewProviderHooks, runtime_function.go NewFunctionHooks). Every package
// kind whose descriptor has HasRuntime needs one.
var deploymentHooks = map[crossplane.Kind]func(d *appsv1.Deployment, c *corev1.Container, ri *runtimeInputs){
	crossplane.KindProvider: providerDeployment,
	crossplane.KindFunction: functionDeployment,
}

// providerDeployment adds a Provider's POD_NAMESPACE, PROVIDER_NAME,
// REVISION_NAME and REVISION_UID, Prometheus scrape annotations unless
// prometheus.io/scrape is set, the image unless set, the webhook port and
// WEBHOOK_TLS_CERT_DIR.
func providerDeployment(d *appsv1.Deployment, c *corev1.Container, ri *runtimeInputs) {
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: fieldRef("metadata.namespace")},
		corev1.EnvVar{Name: "PROVIDER_NAME", ValueFrom: fieldRef("metadata.labels['" + LabelProvider + "']")},
		corev1.EnvVar{Name: "REVISION_NAME", ValueFrom: fieldRef("metadata.labels['" + LabelRevision + "']")},
		corev1.EnvVar{Name: RevisionUIDEnv},
	)
	if d.Spec.Template.Annotations == nil {
		d.Spec.Template.Annotations = map[string]string{}
	}
	if _, ok := d.Spec.Template.Annotations[annotationScrape]; !ok {
		port := strconv.Itoa(MetricsPort)
		for _, cp := range c.Ports {
			if cp.Name == MetricsPortName {
				port = strconv.Itoa(int(cp.ContainerPort))
				break
			}
		}
		d.Spec.Template.Annotations[annotationScrape] = "true"
		d.Spec.Template.Annotations[annotationScrapePort] = port
		d.Spec.Template.Annotations[annotationScrapePath] = "/metrics"
	}
	if c.Image == "" {
		c.Image = ri.po.Revision.Image
	}
	addPorts(c, corev1.ContainerPort{Name: WebhookPortName, ContainerPort: WebhookPort})
	c.Env = append(c.Env, corev1.EnvVar{Name: envWebhookTLSCertDir, Value: "$(" + envTLSServerCertsDir + ")"})
}

// functionDeployment adds a Function's grpc port, FUNCTION_NAME,
// REVISION_NAME, REVISION_UID and the image unless set.
func functionDeployment(_ *appsv1.Deployment, c *corev1.Container, ri *runtimeInputs) {
	addPorts(c, corev1.ContainerPort{Name: GRPCPortName, ContainerPort: GRPCPort})
	c.Env = append(c.Env,
		corev1.EnvVar{Name: "FUNCTION_NAME", ValueFrom: fieldRef("metadata.labels['" + LabelFunction + "']")},
		corev1.EnvVar{Name: "REVISION_NAME", ValueFrom: fieldRef("metadata.labels['" + LabelRevision + "']")},
		corev1.EnvVar{Name: RevisionUIDEnv},
	)
	if c.Image == "" {
		c.Image = ri.po.Revision.Image
	}
}

func fieldRef(path string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
}

// addPorts adds each port to c unless c has a port of the same name.
func addPorts(c *corev1.Container, ports ...corev1.ContainerPort) {
	for _, p := range ports {
		found := false
		for _, have := range c.Ports {
			if have.Name == p.Name {
				found = true
				break
			}
		}
		if !found {
			c.Ports = append(c.Ports, p)
		}
	}
}

// mountTLS mounts a TLS Secret's tls.crt, tls.key and ca.crt into the
// runtime container read-only and points env at the directory
// (docs/crossplane-behaviour.md#runtime-deployment
// step 8).
func mountTLS(d *appsv1.Deployment, secret, volume, path, env string) {
	ps := &d.Spec.Template.Spec
	ps.Volumes = append(ps.Volumes, corev1.Volume{
		Name: volume,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret,
			Items: []corev1.KeyToPath{
				{Key: certs.TLSCertKey, Path: certs.TLSCertKey},
				{Key: certs.TLSKeyKey, Path: certs.TLSKeyKey},
				{Key: certs.CACertKey, Path: certs.CACertKey},
			},
		}},
	})
	c := &ps.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volume, ReadOnly: true, MountPath: path})
	c.Env = append(c.Env, corev1.EnvVar{Name: env, Value: path})
}
