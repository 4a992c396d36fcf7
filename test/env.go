package test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// AssetsEnv names the variable that points at a folder holding kube-apiserver and etcd; when it is
// unset the control plane comes from bin/ at the root of the module.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// Environment is a running control plane with the test CRDs installed.
type Environment struct {
	env *envtest.Environment
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Client is a controller-runtime client on Config with the client-go scheme.
	Client client.Client
	// KubeConfig is a kubeconfig for Config, for tests that run a command.
	KubeConfig []byte
}

// ShardedListAndWatch is kube-apiserver's feature gate of shard selectors (Kubernetes 1.36, alpha):
// the test control plane runs with it on, as a seed that runs dwd with --cache-sharding=server would;
// StartOptions.WithoutShardSelectors turns it off.
const ShardedListAndWatch = "ShardedListAndWatch"

// StartOptions tune the control plane of StartWith.
type StartOptions struct {
	// WithoutShardSelectors runs kube-apiserver with the feature gate ShardedListAndWatch off, as
	// every seed before Kubernetes 1.36 and most after: shard selectors are ignored.
	WithoutShardSelectors bool
}

// Start starts kube-apiserver and etcd from AssetsDir, with shard selectors, and installs the test CRDs.
func Start() (*Environment, error) {
	return StartWith(StartOptions{})
}

// StartWith starts kube-apiserver and etcd from AssetsDir as opts say and installs the test CRDs.
func StartWith(opts StartOptions) (*Environment, error) {
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	crds, err := CRDs()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: dir, CRDs: crds, ErrorIfCRDPathMissing: true,
		ControlPlaneStartTimeout: controlPlaneStartTimeout}
	env.ControlPlane.GetAPIServer().Configure().Append("feature-gates", fmt.Sprintf("%s=%t", ShardedListAndWatch, !opts.WithoutShardSelectors))
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the control plane from %s: %w", dir, err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return &Environment{env: env, Config: cfg, Client: c, KubeConfig: env.KubeConfig}, nil
}

// Stop stops the control plane and removes its data.
func (e *Environment) Stop() error {
	return e.env.Stop()
}

// AssetsDir returns the folder holding the control-plane binaries and checks that they are there.
func AssetsDir() (string, error) {
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("control plane binary %s not found in %s (run `make tools`): %w", name, dir, err)
		}
	}
	return dir, nil
}

// moduleRoot walks up from the working directory to the folder holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Main runs a test package against control planes started before its tests and stopped after, one
// for each env given (a test of the prober needs a seed and a shoot), and returns the exit code for
// os.Exit. Under -short it starts nothing and the envs stay nil. It removes what BuildDwd built.
func Main(m *testing.M, envs ...**Environment) int {
	each := make([]EnvOf, len(envs))
	for i, e := range envs {
		each[i] = EnvOf{Env: e}
	}
	return MainWith(m, each...)
}

// EnvOf is a control plane of MainWith: where it goes and how it starts.
type EnvOf struct {
	Env     **Environment
	Options StartOptions
}

// MainWith is Main with the start options of each control plane.
func MainWith(m *testing.M, envs ...EnvOf) int {
	flag.Parse()
	defer RemoveBuilt()
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	if testing.Short() {
		return m.Run()
	}
	var started []*Environment
	defer func() {
		for _, e := range started {
			if err := e.Stop(); err != nil {
				fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
			}
		}
	}()
	for _, env := range envs {
		e, err := StartWith(env.Options)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		started = append(started, e)
		*env.Env = e
	}
	return m.Run()
}

// Require skips an integration test under -short and fails it when the control plane is missing.
func (e *Environment) Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the control plane, skipped under -short")
	}
	if e == nil {
		t.Fatal("no control plane: call test.Main from TestMain")
	}
}

// Namespace creates a namespace for one test and deletes it when the test ends.
func (e *Environment) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a test namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// KubeconfigFile writes KubeConfig to a file that lives as long as the test and returns its path.
func (e *Environment) KubeconfigFile(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, e.KubeConfig, 0o600); err != nil {
		t.Fatalf("writing the kubeconfig: %v", err)
	}
	return path
}
