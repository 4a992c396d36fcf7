package scaler_test

import (
	"context"
	"testing"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/dryrun"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

func dryRunScales(t *testing.T, dir scaler.Direction) float64 {
	return metricstest.Sum(t, "dwd_dry_run_writes_total", map[string]string{"kind": dryrun.KindScale, "direction": dir.String()})
}

// In dry run a flow sends no write, and what it would have written is what the next reads see: a
// second scale-down finds nothing to do, the scale-up undoes the first, and each is counted once.
func TestDryRunSendsNothingAndReadsWhatItWouldHaveWritten(t *testing.T) {
	f := newFixture(t, withoutDelays(upstreamInfos(t)))
	before := map[string]int32{kcm: 1, mcm: 2, ca: 3}
	for name, n := range before {
		f.create(t, name, n, nil)
	}
	f.scaler.DryRun = dryrun.New(testr.New(t))
	down, up := dryRunScales(t, scaler.Down), dryRunScales(t, scaler.Up)
	ctx := context.Background()

	require.NoError(t, f.scaler.Scale(ctx, f.ns, scaler.Down, meltdown))
	assert.Equal(t, down+3, dryRunScales(t, scaler.Down))
	needs, err := f.scaler.NeedsScaling(ctx, f.ns, scaler.Down)
	require.NoError(t, err)
	assert.False(t, needs, "the scale-down not sent is what the next probe reads")
	require.NoError(t, f.scaler.Scale(ctx, f.ns, scaler.Down, meltdown))
	assert.Equal(t, down+3, dryRunScales(t, scaler.Down), "a second scale-down has nothing to do")

	needs, err = f.scaler.NeedsScaling(ctx, f.ns, scaler.Up)
	require.NoError(t, err)
	assert.True(t, needs, "the recovered shoot is to be scaled up")
	require.NoError(t, f.scaler.Scale(ctx, f.ns, scaler.Up, meltdown))
	assert.Equal(t, up+3, dryRunScales(t, scaler.Up))
	needs, err = f.scaler.NeedsScaling(ctx, f.ns, scaler.Up)
	require.NoError(t, err)
	assert.False(t, needs)

	assert.Empty(t, f.journal.writes, "nothing was sent")
	for name, n := range before {
		assert.Equal(t, state{replicas: n}, f.state(t, name), name)
	}
}
