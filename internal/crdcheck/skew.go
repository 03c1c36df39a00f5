package crdcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// OldestEvidenced is the oldest Kubernetes minor version whose CRD
// validation has been compared with Minor's, release by release
// (docs/design/apply.md#crd-validation-from-kubernetes-133-to-137):
// SkewDifference knows every difference from it to Minor.
const OldestEvidenced = 33

// celFeatures are the CEL functions a kube-apiserver of a minor below
// the key cannot compile in a new expression while Minor's validation
// can: the environment admits the libraries of its compatibility version
// (the server's minor − 1, k8s.io/apiserver/pkg/cel/environment).
var celFeatures = []struct {
	// before: servers of a minor below it lack the functions.
	before int
	what   string
	calls  *regexp.Regexp
}{
	// The Kubernetes semver library, introduced 1.33.
	{34, "the semver library (Kubernetes 1.34)", regexp.MustCompile(`\b(isSemver|semver)\s*\(`)},
	// cel-go's ext.Lists, introduced 1.34.
	{35, "cel-go's list library (Kubernetes 1.35)", regexp.MustCompile(`(\.(slice|flatten|sort|sortBy|reverse|distinct)\s*\(|\blists\.range\s*\()`)},
}

// ruleString finds the CEL rules and message expressions of a CRD's JSON:
// every string value of a "rule" or "messageExpression" key.
var ruleString = regexp.MustCompile(`"(rule|messageExpression)":"((?:[^"\\]|\\.)*)"`)

// metadataRef finds an expression that reads object metadata, whose cost
// Kubernetes 1.37 estimates lower than 1.33–1.36 (metadata.name and
// generateName carry a maximum length from 1.37).
var metadataRef = regexp.MustCompile(`\bmetadata\b`)

// SkewDifference reports why Minor's validation may judge the CRD (its
// JSON) otherwise than a kube-apiserver of serverMinor does, from the
// differences between Kubernetes 1.33 and Minor; "" when none applies, so
// that validating the CRD in-process gives the server's verdict. It
// returns a reason for a server older than OldestEvidenced or newer than
// Minor. The check reads the JSON as text, conservatively: a rule that
// only mentions a name (in a string literal) counts as using it. What it
// looks for, by the server's minor:
//   - below 1.34: CEL rules calling the semver library, and string formats
//     k8s-short-name and k8s-long-name (older servers strip them, 1.37
//     validates defaults against them);
//   - below 1.35: CEL rules calling cel-go's list library (slice, flatten,
//     sort, sortBy, reverse, distinct, lists.range), and selectableFields
//     (1.35 keeps too many of them on update when unchanged);
//   - below 1.37: CEL rules and message expressions that read metadata,
//     whose estimated cost 1.37 lowers.
func SkewDifference(crd []byte, serverMinor int) string {
	switch {
	case serverMinor >= Minor:
		if serverMinor > Minor {
			return fmt.Sprintf("the kube-apiserver (1.%d) is newer than lockstep's validation (1.%d)", serverMinor, Minor)
		}
		return ""
	case serverMinor < OldestEvidenced:
		return fmt.Sprintf("Kubernetes 1.%d is older than the releases compared with 1.%d (1.%d and later)", serverMinor, Minor, OldestEvidenced)
	}
	if serverMinor < 34 && (bytes.Contains(crd, []byte(`"format":"k8s-short-name"`)) || bytes.Contains(crd, []byte(`"format":"k8s-long-name"`))) {
		return fmt.Sprintf("a schema uses format k8s-short-name or k8s-long-name, which Kubernetes 1.%d does not know", serverMinor)
	}
	if serverMinor < 35 && bytes.Contains(crd, []byte(`"selectableFields"`)) {
		return fmt.Sprintf("selectableFields are validated on update otherwise by Kubernetes 1.%d", serverMinor)
	}
	if !bytes.Contains(crd, []byte(`"x-kubernetes-validations"`)) {
		return ""
	}
	for _, m := range ruleString.FindAllSubmatch(crd, -1) {
		var expr string
		if err := json.Unmarshal(append(append([]byte{'"'}, m[2]...), '"'), &expr); err != nil {
			return "a CEL rule cannot be read: " + err.Error()
		}
		if serverMinor < Minor && metadataRef.MatchString(expr) {
			return fmt.Sprintf("CEL %s %q reads metadata, whose cost Kubernetes 1.%d estimates otherwise", m[1], shorten(expr), serverMinor)
		}
		for _, f := range celFeatures {
			if serverMinor < f.before && f.calls.MatchString(expr) {
				return fmt.Sprintf("CEL %s %q calls %s, which Kubernetes 1.%d does not have", m[1], shorten(expr), f.what, serverMinor)
			}
		}
	}
	return ""
}

func shorten(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}
