package ownership_test

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/apply/liveview"
	"github.com/lockstep-gitops/lockstep/apply/ownership"
)

// A payload object controlled by a Deployment lockstep knows nothing of
// is a conflict, found before the package's first write; one controlled
// by a revision that no longer exists has that stale reference released.
func ExamplePackage_CheckController() {
	p := &ownership.Package{View: liveview.New(liveview.Config{}), Name: "provider-nop", RevisionKind: "ProviderRevision",
		Revision: "uid-of-the-current-revision", Record: "uid-of-the-provider",
		Replaced:    func(*unstructured.Unstructured) bool { return false },
		GoneFromGit: func(*unstructured.Unstructured) bool { return false }}
	foreign := object(ref("Deployment", "someone-else", "uid-of-the-deployment", true))
	fmt.Println(p.CheckController(foreign))
	stale := object(ref("ProviderRevision", "provider-nop-0ld", "uid-of-a-gone-revision", true))
	fmt.Println(p.CheckController(stale), "; release:", stale.Release[0].Name)
	// Output:
	// CustomResourceDefinition/widgets.example.org is already controlled by Deployment someone-else (UID uid-of-the-deployment)
	// <nil> ; release: provider-nop-0ld
}
