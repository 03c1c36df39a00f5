package lockfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	dA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	dB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	dC = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	dD = "sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
	dE = "sha256:eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
)

// sampleLock uses every field.
func sampleLock() *Lock {
	return &Lock{
		APIVersion:         APIVersion,
		Kind:               Kind,
		CrossplaneVersion:  "v2.1.0",
		DefaultRegistry:    "xpkg.upbound.io",
		DeclarationsDigest: dA,
		Packages: []Entry{
			{
				Kind: "Provider", Name: "upbound-provider-family-aws", Source: "xpkg.upbound.io/upbound/provider-family-aws",
				Version: "v2.6.0", Digest: dB,
				RequestedBy: []Request{
					{Dependent: "xpkg.upbound.io/upbound/provider-aws-s3", Constraint: ">= 0.0.0"},
					{Dependent: "xpkg.upbound.io/upbound/provider-aws-ec2", Constraint: ">= 0.0.0"},
				},
				CrossplaneConstraint: ">=v1.12.1-0",
				Payload:              Payload{Layer: dC, CRDs: 5},
				Replaces:             []string{"xpkg.upbound.io/old/provider-family-aws"},
			},
			{
				Kind: "Configuration", Name: "network", Source: "xpkg.upbound.io/upbound/configuration-aws-network",
				Version: "v0.23.0", Digest: dD,
				RequestedBy: []Request{{Declaration: "configs/network.yaml", Reference: "xpkg.upbound.io/upbound/configuration-aws-network:v0.23.0"}},
				Dependencies: []Dependency{
					{Kind: "Provider", Source: "xpkg.upbound.io/upbound/provider-aws-ec2", Constraint: "v1"},
					{Kind: "Function", Source: "xpkg.upbound.io/crossplane-contrib/function-auto-ready", Constraint: "v0.4.2", ReplacedBy: "xpkg.crossplane.io/crossplane-contrib/function-auto-ready"},
				},
				CrossplaneConstraint:        ">=v1.14.1-0",
				IgnoreCrossplaneConstraints: true,
				Payload:                     Payload{Layer: dE, XRDs: 1, Compositions: 1, Other: 2},
			},
			{
				Kind: "Function", Name: "fn", Source: "reg.example.com/org/fn", Digest: dE,
				RequestedBy: []Request{{Declaration: "fn.yaml", Reference: "reg.example.com/org/fn@" + dE}},
				Payload:     Payload{CRDs: 1},
			},
		},
	}
}

// wantSampleYAML is the exact file Marshal writes for sampleLock: header,
// field order, sorting (packages by kind then name, requests by dependent,
// dependencies by source) and quoting.
const wantSampleYAML = header + `apiVersion: lockstep.io/v1alpha1
kind: Lock
crossplaneVersion: v2.1.0
defaultRegistry: xpkg.upbound.io
declarationsDigest: ` + dA + `
packages:
  - kind: Configuration
    name: network
    source: xpkg.upbound.io/upbound/configuration-aws-network
    version: v0.23.0
    digest: ` + dD + `
    requestedBy:
      - declaration: configs/network.yaml
        reference: xpkg.upbound.io/upbound/configuration-aws-network:v0.23.0
    dependencies:
      - kind: Function
        source: xpkg.upbound.io/crossplane-contrib/function-auto-ready
        constraint: v0.4.2
        replacedBy: xpkg.crossplane.io/crossplane-contrib/function-auto-ready
      - kind: Provider
        source: xpkg.upbound.io/upbound/provider-aws-ec2
        constraint: v1
    crossplaneConstraint: '>=v1.14.1-0'
    ignoreCrossplaneConstraints: true
    payload:
      layer: ` + dE + `
      crds: 0
      xrds: 1
      compositions: 1
      other: 2
  - kind: Function
    name: fn
    source: reg.example.com/org/fn
    digest: ` + dE + `
    requestedBy:
      - declaration: fn.yaml
        reference: reg.example.com/org/fn@` + dE + `
    payload:
      crds: 1
      xrds: 0
      compositions: 0
  - kind: Provider
    name: upbound-provider-family-aws
    source: xpkg.upbound.io/upbound/provider-family-aws
    version: v2.6.0
    digest: ` + dB + `
    requestedBy:
      - dependent: xpkg.upbound.io/upbound/provider-aws-ec2
        constraint: '>= 0.0.0'
      - dependent: xpkg.upbound.io/upbound/provider-aws-s3
        constraint: '>= 0.0.0'
    crossplaneConstraint: '>=v1.12.1-0'
    payload:
      layer: ` + dC + `
      crds: 5
      xrds: 0
      compositions: 0
    replaces:
      - xpkg.upbound.io/old/provider-family-aws
`

func TestMarshalFormat(t *testing.T) {
	l := sampleLock()
	before := sampleLock()
	got, err := Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantSampleYAML, string(got)); diff != "" {
		t.Errorf("Marshal: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff(before, l); diff != "" {
		t.Errorf("Marshal modified its argument: -before +after:\n%s", diff)
	}
	// Any order of the same content gives the same bytes.
	shuffled := sampleLock()
	p := shuffled.Packages
	p[0], p[2] = p[2], p[0]
	p[2].RequestedBy[0], p[2].RequestedBy[1] = p[2].RequestedBy[1], p[2].RequestedBy[0]
	again, err := Marshal(shuffled)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(got) {
		t.Errorf("Marshal depends on input order:\n%s", cmp.Diff(string(got), string(again)))
	}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	want := sampleLock()
	if err := WriteFile(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatalf("ReadFile of a written lock: %v", err)
	}
	want.Sort()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WriteFile then ReadFile: -want +got:\n%s", diff)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("WriteFile left %d files, want only %s", len(entries), FileName)
	}
	if _, err := ReadFile(filepath.Join(t.TempDir(), FileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a missing lock: got %v, want fs.ErrNotExist", err)
	}
}

func TestParseErrors(t *testing.T) {
	valid, err := Marshal(sampleLock())
	if err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) string {
		if !strings.Contains(string(valid), old) {
			t.Fatalf("test setup: %q not in the sample lock", old)
		}
		return strings.Replace(string(valid), old, new, 1)
	}
	cases := map[string]struct {
		reason string
		in     string
		want   []string
	}{
		"Valid": {
			reason: "The sample lock parses.",
			in:     string(valid),
		},
		"WrongAPIVersion": {
			reason: "apiVersion must be lockstep.io/v1alpha1.",
			in:     replace("apiVersion: lockstep.io/v1alpha1", "apiVersion: lockstep.io/v2"),
			want:   []string{"lockstep.lock:8: apiVersion: must be lockstep.io/v1alpha1"},
		},
		"UnknownField": {
			reason: "Decoding is strict; the error names the line and the field.",
			in:     replace("    name: network\n", "    name: network\n    colour: blue\n"),
			want:   []string{"lockstep.lock:16: unknown field \"colour\""},
		},
		"BadDigest": {
			reason: "A digest must be sha256:<64 hex>; the error names the entry's field and line.",
			in:     replace("digest: "+dD, "digest: sha256:abc"),
			want:   []string{"lockstep.lock:18: packages[0].digest: \"sha256:abc\" is not a sha256 digest"},
		},
		"SourceWithTag": {
			reason: "A source has no tag.",
			in:     replace("source: reg.example.com/org/fn", "source: reg.example.com/org/fn:v1"),
			want:   []string{"packages[1].source:", "not a fully qualified repository"},
		},
		"BadConstraint": {
			reason: "A dependency constraint is a semver range or a digest.",
			in:     replace("constraint: v1\n", "constraint: not-a-version\n"),
			want:   []string{"packages[0].dependencies[1].constraint:", "neither a semver constraint nor a sha256 digest"},
		},
		"BadKind": {
			reason: "The kind is a package type.",
			in:     replace("kind: Function\n    name: fn", "kind: Composition\n    name: fn"),
			want:   []string{"packages[1].kind: \"Composition\" is not a package kind"},
		},
		"MissingCrossplaneVersion": {
			reason: "The Crossplane version is required.",
			in:     replace("crossplaneVersion: v2.1.0\n", ""),
			want:   []string{"crossplaneVersion: required"},
		},
		"DuplicateSource": {
			reason: "A source is locked once.",
			in:     replace("source: reg.example.com/org/fn", "source: xpkg.upbound.io/upbound/configuration-aws-network"),
			want:   []string{"packages[1].source: source xpkg.upbound.io/upbound/configuration-aws-network is also locked as packages[0]"},
		},
		"NoRequester": {
			reason: "Every entry says who asked for it.",
			in: replace("    requestedBy:\n      - declaration: fn.yaml\n        reference: reg.example.com/org/fn@"+dE+"\n",
				""),
			want: []string{"packages[1].requestedBy: required"},
		},
		"NotYAML": {
			reason: "Malformed YAML names the file and line.",
			in:     "apiVersion: [\n",
			want:   []string{"lockstep.lock:"},
		},
		"MergeConflictMarker": {
			reason: "A lock with Git conflict markers names the marker as the cause.",
			in:     replace("    digest: "+dD+"\n", "<<<<<<< HEAD\n    digest: "+dD+"\n=======\n    digest: "+dE+"\n>>>>>>> bump-network\n"),
			want:   []string{`lockstep.lock:18: merge-conflict marker "<<<<<<< HEAD": resolve the Git conflict first`},
		},
		"TabIndentation": {
			reason: "A tab in the indentation is named as the cause.",
			in:     replace("    name: network\n", "\tname: network\n"),
			want:   []string{"lockstep.lock:15: tab character in indentation: YAML allows only spaces"},
		},
		"TwoProblems": {
			reason: "Every problem is reported, not just the first.",
			in:     strings.Replace(replace("version: v2.6.0", "version: 'bad tag'"), "crds: 5", "crds: -5", 1),
			want:   []string{"packages[2].version:", "packages[2].payload.crds: must not be negative"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l, err := Parse(FileName, []byte(tc.in))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("%s\nParse: %v", tc.reason, err)
				}
				if l.Entry("reg.example.com/org/fn") == nil {
					t.Errorf("%s\nparsed lock lacks the fn entry", tc.reason)
				}
				return
			}
			if missing := errorMissing(err, tc.want); len(missing) > 0 {
				t.Errorf("%s\nParse error:\n%v\nmissing: %q", tc.reason, err, missing)
			}
		})
	}
}
