package apply_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/apply"
	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/render"
)

// awsObjects are managed resources of provider-aws-ec2 v1.23.0, one per
// kind, with the fields an EC2 network and its instances typically set,
// each at the version its CRD stores. None uses a field v2.6.0 drops.
const awsObjects = `
apiVersion: ec2.aws.upbound.io/v1beta1
kind: VPC
metadata: {name: main}
spec:
  forProvider: {region: eu-west-1, cidrBlock: 10.0.0.0/16, enableDnsSupport: true, enableDnsHostnames: true, tags: {team: platform}}
  providerConfigRef: {name: default}
---
apiVersion: ec2.aws.upbound.io/v1beta1
kind: Subnet
metadata: {name: main-a}
spec:
  forProvider: {region: eu-west-1, availabilityZone: eu-west-1a, cidrBlock: 10.0.1.0/24, mapPublicIpOnLaunch: true, vpcIdRef: {name: main}}
---
apiVersion: ec2.aws.upbound.io/v1beta1
kind: SecurityGroup
metadata: {name: web}
spec:
  forProvider: {region: eu-west-1, description: web servers, name: web, vpcIdRef: {name: main}}
---
apiVersion: ec2.aws.upbound.io/v1beta1
kind: SecurityGroupRule
metadata: {name: web-https}
spec:
  forProvider: {region: eu-west-1, type: ingress, fromPort: 443, toPort: 443, protocol: tcp, cidrBlocks: [0.0.0.0/0], securityGroupIdRef: {name: web}}
---
apiVersion: ec2.aws.upbound.io/v1beta1
kind: InternetGateway
metadata: {name: main}
spec:
  forProvider: {region: eu-west-1, vpcIdRef: {name: main}}
---
apiVersion: ec2.aws.upbound.io/v1beta1
kind: RouteTable
metadata: {name: public}
spec:
  forProvider: {region: eu-west-1, vpcIdRef: {name: main}}
---
apiVersion: ec2.aws.upbound.io/v1beta2
kind: Route
metadata: {name: public-default}
spec:
  forProvider: {region: eu-west-1, destinationCidrBlock: 0.0.0.0/0, gatewayIdRef: {name: main}, routeTableIdRef: {name: public}}
---
apiVersion: ec2.aws.upbound.io/v1beta1
kind: EIP
metadata: {name: nat}
spec:
  forProvider: {region: eu-west-1, domain: vpc}
---
apiVersion: ec2.aws.upbound.io/v1beta1
kind: NATGateway
metadata: {name: main}
spec:
  forProvider: {region: eu-west-1, allocationIdRef: {name: nat}, subnetIdRef: {name: main-a}}
---
apiVersion: ec2.aws.upbound.io/v1beta1
kind: LaunchTemplate
metadata: {name: web}
spec:
  forProvider: {region: eu-west-1, imageId: ami-0123456789abcdef0, instanceType: t3.small, updateDefaultVersion: true, tagSpecifications: [{resourceType: instance, tags: {team: platform}}]}
---
apiVersion: ec2.aws.upbound.io/v1beta1
kind: Instance
metadata: {name: web-1}
spec:
  forProvider:
    region: eu-west-1
    ami: ami-0123456789abcdef0
    instanceType: t3.small
    subnetIdRef: {name: main-a}
    vpcSecurityGroupIdRefs: [{name: web}]
    rootBlockDevice: [{volumeSize: 20, volumeType: gp3, encrypted: true}]
    metadataOptions: [{httpTokens: required}]
    tags: {team: platform}
`

// legacyInstance uses cpuCoreCount and cpuThreadsPerCore, which
// provider-aws-ec2 v2.6.0 drops from the Instance schema (cpuOptions
// replaces them).
const legacyInstance = `
apiVersion: ec2.aws.upbound.io/v1beta1
kind: Instance
metadata: {name: legacy}
spec:
  forProvider: {region: eu-west-1, ami: ami-0123456789abcdef0, instanceType: c5.xlarge, cpuCoreCount: 2, cpuThreadsPerCore: 1}
`

// TestAWSFamilyUpgradeExistingObjects upgrades the real provider-aws-ec2
// from v1.23.0 to v2.6.0 (its family provider v2.6.0, as a resolver picks
// for ">= 0.0.0"; every kind activated, as Crossplane's chart default
// policy "*" does) over managed resources of eleven kinds. The check reads
// the objects of every CRD the upgrade changes: the typical objects break
// nothing, and an Instance that still sets cpuCoreCount and
// cpuThreadsPerCore, which v2.6.0 drops, refuses the upgrade naming
// exactly those two fields. Once that Instance moves to cpuOptions, the
// upgrade installs and every object is still there, unchanged.
func TestAWSFamilyUpgradeExistingObjects(t *testing.T) {
	testdata(t)
	f := newDedicatedFixture(t)
	m := f.manager(t, nil)
	family := build(t, upstream(t, crossplane.KindProvider, "upbound-provider-family-aws", "provider-family-aws-v2.6.0", "xpkg.upbound.io/upbound/provider-family-aws", "v2.6.0", false))
	ec2v1 := build(t, upstream(t, crossplane.KindProvider, "provider-aws-ec2", "provider-aws-ec2-v1.23.0", "xpkg.upbound.io/upbound/provider-aws-ec2", "v1.23.0", true))
	ec2v2 := build(t, upstream(t, crossplane.KindProvider, "provider-aws-ec2", "provider-aws-ec2-v2.6.0", "xpkg.upbound.io/upbound/provider-aws-ec2", "v2.6.0", true))
	all := map[string][]string{"default": {"*"}}
	mustSucceed(t, f.apply(t, m, f.renderMRDs(t, all, family, ec2v1), apply.Origin{Commit: "c1"}))

	ctx := context.Background()
	objs := decodeAll(t, awsObjects+"\n---\n"+legacyInstance)
	for _, u := range objs {
		if err := f.c.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}

	res := f.apply(t, m, f.renderMRDs(t, all, family, ec2v2), apply.Origin{Commit: "c2"})
	var be *apply.BreakingUpgradeError
	var ec2Err error
	for _, p := range res.Packages {
		if p.Name == ec2v2.Name {
			ec2Err = p.Err
		} else if p.Err != nil {
			t.Errorf("%s: %v", p.Name, p.Err)
		}
	}
	if !errors.As(ec2Err, &be) {
		t.Fatalf("the upgrade over an Instance that sets dropped fields: %v, want a BreakingUpgradeError", ec2Err)
	}
	var got []string
	for _, b := range be.Breakages {
		got = append(got, b.Object+" "+b.Reason+" "+b.Field)
	}
	want := []string{
		"Instance legacy Pruned spec.forProvider.cpuCoreCount",
		"Instance legacy Pruned spec.forProvider.cpuThreadsPerCore",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("breakages: -want +got\n%s", diff)
	}
	t.Logf("refusal: %v", be)

	// The Instance moves to cpuOptions, as v2.6.0 asks.
	legacy := &unstructured.Unstructured{}
	legacy.SetGroupVersionKind(objs[len(objs)-1].GroupVersionKind())
	if err := f.c.Get(ctx, client.ObjectKey{Name: "legacy"}, legacy); err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(legacy.Object, "spec", "forProvider", "cpuCoreCount")
	unstructured.RemoveNestedField(legacy.Object, "spec", "forProvider", "cpuThreadsPerCore")
	if err := unstructured.SetNestedSlice(legacy.Object, []any{map[string]any{"coreCount": int64(2), "threadsPerCore": int64(1)}}, "spec", "forProvider", "cpuOptions"); err != nil {
		t.Fatal(err)
	}
	if err := f.c.Update(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	mustSucceed(t, f.apply(t, m, f.renderMRDs(t, all, family, ec2v2), apply.Origin{Commit: "c3"}))
	if rev := f.revision(t, crossplane.KindProvider, render.RevisionName(ec2v2.Name, ec2v2.Digest)); rev == nil {
		t.Fatal("the v2.6.0 revision was not written")
	}
	versions, _, _ := unstructured.NestedSlice(f.crd(t, "instances.ec2.aws.upbound.io").Object, "spec", "versions")
	for _, v := range versions {
		if _, found, _ := unstructured.NestedMap(v.(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "forProvider", "properties", "cpuCoreCount"); found {
			t.Errorf("the Instance CRD still has cpuCoreCount after the upgrade")
		}
	}
	for _, u := range objs {
		now := f.get(t, u.GetAPIVersion(), u.GetKind(), "", u.GetName())
		if now == nil {
			t.Errorf("%s %s is gone after the upgrade", u.GetKind(), u.GetName())
			continue
		}
		if u.GetName() == "legacy" {
			continue
		}
		if diff := cmp.Diff(u.Object["spec"], now.Object["spec"]); diff != "" {
			t.Errorf("%s %s: spec changed by the upgrade: -before +after\n%s", u.GetKind(), u.GetName(), diff)
		}
	}
}

// decodeAll decodes a multi-document YAML stream.
func decodeAll(t *testing.T, s string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(s, "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}
