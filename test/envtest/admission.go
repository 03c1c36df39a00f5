package envtest

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WaitDeleteAdmission waits up to 30 s until a server-side dry-run DELETE
// of obj by c is denied as Forbidden (denied) or allowed (!denied), and
// fails tb otherwise. The API server loads ValidatingAdmissionPolicies and
// their bindings through an informer, so a policy just written or deleted
// takes effect a moment later; a dry run passes through admission without
// deleting anything. obj is not modified.
func WaitDeleteAdmission(tb testing.TB, c client.Client, obj client.Object, denied bool) {
	tb.Helper()
	var last error
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		last = c.Delete(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
		if apierrors.IsForbidden(last) == denied && (denied || last == nil) {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("a dry-run delete of %s %s never became denied=%t: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), denied, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ClientAs returns a client that acts as user in groups through
// impersonation by the control plane's admin: with "system:masters" a
// cluster admin that is not the admin itself (not lockstep, in a test
// where lockstep runs as the admin), with "system:authenticated" alone a
// user with only the default discovery and self-review permissions.
func (e *Env) ClientAs(user string, groups ...string) (client.Client, error) {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return client.New(cfg, client.Options{Scheme: Scheme()})
}
