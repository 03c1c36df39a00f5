package rootca_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lockstep-gitops/lockstep/apply/rootca"
	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/test/envtest"
)

// The TLS Secret data of a provider's server certificate on a real API
// server (the test control plane) where Crossplane never ran: the root CA
// is generated, its Secret created before the certificate it signed is
// used, and a second request with the data kept returns it unchanged.
func Example() {
	envtest.RunExample(func(env *envtest.Env) {
		ctx := context.Background()
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crossplane-system"}}); err != nil {
			fmt.Println(err)
			return
		}
		now := time.Now()
		writes := 0
		a := rootca.New(env.Client, "crossplane-system", now, rootca.WithFieldManager("lockstep"), rootca.OnCreate(func() { writes++ }))
		req := &certs.TLSRequest{Usage: certs.TLSServer, DNSNames: []string{"provider-nop", "provider-nop.crossplane-system", "provider-nop.crossplane-system.svc"}, CASecretName: certs.RootCASecretName}
		data, err := a.Data(ctx, req, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := a.Ensure(ctx); err != nil {
			fmt.Println(err)
			return
		}
		again, _ := a.Data(ctx, req, data)
		fmt.Println("keys:", len(data), "valid:", certs.Valid(data, req, now, a.Known()))
		fmt.Println("CA Secrets created:", writes, "kept:", string(again[certs.TLSCertKey]) == string(data[certs.TLSCertKey]))
	})
	// Output:
	// keys: 3 valid: true
	// CA Secrets created: 1 kept: true
}
