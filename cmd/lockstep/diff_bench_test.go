package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/lockstep-gitops/lockstep/cmd/internal/diff"
	"github.com/lockstep-gitops/lockstep/test/envtest"
	"github.com/lockstep-gitops/lockstep/test/memstat"
	"github.com/lockstep-gitops/lockstep/test/registry"
)

// benchManagedResource returns the i-th of the managed resources the
// diff benchmark creates: provider-aws-ec2 v1.23.0 Instances (two in
// five), VPCs, Subnets and SecurityGroups, with the fields such objects
// typically set.
func benchManagedResource(i int) *unstructured.Unstructured {
	name := fmt.Sprintf("bench-%04d", i)
	var kind string
	var forProvider map[string]any
	switch i % 5 {
	case 0, 1:
		kind = "Instance"
		forProvider = map[string]any{
			"region": "eu-west-1", "ami": "ami-0123456789abcdef0", "instanceType": "t3.small",
			"subnetIdRef":            map[string]any{"name": "bench-subnet"},
			"vpcSecurityGroupIdRefs": []any{map[string]any{"name": "bench-web"}},
			"rootBlockDevice":        []any{map[string]any{"volumeSize": int64(20), "volumeType": "gp3", "encrypted": true}},
			"metadataOptions":        []any{map[string]any{"httpTokens": "required"}},
			"tags":                   map[string]any{"team": "platform", "index": name},
		}
	case 2:
		kind = "VPC"
		forProvider = map[string]any{"region": "eu-west-1", "cidrBlock": "10.0.0.0/16", "enableDnsSupport": true, "tags": map[string]any{"index": name}}
	case 3:
		kind = "Subnet"
		forProvider = map[string]any{"region": "eu-west-1", "availabilityZone": "eu-west-1a", "cidrBlock": "10.0.1.0/24", "vpcIdRef": map[string]any{"name": "bench-vpc"}}
	default:
		kind = "SecurityGroup"
		forProvider = map[string]any{"region": "eu-west-1", "description": "web", "name": name, "vpcIdRef": map[string]any{"name": "bench-vpc"}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ec2.aws.upbound.io/v1beta1", "kind": kind,
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"forProvider":       forProvider,
			"providerConfigRef": map[string]any{"name": "default"},
		},
		"status": map[string]any{"atProvider": map[string]any{"id": "i-" + name}},
	}}
}

// BenchmarkDiffClusterAWSUpgrade runs `lockstep diff --cluster --format
// json` in-process for provider-aws-ec2 v1.23.0 → v2.6.0 (with its family
// provider) against a real API server on which v1.23.0 is installed with
// 1,000 managed resources of four kinds: "plain" with --check-objects=false
// (the orphan count alone), "check" with the default, which lists the
// objects of every changed CRD and checks each against its new CRD. It
// reports the peak live heap of the command (peak-heap-MB, over the heap
// before it, after a garbage collection) and the objects checked. Run it
// once:
//
//	LOCKSTEP_TESTDATA=../shared/testdata go test ./cmd/lockstep -run '^$' -bench DiffClusterAWSUpgrade -benchtime 1x
func BenchmarkDiffClusterAWSUpgrade(b *testing.B) {
	const objects = 1000
	reg := registry.New(b)
	pushUpstream(b, reg, "provider-aws-ec2-v1.23.0", "upbound/provider-aws-ec2", "v1.23.0")
	pushUpstream(b, reg, "provider-aws-ec2-v2.6.0", "upbound/provider-aws-ec2", "v2.6.0")
	pushUpstream(b, reg, "provider-family-aws-v2.6.0", "upbound/provider-family-aws", "v2.6.0")
	decl := func(version string) string {
		return writePackage(b, map[string]string{
			"ec2.yaml":    "apiVersion: pkg.crossplane.io/v1\nkind: Provider\nmetadata:\n  name: provider-aws-ec2\nspec:\n  package: xpkg.upbound.io/upbound/provider-aws-ec2:" + version + "\n",
			"mirror.yaml": mirrorTo("xpkg.upbound.io", reg),
		})
	}
	base, head := decl("v1.23.0"), decl("v2.6.0")
	cache := b.TempDir()
	for _, dir := range []string{base, head} {
		if out, err := run(b, "lock", "--crossplane-version", "v1.20.0", "--dir", dir, "--cache-dir", cache, "--insecure-registry", reg.Host); err != nil {
			b.Fatalf("lock: %v\n%s", err, out)
		}
	}
	const ns = "diff-bench"
	env, kubeconfig := clusterOn(b, envtest.Dedicated(b), ns)
	if out, err := run(b, "apply", "--instance", "bench", "--dir", base, "--cache-dir", cache, "--insecure-registry", reg.Host, "--kubeconfig", kubeconfig, "--namespace", ns); err != nil {
		b.Fatalf("apply: %v\n%s", err, out)
	}
	for i := range objects {
		if err := env.Client.Create(context.Background(), benchManagedResource(i)); err != nil {
			b.Fatal(err)
		}
	}
	args := []string{"diff", "--format", "json", "--base-dir", base, "--head-dir", head, "--cache-dir", cache, "--insecure-registry", reg.Host, "--cluster", "--kubeconfig", kubeconfig}
	for _, c := range []struct {
		name    string
		flag    string
		checked int
	}{
		{"plain", "--check-objects=false", 0},
		{"check", "--check-objects=true", objects},
	} {
		b.Run(c.name, func(b *testing.B) {
			var out string
			var peak, before uint64
			for b.Loop() {
				runtime.GC()
				before = memstat.HeapObjectBytes()
				stop := memstat.SamplePeak()
				var err error
				out, err = run(b, append(args, c.flag)...)
				peak = stop()
				if err != nil {
					b.Fatalf("diff: %v\n%s", err, out)
				}
			}
			var r diff.Report
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				b.Fatal(err)
			}
			checked, broken := 0, 0
			for _, p := range r.Packages {
				if p.Payload == nil {
					continue
				}
				for _, d := range p.Payload.Definitions {
					if d.Objects != nil {
						checked += d.Objects.Checked
						broken += d.Objects.Broken + d.Objects.Pruned
					}
				}
			}
			if checked != c.checked || broken != 0 {
				b.Fatalf("%d objects checked, %d broken or pruned; want %d and 0", checked, broken, c.checked)
			}
			b.ReportMetric(float64(peak-min(peak, before))/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(checked), "objects-checked")
		})
	}
}
