package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep-gitops/lockstep/test/registry"
)

// credentialHelper writes an executable docker-credential-NAME into a new
// directory put first on PATH: a Docker credential helper, as
// docker-credential-ecr-login, docker-credential-gcr and
// docker-credential-acr-env are, speaking the helper protocol
// (github.com/docker/docker-credential-helpers: `get` reads the server on
// stdin and prints {ServerURL, Username, Secret}). It answers user and
// password for every server and appends each server asked to the returned
// log file.
func credentialHelper(t *testing.T, helper, user, password string) string {
	t.Helper()
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "asked")
	script := `#!/bin/sh
[ "$1" = get ] || exit 1
read server
echo "$server" >> '` + log + `'
printf '{"ServerURL":"%s","Username":"` + user + `","Secret":"` + password + `"}\n' "$server"
`
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-"+helper), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

// TestCredentialHelpers: the CLI's registry credentials come from Docker
// credential helpers, the way cloud registries (ECR, GCR/Artifact
// Registry, ACR) are reached: a registry that requires HTTP Basic auth
// answers lock and render once the Docker config's credHelpers (default
// location, DOCKER_CONFIG) or credsStore (--registry-config) names a
// helper on PATH, and 401 without one; the password is never printed.
func TestCredentialHelpers(t *testing.T) {
	const user, password = "robot", "helper-s3cret-token"
	reg := registry.New(t, registry.WithBasicAuth(user, password))
	pushExamples(t, reg)
	dir := declarationsDir(t, reg, "v0.1.0")
	asked := credentialHelper(t, "lockstep-test", user, password)

	helperDir, storeFile, emptyDir := t.TempDir(), filepath.Join(t.TempDir(), "config.json"), t.TempDir()
	if err := os.WriteFile(filepath.Join(helperDir, "config.json"), []byte(`{"credHelpers":{"`+reg.Host+`":"lockstep-test"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(storeFile, []byte(`{"credsStore":"lockstep-test"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host}
	lock := append([]string{"lock", "--crossplane-version", "v2.1.0"}, flags...)
	cases := []struct {
		name, reason string
		dockerConfig string
		args         []string
		wantErr      string
	}{
		{
			name:         "NoHelper",
			reason:       "without credentials the registry answers 401",
			dockerConfig: emptyDir,
			args:         lock,
			wantErr:      "401 Unauthorized",
		},
		{
			name:         "CredHelpersLock",
			reason:       "lock gets the credentials from the helper the default Docker config names for the registry",
			dockerConfig: helperDir,
			args:         lock,
		},
		{
			name:         "CredsStoreRender",
			reason:       "render, with an empty cache, gets them from the credsStore of --registry-config",
			dockerConfig: emptyDir,
			args:         []string{"render", "--registry-config", storeFile, "--dir", dir, "--cache-dir", t.TempDir(), "--insecure-registry", reg.Host},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DOCKER_CONFIG", tc.dockerConfig)
			_ = os.Remove(asked)
			out, err := run(t, tc.args...)
			t.Logf("lockstep %s: %v", tc.args[0], err)
			if strings.Contains(out, password) || (err != nil && strings.Contains(err.Error(), password)) {
				t.Errorf("%s: the helper's secret was printed", tc.reason)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s: got %v, want an error containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", tc.reason, err, out)
			}
			if b, err := os.ReadFile(asked); err != nil || !strings.Contains(string(b), reg.Host) {
				t.Errorf("%s: the helper was not asked for %s (%v): %q", tc.reason, reg.Host, err, b)
			}
		})
	}
}
