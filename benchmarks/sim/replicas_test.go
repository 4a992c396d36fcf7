package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sharded-dwd/dependency-watchdog/test"
)

func TestWithKubeconfig(t *testing.T) {
	args := []string{"--kubeconfig=/seed", "--probe-workers=1"}
	assert.Equal(t, []string{"--probe-workers=1", "--kubeconfig=/via-dwd-1"}, withKubeconfig(args, "/via-dwd-1"))
	assert.Equal(t, []string{"--kubeconfig=/seed", "--probe-workers=1"}, args, "the common flags stay")
}

// fakeDwd writes a shell script that stands for dwd: it prints its arguments, one line, and waits
// for a signal.
func fakeDwd(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "dwd")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\necho \"$@\"\nexec sleep 60\n"), 0o755))
	return path
}

// commandLines returns the command lines the replica's processes printed to its log so far, once
// there are n.
func commandLines(t *testing.T, r *Replica, n int) []string {
	var lines []string
	require.Eventually(t, func() bool {
		out, _ := os.ReadFile(r.Log)
		lines = strings.FieldsFunc(string(out), func(r rune) bool { return r == '\n' })
		return len(lines) >= n
	}, 10*time.Second, 10*time.Millisecond)
	return lines
}

func TestReplicaRestarts(t *testing.T) {
	rs := &ReplicaSet{Dwd: fakeDwd(t), Dir: t.TempDir(), Args: []string{"--a"}, Audit: true}
	r, err := rs.Start("dwd-0")
	require.NoError(t, err)
	defer r.Kill()
	first := commandLines(t, r, 1)[0]
	ports := strings.TrimPrefix(first, "run --a --member-name=dwd-0 ")
	assert.Contains(t, ports, "--metrics-bind-addr="+r.MetricsAddr())
	assert.True(t, strings.HasSuffix(ports, "--audit-log="+filepath.Join(rs.Dir, "dwd-0.0.audit")), first)

	assert.True(t, r.Terminate(10*time.Second))
	require.NoError(t, r.RestartWith([]string{"--b"}))
	commandLines(t, r, 2)
	r.Kill()
	require.NoError(t, r.Restart())
	lines := commandLines(t, r, 3)
	assert.Equal(t, strings.Replace(strings.Replace(first, "--a", "--b", 1), "dwd-0.0.audit", "dwd-0.1.audit", 1), lines[1],
		"the same name and ports, other flags, a new audit log")
	assert.Equal(t, strings.Replace(lines[1], "dwd-0.1.audit", "dwd-0.2.audit", 1), lines[2], "the new flags stay")

	second, err := rs.StartAs("dwd-0", "dwd-0-second")
	require.NoError(t, err)
	defer second.Kill()
	assert.Equal(t, filepath.Join(rs.Dir, "dwd-0-second.log"), second.Log)
	assert.Contains(t, commandLines(t, second, 1)[0], "--member-name=dwd-0 ")
	assert.Equal(t, []string{"dwd-0.0.audit", "dwd-0.1.audit", "dwd-0.2.audit", "dwd-0-second.0.audit"}, baseNames(rs.AuditLogs()))
}

func baseNames(paths []string) []string {
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	return names
}

func TestReplicaPause(t *testing.T) {
	rs := &ReplicaSet{Dwd: fakeDwd(t), Dir: t.TempDir(), Command: "prober"}
	r, err := rs.Start("dwd-0")
	require.NoError(t, err)
	assert.NotContains(t, commandLines(t, r, 1)[0], "--member-name", "the original's command lines have no member name")
	assert.False(t, r.Paused())
	r.Pause()
	assert.True(t, r.Paused())
	assert.True(t, r.Running(), "a paused process runs")
	r.Resume()
	assert.False(t, r.Paused())
	r.Pause()
	assert.True(t, r.Terminate(10*time.Second), "a paused process is resumed to stop")
	assert.False(t, r.Running())
	assert.False(t, r.Paused())
	assert.NotNil(t, r.State())
	assert.Error(t, r.Cut(), "no proxy")
}

func TestReplicaThroughProxy(t *testing.T) {
	kubeconfig := []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: seed\n  cluster: {server: \"https://127.0.0.1:6443\"}\n")
	seed := &Seed{Env: &test.Environment{Config: &rest.Config{Host: "https://127.0.0.1:6443"}, KubeConfig: kubeconfig}}
	rs := &ReplicaSet{Dwd: fakeDwd(t), Dir: t.TempDir(), Args: []string{"--kubeconfig=/seed", "--a"}, ProxyTo: seed}
	defer rs.Close()
	r, err := rs.StartAs("dwd-0", "dwd-0-second")
	require.NoError(t, err)
	defer r.Kill()
	path := filepath.Join(rs.Dir, "seed-via-proxy-dwd-0-second.kubeconfig")
	assert.Contains(t, commandLines(t, r, 1)[0], "run --a --kubeconfig="+path+" --member-name=dwd-0 ")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	cfg, err := clientcmd.Load(data)
	require.NoError(t, err)
	assert.Equal(t, "https://"+r.proxy.Addr(), cfg.Clusters["seed"].Server)
	require.NoError(t, r.Cut())
	r.Heal()
}
