//go:build tools

// Package tools pins the Crossplane core that `make testbin` builds for the
// end-to-end tests: github.com/crossplane/crossplane/v2/cmd/crossplane.
package tools

import (
	_ "github.com/crossplane/crossplane/v2/cmd/crossplane"
)
