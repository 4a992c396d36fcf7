package prober_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/dryrun"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/prober"
)

func dryRunWrites(t *testing.T, kind, direction string) float64 {
	return metricstest.Sum(t, "dwd_dry_run_writes_total", map[string]string{"kind": kind, "direction": direction})
}

// In dry run a meltdown and its recovery are decided and flowed as usual, but nothing is written: the
// dependents keep their replicas and annotations, no Event is recorded, and dwd_dry_run_writes_total
// counts each scale write once (the writes not sent are what the next probes read), down then up.
func TestDryRunWritesNothingAndCountsWhatItWouldHaveWritten(t *testing.T) {
	seed.Require(t)
	s := newShoot(t, 3)
	scaling := s.watchScaling()
	before := map[string]string{}
	for _, name := range dependents {
		before[name] = s.deployment(name).ResourceVersion
	}
	down, up := dryRunWrites(t, dryrun.KindScale, dryrun.DirectionDown), dryRunWrites(t, dryrun.KindScale, dryrun.DirectionUp)
	events := dryRunWrites(t, dryrun.KindEvent, dryrun.DirectionNone)
	writes := dryrun.New(logr.Discard())
	r := startReplicaWith(t, seed.Namespace(t), "dwd-0", func(o *prober.Options) { o.DryRun = writes })
	require.Eventually(t, func() bool { return r.Prober.Probing(s.name) }, 20*time.Second, 50*time.Millisecond)
	s.awaitSeenRenewing()

	s.renewLeases(2, time.Now().Add(-expired))
	require.Eventually(t, func() bool { return dryRunWrites(t, dryrun.KindScale, dryrun.DirectionDown) == down+3 },
		expiryWait, 50*time.Millisecond, "a scale-down of each dependent counted")
	assert.Greater(t, dryRunWrites(t, dryrun.KindEvent, dryrun.DirectionNone), events, "the ScaledDown Events are counted")

	s.renewLeases(3, time.Now())
	require.Eventually(t, func() bool { return dryRunWrites(t, dryrun.KindScale, dryrun.DirectionUp) == up+3 },
		20*time.Second, 50*time.Millisecond, "a scale-up of each dependent counted")
	// A few more probes of the recovered shoot: nothing more is counted in either direction.
	s.awaitSeenRenewing()
	assert.Equal(t, down+3, dryRunWrites(t, dryrun.KindScale, dryrun.DirectionDown), "each scale-down counted once")
	assert.Equal(t, up+3, dryRunWrites(t, dryrun.KindScale, dryrun.DirectionUp), "each scale-up counted once")

	assert.Empty(t, scaling(), "no replicas written")
	for _, name := range dependents {
		assert.Equal(t, before[name], s.deployment(name).ResourceVersion, "%s is unchanged", name)
	}
	list := &eventsv1.EventList{}
	require.NoError(t, seed.Client.List(context.Background(), list, client.InNamespace(s.name)))
	assert.Empty(t, list.Items, "no Event recorded")
}
