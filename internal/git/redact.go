package git

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// RedactURL returns raw without the secrets a Git URL can carry, for logs,
// events, status and errors. For http and https URLs the whole user
// information is dropped, because a token is often written as the user name
// (https://TOKEN@host/...); for other schemes (ssh, git) the user name is
// kept and a password dropped. An scp-like address (git@host:org/repo) has
// no password and is returned as is. A string that does not parse as a URL
// is scrubbed with the same rule as error messages (see redactString).
func RedactURL(raw string) string {
	if !strings.Contains(raw, "://") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return redactString(raw)
	}
	if u.User == nil {
		return raw
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		u.User = nil
	default:
		u.User = url.User(u.User.Username())
	}
	return u.String()
}

// userinfoRE matches the user information of any URL inside a longer text.
var userinfoRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s"']+@`)

// redactString removes the user information of every URL in s.
func redactString(s string) string {
	return userinfoRE.ReplaceAllString(s, "${1}")
}

// redactedError is an error whose message has every secret removed. It does
// not unwrap to the original error, whose message may hold a URL with
// credentials; Is still answers for the errors in the original chain, so
// callers can test for go-git's sentinel errors (for example
// transport.ErrAuthenticationRequired).
type redactedError struct {
	msg  string
	orig error
}

// Error returns the redacted message.
func (e *redactedError) Error() string { return e.msg }

// Is reports whether the original error chain contains target.
func (e *redactedError) Is(target error) bool { return errors.Is(e.orig, target) }

// redactor removes the secrets of one Source from error messages: the user
// information of every URL and the literal values of its password, bearer
// token and URL credentials.
type redactor struct {
	secrets []string
}

// newRedactor returns a redactor for the given secret values; empty values
// and values shorter than 4 bytes (which would mangle ordinary words) are
// ignored; URL user information is removed regardless.
func newRedactor(secrets ...string) redactor {
	var r redactor
	for _, s := range secrets {
		if len(s) >= 4 {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

// string returns s without secrets.
func (r redactor) string(s string) string {
	s = redactString(s)
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, "[redacted]")
		if esc := url.QueryEscape(secret); esc != secret {
			s = strings.ReplaceAll(s, esc, "[redacted]")
		}
	}
	return s
}

// error returns err with a redacted message, or nil. An error this package
// made itself (a safeError, whose message never holds a secret) passes
// through unchanged so callers can use errors.As on it.
func (r redactor) error(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(safeError); ok { //nolint:errorlint // only an unwrapped safeError is safe: a wrapper may add a secret
		return err
	}
	if re, ok := err.(*redactedError); ok { //nolint:errorlint // a wrapped one is redacted whole below
		return &redactedError{msg: r.string(re.msg), orig: re.orig}
	}
	return &redactedError{msg: r.string(err.Error()), orig: err}
}

// safeError marks this package's own error types: their messages are built
// from redacted URLs and ref names only.
type safeError interface {
	error
	safe()
}
