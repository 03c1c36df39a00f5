package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// AssetsEnv is the environment variable naming the folder that holds the
// kube-apiserver and etcd binaries; `make test` sets it to bin/k8s.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// Env is a running control plane.
type Env struct {
	// Config reaches the API server as a cluster admin.
	Config *rest.Config
	// Client is a controller-runtime client on Config whose scheme knows the
	// client-go built-in types and apiextensions.k8s.io/v1.
	Client client.Client

	env *envtest.Environment

	// mu guards the kube-apiserver KillAPIServer killed and
	// RestartAPIServer restarted (crash.go).
	mu            sync.Mutex
	apiServerArgs []string
	restarted     *apiServerProcess
}

// Scheme returns a scheme with client-go's built-in types and
// apiextensions.k8s.io/v1, the types lockstep's tests read with a typed client.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
}

// AssetsDir returns the folder with kube-apiserver and etcd: $KUBEBUILDER_ASSETS
// when set, otherwise bin/k8s at the root of this module found by walking up
// from the working directory. It returns an error when neither holds both
// binaries, saying how to build them.
func AssetsDir() (string, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		if err := hasBinaries(dir); err != nil {
			return "", fmt.Errorf("%s=%s: %w (run `make testbin`)", AssetsEnv, dir, err)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "tools", "k8s")); err == nil {
				assets := filepath.Join(dir, "bin", "k8s")
				if err := hasBinaries(assets); err != nil {
					return "", fmt.Errorf("%s: %w (run `make testbin`)", assets, err)
				}
				return assets, nil
			}
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%s is unset and no bin/k8s was found above %s (run `make testbin`)", AssetsEnv, wd)
		}
	}
}

func hasBinaries(dir string) error {
	var errs []error
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			errs = append(errs, fmt.Errorf("missing %s", b))
		}
	}
	return errors.Join(errs...)
}

// Start starts etcd and kube-apiserver from AssetsDir and installs crds,
// waiting until each is served. Call Stop when done.
func Start(crds ...*apiextensionsv1.CustomResourceDefinition) (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	e := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDs:                     crds,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("cannot start the test control plane from %s: %w", assets, err)
	}
	// Tests send bursts of requests (hundreds of CRDs); the client-side
	// limiter would only slow them down.
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, env: e}, nil
}

// Stop stops the control plane (a kube-apiserver RestartAPIServer
// started first, then envtest's processes) and removes its data directory.
func (e *Env) Stop() error {
	e.stopRestarted()
	return e.env.Stop()
}

// InstallCRDs creates crds and waits until the API server serves them.
func (e *Env) InstallCRDs(crds ...*apiextensionsv1.CustomResourceDefinition) error {
	_, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{CRDs: crds})
	return err
}

// InstallCRDDir installs every CRD in the YAML files of dir (for example
// Crossplane's own CRDs under $LOCKSTEP_TESTDATA/crossplane-crds).
func (e *Env) InstallCRDDir(dir string) error {
	_, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{dir}, ErrorIfPathMissing: true})
	return err
}

var (
	shared     *Env
	sharedErr  error
	sharedOnce sync.Once
)

// Shared returns one control plane for the whole test binary, started on the
// first call. Tests that share it must use names of their own (a namespace per
// test, or generated names). It fails tb when the control plane cannot start;
// it skips tb only when the binaries are absent and neither CI nor
// KUBEBUILDER_ASSETS asks for them, so `go test ./...` on a machine without
// `make testbin` still runs the unit tests. Call Main from TestMain so the
// control plane stops when the tests end.
func Shared(tb testing.TB) *Env {
	tb.Helper()
	sharedOnce.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		if os.Getenv(AssetsEnv) == "" && os.Getenv("CI") == "" {
			if _, err := AssetsDir(); err != nil {
				tb.Skipf("no test control plane: %v", err)
			}
		}
		tb.Fatalf("test control plane: %v", sharedErr)
	}
	return shared
}

// Main runs the tests of a package that uses Shared and stops the shared
// control plane afterwards. Use it as `func TestMain(m *testing.M) { os.Exit(envtest.Main(m)) }`.
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the test control plane: %v\n", err)
		}
	}
	return code
}

// Context returns a context that ends with the test or after timeout,
// whichever comes first.
func Context(tb testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	tb.Cleanup(cancel)
	return ctx
}

// KubeConfig returns a kubeconfig for a new cluster-admin user of the
// control plane, for processes such as the lockstep CLI in the demo.
func (e *Env) KubeConfig(user string) ([]byte, error) {
	u, err := e.env.ControlPlane.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("cannot add a control-plane user: %w", err)
	}
	return u.KubeConfig()
}

// Dedicated starts a control plane of the test's own and stops it when the
// test ends: for tests whose cluster-scoped objects (CRDs, packages) would
// collide with other tests' on a Shared one. It skips and fails like Shared.
func Dedicated(tb testing.TB) *Env {
	tb.Helper()
	e, err := Start()
	if err != nil {
		if os.Getenv(AssetsEnv) == "" && os.Getenv("CI") == "" {
			if _, aerr := AssetsDir(); aerr != nil {
				tb.Skipf("no test control plane: %v", aerr)
			}
		}
		tb.Fatalf("test control plane: %v", err)
	}
	tb.Cleanup(func() {
		if err := e.Stop(); err != nil {
			tb.Logf("stopping the test control plane: %v", err)
		}
	})
	return e
}
