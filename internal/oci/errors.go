package oci

import (
	"errors"
	"regexp"
)

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

// secretInURL matches the user information of a URL (scheme://user:pass@)
// and credential-like query parameters, which must never reach an error
// message or a log.
var secretInURL = regexp.MustCompile(`(?i)(://)[^/@\s]+@|([?&](?:access_token|token|password|secret)=)[^&\s"]+`)

// redact returns err with secrets in URLs replaced by "REDACTED". It keeps
// err in the chain, so errors.Is and errors.As still see through it. It
// returns nil for nil.
func redact(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := secretInURL.ReplaceAllStringFunc(msg, func(s string) string {
		m := secretInURL.FindStringSubmatch(s)
		if m[1] != "" {
			return m[1] + "REDACTED@"
		}
		return m[2] + "REDACTED"
	})
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
