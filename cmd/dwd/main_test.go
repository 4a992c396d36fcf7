package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"
	"github.com/sharded-dwd/dependency-watchdog/internal/logtest"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

var env *test.Environment

// runMainEnv, set in the environment of a process started from the test binary, makes it run dwd's
// main with its arguments instead of the tests: a real process the tests can kill.
const runMainEnv = "DWD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
	}
	os.Exit(test.Main(m, &env))
}

// gardenerProberArgs is the command line Gardener runs the original prober with.
var gardenerProberArgs = []string{"prober", "--config-file=/etc/dependency-watchdog/config/dep-config.yaml",
	"--kube-api-qps=20.0", "--kube-api-burst=100", "--zap-log-level=INFO", "--enable-leader-election=true"}

// run executes dwd with args and returns its exit code, standard output and standard error (where a
// running replica also logs).
func run(ctx context.Context, args ...string) (int, string, string) {
	var stdout, stderr logtest.Buffer
	root := newRootCommand()
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	code := execute(ctx, root, args)
	return code, stdout.String(), stderr.String()
}

// subcommand finds a command of the tree by its path below the root.
func subcommand(t *testing.T, path ...string) *cobra.Command {
	t.Helper()
	cmd, _, err := newRootCommand().Find(path)
	require.NoError(t, err)
	return cmd
}

func TestGardenerProberCommandLineParses(t *testing.T) {
	cmd := subcommand(t, "prober")
	require.NoError(t, cmd.ParseFlags(gardenerProberArgs[1:]))
	for name, want := range map[string]string{
		"config-file":            "/etc/dependency-watchdog/config/dep-config.yaml",
		"kube-api-qps":           "20",
		"kube-api-burst":         "100",
		"zap-log-level":          "INFO",
		"enable-leader-election": "true",
	} {
		assert.Equal(t, want, cmd.Flags().Lookup(name).Value.String(), name)
	}
}

func TestRoleCommandsTakeEveryUpstreamFlag(t *testing.T) {
	// Flag → default, as the original has them; pprof is off unless its address is given.
	upstream := map[string]string{
		"config-file": "", "concurrent-reconciles": "1", "kube-api-qps": "5", "kube-api-burst": "10",
		"metrics-bind-addr": ":9643", "health-bind-addr": ":9644", "pprof-bind-addr": "",
		"enable-leader-election": "false", "leader-election-namespace": "garden",
		"leader-elect-lease-duration": "15s", "leader-elect-renew-deadline": "10s",
		"leader-elect-retry-period": "2s", "kubeconfig": "",
	}
	zapFlags := []string{"zap-devel", "zap-encoder", "zap-log-level", "zap-stacktrace-level", "zap-time-encoding"}
	for _, r := range []string{"prober", "weeder"} {
		t.Run(r, func(t *testing.T) {
			fs := subcommand(t, r).Flags()
			for name, def := range upstream {
				f := fs.Lookup(name)
				if assert.NotNil(t, f, name) {
					assert.Equal(t, def, f.DefValue, name)
				}
			}
			for _, name := range zapFlags {
				assert.NotNil(t, fs.Lookup(name), name)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  []string
	}{
		{"both valid", []string{"--prober-config=testdata/prober.yaml", "--weeder-config=testdata/weeder.yaml"}, 0, []string{"valid"}},
		{"prober only", []string{"--prober-config=testdata/prober.yaml"}, 0, []string{"valid"}},
		{"every mistake listed", []string{"--prober-config=testdata/prober-invalid.yaml", "--weeder-config=testdata/weeder.yaml"}, 1, []string{
			"testdata/prober-invalid.yaml: probeIntervall",
			"testdata/prober-invalid.yaml: kubeConfigSecretName",
			"testdata/prober-invalid.yaml: nodeLeaseFailureFraction",
			"testdata/prober-invalid.yaml: dependentResourceInfos[0].ref.apiVersion",
			"testdata/prober-invalid.yaml: dependentResourceInfos[0].scaleDown",
		}},
		{"unreadable file", []string{"--weeder-config=" + missing}, 1, []string{missing + ": ", "no such file"}},
		{"unknown keys are errors", []string{"--prober-config=testdata/prober-unknown-key.yaml", "--weeder-config=testdata/weeder-unknown-key.yaml"}, 1,
			[]string{
				"testdata/prober-unknown-key.yaml: internalKubeConfigSecretName",
				"testdata/prober-unknown-key.yaml: dependentResourceInfos[2].scaleUp.maxAttempts",
				"testdata/weeder-unknown-key.yaml: watchTimeout",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, _ := run(context.Background(), append([]string{"config", "validate"}, tt.args...)...)
			assert.Equal(t, tt.wantCode, code)
			for _, want := range tt.wantOut {
				assert.Contains(t, stdout, want)
			}
			if tt.wantCode == 0 {
				assert.Equal(t, "valid\n", stdout)
			} else {
				assert.NotContains(t, stdout, "valid\n")
			}
		})
	}
	t.Run("no file", func(t *testing.T) {
		code, _, stderr := run(context.Background(), "config", "validate")
		assert.Equal(t, 1, code)
		assert.Contains(t, stderr, "--prober-config")
	})
}

func TestInvalidFlagsAreReportedAtOnce(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: not-a-secret}}]
current-context: c
`), 0o600))
	code, stdout, stderr := run(context.Background(), "run", "--kubeconfig="+kubeconfig,
		"--prober-config=testdata/prober-invalid.yaml", "--partitions=0", "--member-name=dwd-0",
		"--member-renew-deadline=20s", "--kube-api-qps=-1", "--shard-namespace=Not_A_Namespace")
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	for _, want := range []string{"--partitions", "--member-renew-deadline", "--kube-api-qps", "--shard-namespace",
		"testdata/prober-invalid.yaml: nodeLeaseFailureFraction"} {
		assert.Contains(t, stderr, want)
	}
	assert.NotContains(t, stderr, "not-a-secret", "secret material must never be printed")
}

func TestRunNeedsARole(t *testing.T) {
	code, _, stderr := run(context.Background(), "run", "--member-name=dwd-0", "--shard-namespace=garden")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "give --prober-config, --weeder-config or both")

	code, _, stderr = run(context.Background(), "weeder")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--config-file is required")
}

func TestHelpReadsWell(t *testing.T) {
	for _, path := range [][]string{{}, {"run"}, {"prober"}, {"weeder"}, {"config"}, {"config", "validate"}, {"version"}, {"shards"}} {
		t.Run(strings.Join(append([]string{"dwd"}, path...), " "), func(t *testing.T) {
			code, stdout, stderr := run(context.Background(), append(path, "--help")...)
			assert.Equal(t, 0, code)
			assert.Empty(t, stderr)
			assert.Contains(t, stdout, "Usage:")
			assert.NotContains(t, stdout, "config-path", "the original's help named a flag that does not exist")
		})
	}
	_, stdout, _ := run(context.Background(), "prober", "--help")
	for _, want := range []string{"--config-file", "--enable-leader-election", "--kube-api-qps", "--zap-log-level", "--shard-group", "--member-name"} {
		assert.Contains(t, stdout, want)
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := run(context.Background(), "version")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `^dwd \S+ \(commit \S+, go1\.\d+`, stdout)
}

func TestGardenerProberCommandLineRuns(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	r := startReplica(t, append(append([]string{}, gardenerProberArgs...),
		"--config-file=testdata/prober.yaml", "--leader-election-namespace="+ns, "--member-name=dwd-prober-0", "--shard-namespace="+ns)...)

	lease := &coordinationv1.Lease{}
	require.Eventually(t, func() bool {
		err := env.Client.Get(r.ctx, client.ObjectKey{Namespace: ns, Name: "dwd-prober-leader-election"}, lease)
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != ""
	}, 30*time.Second, 100*time.Millisecond, "the prober takes the original's leader lease")
	require.Eventually(t, func() bool {
		return heldPartitions(t, ns, "dwd-prober", "dwd-prober-0") == config.DefaultPartitionCount
	},
		30*time.Second, 100*time.Millisecond, "the leader, alone in its group, holds every partition")
	assert.True(t, httpOK("http://"+r.healthAddr+"/healthz"))
	assert.True(t, httpOK("http://"+r.healthAddr+"/readyz"))
	assert.Equal(t, 0, r.stop(t), "a signal ends the replica cleanly")
}

func TestRunJoinsAndLeavesItsGroup(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	cluster := &unstructured.Unstructured{}
	cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"})
	cluster.SetName("shoot--" + ns)
	cluster.Object["spec"] = map[string]any{"shoot": map[string]any{}, "seed": map[string]any{}, "cloudProfile": map[string]any{}}
	require.NoError(t, env.Client.Create(context.Background(), cluster))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cluster) })

	// A replica of both roles is a member of each role's group.
	r := startReplica(t, "run", "--prober-config=testdata/prober.yaml", "--weeder-config=testdata/weeder.yaml",
		"--member-name=dwd-0", "--shard-namespace="+ns)
	require.Eventually(t, func() bool { return httpOK("http://" + r.healthAddr + "/readyz") },
		30*time.Second, 100*time.Millisecond, "ready once the member leases are held")
	for _, group := range []string{"dwd-prober", "dwd-weeder"} {
		require.Eventually(t, func() bool { return heldPartitions(t, ns, group, "dwd-0") == config.DefaultPartitionCount },
			30*time.Second, 100*time.Millisecond, group)
	}
	owned := `dwd_sharding_shoots_owned{group="dwd-prober",member="dwd-0"} `
	require.Eventually(t, func() bool {
		n, ok := metricValue(r.metricsAddr, owned)
		return ok && n >= 1
	}, 30*time.Second, 100*time.Millisecond, "the replica counts the shoots it owns from the Clusters")
	for _, name := range []string{"process_cpu_seconds_total ", "process_resident_memory_bytes ", "go_goroutines ", "go_gc_gomemlimit_bytes "} {
		_, ok := metricValue(r.metricsAddr, name)
		assert.True(t, ok, "the dashboards read %s", name)
	}

	require.Equal(t, 0, r.stop(t))
	assert.Regexp(t, `Go memory limit set from the cgroup's|Go memory limit from GOMEMLIMIT|runs without a memory limit`, r.stderr,
		"the replica says which memory limit the Go runtime keeps (internal/memlimit)")
	for _, group := range []string{"dwd-prober", "dwd-weeder"} {
		member := &coordinationv1.Lease{}
		require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: group + "-member-dwd-0"}, member))
		assert.Nil(t, member.Spec.HolderIdentity, "a graceful stop releases the member lease of %s, so the others take over at once", group)
	}
}

// runningReplica is `dwd` running in the test process against the test API server.
type runningReplica struct {
	ctx         context.Context
	cancel      context.CancelFunc
	healthAddr  string
	metricsAddr string
	done        chan int
	stderr      string // set before done is sent
}

// startReplica runs dwd with args, the test API server's kubeconfig unless args give one, and loopback
// server addresses.
func startReplica(t *testing.T, args ...string) *runningReplica {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningReplica{ctx: ctx, cancel: cancel, healthAddr: freeLoopbackAddr(t), metricsAddr: freeLoopbackAddr(t), done: make(chan int, 1)}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--kubeconfig=") }) {
		args = append(args, "--kubeconfig="+env.KubeconfigFile(t))
	}
	args = append(args, "--metrics-bind-addr="+r.metricsAddr, "--health-bind-addr="+r.healthAddr)
	go func() {
		code, _, stderr := run(ctx, args...)
		if code != 0 {
			t.Log(stderr)
		}
		r.stderr = stderr
		r.done <- code
	}()
	t.Cleanup(cancel)
	require.Eventually(t, func() bool { return httpOK("http://" + r.healthAddr + "/healthz") }, 30*time.Second, 100*time.Millisecond)
	return r
}

// stop cancels the replica's context, as a signal does, and returns its exit code.
func (r *runningReplica) stop(t *testing.T) int {
	r.cancel()
	select {
	case code := <-r.done:
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("the replica did not stop after its context ended")
		return -1
	}
}

// heldPartitions counts the partition leases of group in ns that name member.
func heldPartitions(t *testing.T, ns, group, member string) int {
	list := &coordinationv1.LeaseList{}
	require.NoError(t, env.Client.List(context.Background(), list, client.InNamespace(ns),
		client.MatchingLabels{leases.GroupLabel: group, leases.KindLabel: leases.KindPartition}))
	held := 0
	for _, l := range list.Items {
		if leases.Holder(&l) == member {
			held++
		}
	}
	return held
}

// freeLoopbackAddr returns a loopback address with a port that was free a moment ago, outside the
// range outgoing connections draw from (dwdproc.FreePort).
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	addr, err := dwdproc.FreePort()
	require.NoError(t, err)
	return addr
}

// metricValue reads the sample whose line starts with prefix from a metrics endpoint.
func metricValue(addr, prefix string) (float64, bool) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(body), "\n") {
		if value, ok := strings.CutPrefix(line, prefix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return v, err == nil
		}
	}
	return 0, false
}

func httpOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestBrokenSeedKubeconfigIsNotQuoted: a seed kubeconfig the decoder fails on is reported without its
// credentials, which the decoder's own message would quote.
func TestBrokenSeedKubeconfigIsNotQuoted(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
users:
- name: u
  user:
    token: !!int sEcReTtOkEnVaLuE0123456789
`), 0o600))
	code, _, stderr := run(context.Background(), "run", "--kubeconfig="+kubeconfig, "--prober-config=testdata/prober.yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--kubeconfig")
	assert.Contains(t, stderr, "the details are withheld")
	assert.NotContains(t, stderr, "sEcReTtOkEn")

	t.Setenv("KUBECONFIG", kubeconfig)
	code, _, stderr = run(context.Background(), "run", "--prober-config=testdata/prober.yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "finding the seed's kubeconfig (the details are withheld", "found through $KUBECONFIG")
	assert.NotContains(t, stderr, "sEcReTtOkEn")
}
