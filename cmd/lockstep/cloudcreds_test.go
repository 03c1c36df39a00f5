package main

import (
	"strings"
	"testing"
)

func TestCloudCredentialsFlag(t *testing.T) {
	cases := []struct {
		name, reason string
		args         []string
		wantErr      string
	}{
		{
			name:    "LockUnknown",
			reason:  "lock refuses a value other than auto and off when the flag is parsed",
			args:    []string{"lock", "--cloud-credentials=on", "--dir", t.TempDir()},
			wantErr: `invalid argument "on" for "--cloud-credentials" flag: "on" is not "auto" or "off"`,
		},
		{
			name:    "AgentUnknown",
			reason:  "the agent refuses it too, before connecting to anything",
			args:    []string{"agent", "--cloud-credentials", "always"},
			wantErr: `invalid argument "always" for "--cloud-credentials" flag`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := run(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: got %v, want an error containing %q", tc.reason, err, tc.wantErr)
			}
		})
	}
}
