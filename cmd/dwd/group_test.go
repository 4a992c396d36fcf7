package main

import (
	"cmp"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/replica"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

func TestCompleteShardingFromRoles(t *testing.T) {
	tests := []struct {
		name           string
		group          string // the flag's value; "" when not given
		prober, weeder bool
		wantGroup      string
		wantRoles      []string
	}{
		{"both roles: a member of each role's group", "", true, true, "", []string{"prober", "weeder"}},
		{"prober only", "", true, false, "dwd-prober", []string{"prober"}},
		{"weeder only", "", false, true, "dwd-weeder", []string{"weeder"}},
		{"explicit group, prober only", "shared", true, false, "shared", []string{"prober"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOptions(tt.group)
			if tt.prober {
				o.proberConfigPath = "prober.yaml"
			}
			if tt.weeder {
				o.weederConfigPath = "weeder.yaml"
			}
			o.sharding.Namespace, o.sharding.MemberName = "garden", "dwd-0"
			o.completeSharding()
			assert.Equal(t, tt.wantGroup, o.sharding.GroupName)
			assert.Equal(t, tt.wantRoles, o.sharding.Roles)
			for _, r := range o.roles() {
				s := o.shardingFor(r)
				assert.Equal(t, cmp.Or(tt.group, replica.GroupFor(r)), s.GroupName, "the group of %s", r)
				assert.Equal(t, []string{string(r)}, s.Roles, "a member of %s's group runs that role alone", r)
			}
		})
	}
}

func TestAReplicaOfBothRolesTakesNoShardGroup(t *testing.T) {
	code, _, stderr := run(context.Background(), "run", "--prober-config=testdata/prober.yaml",
		"--weeder-config=testdata/weeder.yaml", "--shard-group=shared")
	assert.NotZero(t, code)
	assert.Contains(t, stderr, "--shard-group: Invalid value: \"shared\"")
	assert.Contains(t, stderr, "dwd-prober")
}

func TestRoleCommandsUseTheGroupsOfRunWithOneRole(t *testing.T) {
	for _, r := range []replica.Role{replica.RoleProber, replica.RoleWeeder} {
		assert.Equal(t, replica.GroupFor(r), subcommand(t, string(r)).Flags().Lookup("shard-group").DefValue)
	}
	assert.Empty(t, subcommand(t, "run").Flags().Lookup("shard-group").DefValue, "run chooses its group from its roles")
}

func TestCompleteShardingFromThePod(t *testing.T) {
	t.Run("in a pod", func(t *testing.T) {
		t.Setenv("POD_NAME", "dwd-1")
		t.Setenv("POD_NAMESPACE", "garden")
		t.Setenv("POD_UID", "6f1c0e2a-uid")
		o := newOptions("")
		o.proberConfigPath = "prober.yaml"
		o.completeSharding()
		assert.Equal(t, "6f1c0e2a-uid", o.sharding.PodUID)
		assert.Equal(t, "dwd-1", o.sharding.MemberName)
		assert.Equal(t, "garden", o.sharding.Namespace)
		assert.Equal(t, corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: "garden", Name: "dwd-1", UID: "6f1c0e2a-uid"}, o.pod)
	})
	t.Run("outside a pod", func(t *testing.T) {
		for _, name := range []string{"POD_NAME", "POD_NAMESPACE", "POD_UID"} {
			t.Setenv(name, "")
		}
		o := newOptions("")
		o.sharding.Namespace, o.sharding.MemberName = "dwd-test", "laptop"
		o.completeSharding()
		assert.Empty(t, o.sharding.PodUID)
		assert.Empty(t, o.pod.Name, "no Events without a Pod")
		assert.Equal(t, "dwd-test", o.pod.Namespace, "the group's namespace stands for the pod's")
	})
}

func TestRunHelpDescribesTheShardingFlags(t *testing.T) {
	code, stdout, _ := run(context.Background(), "run", "--help")
	require.Equal(t, 0, code)
	_, section, ok := strings.Cut(stdout, "Sharding flags:")
	require.True(t, ok, stdout)
	section, _, _ = strings.Cut(section, " flags:\n")
	for _, want := range []string{
		"(default: dwd-prober for the prober, dwd-weeder for the weeder; a replica that runs both roles is a member of both groups and takes no --shard-group)",
		"--leave-mode", "--return-grace", "at least 2s and by 20% of it",
	} {
		assert.Contains(t, strings.Join(strings.Fields(section), " "), want)
	}
}

// Replicas that run different roles must not share partitions: each would leave the shoots whose
// partitions the other holds unprobed or unweeded.
func TestRunWithOneRoleJoinsAGroupOfThatRole(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	prober := startReplica(t, "run", "--prober-config=testdata/prober.yaml", "--member-name=dwd-prober-0", "--shard-namespace="+ns)
	weeder := startReplica(t, "run", "--weeder-config=testdata/weeder.yaml", "--member-name=dwd-weeder-0", "--shard-namespace="+ns)
	for _, member := range []struct{ group, name string }{{"dwd-prober", "dwd-prober-0"}, {"dwd-weeder", "dwd-weeder-0"}} {
		require.Eventually(t, func() bool { return heldPartitions(t, ns, member.group, member.name) == config.DefaultPartitionCount },
			30*time.Second, 100*time.Millisecond, "%s holds every partition of its own group", member.name)
	}
	assert.Equal(t, 0, prober.stop(t))
	assert.Equal(t, 0, weeder.stop(t))
}

// The story: replicas of the prober, and one restarted with the weeder added, as the first
// pod of a rollout that adds the weeder role. It joins the prober's group, where it takes its share,
// and forms the weeder's: no shoot is probed by two processes (docs/sharding.md, "A group per role").
func TestAReplicaThatGainsARoleStaysInTheGroupOfTheOther(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	for _, name := range []string{"dwd-0", "dwd-1"} {
		startReplica(t, "run", "--prober-config=testdata/prober.yaml", "--member-name="+name, "--shard-namespace="+ns)
	}
	startReplica(t, "run", "--prober-config=testdata/prober.yaml", "--weeder-config=testdata/weeder.yaml",
		"--member-name=dwd-2", "--shard-namespace="+ns)
	ring, err := sharding.NewRing([]string{"dwd-0", "dwd-1", "dwd-2"}, sharding.DefaultRingConfig())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, m := range []string{"dwd-0", "dwd-1", "dwd-2"} {
			if heldPartitions(t, ns, "dwd-prober", m) != len(ring.PartitionsOf(m)) {
				return false
			}
		}
		return heldPartitions(t, ns, "dwd-weeder", "dwd-2") == config.DefaultPartitionCount
	}, 60*time.Second, 100*time.Millisecond, "the prober's share split three ways, the weeder's held by dwd-2")
	list := &coordinationv1.LeaseList{}
	require.NoError(t, env.Client.List(context.Background(), list, client.InNamespace(ns)))
	groups := map[string]bool{}
	for _, l := range list.Items {
		groups[l.Labels[leases.GroupLabel]] = true
	}
	assert.Equal(t, map[string]bool{"dwd-prober": true, "dwd-weeder": true}, groups, "no third group")
}

// TestAReplicaThatDropsARoleLeavesThatRolesGroup: a rolling update that drops the weeder role stops
// each pod as a restart (here: --leave-mode=return), so the old process leaves the weeder's group
// returning; its next process, which runs the prober only, ends that leave, and the other member takes
// the weeder share at once instead of after the return grace (two minutes here).
func TestAReplicaThatDropsARoleLeavesThatRolesGroup(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	both := []string{"run", "--prober-config=testdata/prober.yaml", "--weeder-config=testdata/weeder.yaml",
		"--shard-namespace=" + ns, "--leave-mode=return", "--return-grace=2m"}
	startReplica(t, append(both, "--member-name=dwd-0")...)
	dropping := startReplica(t, append(both, "--member-name=dwd-1")...)
	ring, err := sharding.NewRing([]string{"dwd-0", "dwd-1"}, sharding.DefaultRingConfig())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return heldPartitions(t, ns, "dwd-weeder", "dwd-1") == len(ring.PartitionsOf("dwd-1")) &&
			heldPartitions(t, ns, "dwd-prober", "dwd-1") == len(ring.PartitionsOf("dwd-1"))
	}, 60*time.Second, 100*time.Millisecond, "both groups split between the two")

	require.Equal(t, 0, dropping.stop(t))
	startReplica(t, "run", "--prober-config=testdata/prober.yaml", "--shard-namespace="+ns,
		"--leave-mode=return", "--return-grace=2m", "--member-name=dwd-1")
	require.Eventually(t, func() bool {
		return heldPartitions(t, ns, "dwd-weeder", "dwd-0") == config.DefaultPartitionCount &&
			heldPartitions(t, ns, "dwd-prober", "dwd-1") == len(ring.PartitionsOf("dwd-1"))
	}, 20*time.Second, 100*time.Millisecond,
		"dwd-0 holds the whole weeder share long before the return grace, and dwd-1 its prober share again")
}
