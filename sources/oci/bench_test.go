package oci_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	pkgv1beta1 "github.com/crossplane/crossplane/apis/v2/pkg/v1beta1"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/lockstep-gitops/lockstep/internal/xpkg"
	"github.com/lockstep-gitops/lockstep/sources/cosign"
	"github.com/lockstep-gitops/lockstep/sources/oci"
	"github.com/lockstep-gitops/lockstep/test/memstat"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// BenchmarkPackage pulls one package by digest from the in-process registry
// with a new Client per iteration: Cold into an empty cache (manifest and
// base layer over HTTP, streamed to disk, then parsed), Warm from a filled
// cache (no request). It runs on the example provider and, when
// $LOCKSTEP_TESTDATA is set, on the largest real package, provider-upjet-aws
// v2.6.0 with all 2,043 CRDs (98 MB package.yaml). Besides ns/op it reports
// requests/op, pulled-bytes/op and the peak heap an iteration adds
// (peakheap-bytes, sampled every millisecond): Cold should stay close to
// Warm, since the layer goes to disk and is never held in memory.
func BenchmarkPackage(b *testing.B) {
	pkgs := map[string]func(b *testing.B) v1.Image{
		"Example": func(b *testing.B) v1.Image { return example(b, provider) },
		"Monolith": func(b *testing.B) v1.Image {
			dir := os.Getenv("LOCKSTEP_TESTDATA")
			if dir == "" {
				b.Skip("LOCKSTEP_TESTDATA is not set; set it to the shared testdata directory to benchmark the real monolith")
			}
			img, err := xpkg.Build(filepath.Join(dir, "packages", "provider-aws-v2.6.0-monolith-allcrds"))
			if err != nil {
				b.Fatal(err)
			}
			return img
		},
	}
	for n, build := range pkgs {
		b.Run(n, func(b *testing.B) {
			img := build(b)
			reg := registry.New(b)
			d := push(b, reg, "org/pkg:v1", img)
			ref := digestRef(b, reg.Host+"/org/pkg", d)
			for _, warm := range []bool{false, true} {
				mode := "Cold"
				if warm {
					mode = "Warm"
				}
				b.Run(mode, func(b *testing.B) {
					dir := b.TempDir()
					if warm {
						if _, err := client(b, options(reg), dir).Package(context.Background(), ref); err != nil {
							b.Fatal(err)
						}
					}
					var requests, pulled int
					var peak uint64
					for b.Loop() {
						b.StopTimer()
						cacheDir := dir
						if !warm {
							cacheDir = b.TempDir()
						}
						c := client(b, options(reg), cacheDir)
						runtime.GC()
						base := heapBytes()
						stop := memstat.SamplePeak()
						b.StartTimer()

						f, err := c.Package(context.Background(), ref)

						b.StopTimer()
						highest := stop()
						if err != nil {
							b.Fatal(err)
						}
						runtime.KeepAlive(f)
						if highest > base && highest-base > peak {
							peak = highest - base
						}
						s := c.Stats()
						requests, pulled = s.Requests(), int(s.Bytes)
						if !warm {
							_ = os.RemoveAll(cacheDir)
						}
						b.StartTimer()
					}
					b.ReportMetric(float64(requests), "requests/op")
					b.ReportMetric(float64(pulled), "pulled-bytes/op")
					b.ReportMetric(float64(peak), "peakheap-bytes")
				})
			}
		})
	}
}

// heapBytes returns the bytes of heap memory occupied by objects, from
// runtime/metrics (no stop-the-world).
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// BenchmarkVerifySignature measures the cost of verifying one package's
// cosign signature with a new Client per iteration, as the snapshot's
// verify step does on every reconcile: a GET of the sha256-<hex>.sig
// manifest and of its payload layer from the in-process registry, then
// the ECDSA P-256 check with github.com/sigstore/sigstore. ColdCache
// writes the signature into a new package cache each time (the first
// verification of a package), WarmCache finds its blobs cached (every
// later one). KeylessWarmCache checks a keyless signature instead: the
// certificate chain, the Rekor entry's signed entry timestamp and the
// identity with sigstore-go, against a trusted root file (read when the
// Client is made, outside the timing). KeyAttestationWarmCache adds one
// attestation (the .att image) to the key authority. KeyBundleWarmCache
// and KeylessBundleWarmCache verify a Sigstore bundle referrer with
// sigstore-go's verify package (found through the referrers tag schema:
// no .sig image), the keyless one dated by its RFC 3161 timestamp. It
// reports ms/op and requests/op.
func BenchmarkVerifySignature(b *testing.B) {
	reg := registry.New(b)
	key := registry.NewSigningKey(b)
	d := push(b, reg, "org/pkg:v1", example(b, provider))
	reg.Sign(b, "org/pkg:v1", key)
	ics := []pkgv1beta1.ImageConfig{verifyingImageConfig(b, "signed", "", reg.Host+"/org", "release")}
	keys := keysOf(map[string]*registry.SigningKey{"release": key})
	ref := digestRef(b, reg.Host+"/org/pkg", d)
	for _, bc := range []struct {
		name string
		dir  string
	}{
		{name: "ColdCache", dir: ""},
		{name: "WarmCache", dir: b.TempDir()},
	} {
		b.Run(bc.name, func(b *testing.B) { benchmarkVerify(b, options(reg), bc.dir, ics, keys, ref) })
	}

	ca, rekor, tsa := registry.NewTestCA(b), registry.NewTestRekor(b), registry.NewTestTSA(b)
	opts := options(reg)
	opts.TrustedRoot = registry.WriteTrustedRootWithTSA(b, []*registry.TestCA{ca}, []*registry.TestTSA{tsa}, rekor)
	// The keyless bundle carries no Rekor entry (no test makes the
	// inclusion proof a v0.3 bundle needs): it is dated by its RFC 3161
	// timestamp, as --insecure-ignore-tlog allows.
	opts.InsecureIgnoreTlog = true
	now := time.Now()
	signer := ca.Leaf(b, ciSubject, ciIssuer, now.Add(-time.Minute), now.Add(time.Hour))
	signer.Rekor = rekor
	for _, bc := range []struct {
		name, repo, authority string
		sign                  func(ref string)
	}{
		{"KeylessWarmCache", "org/keyless", ciKeyless, func(ref string) { reg.SignKeyless(b, ref, signer) }},
		{"KeyAttestationWarmCache", "org/attested",
			`{"name":"release-key","key":{"secretRef":{"name":"release","key":"cosign.pub"},"hashAlgorithm":"sha256"},"attestations":[{"name":"sbom","predicateType":"` + sbomType + `"}]}`,
			func(ref string) { reg.Sign(b, ref, key); reg.Attest(b, ref, sbomType, key.Signer, nil) }},
		{"KeyBundleWarmCache", "org/bundle", releaseKey,
			func(ref string) { reg.SignBundle(b, ref, registry.BundleSigner{Key: key}) }},
		{"KeylessBundleWarmCache", "org/keyless-bundle", ciKeyless,
			func(ref string) { reg.SignBundle(b, ref, registry.BundleSigner{Keyless: signer, TSA: tsa}) }},
	} {
		d := push(b, reg, bc.repo+":v1", example(b, provider))
		bc.sign(bc.repo + ":v1")
		ics := []pkgv1beta1.ImageConfig{authoritiesConfig(reg.Host+"/"+bc.repo, bc.authority)}
		ref := digestRef(b, reg.Host+"/"+bc.repo, d)
		b.Run(bc.name, func(b *testing.B) { benchmarkVerify(b, opts, b.TempDir(), ics, keys, ref) })
	}
}

// benchmarkVerify verifies ref with a new Client per iteration, its cache
// in dir (a new directory each time when empty, so signatures are fetched
// and written there; else shared, so after the first iteration the
// signature blobs are there and only the manifest is fetched).
func benchmarkVerify(b *testing.B, opts oci.Options, dir string, ics []pkgv1beta1.ImageConfig, keys cosign.KeySource, ref name.Digest) {
	var requests int
	for b.Loop() {
		b.StopTimer()
		c := client(b, opts, dir, ics...)
		b.StartTimer()
		if _, err := c.VerifySignature(context.Background(), ref, keys); err != nil {
			b.Fatal(err)
		}
		requests += c.Stats().Requests()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
	b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
}
