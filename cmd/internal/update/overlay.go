package update

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"time"
)

// overlayFS is a directory with some files replaced in memory: a
// checkout as a proposal would change it, for declarations.LoadFS and
// snapshot.Load, without writing to the checkout.
type overlayFS struct {
	base  fs.FS
	files map[string][]byte // slash-separated paths relative to base
}

// overlay returns dir with files (relative paths → content) over it.
func overlay(dir string, files map[string][]byte) overlayFS {
	return overlayFS{base: os.DirFS(dir), files: files}
}

// Open opens a replaced file from memory, anything else from the base.
func (o overlayFS) Open(name string) (fs.File, error) {
	b, ok := o.files[name]
	if !ok {
		return o.base.Open(name)
	}
	return &memFile{Reader: bytes.NewReader(b), info: memInfo{name: path.Base(name), size: int64(len(b))}}, nil
}

// ReadFile reads a replaced file from memory, anything else from the base.
func (o overlayFS) ReadFile(name string) ([]byte, error) {
	if b, ok := o.files[name]; ok {
		return bytes.Clone(b), nil
	}
	return fs.ReadFile(o.base, name)
}

// memFile is a replaced file, open.
type memFile struct {
	*bytes.Reader
	info memInfo
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

// memInfo describes a replaced file.
type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
