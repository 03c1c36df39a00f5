package crdcheck

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/version"
)

// VersionReader reads a kube-apiserver's version (its /version answer).
type VersionReader func(ctx context.Context) (*version.Info, error)

// Policy decides whether a kube-apiserver's CRD validation is lockstep's,
// so that CRDs can be validated in-process instead of dry-run on it
// (docs/design/apply.md#preflight-modes). The server's version is read
// once, on the first successful Decide; a failed read is not kept. It is
// safe for concurrent use.
type Policy struct {
	read VersionReader
	skew int

	mu     sync.Mutex
	server *version.Info
}

// NewPolicy returns a Policy that reads the server's version with read
// and accepts a server up to skew minors older than Minor as running
// lockstep's validation (--preflight-skew). A nil read makes every
// Decision a dry-run one.
func NewPolicy(read VersionReader, skew int) *Policy {
	return &Policy{read: read, skew: skew}
}

// Decision is what a Policy decided for one server.
type Decision struct {
	// All is true when the server validates CRDs as Minor does (or at
	// most the Policy's skew minors older): every CRD may be validated
	// in-process.
	All bool
	// SkewMinor, when All is false, is the server's minor when it is one
	// whose validation differs from Minor's only in what SkewDifference
	// looks for (OldestEvidenced and later): a CRD that uses none of it
	// may be validated in-process. 0 otherwise.
	SkewMinor int
	// Why says, when neither holds, why every CRD is dry-run on the
	// server, naming both versions; "" otherwise.
	Why string
}

// CRD reports whether the CRD whose JSON is body may be validated
// in-process under d.
func (d Decision) CRD(body []byte) bool {
	return d.All || (d.SkewMinor != 0 && SkewDifference(body, d.SkewMinor) == "")
}

// Some reports whether any CRD may be validated in-process under d: the
// server's validation is known well enough that an object whose validity
// does not depend on the minor (one of lockstep's defaults) needs no
// dry-run either.
func (d Decision) Some() bool { return d.All || d.SkewMinor != 0 }

// Decide reads the server's version, once per Policy, and decides.
func (p *Policy) Decide(ctx context.Context) Decision {
	minor, why := p.serverMinor(ctx)
	switch {
	case why == "":
		return Decision{All: true}
	case minor >= OldestEvidenced && minor < Minor:
		return Decision{SkewMinor: minor}
	default:
		return Decision{Why: why}
	}
}

// serverMinor returns the server's minor version and "" when it is Minor
// or at most skew minors older, and otherwise why not.
func (p *Policy) serverMinor(ctx context.Context) (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.server == nil {
		if p.read == nil {
			return 0, "the kube-apiserver's version cannot be read without a REST config"
		}
		v, err := p.read(ctx)
		if err != nil {
			return 0, fmt.Sprintf("cannot read the kube-apiserver's version: %v", err)
		}
		p.server = v
	}
	v := p.server
	minor, err := ServerMinor(v.Minor)
	if err != nil {
		return 0, err.Error()
	}
	if minor > Minor || Minor-minor > p.skew {
		return minor, fmt.Sprintf("the kube-apiserver runs Kubernetes %s (%s), lockstep validates CustomResourceDefinitions as Kubernetes 1.%d does (--preflight-skew=%d)", v.GitVersion, v.Major+"."+v.Minor, Minor, p.skew)
	}
	return minor, ""
}
