package envtest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// CrossplaneCRDsDir returns the folder of Crossplane CRDs that tests install:
// $LOCKSTEP_TESTDATA/crossplane-crds (Crossplane's own CRDs) when
// LOCKSTEP_TESTDATA is set, otherwise lockstep's stand-ins in
// examples/crossplane-crds at the root of this module, found by walking up
// from the working directory. standIn reports which one it is. It returns an
// error when the chosen folder does not exist.
func CrossplaneCRDsDir() (dir string, standIn bool, err error) {
	if td := os.Getenv("LOCKSTEP_TESTDATA"); td != "" {
		dir = filepath.Join(td, "crossplane-crds")
		if _, err := os.Stat(dir); err != nil {
			return "", false, fmt.Errorf("LOCKSTEP_TESTDATA=%s: %w", td, err)
		}
		return dir, false, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", false, err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			dir = filepath.Join(d, "examples", "crossplane-crds")
			if _, err := os.Stat(dir); err != nil {
				return "", false, fmt.Errorf("no Crossplane CRDs: LOCKSTEP_TESTDATA is unset and %w", err)
			}
			return dir, true, nil
		}
		if filepath.Dir(d) == d {
			return "", false, fmt.Errorf("no Crossplane CRDs: LOCKSTEP_TESTDATA is unset and no go.mod was found above %s", wd)
		}
	}
}

var (
	crossplaneOnce sync.Map // *Env -> *crossplaneInstall
)

type crossplaneInstall struct {
	once    sync.Once
	standIn bool
	err     error
}

// InstallCrossplaneCRDs installs the Crossplane CRDs of CrossplaneCRDsDir
// into e once per Env and waits until they are served. It reports whether
// they are lockstep's stand-ins rather than Crossplane's own CRDs.
func (e *Env) InstallCrossplaneCRDs() (standIn bool, err error) {
	v, _ := crossplaneOnce.LoadOrStore(e, &crossplaneInstall{})
	ci := v.(*crossplaneInstall)
	ci.once.Do(func() {
		dir, si, err := CrossplaneCRDsDir()
		if err != nil {
			ci.err = err
			return
		}
		ci.standIn = si
		if err := e.InstallCRDDir(dir); err != nil {
			ci.err = fmt.Errorf("install the Crossplane CRDs from %s: %w", dir, err)
		}
	})
	return ci.standIn, ci.err
}
