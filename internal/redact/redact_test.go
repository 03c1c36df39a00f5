package redact_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/lockstep-gitops/lockstep/internal/redact"
)

// TestURL: configured URLs lose their credentials for display (the cases of
// the former sources/git TestRedactURL).
func TestURL(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   string
	}{
		"HTTPSUserPassword": {
			reason: "https user information is dropped whole",
			in:     "https://user:secret@git.example.com/org/repo.git", want: "https://git.example.com/org/repo.git",
		},
		"HTTPSTokenAsUser": {
			reason: "a token written as the user name is a secret too",
			in:     "https://ghp_token@git.example.com/org/repo.git", want: "https://git.example.com/org/repo.git",
		},
		"HTTPWithPort": {
			reason: "plain http is treated as https, and the port kept",
			in:     "http://u:p@127.0.0.1:8080/r.git", want: "http://127.0.0.1:8080/r.git",
		},
		"SSHPassword": {
			reason: "an ssh URL keeps its user name, which is not a secret, and loses the password",
			in:     "ssh://git:secret@git.example.com/org/repo.git", want: "ssh://git@git.example.com/org/repo.git",
		},
		"SSHUser": {
			reason: "an ssh URL without password is unchanged",
			in:     "ssh://git@git.example.com/org/repo.git", want: "ssh://git@git.example.com/org/repo.git",
		},
		"SCPLike": {
			reason: "an scp-like address has no password and is kept",
			in:     "git@git.example.com:org/repo.git", want: "git@git.example.com:org/repo.git",
		},
		"File": {
			reason: "a file URL has nothing to remove",
			in:     "file:///srv/repo.git", want: "file:///srv/repo.git",
		},
		"QueryKept": {
			reason: "the query is part of the address Git connects to and is kept; Text scrubs token parameters in messages",
			in:     "https://git.example.com/r.git?ref=main", want: "https://git.example.com/r.git?ref=main",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, redact.URL(tc.in)); diff != "" {
				t.Errorf("%s\nURL(%q): -want +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}

// TestError: the messages of both former users (sources/oci's registry
// errors, sources/git's transport errors) lose their credentials, and the
// redacted error still answers errors.Is and errors.As for its chain.
func TestError(t *testing.T) {
	sentinel := errors.New("cause")
	authRequired := errors.New("authentication required") // stands in for go-git's transport.ErrAuthenticationRequired
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	cases := map[string]struct {
		reason  string
		secrets []string
		err     error
		want    string
		is      error
	}{
		"RegistryUserInfo": {
			reason: "credentials in a URL's user information are replaced (former sources/oci)",
			err:    fmt.Errorf("GET https://robot:s3cret@registry.example/v2/: %w", sentinel),
			want:   "GET https://REDACTED@registry.example/v2/: cause", is: sentinel,
		},
		"RegistryTokenQuery": {
			reason: "token-like query parameters lose their value (former sources/oci)",
			err:    fmt.Errorf("GET https://auth.example/token?service=r&access_token=abc.def&scope=x: %w", sentinel),
			want:   "GET https://auth.example/token?service=r&access_token=REDACTED&scope=x: cause", is: sentinel,
		},
		"Clean": {
			reason: "an error without secrets keeps its message and chain",
			err:    fmt.Errorf("HEAD https://registry.example/v2/org/p/manifests/v1: %w", sentinel),
			want:   "HEAD https://registry.example/v2/org/p/manifests/v1: cause", is: sentinel,
		},
		"GitTokenAsUser": {
			reason: "a Git token written as the URL's user is removed from a transport message (former sources/git)",
			err:    fmt.Errorf(`Get "https://ghp_tokentokentoken@127.0.0.1:1/org/repo.git/info/refs": %w`, netErr),
			want:   `Get "https://REDACTED@127.0.0.1:1/org/repo.git/info/refs": dial tcp: connection refused`,
		},
		"GitKnownPassword": {
			reason:  "a password the caller knows is removed wherever it appears, also query-escaped (former sources/git)",
			secrets: []string{"s3cret password", "abc"},
			err:     fmt.Errorf("remote said s3cret password, or s3cret+password, abc: %w", authRequired),
			want:    "remote said REDACTED, or REDACTED, abc: authentication required", is: authRequired,
		},
		"AuthorizationHeader": {
			reason: "the credential of an Authorization header in a message is removed",
			err:    errors.New(`request failed with Authorization: Bearer eyJhbGciOi.payload.sig sent`),
			want:   `request failed with Authorization: Bearer REDACTED sent`,
		},
		"DeadlineThroughRedaction": {
			reason: "errors.Is still sees context.DeadlineExceeded through the redacted error, as retry and cancellation checks need",
			err:    fmt.Errorf("fetch https://u:p4ss@git.example.com/r.git: %w", context.DeadlineExceeded),
			want:   "fetch https://REDACTED@git.example.com/r.git: context deadline exceeded", is: context.DeadlineExceeded,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := redact.New(tc.secrets...).Error(tc.err)
			if diff := cmp.Diff(tc.want, got.Error()); diff != "" {
				t.Errorf("%s\nError(): -want +got:\n%s", tc.reason, diff)
			}
			if tc.is != nil && !errors.Is(got, tc.is) {
				t.Errorf("%s\nerrors.Is(redacted, %v) = false, want true", tc.reason, tc.is)
			}
			if wrapped := fmt.Errorf("outer: %w", got); tc.is != nil && !errors.Is(wrapped, tc.is) {
				t.Errorf("%s\nerrors.Is through a wrapper of the redacted error = false, want true", tc.reason)
			}
		})
	}
	if redact.Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}

// TestErrorHidesSecret: the secret is absent from every way the redacted
// error prints (Error, %v, %+v, %#v-free wrappers), and errors.Unwrap does
// not hand the original message out; errors.As still reaches typed errors.
func TestErrorHidesSecret(t *testing.T) {
	const secret = "hunter2-s3cret"
	orig := &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("https://robot:%s@registry.example refused", secret)}
	got := fmt.Errorf("pull: %w", redact.New(secret).Error(fmt.Errorf("GET: %w", orig)))
	cases := map[string]struct {
		reason string
		text   string
	}{
		"Error":      {reason: "the message itself", text: got.Error()},
		"PercentV":   {reason: "%v prints the message", text: fmt.Sprintf("%v", got)},
		"PercentPlV": {reason: "%+v prints no cause chain of its own", text: fmt.Sprintf("%+v", got)},
		"Unwrapped":  {reason: "the link below the wrapper is the redacted error, which does not unwrap further", text: unwrapAll(got)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(tc.text, secret) || strings.Contains(tc.text, "robot") {
				t.Errorf("%s\nprints the credentials: %s", tc.reason, tc.text)
			}
		})
	}
	var op *net.OpError
	if !errors.As(got, &op) || op != orig {
		t.Errorf("errors.As(*net.OpError) through the redacted error: got %v, want the original", op)
	}
	var pathErr *fs.PathError
	if errors.As(got, &pathErr) {
		t.Errorf("errors.As found a type that is not in the chain: %v", pathErr)
	}
}

// TestErrorRedactsOnce: redacting a redacted error scrubs it further and
// keeps the original chain without nesting.
func TestErrorRedactsOnce(t *testing.T) {
	first := redact.Error(fmt.Errorf("token tok-123456 at https://u:p@h/: %w", context.Canceled))
	second := redact.New("tok-123456").Error(first)
	if diff := cmp.Diff("token REDACTED at https://REDACTED@h/: context canceled", second.Error()); diff != "" {
		t.Errorf("second redaction: -want +got:\n%s", diff)
	}
	if !errors.Is(second, context.Canceled) {
		t.Error("second redaction lost the chain")
	}
	if errors.Unwrap(second) != nil {
		t.Error("redacted error unwraps")
	}
}

// unwrapAll joins the messages of every link of err's Unwrap chain.
func unwrapAll(err error) string {
	var b strings.Builder
	for e := err; e != nil; e = errors.Unwrap(e) {
		b.WriteString(e.Error())
		b.WriteString("\n")
	}
	return b.String()
}

// TestURLSecrets: the literal secrets of a configured URL, for a Redactor
// that scrubs them wherever they appear outside a URL.
func TestURLSecrets(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   []string
	}{
		"HTTPSUserPassword": {
			reason: "the password is the secret; the user name beside it is not",
			in:     "https://user:s3cret@git.example.com/org/repo.git", want: []string{"s3cret"},
		},
		"HTTPSTokenAsUser": {
			reason: "a lone https user name is a token",
			in:     "https://ghp_token@git.example.com/org/repo.git", want: []string{"ghp_token"},
		},
		"SSHUser": {
			reason: "an ssh user name is not a secret",
			in:     "ssh://git@git.example.com/org/repo.git",
		},
		"SSHPassword": {
			reason: "an ssh password is",
			in:     "ssh://git:pw-1234@git.example.com/org/repo.git", want: []string{"pw-1234"},
		},
		"SCPLike": {
			reason: "an scp-like address has no secret",
			in:     "git@git.example.com:org/repo.git",
		},
		"NoUserinfo": {
			reason: "a URL without user information has none",
			in:     "https://git.example.com/org/repo.git",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, redact.URLSecrets(tc.in)); diff != "" {
				t.Errorf("%s\nURLSecrets(%q): -want +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}
