package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestConfigBindFlags parses command lines with the flags BindFlags binds
// and checks the Config they leave, or the usage error.
func TestConfigBindFlags(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, []byte("- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("- apiGroup: [\"\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	cases := map[string]struct {
		reason  string
		args    []string
		want    Config
		wantErr string
	}{
		"Defaults": {
			reason: "No flag leaves the defaults, and no MRD conversion expectation: the lock decides.",
			want:   DefaultConfig(),
		},
		"Instance": {
			reason: "--instance names the instance.",
			args:   []string{"--instance", "edge"},
			want:   Config{Namespace: DefaultNamespace, Instance: "edge"},
		},
		"ConversionGivenBare": {
			reason: "The conversion flag given alone expects true.",
			args:   []string{"--" + MRDConversionFlag},
			want:   Config{Namespace: DefaultNamespace, Instance: DefaultInstance, ExpectMRDConversion: &yes},
		},
		"ConversionFalse": {
			reason: "The conversion flag given false expects false, which is not the same as not given.",
			args:   []string{"--" + MRDConversionFlag + "=false"},
			want:   Config{Namespace: DefaultNamespace, Instance: DefaultInstance, ExpectMRDConversion: &no},
		},
		"PermissionsFile": {
			reason: "--allowed-provider-permissions reads its file's rules when parsed.",
			args:   []string{"--allowed-provider-permissions", rules},
			want: Config{Namespace: DefaultNamespace, Instance: DefaultInstance, AllowedProviderPermissions: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
			}},
		},
		"PermissionsFileMissing": {
			reason:  "A file that cannot be read is a usage error naming the flag and the file.",
			args:    []string{"--allowed-provider-permissions", filepath.Join(dir, "none.yaml")},
			wantErr: `"--allowed-provider-permissions" flag: open ` + filepath.Join(dir, "none.yaml"),
		},
		"PermissionsFileUnknownField": {
			reason:  "A misspelt field is refused, naming the file, not read as no rule.",
			args:    []string{"--allowed-provider-permissions", typo},
			wantErr: typo + `: error unmarshaling JSON: while decoding JSON: json: unknown field "apiGroup"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := DefaultConfig()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			c.BindFlags(fs)
			err := fs.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nParse(%q): got error %v, want one containing %q", tc.reason, tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nParse(%q): unexpected error: %v", tc.reason, tc.args, err)
			}
			if diff := cmp.Diff(tc.want, c); diff != "" {
				t.Errorf("%s\nParse(%q): -want, +got:\n%s", tc.reason, tc.args, diff)
			}
		})
	}
}

// TestWithConfig checks that WithConfig sets what the single options set,
// keeps the defaults for an empty namespace and instance, and that an
// option after it overrides it.
func TestWithConfig(t *testing.T) {
	yes := true
	c := Config{Namespace: "xp", Instance: "edge", InsecureRegistries: []string{"127.0.0.1:5000"},
		AllowedProviderPermissions: []rbacv1.PolicyRule{{Verbs: []string{"get"}}}, ExpectMRDConversion: &yes}
	o := newOptions([]Option{WithConfig(c), WithInstance("later")})
	if o.namespace != "xp" || o.instance != "later" || !cmp.Equal(o.insecure, c.InsecureRegistries) ||
		!cmp.Equal(o.allowed, c.AllowedProviderPermissions) || o.expectConversion == nil || !*o.expectConversion {
		t.Errorf("WithConfig(%+v), WithInstance(later): got namespace %q, instance %q, insecure %v, allowed %v, conversion %v", c, o.namespace, o.instance, o.insecure, o.allowed, o.expectConversion)
	}
	o = newOptions([]Option{WithConfig(Config{})})
	if o.namespace != DefaultNamespace || o.instance != DefaultInstance || o.expectConversion != nil {
		t.Errorf("WithConfig(Config{}): got namespace %q, instance %q, conversion %v; want the defaults and no expectation", o.namespace, o.instance, o.expectConversion)
	}
}
