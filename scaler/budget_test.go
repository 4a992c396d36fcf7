package scaler_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

func TestTokenBucketPutsScaleDownsFirst(t *testing.T) {
	now := time.Now()
	b := scaler.NewTokenBucket(10, 2) // a token every 100 ms, two at once

	wait, cancel := b.Reserve(now, scaler.Down, 1)
	assert.Zero(t, wait, "the burst is free")
	assert.Nil(t, cancel)
	wait, _ = b.Reserve(now, scaler.Up, 1)
	assert.Zero(t, wait, "an Up request takes a free token")

	downWait, cancel := b.Reserve(now, scaler.Down, 1)
	assert.Equal(t, 100*time.Millisecond, downWait, "a Down request reserves the next token")
	require.NotNil(t, cancel)
	later, _ := b.Reserve(now, scaler.Down, 1)
	assert.Equal(t, 200*time.Millisecond, later, "Down requests are served in the order they asked")

	upWait, upCancel := b.Reserve(now.Add(150*time.Millisecond), scaler.Up, 1)
	assert.Nil(t, upCancel, "an Up request reserves nothing")
	assert.Greater(t, upWait, time.Duration(0), "an Up request waits while Down reservations are pending")
	wait, _ = b.Reserve(now.Add(300*time.Millisecond), scaler.Up, 1)
	assert.Zero(t, wait, "once the Down reservations are served, Up takes the next free token")
}

func TestTokenBucketCancelledReservationFreesItsToken(t *testing.T) {
	now := time.Now()
	b := scaler.NewTokenBucket(1, 1)
	wait, _ := b.Reserve(now, scaler.Down, 1)
	require.Zero(t, wait)
	wait, cancel := b.Reserve(now, scaler.Down, 1)
	require.Equal(t, time.Second, wait)
	require.NotNil(t, cancel)
	cancel(now.Add(100 * time.Millisecond)) // the shoot recovered: the Down flow is gone

	wait, _ = b.Reserve(now.Add(time.Second), scaler.Up, 1)
	assert.Zero(t, wait, "the Up flow does not wait behind a debt nobody will use")
}

func TestTokenBucketNeverAsksForMoreThanItHolds(t *testing.T) {
	now := time.Now()
	b := scaler.NewTokenBucket(1, 1)
	wait, _ := b.Reserve(now, scaler.Up, 2)
	assert.Zero(t, wait, "two tokens from a bucket of one would never be granted; one is")
	unlimited := scaler.NewTokenBucket(0, 0)
	for range 100 {
		wait, _ = unlimited.Reserve(now, scaler.Up, 1)
		require.Zero(t, wait)
	}
}

// A recovery ends the pending Down flows in any order, the oldest first as often as not: every
// cancelled reservation gives its tokens back, not only the newest one.
func TestTokenBucketCancelledReservationsFreeTheirTokensInAnyOrder(t *testing.T) {
	now := time.Now()
	b := scaler.NewTokenBucket(1, 1)
	wait, _ := b.Reserve(now, scaler.Down, 1)
	require.Zero(t, wait)
	var cancels []func(time.Time)
	for i := range 10 {
		wait, cancel := b.Reserve(now, scaler.Down, 1)
		require.Equal(t, time.Duration(i+1)*time.Second, wait)
		cancels = append(cancels, cancel)
	}
	for _, cancel := range cancels { // oldest first
		cancel(now.Add(100 * time.Millisecond))
	}
	wait, _ = b.Reserve(now.Add(time.Second), scaler.Up, 1)
	assert.Zero(t, wait, "no debt is left once every Down flow that made it is gone")

	// A reservation due already was used: its cancel gives nothing back.
	wait, cancel := b.Reserve(now.Add(time.Second), scaler.Down, 1)
	require.Equal(t, time.Second, wait)
	cancel(now.Add(3 * time.Second))
	wait, _ = b.Reserve(now.Add(3*time.Second), scaler.Up, 1)
	assert.Zero(t, wait, "one token gained since, the reservation's own spent")
	wait, _ = b.Reserve(now.Add(3*time.Second), scaler.Up, 1)
	assert.Equal(t, time.Second, wait, "the used reservation's token is not given back twice")
}

// The bucket's content is exported as dwd_scale_budget_tokens at the exported clock's time, below zero
// by the scale-downs reserved ahead; every request it does not grant at once is counted by direction.
func TestTheScaleBudgetIsExported(t *testing.T) {
	now := time.Now()
	clk := clocktesting.NewFakePassiveClock(now)
	b := scaler.NewTokenBucket(10, 2) // a token every 100 ms, two at once
	b.Export(clk)
	tokens := func() float64 { return metricstest.Sum(t, "dwd_scale_budget_tokens", nil) }
	deferred := func(dir scaler.Direction) float64 {
		return metricstest.Sum(t, "dwd_scale_budget_deferrals_total", map[string]string{"direction": dir.String()})
	}
	downs, ups := deferred(scaler.Down), deferred(scaler.Up)
	assert.Equal(t, 2.0, tokens(), "a full bucket")

	for range 3 {
		b.Reserve(now, scaler.Down, 1)
	}
	assert.InDelta(t, -1, tokens(), 1e-9, "one scale-down reserved ahead")
	assert.Equal(t, downs+1, deferred(scaler.Down))
	b.Reserve(now, scaler.Up, 1)
	assert.Equal(t, ups+1, deferred(scaler.Up), "a scale-up told to ask again")

	clk.SetTime(now.Add(250 * time.Millisecond))
	assert.InDelta(t, 1.5, tokens(), 1e-9, "the refill since, read without taking it")
	assert.InDelta(t, 1.5, b.Tokens(clk.Now()), 1e-9, "reading changed nothing")
	clk.SetTime(now.Add(time.Hour))
	assert.Equal(t, 2.0, tokens(), "never more than the burst")
	assert.Equal(t, 2.0, scaler.NewTokenBucket(0, 2).Tokens(now), "a bucket without a limit holds its burst")
}
