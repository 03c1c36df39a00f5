package crossplane

// Label and annotation keys Crossplane reads and writes on package
// revisions, their payload and their runtime (crossplane/crossplane
// apis/pkg/v1/revision_types.go LabelParentPackage, apis/pkg/meta/v1
// LabelProviderFamily, internal/controller/pkg/revision/runtime.go for the
// pod selector labels).
const (
	// LabelParentPackage labels a revision with the name of its package.
	// The function runner and the provider deletion protection look
	// revisions up by it.
	LabelParentPackage = Group + "/package"
	// LabelProviderFamily is how a provider declares its family in its
	// package metadata; Crossplane copies it onto the revision and the RBAC
	// manager aggregates the family's resources.
	LabelProviderFamily = Group + "/provider-family"
	// LabelRevision is the pod selector label holding the revision name.
	LabelRevision = Group + "/revision"
	// LabelProvider is the pod selector label holding a Provider's package
	// name (PackageKind.LabelKey of Provider).
	LabelProvider = Group + "/provider"
	// LabelFunction is the pod selector label holding a Function's package
	// name (PackageKind.LabelKey of Function).
	LabelFunction = Group + "/function"

	// AnnotationPaused is Crossplane's pause annotation. With the value
	// "true" Crossplane's controllers skip the object
	// (crossplane/crossplane-runtime pkg/meta IsPaused).
	AnnotationPaused = "crossplane.io/paused"

	// RevisionFinalizer is the finalizer Crossplane's revision controller
	// puts on every package revision it reconciles and removes only after
	// deactivating it, never while the revision is paused
	// (crossplane/crossplane internal/controller/pkg/revision/reconciler.go,
	// finalizer "revision.pkg.crossplane.io"; on every revision of the
	// captured states in $LOCKSTEP_TESTDATA/crossplane-installed).
	RevisionFinalizer = "revision.pkg.crossplane.io"
)
