package oci

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// PruneGrace is how recent a blob may be and still be removed by Prune:
// younger blobs may belong to a pull still under way (its layers are
// written before the manifest that refers to them), so they stay.
const PruneGrace = 10 * time.Minute

// PruneResult is what Cache.Prune did, in blobs and bytes.
type PruneResult struct {
	// Kept and KeptBytes count the blobs left in the cache.
	Kept      int
	KeptBytes int64
	// Removed and RemovedBytes count the blobs removed.
	Removed      int
	RemovedBytes int64
	// Needed and NeededBytes count the blobs the kept packages need: a
	// cache that must hold more than maxBytes for them keeps them all.
	Needed      int
	NeededBytes int64
}

// Prune bounds the cache to maxBytes of blobs (maxBytes ≤ 0: no bound,
// nothing is removed). The blobs the packages of keep need (each
// package's manifest or index, its platform manifest, the layers package.yaml
// is read from, and its cached signatures and their layers) are never
// removed; of the others, the least recently written go first until the
// cache holds at most maxBytes, except blobs written less than PruneGrace
// before now. A removed package's signature record goes with its manifest.
// Temporary files a crash left behind, older than PruneGrace, are removed
// too. The next pull of a removed package fetches it again; a package that
// cannot be fetched (an air-gapped cluster) must stay in a kept lock.
//
// It returns what it kept and removed; an error names the file that could
// not be read or removed, after removing what it could.
func (c *Cache) Prune(keep []v1.Hash, maxBytes int64, now time.Time) (PruneResult, error) {
	var res PruneResult
	if maxBytes <= 0 {
		return res, nil
	}
	needed := map[string]bool{}
	for _, d := range keep {
		for _, h := range c.needs(d) {
			needed[h.Hex] = true
		}
	}
	type blob struct {
		hex  string
		path string
		size int64
		mod  time.Time
	}
	dir := filepath.Join(c.dir, "blobs", "sha256")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return res, fmt.Errorf("package cache %s: %w", dir, err)
	}
	var candidates []blob
	var total int64
	var files int
	var errs []error
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		path := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), ".tmp-") {
			if now.Sub(info.ModTime()) > PruneGrace {
				if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, fmt.Errorf("package cache: %w", err))
				}
			}
			continue
		}
		b := blob{hex: e.Name(), path: path, size: info.Size(), mod: info.ModTime()}
		files++
		total += b.size
		if needed[b.hex] {
			res.Needed++
			res.NeededBytes += b.size
			continue
		}
		if now.Sub(b.mod) < PruneGrace {
			continue
		}
		candidates = append(candidates, b)
	}
	slices.SortFunc(candidates, func(a, b blob) int {
		if c := a.mod.Compare(b.mod); c != 0 {
			return c
		}
		return strings.Compare(a.hex, b.hex)
	})
	for _, b := range candidates {
		if total <= maxBytes {
			break
		}
		if err := os.Remove(b.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("package cache: %w", err))
			continue
		}
		_ = os.Remove(filepath.Join(c.dir, "signatures", "sha256", b.hex))
		total -= b.size
		res.Removed++
		res.RemovedBytes += b.size
	}
	res.Kept, res.KeptBytes = files-res.Removed, total
	return res, errors.Join(errs...)
}

// needs returns the blobs the package d needs from the cache, as far as
// they are present: what Package and the signature check read.
func (c *Cache) needs(d v1.Hash) []v1.Hash {
	return append(c.packageBlobs(d), c.signatureBlobs(d)...)
}

// packageBlobs returns d, its platform manifest when d is an index, and
// the layers package.yaml is read from.
func (c *Cache) packageBlobs(d v1.Hash) []v1.Hash {
	out := []v1.Hash{d}
	raw, err := c.readManifest(d)
	if err != nil {
		return out
	}
	if index, err := isIndex(raw); err == nil && index {
		child, err := platformManifest(raw)
		if err != nil {
			return out
		}
		out = append(out, child.Digest)
		if raw, err = c.readManifest(child.Digest); err != nil {
			return out
		}
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return out
	}
	_, layers := packageLayers(m)
	for _, l := range layers {
		out = append(out, l.Digest)
	}
	return out
}

// signatureBlobs returns the cached signature manifests of d and their
// layers.
func (c *Cache) signatureBlobs(d v1.Hash) []v1.Hash {
	p, err := c.signatureIndexPath(d)
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	var out []v1.Hash
	for _, line := range strings.Fields(string(b)) {
		h, err := v1.NewHash(line)
		if err != nil {
			continue
		}
		out = append(out, h)
		raw, err := c.readManifest(h)
		if err != nil {
			continue
		}
		if m, err := v1.ParseManifest(bytes.NewReader(raw)); err == nil {
			for _, l := range m.Layers {
				out = append(out, l.Digest)
			}
		}
	}
	return out
}
