package render

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

const webhookStream = providerStream + `
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- name: things.test.lockstep.io
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig:
    caBundle: Zm9v
    service: {name: webhook-service, namespace: system, path: /mutate}
- name: others.test.lockstep.io
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {}
`

func TestBind(t *testing.T) {
	p := Package{Kind: crossplane.KindProvider, Name: "provider-test", Source: "registry.lockstep.example/test/provider-test", Digest: digestA, Contents: parsed(t, webhookStream)}
	out, err := Render(testInput(p))
	if err != nil {
		t.Fatal(err)
	}
	po := out.Packages[0]
	pkgRef, revRef := po.packageRef(), po.revisionRef()
	uids := map[Reference]types.UID{pkgRef: "pkg-uid", revRef: "rev-uid"}
	var crd, hook *Object
	for _, o := range po.Revision.Payload {
		switch o.Kind {
		case "CustomResourceDefinition":
			crd = o
		case "MutatingWebhookConfiguration":
			hook = o
		}
	}
	if crd == nil || hook == nil {
		t.Fatalf("payload %v lacks the CRD or the webhook configuration", po.Revision.Payload)
	}

	t.Run("ControllerAndOwner", func(t *testing.T) {
		u, err := crd.Bind(Binding{UIDs: uids})
		if err != nil {
			t.Fatal(err)
		}
		want := []metav1.OwnerReference{
			{APIVersion: "pkg.crossplane.io/v1", Kind: "ProviderRevision", Name: po.Revision.Name, UID: "rev-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
			{APIVersion: "pkg.crossplane.io/v1", Kind: "Provider", Name: "provider-test", UID: "pkg-uid", BlockOwnerDeletion: ptr.To(true)},
		}
		if diff := cmp.Diff(want, u.GetOwnerReferences()); diff != "" {
			t.Errorf("the active revision controls its payload and the package owns it, both blocking the owner's deletion as Crossplane's references do (docs/crossplane-behaviour.md#establishing-the-payload): -want, +got:\n%s", diff)
		}
	})
	t.Run("OwnerOnly", func(t *testing.T) {
		u, err := crd.Bind(Binding{UIDs: uids, OwnerOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if c := u.GetOwnerReferences()[0].Controller; c == nil || *c {
			t.Errorf("an inactive revision owns without controlling (docs/crossplane-behaviour.md#active-and-inactive-revisions): controller = %v", c)
		}
		if b := u.GetOwnerReferences()[0].BlockOwnerDeletion; b == nil || !*b {
			t.Errorf("a released controller keeps blockOwnerDeletion, as Crossplane's ReleaseObjects does: blockOwnerDeletion = %v", b)
		}
	})
	t.Run("MissingUID", func(t *testing.T) {
		_, err := crd.Bind(Binding{UIDs: map[Reference]types.UID{revRef: "rev-uid"}})
		if err == nil || !strings.Contains(err.Error(), "no UID for Provider/provider-test") {
			t.Errorf("Bind without the package's UID: got %v, want an error naming Provider/provider-test", err)
		}
	})
	t.Run("WebhookConfigurationNamedAndPointedAtTheService", func(t *testing.T) {
		if hook.Name != "crossplane-provider-provider-test" || hook.CABundle == nil || hook.CABundle.SecretName != "provider-test-tls-server" {
			t.Fatalf("webhook configuration %s, CA request %+v", hook.Name, hook.CABundle)
		}
		if strings.Contains(string(hook.JSON()), "caBundle") {
			t.Errorf("the package's own caBundle is dropped before apply injects one: %s", hook.JSON())
		}
		pem := []byte("-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----\n")
		u, err := hook.Bind(Binding{UIDs: uids, CABundle: pem})
		if err != nil {
			t.Fatal(err)
		}
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		for i, h := range hooks {
			cc := h.(map[string]any)["clientConfig"].(map[string]any)
			if cc["caBundle"] != base64.StdEncoding.EncodeToString(pem) {
				t.Errorf("webhooks[%d].clientConfig.caBundle = %v", i, cc["caBundle"])
			}
			svc := cc["service"].(map[string]any)
			if svc["name"] != "provider-test" || svc["namespace"] != "crossplane-system" || svc["port"] != int64(9443) {
				t.Errorf("webhooks[%d].clientConfig.service = %v, want provider-test in crossplane-system on 9443", i, svc)
			}
		}
		if path, _, _ := unstructured.NestedString(hooks[0].(map[string]any), "clientConfig", "service", "path"); path != "/mutate" {
			t.Errorf("the webhook's path is kept, got %q", path)
		}
	})
	t.Run("MissingCABundle", func(t *testing.T) {
		if _, err := hook.Bind(Binding{UIDs: uids}); err == nil || !strings.Contains(err.Error(), "needs the CA bundle from Secret provider-test-tls-server key tls.crt") {
			t.Errorf("Bind without the CA bundle: got %v", err)
		}
	})
	t.Run("RevisionNumberRequired", func(t *testing.T) {
		if _, err := po.Revision.Record.Bind(Binding{UIDs: uids}); err == nil || !strings.Contains(err.Error(), "spec.revision must be at least 1") {
			t.Errorf("Bind of a revision record without a number: got %v", err)
		}
		u, err := po.Revision.Record.Bind(Binding{UIDs: uids, Revision: 7})
		if err != nil {
			t.Fatal(err)
		}
		if state, _, _ := unstructured.NestedString(u.Object, "spec", "desiredState"); state != "Active" {
			t.Errorf("an Automatic revision stays Active when Bind does not override it, got %q", state)
		}
		if refs := u.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "pkg-uid" || !*refs[0].Controller {
			t.Errorf("the package controls its revision: %v", refs)
		}
	})
	t.Run("Identity", func(t *testing.T) {
		if got, want := hook.ID(), "_crossplane-provider-provider-test_admissionregistration.k8s.io_MutatingWebhookConfiguration"; got != want {
			t.Errorf("ID() = %q, want %q", got, want)
		}
		if len(po.Revision.RBAC) == 0 {
			t.Fatal("the test provider rendered no RBAC")
		}
		for _, o := range po.Revision.RBAC {
			// cli-utils (and Flux's inventories) write the ':' of RBAC
			// names as "__", so IDs round-trip through object.ParseObjMetadata.
			if strings.Contains(o.ID(), ":") || !strings.Contains(o.ID(), "crossplane__provider__") {
				t.Errorf("%s: ID() = %q, want ':' written as \"__\"", o, o.ID())
			}
		}
		for _, o := range po.Revision.Runtime {
			if o.Kind == "Deployment" && o.String() != "Deployment/crossplane-system/"+po.Revision.Name {
				t.Errorf("String() = %q", o.String())
			}
		}
	})
}

func TestWithMetadata(t *testing.T) {
	raw := []byte(`{"apiVersion":"v1","kind":"X","metadata":{"generation":12345678901234567,"labels":{"a":"1","b":"2"},"name":"x"},"spec":{"n":1.50,"s":"\u003ctag\u003e"}}`)
	got, err := withMetadata(raw, map[string]string{"b": "two", "c": "3"}, map[string]string{"note": "n"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"v1","kind":"X","metadata":{"annotations":{"note":"n"},"generation":12345678901234567,"labels":{"a":"1","b":"two","c":"3"},"name":"x"},"spec":{"n":1.50,"s":"\u003ctag\u003e"}}`
	if string(got) != want {
		t.Errorf("withMetadata merges labels and annotations and keeps every other byte:\ngot  %s\nwant %s", got, want)
	}
}
