package lockfile

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse feeds Parse the example lockfile and hand-written tricky inputs,
// mutated. Properties: Parse never panics; every error is an *Error naming
// the file; parsing is deterministic; and a parsed lock survives Marshal
// then Parse unchanged (up to Sort, which Marshal applies), with Marshal
// giving the same bytes again.
func FuzzParse(f *testing.F) {
	real, err := os.ReadFile("../examples/repo/clusters/demo/lockstep.lock")
	if err != nil {
		f.Fatalf("cannot read the example lockfile: %v", err)
	}
	f.Add(real)
	for _, s := range []string{
		"",
		"---\n",
		"---\n---\n",
		"# only a comment\n",
		"apiVersion: lockstep.io/v1alpha1\nkind: Lock\ncrossplaneVersion: v2.1.0\npackages: []\n",
		"apiVersion: lockstep.io/v1alpha1\nkind: Lock\ncrossplaneVersion: v2.1.0\npackages:\n\t- kind: Provider\n",
		"<<<<<<< HEAD\napiVersion: lockstep.io/v1alpha1\n=======\napiVersion: lockstep.io/v1alpha2\n>>>>>>> other\n",
		"a: &x {b: *x}\n",
		"base: &b {kind: Provider}\npackages:\n  - *b\n  - <<: *b\n",
		"apiVersion: lockstep.io/v1alpha1\nkind: Lock\ncrossplaneVersion: 99999999999999999999999999999.1.0\n",
		"apiVersion: lockstep.io/v1alpha1\nkind: Lock\npackages:\n  - kind: Provider\n    revisionHistoryLimit: 1e999999\n",
		"apiVersion: lockstep.io/v1alpha1\nkind: Lock\nkind: Lock\n",
		"[1, 2, 3]\n",
		"\xff\xfe\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "clusters/x/lockstep.lock"
		l1, err1 := Parse(file, data)
		l2, err2 := Parse(file, data)
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("Parse is not deterministic: %v, then %v", err1, err2)
		}
		if err1 != nil {
			checkErrorsNameFile(t, err1, file)
			return
		}
		if diff := cmp.Diff(l1, l2); diff != "" {
			t.Fatalf("Parse is not deterministic (-first +second):\n%s", diff)
		}
		b1, err := Marshal(l1)
		if err != nil {
			t.Fatalf("Marshal of a parsed lock: %v", err)
		}
		l3, err := Parse(file, b1)
		if err != nil {
			t.Fatalf("Parse of Marshal output: %v\n%s", err, b1)
		}
		b2, err := Marshal(l3)
		if err != nil {
			t.Fatalf("second Marshal: %v", err)
		}
		if diff := cmp.Diff(string(b1), string(b2)); diff != "" {
			t.Errorf("Marshal, Parse, Marshal changed the bytes (-first +second):\n%s", diff)
		}
		// Parse(Marshal(l)) equals l sorted as Marshal sorts it.
		l1.Sort()
		if diff := cmp.Diff(l1, l3); diff != "" {
			t.Errorf("Marshal then Parse did not round-trip (-parsed +reparsed):\n%s", diff)
		}
	})
}

// checkErrorsNameFile fails t unless every error joined in err is an *Error
// for file whose message starts with the file name.
func checkErrorsNameFile(t *testing.T, err error, file string) {
	t.Helper()
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var le *Error
		if !errors.As(e, &le) {
			t.Errorf("error %q (%T) is not an *Error", e, e)
			continue
		}
		if le.File != file || !strings.HasPrefix(e.Error(), file) {
			t.Errorf("error %q does not name the file %s", e, file)
		}
	}
}
