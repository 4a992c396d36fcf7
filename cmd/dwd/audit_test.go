package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/audit/auditcheck"
)

// auditTimings are the member lease timings of the audit test: short, so that a crash's takeover
// comes soon.
const (
	auditPartitions    = 32
	auditLeaseDuration = 6 * time.Second
	auditRenewDeadline = 4 * time.Second
)

// replicaProcess is `dwd run` in a process of its own (the test binary, see runMainEnv).
type replicaProcess struct {
	name   string
	audit  string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startReplicaProcess starts member name of group in ns, writing its audit file into dir.
func startReplicaProcess(t *testing.T, dir, ns, group, name string) *replicaProcess {
	r := &replicaProcess{name: name, audit: filepath.Join(dir, name+".audit"), exited: make(chan struct{})}
	out, err := os.Create(filepath.Join(dir, name+".log"))
	require.NoError(t, err)
	r.cmd = exec.Command(os.Args[0], "run", "--weeder-config=testdata/weeder.yaml", "--kubeconfig="+env.KubeconfigFile(t),
		"--shard-namespace="+ns, "--shard-group="+group, "--member-name="+name, "--leave-mode=handover",
		fmt.Sprintf("--partitions=%d", auditPartitions), "--member-lease-duration="+auditLeaseDuration.String(),
		"--member-renew-deadline="+auditRenewDeadline.String(), "--member-retry-period=1s",
		"--metrics-bind-addr=0", "--health-bind-addr="+freeLoopbackAddr(t), "--audit-log="+r.audit)
	r.cmd.Env = append(os.Environ(), runMainEnv+"=1")
	r.cmd.Stdout, r.cmd.Stderr = out, out
	require.NoError(t, r.cmd.Start())
	go func() { _ = r.cmd.Wait(); _ = out.Close(); close(r.exited) }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.exited
		if t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("log of %s:\n%s", name, log)
		}
	})
	return r
}

// signal sends sig and waits for the process to end.
func (r *replicaProcess) signal(t *testing.T, sig syscall.Signal) {
	require.NoError(t, r.cmd.Process.Signal(sig))
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not end after %s", r.name, sig)
	}
}

// holdAll waits until the members hold every partition between them, each some.
func holdAll(t *testing.T, ns, group string, members ...string) {
	t.Helper()
	require.Eventually(t, func() bool {
		total := 0
		for _, m := range members {
			n := heldPartitions(t, ns, group, m)
			if n == 0 {
				return false
			}
			total += n
		}
		return total == auditPartitions
	}, 60*time.Second, 100*time.Millisecond, "%v hold every partition", members)
}

// longestBetween is the longest gap that began in [from, to).
func longestBetween(r *auditcheck.Report, from, to time.Time) auditcheck.Unheld {
	var longest auditcheck.Unheld
	for _, g := range r.Gaps {
		if !g.From.Before(from) && g.From.Before(to) && g.Duration > longest.Duration {
			longest = g
		}
	}
	return longest
}

func TestAuditProvesOwnershipOfRealReplicas(t *testing.T) {
	env.Require(t)
	if testing.Short() {
		t.Skip("three dwd processes and a crash's takeover take half a minute")
	}
	ns := env.Namespace(t)
	group := "a-" + ns[len(ns)-5:]
	dir := t.TempDir()
	// dwd-2 starts first, so that it also releases partitions when the others join.
	names := []string{"dwd-2", "dwd-1", "dwd-0"}
	replicas := map[string]*replicaProcess{}
	for i, name := range names {
		replicas[name] = startReplicaProcess(t, dir, ns, group, name)
		holdAll(t, ns, group, names[:i+1]...)
	}

	killed := time.Now()
	replicas["dwd-2"].signal(t, syscall.SIGKILL)
	holdAll(t, ns, group, "dwd-1", "dwd-0")
	terminated := time.Now()
	replicas["dwd-1"].signal(t, syscall.SIGTERM)
	holdAll(t, ns, group, "dwd-0")
	replicas["dwd-0"].signal(t, syscall.SIGTERM)

	files := []string{replicas["dwd-0"].audit, replicas["dwd-1"].audit, replicas["dwd-2"].audit}
	report, err := auditcheck.CheckFiles(files...)
	require.NoError(t, err)
	t.Logf("audit report:\n%s", report)
	require.NoError(t, report.OK())
	assert.Equal(t, 3, report.Processes)
	for _, name := range names {
		records, err := audit.ReadFile(replicas[name].audit)
		require.NoError(t, err)
		for _, event := range []string{audit.EventStart, audit.EventRenew, audit.EventAcquire, audit.EventRelease} {
			assert.True(t, slices.ContainsFunc(records, func(r audit.Record) bool { return r.Event == event }), "%s recorded a %s", name, event)
		}
	}
	afterKill := longestBetween(report, killed, terminated)
	afterTerm := longestBetween(report, terminated, time.Now())
	t.Logf("longest unheld after the kill: %s (%s); after the SIGTERM: %s (%s)", afterKill.Duration, afterKill.Cause, afterTerm.Duration, afterTerm.Cause)
	assert.Equal(t, audit.CauseFenceExpired, afterKill.Cause, "the crashed member's partitions waited for its lease to expire")
	assert.LessOrEqual(t, afterKill.Duration, auditLeaseDuration+2*time.Second)
	assert.LessOrEqual(t, afterTerm.Duration, 2*time.Second)

	t.Run("a planted overlap is found", func(t *testing.T) {
		plantOverlap(t, files)
	})
}

// plantOverlap copies the files with one more acquire in dwd-0's: a partition dwd-1 took over from
// dwd-2 after the crash, taken by dwd-0 too a millisecond later; the check must fail.
func plantOverlap(t *testing.T, files []string) {
	dir := t.TempDir()
	var copies []string
	var taken audit.Record
	for _, f := range files {
		records, err := audit.ReadFile(f)
		require.NoError(t, err)
		for _, r := range records {
			if r.Member == "dwd-1" && r.Event == audit.EventAcquire && r.Cause == "expired-holder" && taken.Wall.IsZero() {
				taken = r
			}
		}
		copies = append(copies, filepath.Join(dir, filepath.Base(f)))
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(copies[len(copies)-1], data, 0o644))
	}
	require.False(t, taken.Wall.IsZero(), "dwd-1 took over a partition of the crashed dwd-2")
	records, err := audit.ReadFile(files[0])
	require.NoError(t, err)
	planted := records[0] // dwd-0's start: its identity
	planted.Event, planted.Partitions, planted.RenewDeadline, planted.LeaseDuration = audit.EventAcquire, 0, 0, 0
	planted.Wall, planted.Partition, planted.Cause = taken.Wall.Add(time.Millisecond), taken.Partition, "planted"
	line, err := planted.MarshalJSON()
	require.NoError(t, err)
	f, err := os.OpenFile(copies[0], os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(append(line, '\n'))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	report, err := auditcheck.CheckFiles(copies...)
	require.NoError(t, err)
	require.Error(t, report.OK())
	require.NotEmpty(t, report.Overlaps)
	assert.Equal(t, taken.Partition, report.Overlaps[0].Partition)
}
