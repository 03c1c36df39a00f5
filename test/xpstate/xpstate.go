// Package xpstate replays a cluster state that a real Crossplane left
// behind into a test API server, so tests can check lockstep against what
// Crossplane actually writes rather than against our own reading of it.
//
// The states are the captured scenarios in
// $LOCKSTEP_TESTDATA/crossplane-installed (its README.md says how each was
// made): every object Crossplane v2.3.4 created or changed, with the values
// the API server assigns removed and every UID written as
// `uid-of:<Kind>/<name>`. Load creates those objects again, owners first,
// puts real UIDs where the placeholders were, and writes status through the
// status subresource, so owner references, finalizers, labels, revision
// status and Lock/lock read back as Crossplane left them. Crossplane itself
// does not run: nothing here reacts to the objects afterwards.
package xpstate

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// Scenario files in $LOCKSTEP_TESTDATA/crossplane-installed. S3Active and
// S3bInactive are 17 MB and 9 MB: load them only where a test needs them.
const (
	S1               = "S1.yaml"
	S2BeforeUpgrade  = "S2-before-upgrade.yaml"
	S2AfterUpgrade   = "S2-after-upgrade.yaml"
	S3Active         = "S3-active.yaml"
	S3bInactive      = "S3b-inactive.yaml"
	S4               = "S4.yaml"
	CapturedRegistry = "127.0.0.1:5055"
)

// UIDPrefix starts every placeholder the capture wrote in place of a UID:
// `uid-of:<Kind>/<name>`.
const UIDPrefix = "uid-of:"

// Redacted is the value of every Secret data key in the captured files.
const Redacted = "REDACTED"

// Path returns the path of the captured scenario file under
// $LOCKSTEP_TESTDATA/crossplane-installed, and skips tb with a message when
// LOCKSTEP_TESTDATA is unset. It fails tb when the variable is set but the
// file is missing.
func Path(tb testing.TB, file string) string {
	tb.Helper()
	td := os.Getenv("LOCKSTEP_TESTDATA")
	if td == "" {
		tb.Skip("LOCKSTEP_TESTDATA is unset: no captured Crossplane state to replay (see CONTRIBUTING.md)")
	}
	p := filepath.Join(td, "crossplane-installed", file)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("captured Crossplane state: %v", err)
	}
	return p
}

// Key names one object of a scenario.
type Key struct {
	Kind      string
	Namespace string
	Name      string
}

// String returns Kind/name or Kind/namespace/name.
func (k Key) String() string {
	if k.Namespace == "" {
		return k.Kind + "/" + k.Name
	}
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// KeyOf returns the Key of u.
func KeyOf(u *unstructured.Unstructured) Key {
	return Key{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// ParseFile reads a captured scenario file: see Parse.
func ParseFile(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path) //nolint:gosec // a test fixture path
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	objs, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Parse reads a multi-document YAML stream in file order, skipping empty
// documents (the capture's leading comment). The objects are as captured:
// placeholders are not resolved. It returns an error naming the document
// that is not an object with apiVersion, kind and name, or that repeats an
// earlier object's kind, namespace and name.
func Parse(r io.Reader) ([]*unstructured.Unstructured, error) {
	yr := utilyaml.NewYAMLReader(bufio.NewReaderSize(r, 1<<20))
	var out []*unstructured.Unstructured
	seen := map[Key]bool{}
	for doc := 1; ; doc++ {
		b, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("document %d: %w", doc, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d: not an object with apiVersion, kind and metadata.name", doc)
		}
		k := KeyOf(u)
		if seen[k] {
			return nil, fmt.Errorf("document %d: %s appears twice", doc, k)
		}
		seen[k] = true
		out = append(out, u)
	}
}

// Options tune Load.
type Options struct {
	// Registry, when set, replaces the captured registry address
	// CapturedRegistry (127.0.0.1:5055) in every string: ImageConfig
	// rewrites, resolved packages and images, container images.
	Registry string
	// SecretData, when set, is called for every Secret with the keys it
	// holds (each value is Redacted); a non-nil result replaces the Secret's
	// data, for example with real certificates. Without it, or when it
	// returns nil, the Secret keeps the placeholder bytes.
	SecretData func(k Key, keys []string) map[string][]byte
	// IssueCertificates replaces the placeholders of the TLS Secrets with
	// real certificates, as Crossplane's initializer and runtime controller
	// made them (docs/crossplane-behaviour.md#tls): a new CA in Secret
	// crossplane-root-ca (tls.crt, tls.key), and for every Secret
	// <package>-tls-server or <package>-tls-client controlled by a revision
	// a certificate from that CA: a server certificate for the package's
	// Service (<package>, <package>.<namespace>, <package>.<namespace>.svc),
	// a client certificate named after the revision. These are the
	// requests lockstep renders (certs.TLSRequest), so lockstep finds them
	// valid and keeps them. SecretData, when it returns data for a Secret,
	// wins. Other Secrets keep their placeholders.
	IssueCertificates bool
	// Timeout bounds the whole load, CRDs becoming Established included;
	// zero means two minutes.
	Timeout time.Duration
}

// State is a loaded scenario.
type State struct {
	// Objects are the objects as the API server returned them after the
	// load (status written), by kind, namespace and name.
	Objects map[Key]*unstructured.Unstructured
	// Order is the order the objects were created in.
	Order []Key
	// CA is the root CA that Options.IssueCertificates generated, nil
	// without it.
	CA *certs.CA
}

// UID returns the UID the API server gave the object, "" when the scenario
// has no such object.
func (s *State) UID(kind, namespace, name string) types.UID {
	if u := s.Objects[Key{Kind: kind, Namespace: namespace, Name: name}]; u != nil {
		return u.GetUID()
	}
	return ""
}

// Get returns the loaded object, nil when the scenario has no such object.
func (s *State) Get(kind, namespace, name string) *unstructured.Unstructured {
	return s.Objects[Key{Kind: kind, Namespace: namespace, Name: name}]
}

// LoadFile installs Crossplane's CRDs into env the way other tests do
// (envtest.Env.InstallCrossplaneCRDs), then loads the captured scenario at
// path: see Load. The scenario's cluster-scoped objects (Lock/lock,
// DeploymentRuntimeConfig/default, CRDs) collide with another scenario's,
// so load one scenario per control plane (envtest.Dedicated).
func LoadFile(ctx context.Context, env *envtest.Env, path string, o Options) (*State, error) {
	if _, err := env.InstallCrossplaneCRDs(); err != nil {
		return nil, err
	}
	objs, err := ParseFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Load(ctx, env.Config, objs, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return s, nil
}

// Load creates objs in the API server of cfg, whose Crossplane CRDs must
// already be installed:
//
//   - the values the API server assigns are removed (uid, resourceVersion,
//     generation, creationTimestamp, managedFields, selfLink, a Service's
//     cluster IPs unless headless);
//   - CustomResourceDefinitions come first, then packages, revisions and
//     the rest, each only after every object its placeholders name, so an
//     owner exists before what it owns; a CRD is waited for until
//     Established before objects that may be of its kind;
//   - every string `uid-of:<Kind>/<name>` (owner reference uids, a
//     Deployment's REVISION_UID, revision status.objectRefs) becomes the
//     UID of that object; status placeholders are resolved after every
//     object exists;
//   - status is written through the status subresource where the kind has
//     one (per API discovery), except a CRD's, which its own server
//     controllers write; finalizers, labels and annotations are kept;
//   - namespaces the objects live in are created when missing.
//
// It returns the objects as read back. Errors name the object and, for a
// placeholder, the field and the missing object.
func Load(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, o Options) (*State, error) {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	l := &loader{cfg: cfg, o: o, uids: map[string]types.UID{}, state: &State{Objects: map[Key]*unstructured.Unstructured{}}}
	if o.IssueCertificates {
		ca, err := certs.New(time.Now())
		if err != nil {
			return nil, err
		}
		l.state.CA = ca
	}
	byName := map[string]bool{}
	var pending []*item
	for _, u := range objs {
		it, err := l.prepare(u)
		if err != nil {
			return nil, err
		}
		byName[it.ref] = true
		pending = append(pending, it)
	}
	for _, it := range pending {
		for _, d := range append(slices.Clone(it.deps), statusDeps(it.status)...) {
			if !byName[d.ref] {
				return nil, fmt.Errorf("%s: %s names %s%s, which the scenario does not hold", it.key, d.path, UIDPrefix, d.ref)
			}
		}
	}
	sort.SliceStable(pending, func(i, j int) bool { return rank(pending[i].u) < rank(pending[j].u) })
	if err := l.newClient(); err != nil {
		return nil, err
	}
	if err := l.createAll(ctx, pending); err != nil {
		return nil, err
	}
	for _, it := range pending {
		if err := l.writeStatus(ctx, it); err != nil {
			return nil, err
		}
	}
	return l.state, nil
}

// item is one object on its way into the server.
type item struct {
	key    Key
	ref    string // Kind/name, as the placeholders name it
	u      *unstructured.Unstructured
	status map[string]any
	deps   []dep // placeholders outside status
}

type dep struct {
	path string
	ref  string
}

type loader struct {
	cfg   *rest.Config
	o     Options
	c     client.Client
	disc  discovery.DiscoveryInterface
	uids  map[string]types.UID // Kind/name -> UID
	ns    map[string]bool
	state *State
}

// rank orders the kinds: CRDs, packages, revisions, the rest.
func rank(u *unstructured.Unstructured) int {
	k := u.GetKind()
	switch {
	case k == "Namespace":
		return 0
	case k == "CustomResourceDefinition":
		return 1
	case strings.HasSuffix(u.GroupVersionKind().Group, "pkg.crossplane.io") && slices.Contains([]string{"Provider", "Function", "Configuration"}, k):
		return 2
	case strings.HasSuffix(k, "Revision"):
		return 3
	}
	return 4
}

// prepare copies u, strips what the server assigns, replaces the registry
// and collects the placeholders.
func (l *loader) prepare(in *unstructured.Unstructured) (*item, error) {
	u := in.DeepCopy()
	key := KeyOf(u)
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	if u.GetKind() == "Service" && u.GetAPIVersion() == "v1" {
		if ip, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP"); ip != "None" {
			unstructured.RemoveNestedField(u.Object, "spec", "clusterIP")
			unstructured.RemoveNestedField(u.Object, "spec", "clusterIPs")
		}
	}
	if l.o.Registry != "" {
		u.Object = replaceStrings(u.Object, func(s string) string {
			return strings.ReplaceAll(s, CapturedRegistry, l.o.Registry)
		}).(map[string]any)
	}
	if u.GetKind() == "Secret" && u.GetAPIVersion() == "v1" {
		if err := l.secretData(key, u); err != nil {
			return nil, err
		}
	}
	legacyXRD(u)
	it := &item{key: key, ref: u.GetKind() + "/" + u.GetName(), u: u}
	if st, ok := u.Object["status"].(map[string]any); ok {
		it.status = st
		delete(u.Object, "status")
	}
	walkStrings(u.Object, "", func(path, s string) {
		if strings.HasPrefix(s, UIDPrefix) {
			it.deps = append(it.deps, dep{path: path, ref: strings.TrimPrefix(s, UIDPrefix)})
		}
	})
	return it, nil
}

// legacyXRD writes a CompositeResourceDefinition that the capture shows at
// apiextensions.crossplane.io/v2 with spec.scope LegacyCluster (the
// server's preferred version of a v1 XRD in Crossplane v2.3.4, README.md of
// the capture) at v1 instead: the later Crossplane CRDs in
// $LOCKSTEP_TESTDATA/crossplane-crds no longer accept LegacyCluster at v2,
// while v1, their storage version, does; without a conversion webhook the
// stored object is the same.
func legacyXRD(u *unstructured.Unstructured) {
	if u.GetAPIVersion() != "apiextensions.crossplane.io/v2" || u.GetKind() != "CompositeResourceDefinition" {
		return
	}
	if scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope"); scope == "LegacyCluster" {
		u.SetAPIVersion("apiextensions.crossplane.io/v1")
	}
}

// secretData replaces the data of Secret u as Options ask.
func (l *loader) secretData(key Key, u *unstructured.Unstructured) error {
	data, _, _ := unstructured.NestedMap(u.Object, "data")
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var repl map[string][]byte
	if l.o.SecretData != nil {
		repl = l.o.SecretData(key, keys)
	}
	if repl == nil && l.state.CA != nil {
		var err error
		if repl, err = l.certificate(key, u); err != nil {
			return err
		}
	}
	if repl == nil {
		return nil
	}
	m := map[string]any{}
	for k, v := range repl {
		m[k] = base64.StdEncoding.EncodeToString(v)
	}
	u.Object["data"] = m
	return nil
}

// certificate returns the data Options.IssueCertificates gives Secret u,
// nil when it is not one of the TLS Secrets.
func (l *loader) certificate(key Key, u *unstructured.Unstructured) (map[string][]byte, error) {
	ca := l.state.CA
	if key.Name == certs.RootCASecretName {
		return map[string][]byte{certs.TLSCertKey: ca.CertPEM(), certs.TLSKeyKey: ca.KeyPEM()}, nil
	}
	var rev string
	for _, r := range u.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller && strings.HasSuffix(r.Kind, "Revision") {
			rev = r.Name
		}
	}
	if rev == "" {
		return nil, nil
	}
	var req *certs.TLSRequest
	if pkg, ok := strings.CutSuffix(key.Name, "-tls-server"); ok {
		req = &certs.TLSRequest{Usage: certs.TLSServer, DNSNames: []string{pkg, pkg + "." + key.Namespace, pkg + "." + key.Namespace + ".svc"}, CASecretName: certs.RootCASecretName}
	} else if strings.HasSuffix(key.Name, "-tls-client") {
		req = &certs.TLSRequest{Usage: certs.TLSClient, DNSNames: []string{rev}, CASecretName: certs.RootCASecretName}
	}
	if req == nil {
		return nil, nil
	}
	data, err := ca.Issue(req, time.Now())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return data, nil
}

func (l *loader) newClient() error {
	hc, err := rest.HTTPClientFor(l.cfg)
	if err != nil {
		return err
	}
	m, err := apiutil.NewDynamicRESTMapper(l.cfg, hc)
	if err != nil {
		return err
	}
	c, err := client.New(l.cfg, client.Options{Scheme: envtest.Scheme(), Mapper: m, HTTPClient: hc})
	if err != nil {
		return err
	}
	d, err := discovery.NewDiscoveryClientForConfig(l.cfg)
	if err != nil {
		return err
	}
	l.c, l.disc = c, d
	return nil
}

// createAll creates the pending items in rounds: every item whose
// placeholders name objects already created and whose kind is served.
// CRDs created in a round are Established before the next.
func (l *loader) createAll(ctx context.Context, pending []*item) error {
	for len(pending) > 0 {
		next, crds, err := l.createReady(ctx, pending)
		if err != nil {
			return err
		}
		if len(next) == len(pending) {
			var msgs []string
			for _, it := range next {
				msgs = append(msgs, it.key.String()+l.why(it))
			}
			return fmt.Errorf("cannot create %s", strings.Join(msgs, "; "))
		}
		if len(crds) > 0 {
			if err := l.waitEstablished(ctx, crds); err != nil {
				return err
			}
			if err := l.newClient(); err != nil {
				return err
			}
		}
		pending = next
	}
	return nil
}

// createReady creates the items of pending that are ready and whose kind
// the API server serves, and returns the others (next) and the names of
// the CRDs it created.
func (l *loader) createReady(ctx context.Context, pending []*item) (next []*item, crds []string, err error) {
	for _, it := range pending {
		if !l.ready(it) {
			next = append(next, it)
			continue
		}
		if _, err := l.c.RESTMapper().RESTMapping(it.u.GroupVersionKind().GroupKind(), it.u.GroupVersionKind().Version); err != nil {
			if meta.IsNoMatchError(err) {
				next = append(next, it)
				continue
			}
			return nil, nil, fmt.Errorf("%s: %w", it.key, err)
		}
		if err := l.create(ctx, it); err != nil {
			return nil, nil, err
		}
		if it.u.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, it.u.GetName())
		}
	}
	return next, crds, nil
}

func (l *loader) ready(it *item) bool {
	for _, d := range it.deps {
		if _, ok := l.uids[d.ref]; !ok {
			return false
		}
	}
	return true
}

func (l *loader) why(it *item) string {
	var miss []string
	for _, d := range it.deps {
		if _, ok := l.uids[d.ref]; !ok {
			miss = append(miss, d.ref)
		}
	}
	if len(miss) > 0 {
		return " (waits for " + strings.Join(miss, ", ") + ")"
	}
	return " (kind " + it.u.GroupVersionKind().String() + " is not served)"
}

func (l *loader) resolve(v any) any {
	return replaceStrings(v, func(s string) string {
		if ref, ok := strings.CutPrefix(s, UIDPrefix); ok {
			if uid, ok := l.uids[ref]; ok {
				return string(uid)
			}
		}
		return s
	})
}

func (l *loader) create(ctx context.Context, it *item) error {
	u := &unstructured.Unstructured{Object: l.resolve(it.u.Object).(map[string]any)}
	if ns := u.GetNamespace(); ns != "" {
		if err := l.ensureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	if it.status != nil && !l.hasStatusSubresource(u) && u.GetKind() != "CustomResourceDefinition" {
		// Without a status subresource the status goes in with the object;
		// any placeholder in it is resolved in writeStatus.
		u.Object["status"] = l.resolve(it.status)
	}
	if err := l.c.Create(ctx, u); err != nil {
		return fmt.Errorf("create %s: %w", it.key, err)
	}
	l.uids[it.ref] = u.GetUID()
	l.state.Objects[it.key] = u
	l.state.Order = append(l.state.Order, it.key)
	return nil
}

func (l *loader) ensureNamespace(ctx context.Context, ns string) error {
	if l.ns == nil {
		l.ns = map[string]bool{}
	}
	if l.ns[ns] {
		return nil
	}
	n := &unstructured.Unstructured{}
	n.SetAPIVersion("v1")
	n.SetKind("Namespace")
	n.SetName(ns)
	if err := l.c.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Namespace %s: %w", ns, err)
	}
	l.ns[ns] = true
	return nil
}

// hasStatusSubresource reports whether the API server serves
// <resource>/status for u's kind.
func (l *loader) hasStatusSubresource(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	m, err := l.c.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false
	}
	rl, err := l.disc.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range rl.APIResources {
		if r.Name == m.Resource.Resource+"/status" {
			return true
		}
	}
	return false
}

// writeStatus writes the captured status, placeholders resolved, through
// the status subresource, and reads the object back into the state.
func (l *loader) writeStatus(ctx context.Context, it *item) error {
	cur := l.state.Objects[it.key]
	if it.status != nil && cur.GetKind() != "CustomResourceDefinition" {
		for _, d := range statusDeps(it.status) {
			if _, ok := l.uids[d.ref]; !ok {
				return fmt.Errorf("%s: %s names %s%s, which the scenario does not hold", it.key, d.path, UIDPrefix, d.ref)
			}
		}
		st := l.resolve(it.status)
		if l.hasStatusSubresource(cur) {
			cur.Object["status"] = st
			if err := l.c.Status().Update(ctx, cur); err != nil {
				return fmt.Errorf("write the status of %s: %w", it.key, err)
			}
		} else if placeholders(it.status) {
			cur.Object["status"] = st
			if err := l.c.Update(ctx, cur); err != nil {
				return fmt.Errorf("write the status of %s: %w", it.key, err)
			}
		}
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(cur.GroupVersionKind())
	if err := l.c.Get(ctx, client.ObjectKeyFromObject(cur), got); err != nil {
		return fmt.Errorf("read back %s: %w", it.key, err)
	}
	l.state.Objects[it.key] = got
	return nil
}

func statusDeps(st map[string]any) []dep {
	var out []dep
	walkStrings(st, ".status", func(path, s string) {
		if ref, ok := strings.CutPrefix(s, UIDPrefix); ok {
			out = append(out, dep{path: path, ref: ref})
		}
	})
	return out
}

func placeholders(st map[string]any) bool { return len(statusDeps(st)) > 0 }

func (l *loader) waitEstablished(ctx context.Context, names []string) error {
	for _, n := range names {
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := l.c.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return false, err
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CustomResourceDefinition %s never became Established: %w", n, err)
		}
	}
	return nil
}

// walkStrings calls fn with the path and value of every string in v.
func walkStrings(v any, path string, fn func(path, s string)) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkStrings(t[k], path+"."+k, fn)
		}
	case []any:
		for i, e := range t {
			walkStrings(e, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case string:
		fn(path, t)
	}
}

// replaceStrings returns a deep copy of v with every string s replaced by
// fn(s).
func replaceStrings(v any, fn func(string) string) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[k] = replaceStrings(e, fn)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = replaceStrings(e, fn)
		}
		return s
	case string:
		return fn(t)
	}
	return v
}
