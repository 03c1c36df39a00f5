package oci

import "errors"

// Errors of the package cache that callers can test for with errors.Is.
var (
	// ErrNotCached means a blob a package needs is not in the cache.
	ErrNotCached = errors.New("not in the package cache")
	// ErrCorrupt means a cached blob does not match its digest (or the size
	// its manifest gives). The blob has been removed; pulling the package
	// again repairs the entry.
	ErrCorrupt = errors.New("corrupt package cache entry")
	// ErrDigestMismatch means a registry served content whose digest (or
	// size) is not the one asked for. Nothing of it is cached.
	ErrDigestMismatch = errors.New("content does not match its digest")
)
