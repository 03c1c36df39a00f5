package xpstate_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/internal/certs"
	"github.com/lockstep-gitops/lockstep/render"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/registry"
	"github.com/lockstep-gitops/lockstep/test/xpstate"
)

// TestParse reads every fast scenario and checks its object count against
// the table in the capture's README.md, and that each document is an
// object with a placeholder-only UID.
func TestParse(t *testing.T) {
	cases := map[string]struct {
		reason string
		file   string
		want   int
	}{
		"S1":       {reason: "provider-nop and function-auto-ready", file: xpstate.S1, want: 26},
		"S2Before": {reason: "provider-kubernetes v0.18.0 and function-patch-and-transform v0.8.2", file: xpstate.S2BeforeUpgrade, want: 29},
		"S2After":  {reason: "the same cluster after the upgrade", file: xpstate.S2AfterUpgrade, want: 44},
		"S4":       {reason: "configuration-getting-started and its dependencies", file: xpstate.S4, want: 105},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := xpstate.ParseFile(xpstate.Path(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, len(objs)); diff != "" {
				t.Errorf("%s: objects: -want +got:\n%s", tc.reason, diff)
			}
			for _, u := range objs {
				if u.GetUID() != "" {
					t.Errorf("%s: %s has a uid %q in the capture", tc.reason, xpstate.KeyOf(u), u.GetUID())
				}
			}
		})
	}
}

// TestParseErrors checks that a document that is not an object, or a
// repeated object, is refused with the document's number.
func TestParseErrors(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"NoKind": {
			reason: "a document without kind is not an object",
			in:     "# comment\n---\napiVersion: v1\nmetadata: {name: a}\n",
			want:   "document 2: not an object",
		},
		"Twice": {
			reason: "an object may appear once",
			in:     "apiVersion: v1\nkind: Secret\nmetadata: {name: a, namespace: ns1}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: a, namespace: ns1}\n",
			want:   "document 2: Secret/ns1/a appears twice",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := xpstate.Parse(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: Parse error %v, want one containing %q", tc.reason, err, tc.want)
			}
		})
	}
}

// ownerRef is an owner reference reduced to what a test compares.
type ownerRef struct {
	Kind       string
	Name       string
	UID        string
	Controller bool
}

func owners(u *unstructured.Unstructured) []ownerRef {
	var out []ownerRef
	for _, r := range u.GetOwnerReferences() {
		out = append(out, ownerRef{Kind: r.Kind, Name: r.Name, UID: string(r.UID), Controller: r.Controller != nil && *r.Controller})
	}
	return out
}

// TestLoad replays S1 and S2-before-upgrade into their own control planes
// and reads back the facts adoption depends on: every placeholder became
// the real UID of the named object, revisions keep Crossplane's finalizer,
// status went through the status subresource, Lock/lock holds its entries,
// the registry and the Secrets were replaced as asked.
func TestLoad(t *testing.T) {
	type check struct {
		reason string
		got    func(s *xpstate.State) any
		want   func(s *xpstate.State) any
	}
	cases := map[string]struct {
		file   string
		checks map[string]check
	}{
		"S1": {
			file: xpstate.S1,
			checks: map[string]check{
				"RevisionFinalizer": {
					reason: "Crossplane puts revision.pkg.crossplane.io on every revision",
					got: func(s *xpstate.State) any {
						return s.Get("ProviderRevision", "", "crossplane-contrib-provider-nop-47fa8bc932a3").GetFinalizers()
					},
					want: func(*xpstate.State) any { return []string{"revision.pkg.crossplane.io"} },
				},
				"RevisionOwner": {
					reason: "the revision is controlled by its Provider, by the Provider's real UID",
					got: func(s *xpstate.State) any {
						return owners(s.Get("ProviderRevision", "", "crossplane-contrib-provider-nop-47fa8bc932a3"))
					},
					want: func(s *xpstate.State) any {
						return []ownerRef{{Kind: "Provider", Name: "crossplane-contrib-provider-nop", UID: string(s.UID("Provider", "", "crossplane-contrib-provider-nop")), Controller: true}}
					},
				},
				"TLSSecretOwner": {
					reason: "Crossplane makes the revision the controller of a provider's TLS Secret",
					got: func(s *xpstate.State) any {
						return owners(s.Get("Secret", "crossplane-system", "crossplane-contrib-provider-nop-tls-server"))
					},
					want: func(s *xpstate.State) any {
						return []ownerRef{{Kind: "ProviderRevision", Name: "crossplane-contrib-provider-nop-47fa8bc932a3", UID: string(s.UID("ProviderRevision", "", "crossplane-contrib-provider-nop-47fa8bc932a3")), Controller: true}}
					},
				},
				"RevisionUIDEnv": {
					reason: "a placeholder in a container's environment is the revision's UID",
					got: func(s *xpstate.State) any {
						cs, _, _ := unstructured.NestedSlice(s.Get("Deployment", "crossplane-system", "crossplane-contrib-provider-nop-47fa8bc932a3").Object, "spec", "template", "spec", "containers")
						env, _, _ := unstructured.NestedSlice(cs[0].(map[string]any), "env")
						for _, e := range env {
							if e.(map[string]any)["name"] == "REVISION_UID" {
								return e.(map[string]any)["value"]
							}
						}
						return nil
					},
					want: func(s *xpstate.State) any {
						return string(s.UID("ProviderRevision", "", "crossplane-contrib-provider-nop-47fa8bc932a3"))
					},
				},
				"StatusObjectRefs": {
					reason: "revision status is written through the status subresource, its uids resolved",
					got: func(s *xpstate.State) any {
						refs, _, _ := unstructured.NestedSlice(s.Get("ProviderRevision", "", "crossplane-contrib-provider-nop-47fa8bc932a3").Object, "status", "objectRefs")
						var out []string
						for _, r := range refs {
							m := r.(map[string]any)
							out = append(out, m["kind"].(string)+"/"+m["name"].(string)+"="+m["uid"].(string))
						}
						return out
					},
					want: func(s *xpstate.State) any {
						return []string{
							"ManagedResourceDefinition/nopresources.nop.crossplane.io=" + string(s.UID("ManagedResourceDefinition", "", "nopresources.nop.crossplane.io")),
							"ValidatingWebhookConfiguration/crossplane-provider-crossplane-contrib-provider-nop=" + string(s.UID("ValidatingWebhookConfiguration", "", "crossplane-provider-crossplane-contrib-provider-nop")),
						}
					},
				},
				"ManagedCRDOwners": {
					reason: "the CRD made from the MRD is owned by the MRD and controlled by the revision",
					got: func(s *xpstate.State) any {
						return owners(s.Get("CustomResourceDefinition", "", "nopresources.nop.crossplane.io"))
					},
					want: func(s *xpstate.State) any {
						return []ownerRef{
							{Kind: "ManagedResourceDefinition", Name: "nopresources.nop.crossplane.io", UID: string(s.UID("ManagedResourceDefinition", "", "nopresources.nop.crossplane.io"))},
							{Kind: "ProviderRevision", Name: "crossplane-contrib-provider-nop-47fa8bc932a3", UID: string(s.UID("ProviderRevision", "", "crossplane-contrib-provider-nop-47fa8bc932a3")), Controller: true},
						}
					},
				},
				"Lock": {
					reason: "Lock/lock keeps its entries and finalizer",
					got: func(s *xpstate.State) any {
						l := s.Get("Lock", "", "lock")
						pkgs, _, _ := unstructured.NestedSlice(l.Object, "packages")
						out := append([]string{}, l.GetFinalizers()...)
						for _, p := range pkgs {
							m := p.(map[string]any)
							out = append(out, m["name"].(string)+" "+m["source"].(string)+" "+m["version"].(string))
						}
						return out
					},
					want: func(*xpstate.State) any {
						return []string{
							"lock.pkg.crossplane.io",
							"crossplane-contrib-provider-nop-47fa8bc932a3 xpkg.upbound.io/crossplane-contrib/provider-nop v0.4.0",
							"crossplane-contrib-function-auto-ready-0ab7dc585b02 xpkg.upbound.io/crossplane-contrib/function-auto-ready v0.7.0",
						}
					},
				},
				"Registry": {
					reason: "the captured registry address is replaced in status and spec",
					got: func(s *xpstate.State) any {
						rp, _, _ := unstructured.NestedString(s.Get("Provider", "", "crossplane-contrib-provider-nop").Object, "status", "resolvedPackage")
						pre, _, _ := unstructured.NestedString(s.Get("ImageConfig", "", "local-registry").Object, "spec", "rewriteImage", "prefix")
						return []string{rp, pre}
					},
					want: func(*xpstate.State) any {
						return []string{"registry.test:5000/crossplane-contrib/provider-nop:v0.4.0", "registry.test:5000"}
					},
				},
				"SecretKept": {
					reason: "without SecretData or IssueCertificates a Secret keeps the capture's placeholder",
					got: func(s *xpstate.State) any {
						d, _, _ := unstructured.NestedStringMap(s.Get("Secret", "crossplane-system", "crossplane-contrib-function-auto-ready-tls-server").Object, "data")
						return d["tls.crt"]
					},
					want: func(*xpstate.State) any { return xpstate.Redacted },
				},
				"SecretData": {
					reason: "SecretData replaces a Secret's placeholders",
					got: func(s *xpstate.State) any {
						d, _, _ := unstructured.NestedStringMap(s.Get("Secret", "crossplane-system", "crossplane-contrib-provider-nop-tls-client").Object, "data")
						return d
					},
					want: func(*xpstate.State) any {
						// base64 of "ca.crt", "tls.crt", "tls.key".
						return map[string]string{"ca.crt": "Y2EuY3J0", "tls.crt": "dGxzLmNydA==", "tls.key": "dGxzLmtleQ=="}
					},
				},
			},
		},
		"S2BeforeUpgrade": {
			file: xpstate.S2BeforeUpgrade,
			checks: map[string]check{
				"DirectCRDOwners": {
					reason: "a CRD applied without an MRD is controlled by the revision and owned by the Provider",
					got: func(s *xpstate.State) any {
						return owners(s.Get("CustomResourceDefinition", "", "providerconfigs.kubernetes.crossplane.io"))
					},
					want: func(s *xpstate.State) any {
						return []ownerRef{
							{Kind: "ProviderRevision", Name: "crossplane-contrib-provider-kubernetes-9a0a3cd84f1f", UID: string(s.UID("ProviderRevision", "", "crossplane-contrib-provider-kubernetes-9a0a3cd84f1f")), Controller: true},
							{Kind: "Provider", Name: "crossplane-contrib-provider-kubernetes", UID: string(s.UID("Provider", "", "crossplane-contrib-provider-kubernetes"))},
						}
					},
				},
				"FunctionRevisionFinalizer": {
					reason: "a FunctionRevision carries Crossplane's finalizer too",
					got: func(s *xpstate.State) any {
						return s.Get("FunctionRevision", "", "crossplane-contrib-function-patch-and-transform-9d4e77074e1b").GetFinalizers()
					},
					want: func(*xpstate.State) any { return []string{"revision.pkg.crossplane.io"} },
				},
				"Certificates": {
					reason: "IssueCertificates gives every TLS Secret a certificate lockstep finds valid for what it renders, from the CA in crossplane-root-ca",
					got: func(s *xpstate.State) any {
						ns := "crossplane-system"
						root := secretBytes(s.Get("Secret", ns, "crossplane-root-ca"))
						ca, err := certs.Parse(root["tls.crt"], root["tls.key"])
						if err != nil {
							return err.Error()
						}
						server := func(pkg string) *certs.TLSRequest {
							return &certs.TLSRequest{Usage: certs.TLSServer, DNSNames: []string{pkg, pkg + "." + ns, pkg + "." + ns + ".svc"}, CASecretName: certs.RootCASecretName}
						}
						k8s, pat := "crossplane-contrib-provider-kubernetes", "crossplane-contrib-function-patch-and-transform"
						client := &certs.TLSRequest{Usage: certs.TLSClient, DNSNames: []string{k8s + "-9a0a3cd84f1f"}, CASecretName: certs.RootCASecretName}
						return map[string]bool{
							"provider server": certs.Valid(secretBytes(s.Get("Secret", ns, k8s+"-tls-server")), server(k8s), time.Now(), ca),
							"provider client": certs.Valid(secretBytes(s.Get("Secret", ns, k8s+"-tls-client")), client, time.Now(), ca),
							"function server": certs.Valid(secretBytes(s.Get("Secret", ns, pat+"-tls-server")), server(pat), time.Now(), ca),
							"state CA":        s.CA != nil && string(s.CA.CertPEM()) == string(root["tls.crt"]),
						}
					},
					want: func(*xpstate.State) any {
						return map[string]bool{"provider server": true, "provider client": true, "function server": true, "state CA": true}
					},
				},
				"OtherSecretKept": {
					reason: "a Secret that is not a package's TLS Secret keeps its placeholder",
					got: func(s *xpstate.State) any {
						return string(secretBytes(s.Get("Secret", "crossplane-system", "crossplane-tls-client"))["tls.crt"])
					},
					want: func(*xpstate.State) any { return string(redactedBytes()) },
				},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := xpstate.Path(t, tc.file)
			env := envtest.Dedicated(t)
			ctx := envtest.Context(t, 3*time.Minute)
			o := xpstate.Options{IssueCertificates: name == "S2BeforeUpgrade"}
			if name == "S1" {
				o.Registry = "registry.test:5000"
				o.SecretData = func(k xpstate.Key, keys []string) map[string][]byte {
					if k.Name != "crossplane-contrib-provider-nop-tls-client" {
						return nil
					}
					m := map[string][]byte{}
					for _, key := range keys {
						m[key] = []byte(key)
					}
					return m
				}
			}
			s, err := xpstate.LoadFile(ctx, env, path, o)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := xpstate.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(len(objs), len(s.Objects)); diff != "" {
				t.Errorf("loaded objects: -want +got:\n%s", diff)
			}
			// Every owner reference names a loaded object by its real UID.
			for k, u := range s.Objects {
				for _, r := range u.GetOwnerReferences() {
					if want := s.UID(r.Kind, "", r.Name); want == "" || r.UID != want {
						t.Errorf("%s: owner %s/%s has uid %q, want %q", k, r.Kind, r.Name, r.UID, want)
					}
				}
				if strings.Contains(toString(u.Object), xpstate.UIDPrefix) {
					t.Errorf("%s: a placeholder %q is left", k, xpstate.UIDPrefix)
				}
			}
			for cname, c := range tc.checks {
				if diff := cmp.Diff(c.want(s), c.got(s)); diff != "" {
					t.Errorf("%s: %s: -want +got:\n%s", cname, c.reason, diff)
				}
			}
		})
	}
}

// secretBytes decodes a Secret's data.
func secretBytes(u *unstructured.Unstructured) map[string][]byte {
	d, _, _ := unstructured.NestedStringMap(u.Object, "data")
	out := map[string][]byte{}
	for k, v := range d {
		b, _ := base64.StdEncoding.DecodeString(v)
		out[k] = b
	}
	return out
}

// redactedBytes are the bytes the capture's placeholder decodes to.
func redactedBytes() []byte {
	b, _ := base64.StdEncoding.DecodeString(xpstate.Redacted)
	return b
}

func toString(v any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for _, e := range t {
				walk(e)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		case string:
			b.WriteString(t)
			b.WriteByte('\n')
		}
	}
	walk(v)
	return b.String()
}

// TestPushPackagesReproducesRevisionNames pushes every package version of
// the scenarios to an in-process registry and checks that the registry
// serves it at the digest whose first 12 hex digits end Crossplane's
// revision name in the capture: lockstep renders the same revision names
// for the same versions.
func TestPushPackagesReproducesRevisionNames(t *testing.T) {
	reg := registry.New(t)
	digests := xpstate.PushPackages(t, reg, xpstate.Packages...)
	for _, p := range xpstate.Packages {
		t.Run(p.Folder, func(t *testing.T) {
			desc, err := remote.Head(reg.Ref(t, p.Repository+":"+p.Tag), reg.RemoteOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(digests[p.Folder], desc.Digest.String()); diff != "" {
				t.Errorf("the registry serves another digest than was pushed: -want +got:\n%s", diff)
			}
			if diff := cmp.Diff(p.Digest12, desc.Digest.Hex[:12]); diff != "" {
				t.Errorf("%s:%s: the revision suffix Crossplane used: -want +got:\n%s", p.Repository, p.Tag, diff)
			}
		})
	}
}

// TestCapturedRevisionNames checks every revision of the fast scenarios
// against render.RevisionName of its package at the digest PushPackages
// pushed for the revision's spec.image.
func TestCapturedRevisionNames(t *testing.T) {
	reg := registry.New(t)
	digests := xpstate.PushPackages(t, reg, xpstate.Packages...)
	byImage := map[string]string{}
	for _, p := range xpstate.Packages {
		byImage["xpkg.upbound.io/"+p.Repository+":"+p.Tag] = digests[p.Folder]
	}
	checked := 0
	for _, f := range []string{xpstate.S1, xpstate.S2BeforeUpgrade, xpstate.S2AfterUpgrade, xpstate.S4} {
		objs, err := xpstate.ParseFile(xpstate.Path(t, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			if !strings.HasSuffix(u.GetKind(), "Revision") || u.GetAPIVersion() != "pkg.crossplane.io/v1" {
				continue
			}
			img, _, _ := unstructured.NestedString(u.Object, "spec", "image")
			d, ok := byImage[img]
			if !ok {
				t.Errorf("%s: %s: spec.image %s is not in xpstate.Packages", f, xpstate.KeyOf(u), img)
				continue
			}
			checked++
			pkg := u.GetLabels()["pkg.crossplane.io/package"]
			if diff := cmp.Diff(u.GetName(), render.RevisionName(pkg, d)); diff != "" {
				t.Errorf("%s: revision of %s: -captured +lockstep:\n%s", f, img, diff)
			}
		}
	}
	if diff := cmp.Diff(12, checked); diff != "" {
		t.Errorf("revisions in S1, S2 and S4: -want +got:\n%s", diff)
	}
}
