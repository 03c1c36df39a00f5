package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
	"github.com/lockstep-gitops/lockstep/internal/xpkg"
)

// The Crossplane namespace and lockstep instance of every run: each tool
// gets a control plane of its own, so lockstep's defaults serve.
const (
	benchNamespace = "crossplane-system"
	benchInstance  = "lockstep"
)

// upboundPrefix is the registry of the AWS providers' sources, which their
// dependencies name (xpkg.upbound.io/upbound/provider-family-aws).
const upboundPrefix = "xpkg.upbound.io/"

// monolithWorkload returns the provider-aws monolith workload: the real
// package from testdata when it is there, else a synthetic one with the
// same CRD count and size distribution written under tmp. The upgrade is to
// a v2.6.1 that differs only in its package metadata (a new digest, so a
// new revision that takes control of all 2,043 CRDs), as a patch release of
// a monolith does.
func monolithWorkload(testdata, tmp string) (*workload, error) {
	w := &workload{Key: "monolith", Prefix: upboundPrefix, Upgraded: "provider-aws"}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	src := ""
	if testdata != "" {
		src = filepath.Join(testdata, "packages", "provider-aws-v2.6.0-monolith-allcrds")
		if _, err := os.Stat(src); err != nil {
			src = ""
		}
	}
	if src == "" {
		src = filepath.Join(tmp, "provider-aws-v2.6.0-synthetic")
		n, err := WriteMonolith(src, "provider-aws", awsMonolith)
		if err != nil {
			return nil, fmt.Errorf("generate the synthetic monolith: %w", err)
		}
		w.Synthetic = true
		w.Notes = append(w.Notes, fmt.Sprintf("Synthetic package ($LOCKSTEP_TESTDATA absent): %d generated CRDs, %.1f MB of CRD files, with provider-upjet-aws v2.6.0's size distribution, written to a temp dir.", awsMonolith.CRDs, float64(n)/1e6))
		w.Title = "provider-aws monolith (synthetic: 2,043 CRDs)"
	} else {
		w.Title = "provider-aws v2.6.0 monolith (2,043 CRDs)"
	}
	next := filepath.Join(tmp, "provider-aws-v2.6.1")
	if err := linkTree(src, next, bumpMeta("v2.6.1")); err != nil {
		return nil, err
	}
	source := upboundPrefix + "upbound/provider-aws"
	w.Install = []pkgVersion{{Kind: crossplane.KindProvider, Name: "provider-aws", Source: source, Tag: "v2.6.0", Dir: src}}
	w.Upgrade = []pkgVersion{{Kind: crossplane.KindProvider, Name: "provider-aws", Source: source, Tag: "v2.6.1", Dir: next}}
	w.Notes = append(w.Notes, "Upgrade: v2.6.0 → v2.6.1, the same CRDs under new package metadata (a new digest and revision, which takes control of every CRD).")
	return w, nil
}

// familyWorkload returns the AWS family workload from testdata, nil when
// the packages are absent: provider-family-aws, provider-aws-s3, -iam and
// -rds v2.6.0 with provider-aws-ec2 v1.23.0, upgraded to provider-aws-ec2
// v2.6.0 (101 → 208 CRDs), after which the whole family is at v2.6.0.
func familyWorkload(testdata string) *workload {
	if testdata == "" {
		return nil
	}
	dir := func(folder string) string { return filepath.Join(testdata, "packages", folder) }
	for _, f := range []string{"provider-family-aws-v2.6.0", "provider-aws-ec2-v1.23.0", "provider-aws-ec2-v2.6.0", "provider-aws-s3-v2.6.0", "provider-aws-iam-v2.6.0", "provider-aws-rds-v2.6.0"} {
		if _, err := os.Stat(dir(f)); err != nil {
			return nil
		}
	}
	pv := func(name, tag string) pkgVersion {
		return pkgVersion{Kind: crossplane.KindProvider, Name: name, Source: upboundPrefix + "upbound/" + name, Tag: tag, Dir: dir(name + "-" + tag)}
	}
	rest := []pkgVersion{pv("provider-family-aws", "v2.6.0"), pv("provider-aws-s3", "v2.6.0"), pv("provider-aws-iam", "v2.6.0"), pv("provider-aws-rds", "v2.6.0")}
	return &workload{
		Key:      "family",
		Title:    "AWS family v2.6.0: provider-family-aws, -ec2, -s3, -iam, -rds",
		Prefix:   upboundPrefix,
		Upgraded: "provider-aws-ec2",
		Install:  append([]pkgVersion{pv("provider-aws-ec2", "v1.23.0")}, rest...),
		Upgrade:  append([]pkgVersion{pv("provider-aws-ec2", "v2.6.0")}, rest...),
		Notes:    []string{"The cold install has provider-aws-ec2 at v1.23.0 (101 CRDs) so that the upgrade is v1.23.0 → v2.6.0 (208 CRDs); the others are at v2.6.0 throughout."},
	}
}

// smallPrefix is the registry of the small packages' sources.
const smallPrefix = "lockstep.example/"

// smallWorkload returns 20 small packages made from examples/packages under
// tmp: providers provider-demo-0..6, functions function-demo-0..6 and
// configurations configuration-demo-0..5, each with API groups of its own;
// configuration-demo-k depends on provider-demo-k and function-demo-k. The
// upgrade takes provider-demo-0 from v0.1.0 to v0.2.0 (2 → 4 CRDs).
func smallWorkload(examples, tmp string) (*workload, error) {
	w := &workload{
		Key:      "small",
		Title:    "20 small packages: 7 providers, 7 functions, 6 configurations with dependencies",
		Prefix:   smallPrefix,
		Upgraded: "provider-demo-0",
	}
	make1 := func(kind crossplane.Kind, base string, k int, version string) (pkgVersion, error) {
		name := fmt.Sprintf("%s-%d", base, k)
		dst := filepath.Join(tmp, "small", name+"-"+version)
		r := strings.NewReplacer(
			"demo.m.lockstep.io", fmt.Sprintf("p%d.demo.m.lockstep.io", k),
			"demo.lockstep.io", fmt.Sprintf("p%d.demo.lockstep.io", k),
			"demo.fn.lockstep.io", fmt.Sprintf("f%d.demo.fn.lockstep.io", k),
			"platform.lockstep.io", fmt.Sprintf("c%d.platform.lockstep.io", k),
			"lockstep.example/lockstep-examples/provider-demo", fmt.Sprintf("%sbench/provider-demo-%d", smallPrefix, k),
			"lockstep.example/lockstep-examples/function-demo", fmt.Sprintf("%sbench/function-demo-%d", smallPrefix, k),
			"lockstep-examples-function-demo", fmt.Sprintf("function-demo-%d", k),
		)
		err := copyTree(filepath.Join(examples, base, version), dst, func(b []byte) []byte { return []byte(r.Replace(string(b))) })
		return pkgVersion{Kind: kind, Name: name, Source: fmt.Sprintf("%sbench/%s", smallPrefix, name), Tag: version, Dir: dst}, err
	}
	var install []pkgVersion
	for k := 0; k < 7; k++ {
		for _, s := range []struct {
			kind crossplane.Kind
			base string
		}{{crossplane.KindProvider, "provider-demo"}, {crossplane.KindFunction, "function-demo"}, {crossplane.KindConfiguration, "configuration-demo"}} {
			if s.kind == crossplane.KindConfiguration && k == 6 {
				continue
			}
			v, err := make1(s.kind, s.base, k, "v0.1.0")
			if err != nil {
				return nil, err
			}
			install = append(install, v)
		}
	}
	up, err := make1(crossplane.KindProvider, "provider-demo", 0, "v0.2.0")
	if err != nil {
		return nil, err
	}
	w.Install = install
	w.Upgrade = append([]pkgVersion{up}, install[1:]...)
	w.Notes = []string{"Upgrade: provider-demo-0 v0.1.0 → v0.2.0 (2 → 4 CRDs)."}
	return w, nil
}

// bumpMeta returns an edit for linkTree that gives crossplane.yaml an
// annotation naming version, so the package gets a new digest.
func bumpMeta(version string) func(rel string, b []byte) ([]byte, error) {
	return func(rel string, b []byte) ([]byte, error) {
		if rel != xpkg.MetaFile {
			return nil, nil
		}
		s := string(b)
		const anchor = "  annotations:\n"
		if !strings.Contains(s, anchor) {
			return nil, fmt.Errorf("%s has no metadata.annotations to add a build annotation to", rel)
		}
		return []byte(strings.Replace(s, anchor, anchor+fmt.Sprintf("    lockstep.io/bench-build: %q\n", version), 1)), nil
	}
}

// linkTree makes dst a copy of the package tree src in which every file is
// a symbolic link to the original, except those edit rewrites (edit returns
// nil for a file it leaves alone).
func linkTree(src, dst string, edit func(rel string, b []byte) ([]byte, error)) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if nb, err := edit(rel, b); err != nil {
			return err
		} else if nb != nil {
			return os.WriteFile(target, nb, 0o644)
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return err
		}
		return os.Symlink(abs, target)
	})
}

// copyTree copies the files of src to dst, each passed through edit.
func copyTree(src, dst string, edit func([]byte) []byte) error {
	return linkTree(src, dst, func(_ string, b []byte) ([]byte, error) {
		if nb := edit(b); nb != nil {
			return nb, nil
		}
		return []byte{}, nil // written, not linked
	})
}

var (
	caOnce sync.Once
	caPEM  []byte
	caErr  error
)

// benchCABundle returns a self-signed certificate in PEM, the CA bundle the
// baselines put where lockstep injects the package's TLS server
// certificate (webhook configurations, CRD conversion webhooks).
func benchCABundle() ([]byte, error) {
	caOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			caErr = err
			return
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: "lockstep-bench"},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().Add(24 * time.Hour),
			IsCA:                  true,
			BasicConstraintsValid: true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			caErr = err
			return
		}
		caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	})
	return caPEM, caErr
}

// Keys of the managed resource activation workloads: the
// monolith rendered with Crossplane v2's CRD-to-MRD conversion on
// (`--enable-custom-to-managed-resource-conversion`), under a
// ManagedResourceActivationPolicy declared beside the package.
const (
	// mrd10Key activates 10 kinds: 2,038 MRDs, 10 of them Active, so 10
	// managed-resource CRDs (plus the 5 provider-configuration CRDs, which
	// stay CRDs).
	mrd10Key = "monolith-mrd10"
	// mrdAllKey activates every kind ("*"): 2,038 Active MRDs and their
	// 2,038 CRDs.
	mrdAllKey = "monolith-mrd"
)

// mrdActivationPolicy names the ManagedResourceActivationPolicy of the
// activation workloads.
const mrdActivationPolicy = "bench-activation"

// tenKinds are the kinds mrd10Key activates: what a platform using EC2
// networking, S3, IAM, RDS and EKS would activate out of the monolith.
var tenKinds = []string{
	"instances.ec2.aws.upbound.io", "vpcs.ec2.aws.upbound.io", "subnets.ec2.aws.upbound.io", "securitygroups.ec2.aws.upbound.io",
	"buckets.s3.aws.upbound.io", "roles.iam.aws.upbound.io", "policies.iam.aws.upbound.io", "rolepolicyattachments.iam.aws.upbound.io",
	"instances.rds.aws.upbound.io", "clusters.eks.aws.upbound.io",
}

// monolithMRDWorkload returns the monolith workload (monolithWorkload,
// with its files under tmp/key) rendered with MRD conversion on, keyed key.
// The monolith is safe-start, as provider-aws v2.6.0 is, so every MRD is
// Inactive unless the workload's policy activates it: for mrd10Key the
// policy lists tenKinds (on the synthetic monolith, whose kinds are made
// up, its first 10 CRDs by file name), for mrdAllKey it is "*".
func monolithMRDWorkload(key, testdata, tmp string) (*workload, error) {
	w, err := monolithWorkload(testdata, filepath.Join(tmp, key))
	if err != nil {
		return nil, err
	}
	w.Key, w.MRDs = key, true
	src := w.Install[0].Dir
	switch key {
	case mrd10Key:
		if w.Activate, err = pickKinds(filepath.Join(src, "crds"), tenKinds); err != nil {
			return nil, err
		}
		w.ExpectActive = len(w.Activate)
		w.Title = strings.Replace(w.Title, "monolith", "monolith through MRDs, 10 kinds activated", 1)
		w.Notes = append(w.Notes, fmt.Sprintf("MRD conversion on, lock crossplaneVersion v2.1.0; ManagedResourceActivationPolicy %s activates %d kinds: %s. The floor applies the same objects: every MRD, the CRDs of the Active ones and the provider-configuration CRDs.", mrdActivationPolicy, len(w.Activate), strings.Join(w.Activate, ", ")))
	case mrdAllKey:
		w.Activate, w.ExpectActive = []string{"*"}, -1
		w.Title = strings.Replace(w.Title, "monolith", "monolith through MRDs, all kinds activated", 1)
		w.Notes = append(w.Notes, fmt.Sprintf("MRD conversion on, lock crossplaneVersion v2.1.0; ManagedResourceActivationPolicy %s activates \"*\": every MRD Active, each with its CRD. The floor applies the same MRDs and CRDs.", mrdActivationPolicy))
	default:
		return nil, fmt.Errorf("unknown activation workload %q", key)
	}
	return w, nil
}

// pickKinds returns the MRD names of want that the package's CRD files in
// dir (named <group>_<plural>.yaml) define, or, when one is missing (the
// synthetic monolith), the names of the first len(want) files.
func pickKinds(dir string, want []string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	have := map[string]bool{}
	for _, e := range entries {
		group, plural, ok := strings.Cut(strings.TrimSuffix(e.Name(), ".yaml"), "_")
		if !ok || e.IsDir() {
			continue
		}
		names = append(names, plural+"."+group)
		have[plural+"."+group] = true
	}
	all := true
	for _, n := range want {
		all = all && have[n]
	}
	if all {
		return want, nil
	}
	if len(names) < len(want) {
		return nil, fmt.Errorf("%s: %d CRD files, fewer than the %d kinds to activate", dir, len(names), len(want))
	}
	return names[:len(want)], nil
}
