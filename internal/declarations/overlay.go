package declarations

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// OverlayFileName is the file in a declarations directory that names its
// bases (Overlay).
const OverlayFileName = "lockstep.yaml"

// OverlayKind and OverlayAPIVersion identify an Overlay.
const (
	OverlayKind       = "Overlay"
	OverlayAPIVersion = "lockstep.io/v1alpha1"
)

// Overlay is lockstep.yaml: the shared directories (bases) whose
// declarations a cluster directory starts from, so that many clusters share
// one set of declarations and each overrides what differs
// (docs/design/fleets.md#bases-and-overlays):
//
//	apiVersion: lockstep.io/v1alpha1
//	kind: Overlay
//	bases:
//	- ../../bases/platform
type Overlay struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Bases are directories relative to the overlay's directory, inside
	// the repository and outside the directory itself, read in order.
	Bases []string `json:"bases"`
}

// Override records that a declaration or manifest of the directory
// replaced one of a base with the same kind and name.
type Override struct {
	// Object is "Kind name" (a manifest: "Kind/namespace/name").
	Object string
	// Base is where the base declared it; Overlay where the directory does.
	Base, Overlay Location
}

// Layers of a LoadTree.
const (
	layerBase = iota
	layerOverlay
)

// LoadTree reads the declarations directory dir (slash-separated, relative
// to root) as LoadFS does, after the bases its lockstep.yaml (Overlay)
// names: each base is read as LoadFS reads a directory, its files named
// by their path relative to dir ("../../bases/platform/provider.yaml");
// then the directory's own files. A declaration or manifest of the
// directory replaces, whole, the one of a base with the same kind and
// name (Set.Overrides records each); two bases that declare the same
// object are an error naming both files and lines, as two files of one
// directory are. A directory without lockstep.yaml is read as LoadFS reads
// it. Errors: a lockstep.yaml that is not an Overlay, a base outside root
// or inside dir, missing, named twice, or itself an overlay with bases
// (one level of bases).
func LoadTree(root fs.FS, dir string) (*Set, error) {
	dir = path.Clean(dir)
	sub := root
	if dir != "." {
		var err error
		if sub, err = fs.Sub(root, dir); err != nil {
			return nil, fmt.Errorf("cannot read declarations: %w", err)
		}
	}
	if _, err := fs.Stat(sub, "."); err != nil {
		return nil, fmt.Errorf("cannot read declarations: %w", err)
	}
	bases, err := readOverlay(sub)
	if err != nil {
		return nil, err
	}
	l := newLoader()
	l.layer = layerBase
	for _, b := range bases {
		bdir := path.Join(dir, b)
		if !fs.ValidPath(bdir) || bdir == "." {
			return nil, fmt.Errorf("%s: base %q is outside the tree lockstep reads (the repository, or the directory alone where no repository is given)", OverlayFileName, b)
		}
		if dir == "." || strings.HasPrefix(bdir+"/", dir+"/") {
			return nil, fmt.Errorf("%s: base %q is inside the directory, which is read whole already", OverlayFileName, b)
		}
		bfs, err := fs.Sub(root, bdir)
		if err != nil {
			return nil, fmt.Errorf("%s: base %q: %w", OverlayFileName, b, err)
		}
		if st, err := fs.Stat(bfs, "."); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%s: base %q is not a directory of the repository", OverlayFileName, b)
		}
		nested, err := readOverlay(bfs)
		if err != nil {
			return nil, fmt.Errorf("base %q: %w", b, err)
		}
		if len(nested) > 0 {
			return nil, fmt.Errorf("%s: base %q names bases of its own in its %s; bases are one level deep", OverlayFileName, b, OverlayFileName)
		}
		if err := l.walk(bfs, b); err != nil {
			return nil, fmt.Errorf("cannot read declarations: base %q: %w", b, err)
		}
	}
	l.layer = layerOverlay
	if err := l.walk(sub, ""); err != nil {
		return nil, fmt.Errorf("cannot read declarations: %w", err)
	}
	return l.finish()
}

// readOverlay returns the cleaned bases of fsys's lockstep.yaml; none
// when there is no such file.
func readOverlay(fsys fs.FS) ([]string, error) {
	b, err := fs.ReadFile(fsys, OverlayFileName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", OverlayFileName, err)
	}
	var o Overlay
	if err := yaml.UnmarshalStrict(b, &o); err != nil {
		return nil, fmt.Errorf("%s: %w", OverlayFileName, err)
	}
	if o.APIVersion != OverlayAPIVersion || o.Kind != OverlayKind {
		return nil, fmt.Errorf("%s: apiVersion %q kind %q: want %s %s", OverlayFileName, o.APIVersion, o.Kind, OverlayAPIVersion, OverlayKind)
	}
	var out []string
	for i, b := range o.Bases {
		c := path.Clean(filepath.ToSlash(b))
		if b == "" || path.IsAbs(c) {
			return nil, fmt.Errorf("%s: bases[%d] %q: want a path relative to the directory", OverlayFileName, i, b)
		}
		if slices.Contains(out, c) {
			return nil, fmt.Errorf("%s: bases[%d] %q is named twice", OverlayFileName, i, b)
		}
		out = append(out, c)
	}
	return out, nil
}

// loadOS reads the directory dir of the local file system with its bases:
// the root is the Git worktree that holds dir (the nearest directory with a
// .git above it), else dir's file system root.
func loadOS(dir string) (*Set, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot read declarations: %w", err)
	}
	top := abs
	for {
		if _, err := os.Stat(filepath.Join(top, ".git")); err == nil {
			break
		}
		parent := filepath.Dir(top)
		if parent == top {
			top = parent
			break
		}
		top = parent
	}
	rel, err := filepath.Rel(top, abs)
	if err != nil {
		return nil, fmt.Errorf("cannot read declarations: %w", err)
	}
	return LoadTree(os.DirFS(top), filepath.ToSlash(rel))
}

// declare records the name key of o (what says "Kind name" in errors),
// declared at at. It returns false, with an error, when key was declared
// before in the same layer; a key of an earlier layer is overridden: its
// declaration leaves the Set.
func (l *loader) declare(o object, key, what string, at Location) bool {
	first, dup := l.names[key]
	if dup && l.nameLayer[key] == l.layer {
		l.fail(o, "metadata.name", fmt.Errorf("%s is declared twice: first at %s", what, first))
		return false
	}
	if dup {
		l.drop(key)
		l.set.Overrides = append(l.set.Overrides, Override{Object: what, Base: first, Overlay: at})
	}
	l.names[key], l.nameLayer[key] = at, l.layer
	return true
}

// drop removes from the Set the declaration or manifest of key, which a
// later layer overrides.
func (l *loader) drop(key string) {
	s := l.set
	if id, ok := strings.CutPrefix(key, "manifest "); ok {
		s.Manifests = slices.DeleteFunc(s.Manifests, func(m Manifest) bool { return m.identity() == id })
		return
	}
	kind, name, _ := strings.Cut(key, "/")
	s.Packages = slices.DeleteFunc(s.Packages, func(d Declaration) bool { return string(d.Kind) == kind && d.Name == name })
	s.RuntimeConfigs = slices.DeleteFunc(s.RuntimeConfigs, func(r DeploymentRuntimeConfig) bool { return kind == "DeploymentRuntimeConfig" && r.Name == name })
	s.ImageConfigs = slices.DeleteFunc(s.ImageConfigs, func(i ImageConfig) bool { return kind == "ImageConfig" && i.Name == name })
	s.ActivationPolicies = slices.DeleteFunc(s.ActivationPolicies, func(p ActivationPolicy) bool { return kind == p.Kind && p.Name == name })
	l.runtimeRefs = slices.DeleteFunc(l.runtimeRefs, func(r runtimeRef) bool { return r.o.kind == kind && r.o.name == name })
	for src, e := range l.sources {
		if e.object == kind+" "+name {
			delete(l.sources, src)
		}
	}
}

// FindDirectories returns the declarations directories of the tree root
// (slash-separated, sorted): every directory, hidden ones aside, that holds
// a lockstep.lock or a lockstep.yaml, except the bases some lockstep.yaml
// names. It is what `lockstep lock --all` works on: one per cluster.
func FindDirectories(root fs.FS) ([]string, error) {
	var dirs []string
	bases := map[string]bool{}
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir
		}
		overlay, lock := exists(root, path.Join(p, OverlayFileName)), exists(root, path.Join(p, "lockstep.lock"))
		if !overlay && !lock {
			return nil
		}
		dirs = append(dirs, p)
		if overlay {
			sub, err := fs.Sub(root, p)
			if err != nil {
				return err
			}
			bs, err := readOverlay(sub)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			for _, b := range bs {
				bases[path.Join(p, b)] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	dirs = slices.DeleteFunc(dirs, func(d string) bool { return bases[d] })
	slices.Sort(dirs)
	return dirs, nil
}

func exists(fsys fs.FS, name string) bool {
	_, err := fs.Stat(fsys, name)
	return err == nil
}
