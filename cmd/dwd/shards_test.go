package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
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
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

// The unit tests' group has 4 partitions, so that a case lists every partition lease.
const shardsTestPartitions = 4

var (
	shardsNow      = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	shardsSettings = sharding.Settings(sharding.RingConfig{PartitionCount: shardsTestPartitions, ReplicationFactor: 400, LoadBound: 1.02},
		[]string{"prober", "weeder"})
	otherSettings = sharding.Settings(sharding.RingConfig{PartitionCount: 8, ReplicationFactor: 400, LoadBound: 1.02},
		[]string{"prober", "weeder"})
)

// memberLease is the member lease of name in group "g", renewed ago before shardsNow with a 15 s
// duration and shardsSettings, changed by opts.
func memberLease(name string, ago time.Duration, opts ...func(*coordinationv1.Lease)) coordinationv1.Lease {
	l := coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: leases.MemberLeaseName("g", name),
			Labels:      map[string]string{leases.GroupLabel: "g", leases.KindLabel: leases.KindMember},
			Annotations: map[string]string{leases.IncarnationAnnotation: "inc-" + name, leases.SettingsAnnotation: shardsSettings}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(shardsNow.Add(-ago)))},
	}
	for _, opt := range opts {
		opt(&l)
	}
	return l
}

// leftLease marks a member lease as a clean leave; with returning > 0 the member restarts.
func leftLease(returning time.Duration) func(*coordinationv1.Lease) {
	return func(l *coordinationv1.Lease) {
		l.Annotations[leases.LeftAnnotation] = leases.Incarnation(l)
		if returning > 0 {
			l.Annotations[leases.ReturningAnnotation] = returning.String()
		} else {
			l.Spec.HolderIdentity = nil
		}
	}
}

func withSettings(s string) func(*coordinationv1.Lease) {
	return func(l *coordinationv1.Lease) { l.Annotations[leases.SettingsAnnotation] = s }
}

// partitionLease is the lease of partition p in group "g", held by holder ("" for none), labelled
// with count partitions.
func partitionLease(p int, holder string, count int) coordinationv1.Lease {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leases.PartitionLeaseName("g", p),
		Labels: map[string]string{leases.GroupLabel: "g", leases.KindLabel: leases.KindPartition, leases.PartitionsLabel: strconv.Itoa(count)}}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

// reservedLease is a released partition lease reserved for member.
func reservedLease(p int, member string) coordinationv1.Lease {
	l := partitionLease(p, "", shardsTestPartitions)
	l.Annotations = map[string]string{leases.ReservedForAnnotation: member}
	return l
}

// clusterIn returns a Cluster name in partition p of shardsTestPartitions, different for each i.
func clusterIn(p, i int) string {
	for n := 0; ; n++ {
		name := fmt.Sprintf("shoot--p%d-%d-%d", p, i, n)
		if sharding.PartitionOf(name, shardsTestPartitions) == p {
			return name
		}
	}
}

// oneClusterPerPartition has one Cluster in each of the 4 partitions.
var oneClusterPerPartition = []string{clusterIn(0, 0), clusterIn(1, 0), clusterIn(2, 0), clusterIn(3, 0)}

// memberSummary is the part of a memberReport the table tests compare.
type memberSummary struct {
	name                     string
	state                    string
	held, reserved, shoots   int
	settingsPartitionsOrZero int
}

func summarize(members []memberReport) []memberSummary {
	var out []memberSummary
	for _, m := range members {
		s := memberSummary{name: m.Name, state: m.State, held: m.PartitionsHeld, reserved: m.PartitionsReserved, shoots: m.Shoots}
		if m.Settings != nil {
			s.settingsPartitionsOrZero = m.Settings.Partitions
		}
		out = append(out, s)
	}
	return out
}

func TestShardsReport(t *testing.T) {
	ab := func(bLease coordinationv1.Lease, parts ...coordinationv1.Lease) []coordinationv1.Lease {
		return append([]coordinationv1.Lease{memberLease("a", time.Second), bLease}, parts...)
	}
	split := []coordinationv1.Lease{partitionLease(0, "a", 4), partitionLease(1, "a", 4), partitionLease(2, "b", 4), partitionLease(3, "b", 4)}
	tests := []struct {
		name             string
		leases           []coordinationv1.Lease
		clusters         []string
		wantMembers      []memberSummary
		wantUnheld       []int
		wantShootsUnheld int
		wantPartitions   int
		wantMismatched   []string
		wantBadLeases    []string
	}{
		{
			name: "all live", leases: ab(memberLease("b", 2*time.Second), split...), clusters: oneClusterPerPartition,
			wantMembers: []memberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "live", 2, 0, 2, 4}}, wantUnheld: []int{},
		},
		{
			name: "expired member", leases: ab(memberLease("b", 16*time.Second), split...), clusters: oneClusterPerPartition,
			wantMembers: []memberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "expired", 2, 0, 2, 4}},
			wantUnheld:  []int{2, 3}, wantShootsUnheld: 2,
		},
		{
			name: "renewed just within its duration", leases: ab(memberLease("b", 14*time.Second), split...),
			wantMembers: []memberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "live", 2, 0, 0, 4}}, wantUnheld: []int{},
		},
		{
			name: "member lease cleared by someone else", leases: ab(memberLease("b", time.Second, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil }), split...),
			wantMembers: []memberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "expired", 2, 0, 0, 4}}, wantUnheld: []int{2, 3},
		},
		{
			name: "left for good, partitions released", clusters: oneClusterPerPartition,
			leases:      ab(memberLease("b", time.Second, leftLease(0)), split[0], split[1], partitionLease(2, "", 4), partitionLease(3, "", 4)),
			wantMembers: []memberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "left", 0, 0, 0, 4}},
			wantUnheld:  []int{2, 3}, wantShootsUnheld: 2,
		},
		{
			name: "returning within its grace", clusters: oneClusterPerPartition,
			leases:      ab(memberLease("b", 20*time.Second, leftLease(30*time.Second)), split[0], split[1], reservedLease(2, "b"), reservedLease(3, "b")),
			wantMembers: []memberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "returning", 0, 2, 0, 4}},
			wantUnheld:  []int{2, 3}, wantShootsUnheld: 2,
		},
		{
			name:        "returning past its grace",
			leases:      ab(memberLease("b", 31*time.Second, leftLease(30*time.Second)), split[0], split[1], reservedLease(2, "b"), reservedLease(3, "b")),
			wantMembers: []memberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "left", 0, 2, 0, 4}}, wantUnheld: []int{2, 3},
		},
		{
			name: "a left marker of an earlier incarnation is no leave",
			leases: ab(memberLease("b", time.Second, leftLease(0), func(l *coordinationv1.Lease) {
				l.Spec.HolderIdentity = ptr.To("b")
				l.Annotations[leases.IncarnationAnnotation] = "inc-b-2"
			}), split...),
			wantMembers: []memberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "live", 2, 0, 0, 4}}, wantUnheld: []int{},
		},
		{
			name: "missing partition lease", leases: ab(memberLease("b", time.Second), split[:3]...), clusters: oneClusterPerPartition,
			wantMembers: []memberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "live", 1, 0, 1, 4}},
			wantUnheld:  []int{3}, wantShootsUnheld: 1,
		},
		{
			name: "holder without a member lease", leases: ab(memberLease("b", time.Second), split[0], split[1], split[2], partitionLease(3, "ghost", 4)),
			clusters:    oneClusterPerPartition,
			wantMembers: []memberSummary{{"a", "live", 2, 0, 2, 4}, {"b", "live", 1, 0, 1, 4}, {"ghost", "no-lease", 1, 0, 1, 0}},
			wantUnheld:  []int{3}, wantShootsUnheld: 1,
		},
		{
			name:        "a member with other settings",
			leases:      append(ab(memberLease("b", time.Second), split...), memberLease("c", time.Second, withSettings(otherSettings))),
			wantMembers: []memberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "live", 2, 0, 0, 4}, {"c", "live", 0, 0, 0, 8}},
			wantUnheld:  []int{}, wantMismatched: []string{"c"},
		},
		{
			name: "the majority of live members decides", leases: []coordinationv1.Lease{
				memberLease("a", time.Second, withSettings(otherSettings)),
				memberLease("b", 20*time.Second), memberLease("c", 20*time.Second),
				partitionLease(0, "a", 8), partitionLease(1, "b", 4),
			},
			wantMembers: []memberSummary{{"a", "live", 1, 0, 0, 8}, {"b", "expired", 0, 0, 0, 4}, {"c", "expired", 0, 0, 0, 4}},
			wantUnheld:  []int{1, 2, 3, 4, 5, 6, 7}, wantPartitions: 8, wantMismatched: []string{"b", "c"}, wantBadLeases: []string{"g-partition-1"},
		},
		{
			name: "no live member: the majority of all", leases: []coordinationv1.Lease{
				memberLease("a", 20*time.Second, withSettings(otherSettings)),
				memberLease("b", 20*time.Second), memberLease("c", 20*time.Second),
			},
			wantMembers: []memberSummary{{"a", "expired", 0, 0, 0, 8}, {"b", "expired", 0, 0, 0, 4}, {"c", "expired", 0, 0, 0, 4}},
			wantUnheld:  []int{0, 1, 2, 3}, wantMismatched: []string{"a"},
		},
		{
			name:        "partition lease of another count",
			leases:      ab(memberLease("b", time.Second), split[0], split[1], split[2], partitionLease(3, "b", 8), partitionLease(7, "b", 8)),
			wantMembers: []memberSummary{{"a", "live", 2, 0, 0, 4}, {"b", "live", 1, 0, 0, 4}},
			wantUnheld:  []int{3}, wantBadLeases: []string{"g-partition-3", "g-partition-7"},
		},
		{
			name: "no settings advertised: the default count", leases: []coordinationv1.Lease{memberLease("a", time.Second, withSettings(""))},
			wantMembers: []memberSummary{{"a", "live", 0, 0, 0, 0}}, wantPartitions: config.DefaultPartitionCount,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := buildShardsReport("g", tt.leases, tt.clusters, shardsNow)
			assert.Equal(t, tt.wantMembers, summarize(r.Members))
			if tt.wantUnheld != nil {
				assert.Equal(t, tt.wantUnheld, r.Unheld)
			}
			assert.Equal(t, len(tt.clusters), r.Shoots)
			assert.Equal(t, tt.wantShootsUnheld, r.ShootsUnheld)
			if tt.wantPartitions == 0 {
				tt.wantPartitions = shardsTestPartitions
			}
			assert.Equal(t, tt.wantPartitions, r.Partitions)
			assert.Equal(t, append([]string{}, tt.wantMismatched...), r.Mismatches.Members)
			var bad []string
			for _, l := range r.Mismatches.PartitionLeases {
				bad = append(bad, l.Name)
			}
			assert.Equal(t, tt.wantBadLeases, bad)
		})
	}
}

func TestShardsReportOfNoMembersIsEmptyNotNull(t *testing.T) {
	r := buildShardsReport("g", []coordinationv1.Lease{partitionLease(0, "", 4)}, nil, shardsNow)
	raw, err := json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"members":[]`)
	assert.Contains(t, string(raw), `"mismatches":{"members":[],"partitionLeases":[]}`)
	assert.Equal(t, []int{0, 1, 2, 3}, r.Unheld, "no settings advertised: the count the partition leases are labelled with")
}

func TestShardsReportParsesSettings(t *testing.T) {
	s := parseSettings(shardsSettings)
	assert.Equal(t, &advertisedSettings{Raw: shardsSettings, Partitions: 4, ReplicationFactor: 400, LoadBound: 1.02,
		PartitionFunction: sharding.PartitionFunction, Roles: []string{"prober", "weeder"}}, s)
	assert.Nil(t, parseSettings(""))
	assert.Equal(t, &advertisedSettings{Raw: "future=1,roles=", Roles: []string{}}, parseSettings("future=1,roles="),
		"unknown keys are kept in raw only")
}

func TestShardsOutputFormats(t *testing.T) {
	list := []coordinationv1.Lease{memberLease("a", time.Second), memberLease("b", 20*time.Second, leftLease(30*time.Second)),
		memberLease("c", 2*time.Second, withSettings(otherSettings)),
		partitionLease(0, "a", 4), partitionLease(1, "a", 4), reservedLease(2, "b"), partitionLease(3, "", 4), partitionLease(5, "c", 8)}
	r := buildShardsReport("g", list, oneClusterPerPartition, shardsNow)
	r.Namespace = "garden"

	var table bytes.Buffer
	require.NoError(t, printShards(&table, r))
	for _, want := range []string{
		"Group g in namespace garden, 4 partitions",
		"MEMBER  STATE",
		"a       live       1s ago   15s                  2           0         2       P=4 RF=400 LB=1.02 fn=xxhash64-mod-v1 roles=prober+weeder",
		"b       returning  20s ago  15s (returning 30s)  0           1         0",
		"c       live       2s ago   15s                  0           0         0       P=8 RF=400",
		"Shoots: 4, 2 of them in partitions without a live holder",
		"Partitions without a live holder: 2 (2, 3)",
		"Members with other settings: c",
		`Partition leases of another partition count: g-partition-5 (partitions="8", holder "c")`,
	} {
		assert.Contains(t, table.String(), want)
	}

	var decoded map[string]any
	raw, err := json.Marshal(r)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &decoded))
	for _, key := range []string{"group", "namespace", "time", "partitions", "settings", "members", "shoots", "shootsUnheld", "unheldPartitions", "mismatches"} {
		assert.Contains(t, decoded, key, "the JSON field names are documented in the help")
	}
	member := decoded["members"].([]any)[1].(map[string]any)
	for _, key := range []string{"name", "state", "renewTime", "leaseDurationSeconds", "returningSeconds", "settings", "partitionsHeld", "partitionsReserved", "shoots"} {
		assert.Contains(t, member, key)
	}
	assert.Equal(t, "returning", member["state"])
}

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
func shardsJSON(t *testing.T, args ...string) shardsReport {
	t.Helper()
	r, out, ok := tryShardsJSON(args...)
	require.True(t, ok, out)
	return r
}

// tryShardsJSON runs `dwd shards -o json` and decodes its report; ok is false, with what it printed,
// when it failed. For conditions polled in another goroutine, where require must not be called.
func tryShardsJSON(args ...string) (r shardsReport, out string, ok bool) {
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
	cfg, proxy := test.ConfigThrough(t, env.Config)
	kc, err := clientcmd.Load(env.KubeConfig)
	require.NoError(t, err)
	for _, c := range kc.Clusters {
		c.Server = cfg.Host
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-proxied")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
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
	var r shardsReport
	require.Eventually(t, func() bool {
		var ok bool
		r, _, ok = tryShardsJSON(args...)
		return ok && len(r.Members) == 3 && len(r.Unheld) == 0 && r.Members[0].PartitionsHeld > 0 &&
			r.Members[1].PartitionsHeld > 0 && r.Members[2].PartitionsHeld > 0
	}, 30*time.Second, 200*time.Millisecond, "the three replicas share every partition")
	checkAllHeld(t, r, group, ns, members)

	proxy.Cut()
	require.Eventually(t, func() bool {
		var ok bool
		r, _, ok = tryShardsJSON(args...)
		return ok && len(r.Members) == 3 && r.Members[2].State == memberExpired
	}, 20*time.Second, 100*time.Millisecond, "the cut-off member expires 5 s after its last renewal")
	assert.Equal(t, memberLive, r.Members[0].State)
	assert.Equal(t, memberLive, r.Members[1].State)
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
	assert.Equal(t, memberExpired, r.Members[2].State)
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

// checkAllHeld checks a report of three live members that hold every partition.
func checkAllHeld(t *testing.T, r shardsReport, group, ns string, members []string) {
	assert.Equal(t, group, r.Group)
	assert.Equal(t, ns, r.Namespace)
	assert.Equal(t, config.DefaultPartitionCount, r.Partitions)
	held, shoots := 0, 0
	for i, m := range r.Members {
		assert.Equal(t, members[i], m.Name)
		assert.Equal(t, memberLive, m.State)
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
// dwd-1 logged, shown when its lease does not say it is returning.
func checkReturning(t *testing.T, r shardsReport, args []string, stderr string) {
	require.Len(t, r.Members, 3)
	returning := r.Members[1]
	if !assert.Equal(t, memberReturning, returning.State) {
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
	assert.Regexp(t, `dwd-2\s+expired\s+\d+s ago\s+5s\s+0\s+0\s+0\s`, table)
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

	lease := memberLease("dwd-0", 0)
	lease.Namespace = ns
	require.NoError(t, env.Client.Create(context.Background(), &lease))
	code, _, stderr = run(context.Background(), args...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "listing the Clusters (extensions.gardener.cloud/v1alpha1): forbidden; dwd shards needs list on clusters.extensions.gardener.cloud")
}
