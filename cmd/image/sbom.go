package main

import (
	"bytes"
	"fmt"
	"regexp"
	"runtime/debug"
	"time"

	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"
)

// spdxID replaces what an SPDX identifier may not hold
// ([A-Za-z0-9.-] only).
var spdxID = regexp.MustCompile(`[^A-Za-z0-9.-]`)

// SPDX returns the SPDX 2.3 JSON document of the image's software: the
// lockstep binary (its main module at the version and revision it was
// built from), every Go module linked into it with its version and
// checksum (as `go version -m` lists them), the Go toolchain, and the CA
// bundle. Its namespace and time are derived from the revision and the
// commit time, so the same build gives the same document.
func SPDX(info *debug.BuildInfo, src Source, p Platform, at time.Time) ([]byte, error) {
	revision, _, _ := vcs(info)
	name := "lockstep-" + src.Version + "-" + p.OS + "-" + p.Arch
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      name,
		DocumentNamespace: "https://github.com/lockstep-gitops/lockstep/sbom/" + spdxID.ReplaceAllString(name, "-") + "-" + revision,
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "lockstep-cmd-image"}},
			Created:  at.UTC().Format(time.RFC3339),
		},
	}
	pkg := func(id, name, version, purl string) *spdx.Package {
		p := &spdx.Package{
			PackageName:             name,
			PackageSPDXIdentifier:   common.ElementID(spdxID.ReplaceAllString(id, "-")),
			PackageVersion:          version,
			PackageDownloadLocation: "NOASSERTION",
			PackageLicenseConcluded: "NOASSERTION",
			PackageLicenseDeclared:  "NOASSERTION",
			PackageCopyrightText:    "NOASSERTION",
		}
		if purl != "" {
			p.PackageExternalReferences = []*spdx.PackageExternalReference{{Category: "PACKAGE-MANAGER", RefType: "purl", Locator: purl}}
		}
		return p
	}
	main := pkg("Package-lockstep", info.Main.Path, src.Version, "pkg:golang/"+info.Main.Path+"@"+src.Version+"?type=module")
	main.PackageDownloadLocation = "git+" + src.SourceURL
	if revision != "" {
		main.PackageDownloadLocation += "@" + revision
	}
	if src.SourceURL == "" {
		main.PackageDownloadLocation = "NOASSERTION"
	}
	doc.Packages = append(doc.Packages, main)
	doc.Relationships = append(doc.Relationships, &spdx.Relationship{
		RefA: common.MakeDocElementID("", "DOCUMENT"), RefB: common.MakeDocElementID("", string(main.PackageSPDXIdentifier)), Relationship: common.TypeRelationshipDescribe,
	})
	depend := func(p *spdx.Package) {
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA: common.MakeDocElementID("", string(main.PackageSPDXIdentifier)), RefB: common.MakeDocElementID("", string(p.PackageSPDXIdentifier)), Relationship: common.TypeRelationshipDependsOn,
		})
	}
	depend(pkg("Package-go", "go", info.GoVersion, "pkg:golang/stdlib@"+info.GoVersion))
	for _, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		p := pkg("Package-"+m.Path+"-"+m.Version, m.Path, m.Version, "pkg:golang/"+m.Path+"@"+m.Version+"?type=module")
		if m.Sum != "" {
			p.PackageComment = "go.sum " + m.Sum
		}
		depend(p)
	}
	ca := pkg("Package-ca-certificates", "ca-certificates", "", "")
	ca.PackageComment = "the CA roots of /" + caPath + ", copied from " + src.CABundle + " on the build machine"
	depend(ca)
	var buf bytes.Buffer
	if err := spdxjson.Write(doc, &buf, spdxjson.Indent("  ")); err != nil {
		return nil, fmt.Errorf("writing the SPDX document: %w", err)
	}
	return buf.Bytes(), nil
}
