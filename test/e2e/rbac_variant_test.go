package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/demo"
	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// variantTimeout bounds the first step of a story under RBAC with a rule taken out: long enough for
// the whole story's RBAC to have started it (seconds, see TestDemo and TestRBACGardener), short
// enough to keep the test quick.
const variantTimeout = 10 * time.Second

// TestRBACRuleRemovedFailsTheStory takes one rule out of the RBAC each story runs under and checks
// that the story then fails at its first step, that a replica's log names the missing permission,
// and that the replicas are not ready: the stories check RBAC, not only the code.
func TestRBACRuleRemovedFailsTheStory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs seeds and dwd processes")
	}
	// The two variants mostly wait for a step to time out: they run side by side.
	t.Run("dwd run under deploy/overlays/sharded less list and watch on leases", func(t *testing.T) {
		t.Parallel()
		g := overlayGrants(t)
		var err error
		g.Objects, err = withoutVerbs(g.Objects, "Role", "dwd", "coordination.k8s.io", "leases", "list", "watch")
		require.NoError(t, err)
		dir := t.TempDir()
		d, buf := setUpDemo(t, demo.Options{Dir: dir}, g)
		ctx := context.Background()

		ok := d.Step(ctx, "Start 3 replicas; they share the partitions and probe every shoot", func(ctx context.Context) (string, error) {
			return d.StartReplicasWithin(ctx, variantTimeout)
		})
		t.Log(buf.String())
		assert.False(t, ok, "the story's first step passed without list and watch on leases")
		assert.Error(t, d.Summary())
		assertNamedAndUnready(t, ctx, d.Replicas, dir, "list", "coordination.k8s.io", "leases", d.Namespace)
	})
	t.Run("dwd prober under Gardener's RBAC less list and watch on secrets", func(t *testing.T) {
		t.Parallel()
		rbac, err := readManifests(gardenerRBACFile)
		require.NoError(t, err)
		rbac, err = withoutVerbs(rbac, "ClusterRole", "gardener.cloud:dependency-watchdog-prober", "", "secrets", "list", "watch")
		require.NoError(t, err)
		g := newGardenerStory(t, rbac)
		ctx := context.Background()

		ok := g.Step(ctx, "Start 2 probers and 2 weeders; a leader probes every shoot", func(ctx context.Context) (string, error) {
			return g.start(ctx, variantTimeout)
		})
		assert.False(t, ok, "the story's first step passed without list and watch on secrets")
		assert.Error(t, g.Summary())
		assertNamedAndUnready(t, ctx, g.probers, g.Options.Dir, "list", "", "secrets", "")
		// A replica whose caches cannot sync has started no work: it stops at once on SIGTERM, where
		// controller-runtime's manager alone would wait for the caches for ever.
		for _, r := range g.probers {
			assert.True(t, r.Terminate(5*time.Second), "%s did not stop within 5 s of SIGTERM", r.Name)
		}
	})
}

// assertNamedAndUnready checks that a log says "Missing permission" for verb on resource in group and
// namespace, and that none of the replicas is ready.
func assertNamedAndUnready(t *testing.T, ctx context.Context, rs []*sim.Replica, dir, verb, group, resource, namespace string) {
	t.Helper()
	missing := permissionLines(readLogs(t, dir), false)
	named := false
	for _, l := range missing {
		named = named || names(l, verb, group, resource, namespace)
	}
	assert.True(t, named, "no log says that %s %s/%s in %q is missing; the missing permissions logged: %v",
		verb, group, resource, namespace, missing)
	for _, r := range rs {
		assert.False(t, r.Ready(ctx), "%s is ready without %s on %s", r.Name, verb, resource)
	}
}
