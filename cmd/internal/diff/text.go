package diff

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/lockstep-gitops/lockstep/internal/crossplane"
)

// TextOptions tune WriteText.
type TextOptions struct {
	// Color adds ANSI colours: breaking changes red, additions green,
	// removals red, changes yellow, what needs a reviewer's attention
	// (re-pinned tags, permissions gained, storage migrations) bold
	// magenta. The CLI sets it when stdout is a terminal and NO_COLOR is
	// unset.
	Color bool
}

// ANSI escape sequences.
const (
	ansiReset   = "\x1b[0m"
	ansiBold    = "\x1b[1m"
	ansiRed     = "\x1b[31m"
	ansiGreen   = "\x1b[32m"
	ansiYellow  = "\x1b[33m"
	ansiBoldRed = "\x1b[1;31m"
	ansiBoldMag = "\x1b[1;35m"
)

// WriteText writes the report for a terminal: a verdict line, then every
// change as an indented outline in which each line starts with a mark:
// "!" breaking or needing attention, "+" added, "-" removed, "~" changed.
// Every change is listed; nothing is truncated. It returns the first write
// error.
func (r *Report) WriteText(w io.Writer, opts TextOptions) error {
	bw := bufio.NewWriter(w)
	t := &textWriter{w: bw, color: opts.Color}
	t.line(0, sevPlain, 0, fmt.Sprintf("lockstep diff: base %s → head %s", sideString(r.Base), sideString(r.Head)), true)
	verdict := strings.ToUpper(string(r.Summary.Verdict))
	sev := sevChanged
	switch r.Summary.Verdict {
	case VerdictBreaking:
		sev = sevBreaking
	case VerdictNone:
		sev, verdict = sevPlain, "NO CHANGES"
	}
	t.line(0, sev, 0, verdict+": "+verdictLine(r), true)
	if len(r.Lock) > 0 {
		t.blank()
		t.line(0, sevPlain, 0, "lock", true)
		for _, f := range r.Lock {
			t.line(1, sevChanged, '~', lockFieldLabel(f.Field)+": "+arrow(f.Base, f.Head), false)
		}
	}
	if len(r.Warnings) > 0 {
		t.blank()
		t.line(0, sevPlain, 0, "warnings", true)
		for _, wn := range r.Warnings {
			t.line(1, sevAttention, '!', wn, false)
		}
	}
	for i := range r.Packages {
		t.blank()
		t.node(0, packageOutline(&r.Packages[i]), true)
	}
	if len(r.RuntimeConfigs) > 0 {
		t.blank()
		n := &node{text: "DeploymentRuntimeConfigs"}
		for i := range r.RuntimeConfigs {
			configOutline(n, crossplane.KindDeploymentRuntimeConfig, &r.RuntimeConfigs[i])
		}
		t.node(0, n, true)
	}
	if len(r.ImageConfigs) > 0 {
		t.blank()
		n := &node{text: "ImageConfigs"}
		for i := range r.ImageConfigs {
			configOutline(n, crossplane.KindImageConfig, &r.ImageConfigs[i])
		}
		t.node(0, n, true)
	}
	if len(r.ActivationPolicies) > 0 {
		t.blank()
		n := &node{text: "ManagedResourceActivationPolicies"}
		for i := range r.ActivationPolicies {
			configOutline(n, crossplane.GroupKindMRAP.Kind, &r.ActivationPolicies[i])
		}
		t.node(0, n, true)
	}
	if len(r.Manifests) > 0 {
		t.blank()
		t.node(0, manifestsOutline(r.Manifests), true)
	}
	if t.err != nil {
		return t.err
	}
	return bw.Flush()
}

type textWriter struct {
	w     *bufio.Writer
	color bool
	err   error
}

func (t *textWriter) blank() {
	if t.err == nil {
		_, t.err = t.w.WriteString("\n")
	}
}

func (t *textWriter) node(depth int, n *node, heading bool) {
	t.line(depth, n.sev, n.mark, n.text, heading)
	for _, k := range n.kids {
		t.node(depth+1, k, false)
	}
}

func (t *textWriter) line(depth int, sev severity, mark byte, text string, heading bool) {
	if t.err != nil {
		return
	}
	var b strings.Builder
	b.WriteString(strings.Repeat("  ", depth))
	plain := strings.NewReplacer(codeOpen, "", codeClose, "").Replace(text)
	if mark != 0 {
		plain = string(mark) + " " + plain
	}
	if t.color {
		if c := colorOf(sev, heading); c != "" {
			plain = c + plain + ansiReset
		}
	}
	b.WriteString(plain)
	b.WriteByte('\n')
	_, t.err = t.w.WriteString(b.String())
}

func colorOf(sev severity, heading bool) string {
	switch sev {
	case sevBreaking:
		return ansiBoldRed
	case sevAttention:
		return ansiBoldMag
	case sevAdded:
		if heading {
			return ansiBold + ansiGreen
		}
		return ansiGreen
	case sevRemoved:
		if heading {
			return ansiBold + ansiRed
		}
		return ansiRed
	case sevChanged:
		if heading {
			return ansiBold + ansiYellow
		}
		return ansiYellow
	}
	if heading {
		return ansiBold
	}
	return ""
}
