package crdcheck_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/internal/crdcheck"
)

// BenchmarkCheckAWSInstances checks 1,000 existing EC2 Instances (each with
// the fields a managed resource commonly sets, and the status a provider
// writes) against provider-aws-ec2 v2.6.0's Instance CRD (349 KB, two
// versions), as an upgrade to it checks them: one op is NewChecker plus
// 1,000 Checks. objects/s and B/op say what the check adds per managed
// resource. It needs $LOCKSTEP_TESTDATA.
func BenchmarkCheckAWSInstances(b *testing.B) {
	dir := os.Getenv("LOCKSTEP_TESTDATA")
	if dir == "" {
		b.Skip("LOCKSTEP_TESTDATA is not set; set it to the shared testdata directory to benchmark against provider-aws-ec2")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "packages", "provider-aws-ec2-v2.6.0", "crds", "ec2.aws.upbound.io_instances.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		b.Fatal(err)
	}
	const n = 1000
	objs := make([]*unstructured.Unstructured, n)
	for i := range objs {
		j, err := yaml.YAMLToJSON(fmt.Appendf(nil, `apiVersion: ec2.aws.upbound.io/v1beta1
kind: Instance
metadata: {name: instance-%d, annotations: {crossplane.io/external-name: i-%012d}}
spec:
  deletionPolicy: Delete
  providerConfigRef: {name: default}
  forProvider:
    region: eu-west-1
    ami: ami-0123456789abcdef0
    instanceType: t3.micro
    subnetId: subnet-%d
    tags: {team: platform, env: prod, index: "%d"}
    rootBlockDevice: [{volumeSize: 20, volumeType: gp3, encrypted: true}]
    metadataOptions: [{httpTokens: required, httpEndpoint: enabled}]
status:
  atProvider: {id: i-%012d, arn: "arn:aws:ec2:eu-west-1:123456789012:instance/i-%012d", instanceState: running}
  conditions:
  - {type: Ready, status: "True", reason: Available, lastTransitionTime: "2026-11-28T00:00:00Z"}
  - {type: Synced, status: "True", reason: ReconcileSuccess, lastTransitionTime: "2026-11-28T00:00:00Z"}
`, i, i, i, i, i, i))
		if err != nil {
			b.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			b.Fatal(err)
		}
		objs[i] = u
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	broken := 0
	for b.Loop() {
		c, err := crdcheck.NewChecker(crd)
		if err != nil {
			b.Fatal(err)
		}
		broken = 0
		for _, o := range objs {
			broken += len(c.Check(ctx, o))
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "objects/s")
	if broken != 0 {
		b.Fatalf("%d breakages of objects valid for the CRD; the benchmark's objects are wrong", broken)
	}
}
