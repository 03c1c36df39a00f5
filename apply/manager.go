package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/pkg/ssa"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/access"
	"github.com/lockstep-gitops/lockstep/apply/desired"
	"github.com/lockstep-gitops/lockstep/apply/events"
	"github.com/lockstep-gitops/lockstep/apply/journal"
	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/manifests"
	"github.com/lockstep-gitops/lockstep/apply/planinput"
	"github.com/lockstep-gitops/lockstep/apply/rootca"
	"github.com/lockstep-gitops/lockstep/apply/writer"
	"github.com/lockstep-gitops/lockstep/health"
	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
	"github.com/lockstep-gitops/lockstep/internal/crdwait"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/inventory"
	"github.com/lockstep-gitops/lockstep/internal/liststream"
	"github.com/lockstep-gitops/lockstep/internal/live"
	"github.com/lockstep-gitops/lockstep/internal/parallel"
	"github.com/lockstep-gitops/lockstep/internal/plan"
	"github.com/lockstep-gitops/lockstep/internal/reqlimit"
	"github.com/lockstep-gitops/lockstep/render"
)

// Field managers lockstep writes with (Kubernetes server-side apply).
const (
	// FieldManager owns everything lockstep renders: package and revision
	// records, payload, runtime and RBAC. It applies with force, so fields
	// that Crossplane's own controllers or a `kubectl edit` changed are taken
	// back, while fields nobody in lockstep sets (another tool's label) stay.
	FieldManager = "lockstep"
	// StatusFieldManager owns what lockstep writes through the status
	// subresource of packages and revisions. It differs from FieldManager
	// as Flux's status manager differs from its apply manager
	// (docs/design.md#flux-kustomize), so a status write never drops a spec field.
	StatusFieldManager = "lockstep-status"
	// ActivationFieldManager owns spec.desiredState of revisions whose state
	// lockstep decides outside their rendered record: revisions it
	// deactivates, and Manual revisions, whose state lockstep sets only when
	// it creates them (Inactive). Because FieldManager never claims that
	// field on a Manual revision, a user's later `kubectl patch` of
	// spec.desiredState takes it over and lockstep's applies leave it alone.
	ActivationFieldManager = "lockstep-activation"
	// ActivateFieldManager is the field manager of `lockstep activate`,
	// which activates a revision the way a user's kubectl patch would.
	ActivateFieldManager = "lockstep-activate"
	// AdoptFieldManager writes the pause annotation and the instance label
	// on the records of a package lockstep adopts from another package
	// manager, and takes them back when the adoption is rolled back
	// (docs/migrating.md).
	AdoptFieldManager = "lockstep-adopt"
)

// Options configure a Manager. Start from DefaultOptions.
type Options struct {
	// Namespace is the Crossplane namespace: runtimes, TLS Secrets, the root
	// CA and lockstep's inventory live there. It must equal the Namespace of
	// the render.Output given to Apply.
	Namespace string
	// Instance names the lockstep instance; it must equal the Output's
	// Instance. lockstep reads, applies and prunes only objects labelled
	// with it (render.LabelInstance).
	Instance string
	// PruneCRDs is the --prune-crds policy for the definitions of pruned
	// packages (see plan.PruneCRDs).
	PruneCRDs plan.PruneCRDs
	// WaitTimeout bounds the wait for applied CRDs to become Established
	// before the rest of a payload is applied.
	WaitTimeout time.Duration
	// WaitInterval is the polling interval of that wait.
	WaitInterval time.Duration
	// Concurrency is how many requests an apply sends the API server at
	// once, all packages together (reads, dry-runs, writes, status writes;
	// not the watch of CRDs nor streamed LISTs); at least 1. Every
	// independent package is on its way at once, and a package waiting
	// (for its CRDs to be Established, say) holds none of them.
	Concurrency int
	// DryRun sends every write as a server-side dry-run and deletes nothing:
	// the Result says what a real apply would change.
	DryRun bool
	// AllowEmpty lets an Output without packages prune every package the
	// instance's inventory lists (--allow-empty); without it Apply refuses
	// such an Output with an *EmptyLockError before any package is written
	// or pruned.
	AllowEmpty bool
	// DeletionProtection installs the instance's ValidatingAdmissionPolicy
	// that lets only lockstep's user (and the garbage collector) delete its
	// package and revision records and its CRDs, MRDs and XRDs
	// (render.DeletionProtection, docs/design/apply.md#deletion-protection);
	// false deletes that policy when it exists.
	DeletionProtection bool
	// Preflight is how new CustomResourceDefinitions, and new runtime
	// objects rendered from lockstep's defaults, are checked before a
	// package's first write (--preflight): PreflightLocal in-process (the
	// runtime objects against the authorizer), PreflightServer with
	// server-side dry-runs (docs/design/apply.md#preflight-modes).
	Preflight PreflightMode
	// PreflightSkew is how many minor versions older than lockstep's CRD
	// validation the kube-apiserver may be for PreflightLocal to validate
	// in-process (--preflight-skew); 0 asks for the same minor version.
	PreflightSkew int
	// ManifestKinds are the kinds the declarations' manifests may have
	// (--manifest-kinds): manifests.KindsCrossplane, manifests.KindsAll, or
	// GROUP/KIND patterns; empty means manifests.DefaultKinds. A manifest of
	// another kind refuses the whole output with a *manifests.ScopeError
	// before anything is written (docs/design/manifests.md#scope).
	ManifestKinds []string
	// ManifestServiceAccount, when set, is the ServiceAccount ("NAME" in
	// Namespace, or "NAMESPACE/NAME") manifests are applied and pruned as,
	// by impersonation, as Flux's kustomize-controller applies with
	// spec.serviceAccountName; a manifest it may not create or patch
	// refuses the output before anything is written. It needs a REST
	// config (WithRESTConfig) and the impersonate permission on that
	// ServiceAccount.
	ManifestServiceAccount string
}

// DefaultOptions returns the options of `lockstep apply` without flags:
// namespace crossplane-system, instance lockstep, --prune-crds unused, a
// 2-minute wait for CRDs polled every second (when no REST config is
// given; see WithRESTConfig), 8 requests in parallel (as many as the
// benchmark's floor, plain server-side apply, sends), deletion protection
// on.
func DefaultOptions() Options {
	return Options{
		Namespace:    "crossplane-system",
		Instance:     "lockstep",
		PruneCRDs:    plan.PruneUnused,
		WaitTimeout:  2 * time.Minute,
		WaitInterval: time.Second,
		Concurrency:  8,
		Preflight:    PreflightLocal,

		DeletionProtection: true,
	}
}

// Validate returns an error naming the option that is not usable.
func (o Options) Validate() error {
	var errs []error
	if es := validation.IsDNS1123Label(o.Namespace); len(es) > 0 {
		errs = append(errs, fmt.Errorf("namespace %q is not a DNS label: %s", o.Namespace, strings.Join(es, "; ")))
	}
	if o.Instance == "" {
		errs = append(errs, errors.New("instance is required"))
	} else if es := validation.IsValidLabelValue(o.Instance); len(es) > 0 {
		errs = append(errs, fmt.Errorf("instance %q is not a label value: %s", o.Instance, strings.Join(es, "; ")))
	}
	if _, err := plan.ParsePruneCRDs(string(o.PruneCRDs)); err != nil || o.PruneCRDs == "" {
		errs = append(errs, fmt.Errorf("prune-crds %q is not unused, never or always", o.PruneCRDs))
	}
	if o.Preflight != PreflightLocal && o.Preflight != PreflightServer {
		errs = append(errs, fmt.Errorf("preflight %q is not local or server", o.Preflight))
	}
	if o.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("concurrency %d: at least 1 request at a time", o.Concurrency))
	}
	if o.PreflightSkew < 0 {
		errs = append(errs, fmt.Errorf("preflight skew %d is negative", o.PreflightSkew))
	}
	if o.WaitTimeout <= 0 || o.WaitInterval <= 0 {
		errs = append(errs, errors.New("wait timeout and interval must be positive"))
	}
	if err := manifests.ValidKinds(o.ManifestKinds); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Manager applies rendered output to one cluster, in the style of
// fluxcd/pkg/ssa's ResourceManager: it owns the client, the field managers
// and the options. It is safe for sequential use; one Apply at a time.
type Manager struct {
	client client.Client
	rm     *ssa.ResourceManager
	crds   *crdwait.Watcher
	lister *liststream.Lister
	// disco lists the served resources (nil without WithRESTConfig), for
	// the objects a Namespace holds before prune deletes it.
	disco discovery.DiscoveryInterface
	opts  Options
	now   func() time.Time
	lock  Locker
	// manifests writes manifests as Options.ManifestServiceAccount; nil
	// writes them as the client's own user.
	manifests *manifests.ServiceAccount

	// identityMu guards user, the client's user name once a
	// SelfSubjectReview returned it (deletion protection).
	identityMu sync.Mutex
	user       string
	// validation decides whether CRDs are validated in-process; it reads
	// the kube-apiserver's /version once per Manager.
	validation *crdcheck.Policy
	// restoreMu guards restorable, what the last full Apply that wrote
	// nothing left for Restore (nil when there is none).
	restoreMu  sync.Mutex
	restorable *restorable
}

// ManagerOption configures a Manager beyond its Options.
type ManagerOption func(*managerConfig)

type managerConfig struct {
	rest *rest.Config
	lock Locker
}

// Locker is the write lock of one lockstep instance, held for the whole of
// an Apply: internal/writelock's Lock, a coordination.k8s.io Lease. Acquire
// returns a context that ends when the lock is lost, and the release; its
// error says who holds the lock.
type Locker interface {
	Acquire(ctx context.Context) (context.Context, func(), error)
}

// WithLock makes every Apply that writes (not a dry run) hold l from
// before it reads the cluster to its end, so that two applies of one
// instance never interleave (one writer per instance,
// docs/design/ownership.md#one-writer-per-instance). An
// Apply that cannot take it returns its error and writes nothing but the
// Crossplane namespace, which the Lease lives in.
func WithLock(l Locker) ManagerOption {
	return func(c *managerConfig) { c.lock = l }
}

// WithRESTConfig gives the Manager the cluster's REST config, from which it
// builds a client that waits for CRDs to be Established with one watch
// (see crdwait.Watcher) instead of polling full CRD lists every WaitInterval,
// and one that streams LISTs so that live CRDs, XRDs and Compositions are
// kept as JSON rather than decoded (see liveview.CompactKinds). Without it, the
// wait polls through kstatus as fluxcd/pkg/ssa's WaitForSet does, which
// costs a LIST of every CRD per interval, and live objects are decoded.
func WithRESTConfig(cfg *rest.Config) ManagerOption {
	return func(c *managerConfig) { c.rest = cfg }
}

// NewManager returns a Manager on c, whose RESTMapper must know the
// pkg.crossplane.io kinds (Crossplane's CRDs, or lockstep's stand-ins in
// examples/crossplane-crds). It returns an error when opts do not validate
// or a ManagerOption cannot be used.
func NewManager(c client.Client, opts Options, mopts ...ManagerOption) (*Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c = reqlimit.Client(c, opts.Concurrency)
	rm := ssa.NewResourceManager(c, health.NewStatusPoller(c, c.RESTMapper()), ssa.Owner{Field: FieldManager, Group: "lockstep.io"})
	rm.SetConcurrency(opts.Concurrency)
	m := &Manager{client: c, rm: rm, opts: opts, now: time.Now}
	var mc managerConfig
	for _, o := range mopts {
		o(&mc)
	}
	m.lock = mc.lock
	var readVersion crdcheck.VersionReader
	if mc.rest != nil {
		rc, err := crdwait.NewRESTClient(mc.rest)
		if err != nil {
			return nil, err
		}
		m.crds = crdwait.NewWatcher(rc)
		m.lister = &liststream.Lister{REST: rc, Mapper: c.RESTMapper()}
		readVersion = func(ctx context.Context) (*version.Info, error) {
			raw, err := rc.Get().AbsPath("/version").Do(ctx).Raw()
			if err != nil {
				return nil, err
			}
			v := &version.Info{}
			return v, utiljson.Unmarshal(raw, v)
		}
		if m.disco, err = discovery.NewDiscoveryClientForConfig(mc.rest); err != nil {
			return nil, err
		}
	}
	m.validation = crdcheck.NewPolicy(readVersion, opts.PreflightSkew)
	if sa := opts.ManifestServiceAccount; sa != "" {
		if mc.rest == nil {
			return nil, fmt.Errorf("manifest service account %s: impersonating it needs a REST config (WithRESTConfig)", sa)
		}
		w, err := manifests.Impersonate(mc.rest, c, opts.Namespace, sa)
		if err != nil {
			return nil, err
		}
		m.manifests = w
	}
	return m, nil
}

// Options returns the Manager's options.
func (m *Manager) Options() Options { return m.opts }

// Origin is where an apply's input came from, as the inventory records it
// beside each package it applies (docs/design/apply.md). Manager.Apply
// takes it apart from the render.Output because rendering is pure: the
// same declarations and lock render the same output whatever commit holds
// them.
type Origin struct {
	// Commit is the Git commit of the declarations ("" when unknown); it is
	// recorded in the inventory per package.
	Commit string
	// LockDigest is the digest of lockstep.lock ("sha256:<hex>"), recorded
	// in the inventory.
	LockDigest string
}

// Result is what one Apply did.
type Result struct {
	// Packages are the packages of the Output, in its order.
	Packages []*PackageResult
	// Pruned are the packages lockstep removed because they are gone from
	// Git.
	Pruned []*PackageResult
	// Manifests are the declarations' manifests, in the Output's order,
	// then those deleted because they are gone from Git
	// (docs/design/manifests.md#manifests).
	Manifests []*manifests.Result
	// Writes is how many mutating requests were sent (creates, applies,
	// patches, deletes, status writes, events, the inventory); server-side
	// dry-runs are not counted. Zero means nothing in the cluster changed.
	Writes int64
	// Crossplane is the Crossplane version the cluster runs and where it
	// was read, which every package's spec.crossplane.version was checked
	// against (docs/design/apply.md#apply-steps, preflight).
	Crossplane CrossplaneVersion
	// Lock says what the apply did to Crossplane's Lock/lock
	// (docs/design/apply.md#crossplanes-lock): created, configured or unchanged;
	// nil when the apply did not get that far.
	Lock *ssa.ChangeSetEntry
	// LockErr is why the Lock could not be written, nil when it was.
	LockErr error
	// Warnings are things an operator should know that are not errors: a
	// definition left in place because custom resources of it exist, a
	// revision activated out of band, a dry-run that skipped objects.
	Warnings []string
}

// Deleted lists every object the apply deleted, in the order of the
// result (packages, pruned packages, then manifests): payload objects,
// runtimes and revisions the packages' steps deleted, what pruning a
// package deleted (its MRDs, definitions with --prune-crds, revisions and
// the package itself), and manifests gone from Git. Each is named as
// fluxcd/pkg/ssa names a change ("Kind/namespace/name"); a dry run lists
// what it would delete. It is empty when nothing was deleted.
func (r *Result) Deleted() []string {
	var out []string
	for _, p := range append(slices.Clip(r.Packages), r.Pruned...) {
		if p.Changes == nil {
			continue
		}
		for _, e := range p.Changes.Entries {
			if e.Action == ssa.DeletedAction {
				out = append(out, e.Subject)
			}
		}
	}
	for _, m := range r.Manifests {
		if m.Action == ssa.DeletedAction {
			out = append(out, m.Object)
		}
	}
	return out
}

// Mutated reports whether any mutating request was sent.
func (r *Result) Mutated() bool { return r.Writes > 0 }

// Err joins the errors of every package, of every manifest (named
// "FILE:LINE: Kind/name") and of the Lock write, nil when all succeeded.
func (r *Result) Err() error {
	var errs []error
	for _, p := range append(append([]*PackageResult(nil), r.Packages...), r.Pruned...) {
		if p.Err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", p.Kind, p.Name, p.Err))
		}
	}
	if err := manifests.Err(r.Manifests); err != nil {
		errs = append(errs, err)
	}
	if r.LockErr != nil {
		errs = append(errs, r.LockErr)
	}
	return errors.Join(errs...)
}

// PackageResult is what Apply did for one package.
type PackageResult struct {
	// Kind and Name identify the package.
	Kind crossplane.Kind
	Name string
	// CurrentRevision is the revision of the locked digest.
	CurrentRevision string
	// ActiveRevision is the revision that is Active after the apply, "" for
	// none (a Manual package whose current revision awaits activation, or a
	// failed first install).
	ActiveRevision string
	// Changes has one entry per object lockstep applied, kept or deleted
	// for the package: created, configured, unchanged, deleted (skipped for
	// an object lockstep left alone, such as an orphaned CRD).
	Changes *ssa.ChangeSet
	// Step names the step that failed ("records", "preflight", "payload",
	// "runtime", "status", "activation", "gc", "prune", "replaces"), "" on
	// success.
	Step string
	// Err is the step's error; the package stopped there. Other packages
	// are applied regardless.
	Err error
	// Warnings are the package's warnings (also in Result.Warnings).
	Warnings []string
	// Plan are the decisions the apply made for the package, with their
	// reasons (internal/plan): its revision's activation, the revisions
	// it garbage collected, or the prune of a package gone from Git.
	Plan []plan.Decision
	// Paused is set for a package whose declaration carries
	// lockstep.io/paused: "true": nothing of it was written, pruned or
	// garbage collected, and its inventory entry is kept as it was
	// (docs/design/agent.md#pausing).
	Paused bool
	// Health names the objects that decide the package's health (its
	// record, current revision and runtime Deployment) for health.Check;
	// it has no objects for a pruned package.
	Health health.Target
}

// Changed reports whether any object of the package was created,
// configured or deleted.
func (p *PackageResult) Changed() bool {
	for _, e := range p.Changes.Entries {
		switch e.Action {
		case ssa.CreatedAction, ssa.ConfiguredAction, ssa.DeletedAction:
			return true
		}
	}
	return false
}

// Counts returns how many objects had each action.
func (p *PackageResult) Counts() map[ssa.Action]int {
	out := map[ssa.Action]int{}
	for _, e := range p.Changes.Entries {
		out[e.Action]++
	}
	return out
}

// Apply runs one reconcile of out, the render of the lock at meta.Commit,
// in the steps docs/design/apply.md#apply-steps lists. Packages are applied in
// out's order (Providers, Functions, Configurations); a package whose step
// fails stops there, its error lands on its revision's and package's
// conditions and as Events, and the next package goes on. Then revisions
// past revisionHistoryLimit are deleted and packages gone from out are
// pruned, after the inventory was written.
//
// Apply returns an error, and no Result, only when it cannot start: the
// Output is for another namespace or instance, another apply holds the
// instance's write lock (WithLock; a *writelock.HeldError), the deletion
// protection cannot be applied or removed (Options.DeletionProtection), a
// manifest names an object lockstep did not create without opting in to
// adopting it (a *manifests.ForeignError), the
// pkg.crossplane.io kinds are not served, the cluster state or inventory
// cannot be read, or out has no package while the inventory lists some and
// Options.AllowEmpty is not set (an *EmptyLockError). Package
// failures are in Result.Err. A cancelled ctx stops the reconcile at the
// next request; the next Apply converges.
func (m *Manager) Apply(ctx context.Context, out *render.Output, meta Origin) (*Result, error) {
	if out.Namespace != m.opts.Namespace || out.Instance != m.opts.Instance {
		return nil, fmt.Errorf("the render output is for namespace %q and instance %q, but this apply is for namespace %q and instance %q",
			out.Namespace, out.Instance, m.opts.Namespace, m.opts.Instance)
	}
	m.restoreMu.Lock()
	m.restorable = nil
	m.restoreMu.Unlock()
	r := m.newRun(out, meta)
	if m.lock != nil && !m.opts.DryRun {
		// The Lease lives in the Crossplane namespace, which a first
		// apply creates.
		if err := r.ensureNamespace(ctx); err != nil {
			return nil, err
		}
		held, release, err := m.lock.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
		ctx = held
	}
	if m.crds != nil {
		r.crds = m.crds.Track(crdwait.Selector{Labels: map[string]string{render.LabelInstance: m.opts.Instance}})
		defer r.crds.Stop()
	}
	// The deletion protection, the run's reads and Crossplane's version
	// do not depend on one another: they go at once, and all of them end
	// before the first package write.
	var (
		cv        live.CrossplaneVersion
		invExists bool
	)
	err := parallel.All(ctx,
		r.protectStep,
		func(ctx context.Context) (err error) {
			invExists, err = r.load(ctx)
			return err
		},
		func(ctx context.Context) (err error) {
			cv, err = live.ReadCrossplaneVersion(ctx, r.c, r.opts.Namespace)
			return err
		},
	)
	if err != nil {
		return nil, err
	}
	if !invExists {
		// A first apply may find no Crossplane namespace yet: the
		// runtime, TLS Secrets and the inventory go there.
		if err := r.ensureNamespace(ctx); err != nil {
			return nil, err
		}
	}
	if err := r.refuseEmpty(r.journal.Inventory()); err != nil {
		return nil, err
	}
	if err := r.manifestStep().CheckScope(ctx, out); err != nil {
		return nil, err
	}
	if err := r.manifestStep().CheckOwners(ctx, out, r.journal.Inventory().Manifests); err != nil {
		return nil, err
	}
	r.crossplane, r.res.Crossplane = cv, cv
	r.loaded = r.journal.Inventory()
	r.replacedBy = out.ReplacedBy()
	// What the run decides before its first write; the packages' steps
	// execute it.
	r.computePlan(ctx)
	// Packages that share no object and do not replace one another are
	// independent: their groups all run at once, and the packages of a
	// group in out's order. The client bounds their requests
	// (reqlimit.Client): Concurrency in flight at a time for the whole run,
	// so a package that waits (for its CRDs to be Established, say) holds
	// none of them.
	pkgs := make([]*pkgRun, len(out.Packages))
	groups := out.Groups()
	// A package's failure is in its result (pkgs[i].res), which the
	// summary and the inventory report: the groups return no error.
	if err := parallel.Each(ctx, len(groups), len(groups), func(ctx context.Context, gi int) error {
		for _, i := range groups[gi] {
			if out.Packages[i].Paused {
				pkgs[i] = r.pausedPackage(out.Packages[i])
				continue
			}
			pkgs[i] = r.applyPackage(ctx, out.Packages[i])
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for _, p := range pkgs {
		r.pkgs = append(r.pkgs, p)
		r.res.Packages = append(r.res.Packages, p.res)
	}
	r.manifestsStep(ctx)
	r.finish(ctx)
	r.lockStep(ctx)
	r.sendEvents(ctx)
	r.res.Writes = r.w.Writes()
	m.keepRestorable(r)
	return r.res, nil
}

// run is the state of one Apply.
type run struct {
	m    *Manager
	c    client.Client
	opts Options
	out  *render.Output
	meta Origin
	res  *Result
	now  time.Time

	// live is what the run read of the cluster (load).
	live *liveview.View
	pkgs []*pkgRun
	// crossplane is the Crossplane version the cluster runs.
	crossplane CrossplaneVersion
	// crds follows the CRDs the packages wait for (nil without a REST
	// config): one watch for the whole run.
	crds *crdwait.Tracker
	// events are the Events recorded and not sent yet (sendEvents).
	events *events.Recorder
	// mu guards res.Warnings: concurrent packages share them.
	mu sync.Mutex
	// ca is crossplane-root-ca, which signs the runtimes' TLS Secrets.
	ca *rootca.Authority
	// replacedBy maps packages of the output that another package of the
	// output replaces to the replacing package.
	replacedBy map[crossplane.PackageRef]string
	// plan is what the run decided before its first write (computePlan);
	// planRead is what was read for it: its input (the desired IDs among
	// it), the MRDs each package's records own, the errors of reading a
	// package's part.
	plan     *plan.Plan
	planRead *planinput.Read
	// loaded is the inventory as read before the packages' steps; journal
	// the inventory as the run records it (intents, then the result).
	loaded  *inventory.Inventory
	journal *journal.Journal
	// w sends the run's writes and counts them; planner decides and writes
	// each object through it.
	w       *writer.Writer
	planner *desired.Planner

	// keptListed counts the bytes of listed CRD JSON kept (keepListed).
	keptListed atomic.Int64
	// localOnce takes local, the run's decision on in-process validation
	// (preflight).
	localOnce sync.Once
	local     crdcheck.Decision
	// access answers whether runtime objects may be created without a
	// dry-run (access.Reviewer.MayCreate).
	access *access.Reviewer
}

// newRun returns the state of one Apply or Restore of out, at the
// Manager's time now: its root CA (read through the run's client at most
// once, created and counted as a write when the run generated it) and its
// Event recorder.
func (m *Manager) newRun(out *render.Output, meta Origin) *run {
	r := &run{m: m, c: m.client, w: writer.New(m.client, m.opts.DryRun), access: access.New(m.client), opts: m.opts, out: out, meta: meta, res: &Result{}, now: m.now()}
	r.ca = rootca.New(r.c, r.opts.Namespace, r.now,
		rootca.WithDryRun(r.opts.DryRun), rootca.WithFieldManager(FieldManager), rootca.OnCreate(r.w.Wrote))
	r.events = events.NewRecorder(r.opts.Instance, r.now, r.opts.DryRun)
	r.planner = &desired.Planner{Writer: r.w, Client: r.c, FieldManager: FieldManager, Local: r.preflight, MayCreate: r.access.MayCreate,
		LocalMRDs: r.opts.Preflight == PreflightLocal, Mapper: r.c.RESTMapper()}
	return r
}

// sendEvents creates the Events the run recorded, Concurrency at a time,
// once every package's steps are done, so that no package waits for its
// Events. A failure to create one is a warning, not an apply failure.
func (r *run) sendEvents(ctx context.Context) {
	sent, failed := r.events.Send(ctx, r.c, r.opts.Concurrency, FieldManager)
	for range sent {
		r.w.Wrote()
	}
	for _, err := range failed {
		r.warn(nil, "%v", err)
	}
}

// warn records a warning on the result and, when p is not nil, on the
// package's result.
func (r *run) warn(p *PackageResult, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if p != nil {
		p.Warnings = append(p.Warnings, msg)
		msg = fmt.Sprintf("%s %s: %s", p.Kind, p.Name, msg)
	}
	r.res.Warnings = append(r.res.Warnings, msg)
}
