package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestExitCodes: CI tells a usage error, a stale lock, a diff gate and a
// failure apart by the exit code alone. Every code is
// listed in the root command's help.
func TestExitCodes(t *testing.T) {
	empty := t.TempDir()
	cases := map[string]struct {
		reason string
		args   []string
		want   int
		msg    string
	}{
		"UnknownFlag": {
			reason: "An unknown flag is a usage error.",
			args:   []string{"lock", "--dir", empty, "--bogus"},
			want:   exitUsage,
			msg:    "unknown flag: --bogus",
		},
		"UnknownShorthand": {
			reason: "An unknown shorthand flag is a usage error.",
			args:   []string{"render", "-z"},
			want:   exitUsage,
			msg:    "unknown shorthand flag: 'z' in -z",
		},
		"BadArgumentCount": {
			reason: "render takes no argument.",
			args:   []string{"render", "--dir", empty, "extra"},
			want:   exitUsage,
			msg:    `unknown command "extra" for "lockstep render"`,
		},
		"InvalidFlagValue": {
			reason: "A value pflag cannot parse is a usage error.",
			args:   []string{"lock", "--dir", empty, "--jobs", "many"},
			want:   exitUsage,
			msg:    `invalid argument "many" for "--jobs" flag`,
		},
		"InvalidEnumValue": {
			reason: "A value the command itself refuses is a usage error too.",
			args:   []string{"diff", "--base-dir", empty, "--head-dir", empty, "--fail-on", "sometimes"},
			want:   exitUsage,
			msg:    `--fail-on "sometimes" is not none, breaking or any`,
		},
		"BadMemoryLimit": {
			reason: "A --memory-limit that is not a quantity is a usage error.",
			args:   []string{"apply", "--dir", empty, "--memory-limit", "lots"},
			want:   exitUsage,
			msg:    `--memory-limit "lots": quantities must match`,
		},
		"NegativeMemoryLimit": {
			reason: "A --memory-limit that is not positive is a usage error.",
			args:   []string{"agent", "--memory-limit", "-5Mi"},
			want:   exitUsage,
			msg:    `--memory-limit "-5Mi": want a positive number of bytes`,
		},
		"VerifyModeWithoutKeys": {
			reason: "A commit verification mode without trusted keys would verify nothing: refused, not ignored.",
			args:   []string{"agent", "--git-url", "file:///nowhere", "--git-verify-mode", "Tag"},
			want:   exitUsage,
			msg:    "--git-verify-mode needs trusted keys",
		},
		"ExclusiveFlags": {
			reason: "Flags that exclude each other are a usage error.",
			args:   []string{"lock", "--dir", empty, "--check", "--update"},
			want:   exitUsage,
			msg:    "none of the others can be",
		},
		"ArgumentsWithoutUpdate": {
			reason: "lock's own argument rule is a usage error.",
			args:   []string{"lock", "--dir", empty, "provider-nop"},
			want:   exitUsage,
			msg:    "only accepted with --update",
		},
		"UnknownCommand": {
			reason: "An unknown command is a usage error.",
			args:   []string{"lokc"},
			want:   exitUsage,
			msg:    `unknown command "lokc" for "lockstep"`,
		},
		"StaleLock": {
			reason: "lock --check of a stale lock has its own code.",
			args:   []string{"lock", "--dir", empty, "--check"},
			want:   exitStale,
			msg:    "is stale: 1 problem",
		},
		"Failure": {
			reason: "Anything else that fails exits 1.",
			args:   []string{"lock", "--dir", filepath.Join(empty, "missing")},
			want:   exitFailure,
			msg:    "no such file or directory",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%s\nlockstep %v: got %v, want an error containing %q\n%s", tc.reason, tc.args, err, tc.msg, out)
			}
			if got := exitCode(err); got != tc.want {
				t.Errorf("%s\nlockstep %v: exit %d, want %d (%v)", tc.reason, tc.args, got, tc.want, err)
			}
		})
	}
	help, err := run(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Exit codes:", "  0  success", "  1  failure", "  2  diff --fail-on", "  3  diff --fail-on any", "  4  stale lock", " 64  usage error"} {
		if !strings.Contains(help, want) {
			t.Errorf("lockstep --help lacks %q:\n%s", want, help)
		}
	}
}

// TestShorthandV: -v is apply's --verbose only; the root's --version has no
// shorthand, so `lockstep -v` is not silently the version.
func TestShorthandV(t *testing.T) {
	cases := map[string]struct {
		reason   string
		args     []string
		wantOut  []string
		wantNot  []string
		wantCode int
	}{
		"RootVersionLong": {
			reason:  "--version prints the version.",
			args:    []string{"--version"},
			wantOut: []string{"lockstep version "},
		},
		"RootShorthandRefused": {
			reason:   "-v on the root is an unknown flag, a usage error.",
			args:     []string{"-v"},
			wantCode: exitUsage,
		},
		"RootHelp": {
			reason:  "The root's help lists --version without a shorthand and says where -v belongs.",
			args:    []string{"--help"},
			wantOut: []string{"      --version   print lockstep's version (no shorthand: -v is apply's --verbose)"},
			wantNot: []string{"-v, --version"},
		},
		"ApplyHelp": {
			reason:  "apply's help lists -v as --verbose.",
			args:    []string{"apply", "--help"},
			wantOut: []string{"-v, --verbose"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, tc.args...)
			if tc.wantCode != 0 {
				if err == nil || exitCode(err) != tc.wantCode {
					t.Fatalf("%s\nlockstep %v: got %v (exit %d), want exit %d\n%s", tc.reason, tc.args, err, exitCode(err), tc.wantCode, out)
				}
				t.Logf("lockstep %v: %v", tc.args, err)
				return
			}
			if err != nil {
				t.Fatalf("%s\nlockstep %v: %v", tc.reason, tc.args, err)
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(out, want) {
					t.Errorf("%s\nlockstep %v output lacks %q:\n%s", tc.reason, tc.args, want, out)
				}
			}
			for _, not := range tc.wantNot {
				if strings.Contains(out, not) {
					t.Errorf("%s\nlockstep %v output has %q:\n%s", tc.reason, tc.args, not, out)
				}
			}
		})
	}
}
