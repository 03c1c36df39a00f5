package snapshot

import (
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/pflag"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/lockstep-gitops/lockstep/sources/cosign"
)

// Default values of Config.
const (
	// DefaultNamespace is Crossplane's namespace when none is given.
	DefaultNamespace = "crossplane-system"
	// DefaultInstance names the lockstep instance when none is given.
	DefaultInstance = "lockstep"
)

// MRDConversionFlag is Crossplane v2's CRD-to-MRD conversion switch,
// named after Crossplane's own flag
// (--enable-custom-to-managed-resource-conversion). On the commands that
// render it asserts the lock's decision (Config.ExpectMRDConversion); on
// `lockstep lock` it sets what the lock records.
const MRDConversionFlag = "enable-custom-to-managed-resource-conversion"

// Config is how the pipeline loads and renders one commit for one cluster:
// the settings every command that renders and the agent give Load, held as
// one value (WithConfig) and bound to command-line flags once (BindFlags),
// as fluxcd/pkg runtime/client's Options are. A new setting is a field
// here, a flag in BindFlags and its use in Load; callers pass the value
// on.
type Config struct {
	// Namespace is Crossplane's namespace, where rendered runtimes and
	// their ServiceAccounts go (render.Input.Namespace); default
	// DefaultNamespace.
	Namespace string
	// Instance names this lockstep instance, recorded in a label on every
	// object it renders (render.Input.Instance); default DefaultInstance.
	Instance string
	// InsecureRegistries are registry hosts (host or host:port) reached
	// over plain HTTP, as --insecure-registry says.
	InsecureRegistries []string
	// AllowedProviderPermissions is the allow list for the
	// spec.controller.permissionRequests of v1-style providers
	// (render.Input.AllowedProviderPermissions); default none.
	AllowedProviderPermissions []rbacv1.PolicyRule
	// ExpectMRDConversion, when not nil, is what the lock must decide
	// about Crossplane v2's CRD-to-MRD conversion (ExpectMRDConversion);
	// nil takes the lock's decision as it is.
	ExpectMRDConversion *bool
	// VerificationKeys gives the verify step the public keys that
	// ImageConfig key authorities name by Secret (WithVerificationKeys).
	VerificationKeys cosign.KeySource
}

// DefaultConfig returns the Config of a command given no flags.
func DefaultConfig() Config {
	return Config{Namespace: DefaultNamespace, Instance: DefaultInstance}
}

// BindFlags registers on fs the flags of the settings a user gives on the
// command line: --instance, --allowed-provider-permissions (a YAML file of
// RBAC PolicyRules, read and checked when the flag is parsed, so that a
// missing or malformed file is a usage error naming it) and
// MRDConversionFlag (sets ExpectMRDConversion only when given). Namespace,
// InsecureRegistries and VerificationKeys come from flags other parts
// share (the cluster's and the registry's) and are set by the caller.
// Call it on a Config from DefaultConfig.
func (c *Config) BindFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Instance, "instance", c.Instance, "name of this lockstep instance, recorded in a label on every object it renders")
	fs.Var(&policyRulesFile{rules: &c.AllowedProviderPermissions}, "allowed-provider-permissions", "YAML `FILE` with a list of RBAC PolicyRules that v1-style providers may request with spec.controller.permissionRequests (default: none)")
	fs.Var(&optionalBool{p: &c.ExpectMRDConversion}, MRDConversionFlag, "require the lock's MRD conversion (customToManagedResourceConversion) to be this value, and fail otherwise; the lock decides it (set it with lockstep lock --"+MRDConversionFlag+")")
	fs.Lookup(MRDConversionFlag).NoOptDefVal = "true"
}

// WithConfig sets every setting of c, as the single options
// (WithNamespace, WithInstance, WithInsecureRegistries,
// WithAllowedProviderPermissions, ExpectMRDConversion,
// WithVerificationKeys) would; an empty Namespace or Instance keeps the
// default. Options after it override it.
func WithConfig(c Config) Option {
	return func(o *options) {
		if c.Namespace != "" {
			o.namespace = c.Namespace
		}
		if c.Instance != "" {
			o.instance = c.Instance
		}
		o.insecure = c.InsecureRegistries
		o.allowed = c.AllowedProviderPermissions
		o.expectConversion = c.ExpectMRDConversion
		o.keys = c.VerificationKeys
	}
}

// policyRulesFile is the pflag.Value of --allowed-provider-permissions:
// its string is the file, and Set reads the rules from it.
type policyRulesFile struct {
	path  string
	rules *[]rbacv1.PolicyRule
}

func (p *policyRulesFile) String() string { return p.path }
func (p *policyRulesFile) Type() string   { return "string" }

func (p *policyRulesFile) Set(path string) error {
	if path == "" {
		p.path, *p.rules = "", nil
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rules []rbacv1.PolicyRule
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	p.path, *p.rules = path, rules
	return nil
}

// optionalBool is a boolean flag that is nil until given.
type optionalBool struct{ p **bool }

func (b *optionalBool) String() string {
	if *b.p == nil {
		return "false"
	}
	return strconv.FormatBool(**b.p)
}

func (b *optionalBool) Type() string { return "bool" }

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.p = &v
	return nil
}

// IsBoolFlag lets the flag be given without a value, as a bool flag.
func (b *optionalBool) IsBoolFlag() bool { return true }
