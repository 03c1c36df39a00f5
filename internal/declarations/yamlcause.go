package declarations

import (
	"bytes"
	"errors"
	"fmt"
)

// conflictMarkers are the line starts Git writes around a merge conflict
// (git-merge(1), "HOW CONFLICTS ARE PRESENTED"; ||||||| is the diff3 style's
// base section).
var conflictMarkers = [][]byte{[]byte("<<<<<<<"), []byte("|||||||"), []byte("======="), []byte(">>>>>>>")}

// errTabIndent is the cause of a syntax error on a line indented with a tab.
var errTabIndent = errors.New("tab character in indentation: YAML allows only spaces")

// SyntaxCause names the likely cause of a YAML syntax error in data that
// go.yaml.in/yaml/v3 reported at the 1-based line, for the two causes its
// messages leave unsaid. When data holds a Git merge-conflict marker (a line
// starting with seven '<', '|', '=' or '>' followed by a space or the end of
// the line), it returns the first such line and `merge-conflict marker
// "<line>": resolve the Git conflict first`. Otherwise, when line or the line
// after it (yaml/v3 sometimes reports the line before a bad indentation) is
// indented with a tab, it returns that line and "tab character in
// indentation: YAML allows only spaces" (YAML 1.2.2, section 6.1: tabs are
// not allowed in indentation). Otherwise it returns line and nil.
//
// It is used for declaration files (Load) and lockstep.lock
// (lockfile.Parse), both of which are edited by hand and merged with Git.
func SyntaxCause(data []byte, line int) (int, error) {
	lines := bytes.Split(data, []byte("\n"))
	for i, l := range lines {
		l = bytes.TrimRight(l, "\r")
		for _, m := range conflictMarkers {
			if bytes.HasPrefix(l, m) && (len(l) == len(m) || l[len(m)] == ' ') {
				return i + 1, fmt.Errorf("merge-conflict marker %q: resolve the Git conflict first", l)
			}
		}
	}
	for _, n := range []int{line, line + 1} {
		if n < 1 || n > len(lines) {
			continue
		}
		l := lines[n-1]
		indent := l[:len(l)-len(bytes.TrimLeft(l, " \t"))]
		if bytes.IndexByte(indent, '\t') >= 0 {
			return n, errTabIndent
		}
	}
	return line, nil
}
