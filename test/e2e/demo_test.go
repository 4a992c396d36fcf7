package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/demo"
	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/internal/logtest"
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
	dir := t.TempDir()
	d, buf := setUpDemo(t, demo.Options{Dir: dir, LogLevel: "debug"}, overlayGrants(t))
	ctx := context.Background()
	err := d.Run(ctx)
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

// overlayGrants are the grants of the demo's overlay, deploy/overlays/sharded.
func overlayGrants(t *testing.T) sim.Grants {
	t.Helper()
	g, err := sim.OverlayGrants(demo.Overlay)
	require.NoError(t, err)
	return g
}

// setUpDemo sets up the demo's seed with 30 shoots of 2 nodes, and 3 replicas (not started) of the dwd
// the test built, under the grants g, with the other options of opts; the demo is torn down when the
// test ends. The buffer holds what the demo printed.
func setUpDemo(t *testing.T, opts demo.Options, g sim.Grants) (*demo.Demo, *logtest.Buffer) {
	t.Helper()
	quietLogs()
	opts.Shoots, opts.Nodes, opts.Replicas = 30, 2, 3
	if opts.Dwd == "" {
		opts.Dwd = test.BuildDwd(t)
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	out := &logtest.Buffer{}
	d, err := demo.SetUp(context.Background(), out, opts, g)
	if d != nil {
		t.Cleanup(d.TearDown)
	}
	require.NoError(t, err, out.String())
	return d, out
}
