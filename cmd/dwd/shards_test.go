package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

func TestShardsRejectsAnUnknownOutput(t *testing.T) {
	code, _, stderr := run(context.Background(), "shards", "-o", "yaml", "--shard-namespace=garden")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `-o "yaml": must be table or json`)
}

func TestShardsHelpDocumentsTheJSONFields(t *testing.T) {
	code, stdout, _ := run(context.Background(), "shards", "--help")
	require.Equal(t, 0, code)
	for _, want := range []string{"--shard-group", "--shard-namespace", "--kubeconfig", "-o, --output", "unheldPartitions[]", "partitionsHeld"} {
		assert.Contains(t, stdout, want)
	}
}

// shardsJSON runs `dwd shards -o json` and decodes its report.
func shardsJSON(t *testing.T, args ...string) sharding.Report {
	t.Helper()
	r, out, ok := tryShardsJSON(args...)
	require.True(t, ok, out)
	return r
}

// tryShardsJSON runs `dwd shards -o json` and decodes its report; ok is false, with what it printed,
// when it failed. For conditions polled in another goroutine, where require must not be called.
func tryShardsJSON(args ...string) (r sharding.Report, out string, ok bool) {
	code, stdout, stderr := run(context.Background(), append([]string{"shards", "-o", "json"}, args...)...)
	if code != 0 {
		return r, stderr, false
	}
	err := json.Unmarshal([]byte(stdout), &r)
	return r, stdout, err == nil
}

// createClusters creates n Cluster objects named after namespaces of ns and deletes them at the end.
func createClusters(t *testing.T, ns string, n int) {
	for i := range n {
		cluster := &unstructured.Unstructured{}
		cluster.SetGroupVersionKind(schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"})
		cluster.SetName(fmt.Sprintf("shoot--%s-%d", ns, i))
		cluster.Object["spec"] = map[string]any{"shoot": map[string]any{}, "seed": map[string]any{}, "cloudProfile": map[string]any{}}
		require.NoError(t, env.Client.Create(context.Background(), cluster))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cluster) })
	}
}

// clusterCount counts the Cluster objects of the whole API server (other tests may have some too).
func clusterCount(t *testing.T) int {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "ClusterList"})
	require.NoError(t, env.Client.List(context.Background(), list))
	return len(list.Items)
}

// kubeconfigThroughProxy writes a kubeconfig for the test API server that reaches it through a proxy
// the test can cut, to play a replica whose process stops without a word (a crash, a partition).
func kubeconfigThroughProxy(t *testing.T) (string, *test.Proxy) {
	_, proxy := test.ConfigThrough(t, env.Config)
	data, err := proxy.Kubeconfig(env.KubeConfig)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "kubeconfig-proxied")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path, proxy
}

// startShardsReplica starts member of group in ns with short member lease timings, so that a lost
// member expires within seconds; extra are further arguments.
func startShardsReplica(t *testing.T, ns, group, member string, extra ...string) *runningReplica {
	return startReplica(t, append([]string{"run", "--prober-config=testdata/prober.yaml", "--member-name=" + member,
		"--shard-namespace=" + ns, "--shard-group=" + group, "--leave-mode=return", "--return-grace=10m",
		"--member-lease-duration=5s", "--member-renew-deadline=3s", "--member-retry-period=1s"}, extra...)...)
}

// TestShardsOfThreeReplicas runs three replicas and checks what dwd shards reports: all partitions
// held; then, with one replica cut off from the API server (as a crash looks to the others), that
// member expired and its partitions unheld until the others take them over; then, with a second
// replica stopped to restart, its partitions reserved for it and unheld.
func TestShardsOfThreeReplicas(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	createClusters(t, ns, 12)
	group := "s-" + ns[len(ns)-5:]
	members := []string{"dwd-0", "dwd-1", "dwd-2"}
	proxied, proxy := kubeconfigThroughProxy(t)
	replicas := map[string]*runningReplica{
		"dwd-0": startShardsReplica(t, ns, group, "dwd-0"),
		"dwd-1": startShardsReplica(t, ns, group, "dwd-1"),
		"dwd-2": startShardsReplica(t, ns, group, "dwd-2", "--kubeconfig="+proxied),
	}
	args := []string{"--kubeconfig=" + env.KubeconfigFile(t), "--shard-namespace=" + ns, "--shard-group=" + group}
	var r sharding.Report
	require.Eventually(t, func() bool {
		var ok bool
		r, _, ok = tryShardsJSON(args...)
		return ok && len(r.Members) == 3 && len(r.Unheld) == 0 && r.Members[0].PartitionsHeld > 0 &&
			r.Members[1].PartitionsHeld > 0 && r.Members[2].PartitionsHeld > 0
	}, 30*time.Second, 200*time.Millisecond, "the three replicas share every partition")
	checkAllHeld(t, r, group, ns, members)
	checkOwnership(t, args, "shoot--"+ns+"-3", true)
	checkOwnership(t, args, "shoot--no-such-"+ns, false)

	proxy.Cut()
	require.Eventually(t, func() bool {
		var ok bool
		r, _, ok = tryShardsJSON(args...)
		return ok && len(r.Members) == 3 && r.Members[2].State == sharding.MemberExpired
	}, 20*time.Second, 100*time.Millisecond, "the cut-off member expires 5 s after its last renewal")
	assert.Equal(t, sharding.MemberLive, r.Members[0].State)
	assert.Equal(t, sharding.MemberLive, r.Members[1].State)
	assert.GreaterOrEqual(t, len(r.Unheld), r.Members[2].PartitionsHeld, "what the expired member still names is unheld")
	// Unheld: what the expired member names, and what the live ones are moving between them (released
	// to nobody for a moment).
	assert.Equal(t, config.DefaultPartitionCount, r.Members[0].PartitionsHeld+r.Members[1].PartitionsHeld+len(r.Unheld))
	if len(r.Unheld) > 0 {
		code, table, stderr := run(context.Background(), append([]string{"shards"}, args...)...)
		require.Equal(t, 0, code, stderr)
		t.Log("\n" + table)
		assert.Regexp(t, `dwd-2\s+expired\s+\d+s ago\s+5s\s+\d+`, table)
		assert.Contains(t, table, "Partitions without a live holder: ")
	}
	require.Eventually(t, func() bool {
		var ok bool
		r, _, ok = tryShardsJSON(args...)
		return ok && len(r.Unheld) == 0
	}, 20*time.Second, 200*time.Millisecond, "the live members take the expired member's partitions over")
	assert.Equal(t, sharding.MemberExpired, r.Members[2].State)
	assert.Zero(t, r.Members[2].PartitionsHeld)
	assert.Equal(t, config.DefaultPartitionCount, r.Members[0].PartitionsHeld+r.Members[1].PartitionsHeld)
	assert.Equal(t, r.Shoots, r.Members[0].Shoots+r.Members[1].Shoots)

	require.Equal(t, 0, replicas["dwd-1"].stop(t))
	r = shardsJSON(t, args...)
	checkReturning(t, r, args, replicas["dwd-1"].stderr)

	assert.Equal(t, 0, replicas["dwd-0"].stop(t))
	proxy.Heal() // so that the cut-off replica can stop (and leave) in time
	replicas["dwd-2"].stop(t)
}

// checkOwnership checks `dwd shards --shoot`, in JSON and as a table, while the three live members hold
// every partition: the shoot's partition, a live holder, and whether its Cluster exists.
func checkOwnership(t *testing.T, args []string, shoot string, cluster bool) {
	code, stdout, stderr := run(context.Background(), append([]string{"shards", "-o", "json", "--shoot=" + shoot}, args...)...)
	require.Equal(t, 0, code, stderr)
	var o sharding.ShootOwnership
	require.NoError(t, json.Unmarshal([]byte(stdout), &o), stdout)
	assert.Equal(t, shoot, o.Shoot)
	assert.Equal(t, cluster, o.Cluster)
	assert.Equal(t, (sharding.Partitions{Count: config.DefaultPartitionCount}).Of(shoot), o.Partition)
	assert.Equal(t, sharding.PartitionFNVRange, o.PartitionFunction)
	assert.Contains(t, []string{"dwd-0", "dwd-1", "dwd-2"}, o.Holder)
	assert.Equal(t, sharding.MemberLive, o.HolderState)
	assert.True(t, o.Owned)

	code, table, stderr := run(context.Background(), append([]string{"shards", "--shoot=" + shoot}, args...)...)
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `Holder\s+`+o.Holder+` live\n`, table)
	assert.Regexp(t, `Owned\s+yes`, table)
	if !cluster {
		assert.Regexp(t, `Cluster\s+missing`, table)
	}
}

// checkAllHeld checks a report of three live members that hold every partition.
func checkAllHeld(t *testing.T, r sharding.Report, group, ns string, members []string) {
	assert.Equal(t, group, r.Group)
	assert.Equal(t, ns, r.Namespace)
	assert.Equal(t, config.DefaultPartitionCount, r.Partitions)
	held, shoots := 0, 0
	for i, m := range r.Members {
		assert.Equal(t, members[i], m.Name)
		assert.Equal(t, sharding.MemberLive, m.State)
		assert.Equal(t, int64(5), m.LeaseDurationSeconds)
		require.NotNil(t, m.Settings)
		assert.Equal(t, []string{"prober"}, m.Settings.Roles)
		held += m.PartitionsHeld
		shoots += m.Shoots
	}
	assert.Equal(t, config.DefaultPartitionCount, held)
	assert.Equal(t, r.Shoots, shoots, "every shoot is in a held partition")
	assert.Equal(t, clusterCount(t), r.Shoots)
	assert.GreaterOrEqual(t, r.Shoots, 12)
	assert.Zero(t, r.ShootsUnheld)
	assert.Empty(t, r.Mismatches.Members)
	assert.Empty(t, r.Mismatches.PartitionLeases)
}

// checkReturning checks the report after dwd-1 stopped to restart, dwd-2 expired: dwd-1's partitions
// are reserved for it and unheld, dwd-0 holds the rest. It checks the table as well. stderr is what
// dwd-1 logged, shown when its lease does not say it is returning. dwd-2's lease may be gone by then:
// the others delete a member lease unchanged for leases.OrphanedAfter durations (10 s here) once no
// partition names it, which a slow machine reaches before dwd-1 has stopped.
func checkReturning(t *testing.T, r sharding.Report, args []string, stderr string) {
	require.GreaterOrEqual(t, len(r.Members), 2)
	require.Equal(t, []string{"dwd-0", "dwd-1"}, []string{r.Members[0].Name, r.Members[1].Name})
	returning := r.Members[1]
	if !assert.Equal(t, sharding.MemberReturning, returning.State) {
		t.Log("dwd-1's errors and last lines:\n" + errorLines(stderr, 20))
	}
	assert.Equal(t, int64(600), returning.ReturningSeconds)
	assert.Zero(t, returning.PartitionsHeld)
	assert.Positive(t, returning.PartitionsReserved)
	assert.LessOrEqual(t, returning.PartitionsReserved, len(r.Unheld), "its partitions wait for it, unheld")
	assert.Equal(t, config.DefaultPartitionCount, r.Members[0].PartitionsHeld+len(r.Unheld))
	assert.Equal(t, clusterCount(t), r.Shoots)
	assert.Equal(t, r.Shoots, r.Members[0].Shoots+r.ShootsUnheld)

	code, table, shardsErr := run(context.Background(), append([]string{"shards"}, args...)...)
	require.Equal(t, 0, code, shardsErr)
	t.Log("\n" + table)
	assert.Regexp(t, `dwd-0\s+live\s+\d+s ago\s+5s\s+\d+`, table)
	assert.Regexp(t, `dwd-1\s+returning\s+\d+s ago\s+5s \(returning 10m0s\)\s+0\s+[1-9]\d*\s`, table)
	if strings.Contains(table, "dwd-2") {
		assert.Regexp(t, `dwd-2\s+expired\s+\d+s ago\s+5s\s+0\s+0\s+0\s`, table)
	}
	assert.Regexp(t, `Partitions without a live holder: [1-9]\d* \(\d+, `, table)
	assert.Contains(t, table, "Members with other settings: none")
	assert.True(t, strings.HasPrefix(table, "Group "+r.Group+" in namespace "+r.Namespace), table)
}

func TestShardsExplainsAnEmptyGroup(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	kubeconfig := "--kubeconfig=" + env.KubeconfigFile(t)
	code, _, stderr := run(context.Background(), "shards", kubeconfig, "--shard-namespace=no-such-namespace-x")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `namespace "no-such-namespace-x" does not exist (--shard-namespace)`)

	code, _, stderr = run(context.Background(), "shards", kubeconfig, "--shard-namespace="+ns, "--shard-group=nobody")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `no Leases of group "nobody" in namespace "`+ns+`"`)
}

// errorLines returns the error lines of a replica's log and its last n lines.
func errorLines(log string, n int) string {
	lines := strings.Split(strings.TrimSpace(log), "\n")
	var out []string
	for _, l := range lines {
		if strings.Contains(l, `"level":"error"`) {
			out = append(out, l)
		}
	}
	return strings.Join(append(out, lines[max(0, len(lines)-n):]...), "\n")
}

// kubeconfigAs writes a kubeconfig for the test API server that impersonates user.
func kubeconfigAs(t *testing.T, user string) string {
	kc, err := clientcmd.Load(env.KubeConfig)
	require.NoError(t, err)
	for _, a := range kc.AuthInfos {
		a.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-"+user)
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

func TestShardsSaysWhichListIsForbidden(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	user := "shards-viewer-" + ns
	args := []string{"shards", "--kubeconfig=" + kubeconfigAs(t, user), "--shard-namespace=" + ns, "--shard-group=g"}

	code, stdout, stderr := run(context.Background(), args...)
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, `listing the Leases of group "g" in namespace "`+ns+`": forbidden; dwd shards needs list on leases.coordination.k8s.io in `+ns)

	env.UserWithRole(t, ns, user, []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list"}}})
	code, _, stderr = run(context.Background(), args...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `no Leases of group "g" in namespace "`+ns+`"`, "without get on namespaces it cannot say more")

	lease := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: leases.MemberLeaseName("g", "dwd-0"),
		Labels: map[string]string{leases.GroupLabel: "g", leases.KindLabel: leases.KindMember}}}
	require.NoError(t, env.Client.Create(context.Background(), &lease))
	code, _, stderr = run(context.Background(), args...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "listing the Clusters (extensions.gardener.cloud/v1alpha1): forbidden; dwd shards needs list on clusters.extensions.gardener.cloud")
}

// In the gardener overlay Gardener's resource manager sets spec.replicas from the high-availability
// annotation at every update: dwd shards warns about a StatefulSet whose two disagree (a kubectl scale
// that will be undone), and about none whose two agree.
func TestShardsWarnsWhenGardenerWillResetTheReplicas(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	lease := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: leases.MemberLeaseName("g", "dwd-0"),
		Labels: map[string]string{leases.GroupLabel: "g", leases.KindLabel: leases.KindMember}}}
	require.NoError(t, env.Client.Create(context.Background(), &lease))
	for name, replicas := range map[string]int32{"dwd-prober": 4, "dwd-weeder": 3} {
		sts := env.CreateStatefulSet(t, ns, name, replicas)
		sts.Labels = map[string]string{"app.kubernetes.io/name": "dwd"}
		sts.Annotations = map[string]string{HAReplicasAnnotation: "3"}
		require.NoError(t, env.Client.Update(context.Background(), sts))
	}
	args := []string{"--kubeconfig=" + env.KubeconfigFile(t), "--shard-namespace=" + ns, "--shard-group=g"}
	r := shardsJSON(t, args...)
	require.Len(t, r.Warnings, 1)
	assert.Contains(t, r.Warnings[0], `StatefulSet dwd-prober has spec.replicas 4 but `+HAReplicasAnnotation+`="3"`)
	code, stdout, _ := run(context.Background(), append([]string{"shards"}, args...)...)
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, "Warning: StatefulSet dwd-prober has spec.replicas 4")
}
