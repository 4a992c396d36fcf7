package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/config"
)

// renewLeaderLease holds the prober's leader lease of the original's mode in ns for "original", renewing
// it every second, until the returned func releases it.
func renewLeaderLease(t *testing.T, ns string) (release func()) {
	ctx := context.Background()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dwd-prober-leader-election"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("original"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NowMicro())}}
	require.NoError(t, env.Client.Create(ctx, lease))
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-stop:
				lease.Spec.HolderIdentity = nil
				_ = env.Client.Update(ctx, lease)
				return
			case <-ticker.C:
				lease.Spec.RenewTime = ptr.To(metav1.NowMicro())
				_ = env.Client.Update(ctx, lease) // a conflict is retried at the next tick
				_ = env.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease)
			}
		}
	}()
	return func() { close(stop); <-done }
}

// readOnlyUser grants user reads of what the prober caches, seed-wide, and every verb on Leases in ns
// only: no write to a shoot's control plane. It returns a kubeconfig that impersonates user.
func readOnlyUser(t *testing.T, ns, user string) string {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"extensions.gardener.cloud"}, Resources: []string{"clusters"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"machine.sapcloud.io"}, Resources: []string{"machines"}, Verbs: []string{"list", "watch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	for _, obj := range []client.Object{role, binding} {
		require.NoError(t, env.Client.Create(ctx, obj))
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
	env.UserWithRole(t, ns, user, []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
		Verbs: []string{"get", "list", "watch", "create", "update", "delete"}}})
	return kubeconfigAs(t, user)
}

// A shadow group (--dry-run) runs on read-only permissions, beside anything: it takes its share and is
// ready while the original's leader lease is held, and a group that acts never defers to it, though the
// shadow was there first.
func TestADryRunGroupRunsBesideTheOriginalAndNoGroupDefersToIt(t *testing.T) {
	env.Require(t)
	ns := env.Namespace(t)
	release := renewLeaderLease(t, ns)
	shadow := startReplica(t, "run", "--prober-config=testdata/prober.yaml", "--member-name=shadow-0", "--dry-run",
		"--shard-namespace="+ns, "--leader-election-namespace="+ns, "--kubeconfig="+readOnlyUser(t, ns, "shadow-"+ns))
	shadowGroup := "dwd-prober" + config.DryRunGroupSuffix
	require.Eventually(t, func() bool { return heldPartitions(t, ns, shadowGroup, "shadow-0") == config.DefaultPartitionCount },
		30*time.Second, 100*time.Millisecond, "the shadow takes its share beside the original's leader")
	require.Eventually(t, func() bool { return httpOK("http://" + shadow.healthAddr + "/readyz") }, 30*time.Second, 100*time.Millisecond,
		"ready on read-only permissions")
	release()

	r := startReplica(t, "run", "--prober-config=testdata/prober.yaml", "--member-name=dwd-0",
		"--shard-namespace="+ns, "--leader-election-namespace="+ns)
	require.Eventually(t, func() bool { return heldPartitions(t, ns, "dwd-prober", "dwd-0") == config.DefaultPartitionCount },
		30*time.Second, 100*time.Millisecond, "the group that acts takes its share beside the senior shadow")
	assert.Equal(t, config.DefaultPartitionCount, heldPartitions(t, ns, "dwd-prober"+config.DryRunGroupSuffix, "shadow-0"))
	n, ok := metricValue(shadow.metricsAddr, `dwd_dry_run_writes_total{direction="down",kind="scale"} `)
	assert.True(t, ok && n == 0, "the shadow exports what it did not write")
	require.Equal(t, 0, r.stop(t))
	require.Equal(t, 0, shadow.stop(t))
	assert.Contains(t, shadow.stderr, "Dry run: nothing is scaled")
}

// A shadow must not take the original's leader lease: with it, it would stop the original.
func TestDryRunRefusesLeaderElection(t *testing.T) {
	code, _, stderr := run(context.Background(), "prober", "--config-file=testdata/prober.yaml", "--enable-leader-election", "--dry-run")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--dry-run runs as a sharded group of its own")
}

// A shadow's group is never one that acts: the default group names, and any given, end in -dry-run.
func TestADryRunGroupIsAGroupOfItsOwn(t *testing.T) {
	o := newOptions("dwd-prober")
	o.dryRun = true
	s := o.shardingFor("prober")
	assert.Equal(t, "dwd-prober-dry-run", s.GroupName)
	assert.True(t, s.DryRun)
	o.sharding.GroupName = "shadow"
	assert.Equal(t, "shadow-dry-run", o.shardingFor("prober").GroupName)
	o.sharding.GroupName = "shadow-dry-run"
	assert.Equal(t, "shadow-dry-run", o.shardingFor("prober").GroupName)
}

// A group named as a shadow's is a shadow's: a replica that acts may not join it.
func TestAnActingReplicaRefusesAShadowsGroup(t *testing.T) {
	code, _, stderr := run(context.Background(), "run", "--prober-config=testdata/prober.yaml", "--member-name=dwd-0",
		"--shard-namespace=garden", "--shard-group=x-dry-run")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "a replica that acts must not join it")
}
