package events_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lockstep-gitops/lockstep/apply/events"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// The Events of an install on a real API server (the test control plane):
// recorded while the steps run, sent once they are done. A Provider is
// cluster-scoped, so its Events go to the default namespace.
func Example() {
	envtest.RunExample(func(env *envtest.Env) {
		ctx := context.Background()
		r := events.NewRecorder("prod", time.Now(), false)
		r.Record(record("Provider", "", "provider-nop"), corev1.EventTypeNormal, events.ReasonInstallPackageRevision, "Installed provider-nop-abc")
		r.Record(record("ProviderRevision", "", "provider-nop-abc"), corev1.EventTypeNormal, events.ReasonSyncPackage, "Applied the payload and the runtime")
		sent, failed := r.Send(ctx, env.Client, 8, "lockstep")
		fmt.Println("sent:", sent, "failed:", len(failed))
		list := &corev1.EventList{}
		if err := env.Client.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{"lockstep.io/instance": "prod"}); err != nil {
			fmt.Println(err)
			return
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Provider" {
				fmt.Println(e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type, e.Reason+":", e.Message)
			}
		}
	})
	// Output:
	// sent: 2 failed: 0
	// Provider provider-nop Normal InstallPackageRevision: Installed provider-nop-abc
}
