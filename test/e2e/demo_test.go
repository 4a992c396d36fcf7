package e2e

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/demo"
	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

// TestDemo plays the demo's whole script with a small seed, so that `make demo` keeps working: three
// `dwd run` replicas under exactly the RBAC of deploy/overlays/sharded (their kubeconfig impersonates
// its ServiceAccount) probe every shoot, scale down and up, weed, hand over after a kill -9 and after
// a graceful stop. Their logs report no permission missing and no refusal twice; they log at debug
// level, and no line may carry a token, key or certificate of a kubeconfig of the seed.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a seed and three dwd processes")
	}
	quietLogs()
	dir := t.TempDir()
	dwd := test.BuildDwd(t)
	g, err := sim.OverlayGrants(demo.Overlay)
	require.NoError(t, err)

	ctx := context.Background()
	var buf bytes.Buffer
	d, err := demo.SetUp(ctx, &sim.LockedWriter{W: &buf}, demo.Options{Shoots: 30, Nodes: 2, Replicas: 3, Dwd: dwd, Dir: dir, LogLevel: "debug"}, g)
	if d != nil {
		defer d.TearDown()
	}
	require.NoError(t, err, buf.String())
	err = d.Run(ctx)
	t.Log(buf.String())
	require.NoError(t, err)
	require.Contains(t, buf.String(), "All 7 steps did what they should.")
	require.Contains(t, buf.String(), "with exactly the permissions of deploy/overlays/sharded")
	// Readiness follows the last step's rebalance by a reconcile: it holds its new share soon.
	for _, r := range d.Replicas {
		if r.Running() {
			assert.Eventually(t, func() bool { return r.Ready(ctx) }, 15*time.Second, 200*time.Millisecond, "%s is ready", r.Name)
		}
	}
	lines := assertPermissionsSuffice(t, dir)
	assert.Empty(t, permissionLines(lines, true), "the overlay grants the optional permissions too")
	requireNoSecretsInLogs(t, ctx, d.Seed, dir)
}
