// Package redact removes credentials from URLs, strings and errors before
// they reach a log, an event, a status condition or a terminal. It is the
// one redaction policy of lockstep's transports: sources/git (Git over
// HTTPS and SSH) and sources/oci (registries) both use it, so a secret is
// treated the same way whichever transport met it.
//
// What is removed:
//   - the user information of a URL (https://TOKEN@host,
//     https://user:pass@host), since tokens are often written as the user
//     name;
//   - token-like query parameters (access_token, token, password, secret),
//     which OCI token endpoints carry in the URLs they print
//     (https://distribution.github.io/distribution/spec/auth/token/);
//   - the credential of an Authorization header written into a message;
//   - every literal secret the caller knows (a password, a bearer token),
//     and its URL-query-escaped form.
//
// Everything removed is replaced by Placeholder, so a reader sees that a
// credential was there. URL is the exception: it returns a configured URL
// for display (a Sync's status, a log line naming the repository), where the
// user information is dropped rather than marked.
//
// # Unwrap policy
//
// Error returns an error whose Error() is the redacted message and which
// answers errors.Is and errors.As for the original chain (through its Is
// and As methods), but which has no Unwrap method. Callers keep testing for
// sentinels and types — context.DeadlineExceeded, go-git's
// transport.ErrAuthenticationRequired, go-containerregistry's
// *transport.Error — exactly as before redaction. What they cannot do is
// walk the chain with errors.Unwrap and print a link: a generic walker
// (a logger that prints causes, an aggregate that joins messages) would
// otherwise print the original message with the credential in it. The
// former sources/oci copy unwrapped and leaked that way; the former
// sources/git copy answered Is but not As, so typed errors were lost.
// A value that errors.As hands out is the original, unredacted one: read its
// fields, print the redacted error.
package redact

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
)

// Placeholder replaces every credential this package removes from text.
const Placeholder = "REDACTED"

// minSecret is the length under which a caller's secret is not replaced
// literally: shorter values would mangle ordinary words of a message. URL
// user information, token parameters and Authorization headers are removed
// whatever their length.
const minSecret = 4

// URL returns raw, a URL given by a user or a configuration, without the
// secrets its user information can carry, for display. For http and https
// URLs the whole user information is dropped, because a token is often
// written as the user name (https://TOKEN@host/...); for other schemes (ssh,
// git) the user name is kept and a password dropped. An scp-like address
// (git@host:org/repo) has no password and is returned as is. A string that
// does not parse as a URL is scrubbed with Text. The query is kept: Git
// connects to the URL URL returns (see sources/git's Source).
func URL(raw string) string {
	if !strings.Contains(raw, "://") {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Text(raw)
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

// URLSecrets returns the secrets the user information of raw holds, for
// New: its password, or, when there is none, its user name for http and
// https URLs (https://TOKEN@host/..., where the token is the user name). A
// user name beside a password is not a secret and is not returned, so that
// replacing it literally does not mangle messages; URL and Text drop it from
// URLs anyway. It returns nil for a URL without user information, an
// scp-like address and a string that does not parse.
func URLSecrets(raw string) []string {
	if !strings.Contains(raw, "://") {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return nil
	}
	if p, ok := u.User.Password(); ok {
		return []string{p}
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		if name := u.User.Username(); name != "" {
			return []string{name}
		}
	}
	return nil
}

// Patterns of credentials inside free text.
var (
	// userinfoRE matches a URL's scheme and user information.
	userinfoRE = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s"']+@`)
	// queryRE matches a token-like query parameter and its value.
	queryRE = regexp.MustCompile(`(?i)((?:^|[?&])(?:access_token|token|password|secret)=)[^&\s"']+`)
	// authorizationRE matches an Authorization header and its credential.
	authorizationRE = regexp.MustCompile(`(?i)(authorization:\s*(?:(?:bearer|basic|token)\s+)?)[^\s"',]+`)
)

// Text returns s without the credentials of URLs (user information and
// token-like query parameters) and of Authorization headers. It is
// New().Text(s).
func Text(s string) string { return Redactor{}.Text(s) }

// Error returns err with a message scrubbed by Text, following the unwrap
// policy of the package doc; nil for nil. It is New().Error(err).
func Error(err error) error { return Redactor{}.Error(err) }

// Redactor removes the credentials of one connection — the password, token
// or key passphrase its caller holds — in addition to what Text removes. The
// zero Redactor knows no secrets.
type Redactor struct {
	secrets []string
}

// New returns a Redactor for the given secret values. Empty values and
// values shorter than 4 bytes are ignored (they would mangle ordinary words);
// URL user information and tokens are removed regardless.
func New(secrets ...string) Redactor {
	var r Redactor
	for _, s := range secrets {
		if len(s) >= minSecret {
			r.secrets = append(r.secrets, s)
		}
	}
	return r
}

// Text returns s without URL user information, token-like query parameters,
// Authorization header credentials and the Redactor's secrets (also in
// their URL-query-escaped form), each replaced by Placeholder.
func (r Redactor) Text(s string) string {
	s = userinfoRE.ReplaceAllString(s, "${1}"+Placeholder+"@")
	s = queryRE.ReplaceAllString(s, "${1}"+Placeholder)
	s = authorizationRE.ReplaceAllString(s, "${1}"+Placeholder)
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, Placeholder)
		if esc := url.QueryEscape(secret); esc != secret {
			s = strings.ReplaceAll(s, esc, Placeholder)
		}
	}
	return s
}

// Error returns err with its message scrubbed by Text, or nil for nil. The
// result answers errors.Is and errors.As for err's chain but does not unwrap
// to it (see the package doc). Redacting an error this package returned
// again scrubs its message further and keeps the original chain, so errors
// do not nest.
func (r Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	if re, ok := err.(*redactedError); ok { //nolint:errorlint // only an error this package returned as is, not one it wraps
		return &redactedError{msg: r.Text(re.msg), orig: re.orig}
	}
	return &redactedError{msg: r.Text(err.Error()), orig: err}
}

// redactedError is an error whose message has its credentials removed; it
// answers Is and As for the original chain and does not unwrap to it.
type redactedError struct {
	msg  string
	orig error
}

// Error returns the redacted message.
func (e *redactedError) Error() string { return e.msg }

// Is reports whether the original chain holds target.
func (e *redactedError) Is(target error) bool { return errors.Is(e.orig, target) }

// As finds the first error of the original chain that matches target.
func (e *redactedError) As(target any) bool { return errors.As(e.orig, target) }
