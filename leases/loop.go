package leases

import (
	"context"
	"time"
)

// Hooks are what the member loop calls.
type Hooks struct {
	// OnFence must stop all of the replica's work before it returns; it is called as soon as the
	// renew deadline passes without a successful renewal.
	OnFence func()
	// OnRenewFailure is called with every failed renewal.
	OnRenewFailure func(error)
	// OnRenew, when set, is called after every successful renewal with the time it was sent, the time
	// the lease's renewTime shows.
	OnRenew func(sentAt time.Time)
	// OnStepDown is called when the member gives up its lease after fencing too often, until the
	// time it will try again.
	OnStepDown func(until time.Time)
	// Healthy, when set, is asked before every renewal: a replica whose work loop is wedged stops
	// renewing, so that it fences and the others take over.
	Healthy func() bool
	// MayStepDown, when set, is asked whether a member that fenced too often should step down, with
	// the time of the fence that made it too often: StepDown once another member that could take over
	// has been seen renewing after that fence without having fenced itself, Stay when every such member
	// has been seen renewing after it and each of them fenced too (the API server's brownouts) or when
	// there is none, and NotYetKnown until then. What the member saw when it fenced comes from before
	// its outage and cannot tell its own cut from a brownout of the whole group. The member asks every
	// round until the answer is known, acting again meanwhile once a renewal succeeds, and forgets the
	// question once its fences fall below FlapFences within the window. Without it the member never
	// steps down. Each renewal advertises the member's recent fences (RecentFencesAnnotation) for the
	// others to judge by.
	MayStepDown func(fencedAt time.Time) StepDownAnswer
}

// StepDownAnswer is the group's answer to a member that fenced too often (Hooks.MayStepDown).
type StepDownAnswer int

const (
	// NotYetKnown: the member has not seen every other member renew since the fence.
	NotYetKnown StepDownAnswer = iota
	// Stay: no other member could take over without fencing as well.
	Stay
	// StepDown: another member renewed since the fence without fencing.
	StepDown
)

// Flapping: a member that fences this often within flapWindow steps down for flapWindow, so that the
// others take its partitions instead of watching it drop and re-take them over and over.
const (
	FlapFences          = 3
	FlapWindowDurations = 10 // in lease durations
)

// loopState is the member loop's own state.
type loopState struct {
	started   bool
	fenced    bool
	fences    []time.Time // recent fences, oldest first
	downUntil time.Time   // while stepped down
	releasing bool        // stepped down, and the lease not released yet
	// asking is the fence that made the member fence too often, while the group's answer to whether it
	// should step down is not known (zero otherwise).
	asking time.Time
}

// Run renews the member lease every RetryPeriod until ctx ends (see Step), and at once when
// AnnounceLeave asks.
func (m *Member) Run(ctx context.Context, hooks Hooks) {
	poke := m.pokeChan()
	for {
		wait := m.Step(ctx, hooks)
		select {
		case <-ctx.Done():
			return
		case <-m.Clock.After(wait):
		case <-poke:
		}
	}
}

// Step runs one round of the member loop and returns how long to wait before the next: it fences
// (hooks.OnFence) as soon as the renew deadline has passed, renews with an attempt cut off at that
// deadline, and fences again if the attempt failed past it. After a fence renewals go on, and the
// replica may act again once one succeeds. When it fenced FlapFences times within the flap window it
// asks the group (Hooks.MayStepDown); when the answer is to step down, it releases its lease and sits
// out the window.
func (m *Member) Step(ctx context.Context, hooks Hooks) time.Duration {
	start := m.Clock.Now()
	if !m.loop.started {
		m.loop.started, m.loop.fenced = true, true // until the first renewal succeeds
	}
	if start.Before(m.loop.downUntil) {
		return m.sitOut(ctx, start)
	}
	m.fenceIfDue(hooks, start)
	m.ask(hooks, start)
	if start.Before(m.loop.downUntil) {
		return m.sitOut(ctx, start)
	}
	if hooks.Healthy == nil || hooks.Healthy() {
		switch err := m.renewBefore(ctx, start); {
		case err == nil && hooks.OnRenew != nil:
			hooks.OnRenew(start)
		case err != nil && ctx.Err() == nil && hooks.OnRenewFailure != nil:
			hooks.OnRenewFailure(err)
		}
	}
	now := m.Clock.Now()
	m.fenceIfDue(hooks, now)
	m.ask(hooks, now)
	m.loop.fenced = m.Fenced(now)
	next := start.Add(m.RetryPeriod)
	if at := m.FenceAt(); !m.loop.fenced && at.Before(next) {
		next = at
	}
	return max(next.Sub(now), 0)
}

// fenceIfDue fences when the renew deadline has passed since the last round; when that happened too
// often, the member asks the group whether to step down (see ask).
func (m *Member) fenceIfDue(hooks Hooks, now time.Time) {
	if m.loop.fenced || !m.Fenced(now) {
		return
	}
	m.loop.fenced = true
	hooks.OnFence()
	window := FlapWindowDurations * m.LeaseDuration
	recent := m.loop.fences[:0]
	for _, at := range m.loop.fences {
		if now.Sub(at) < window {
			recent = append(recent, at)
		}
	}
	m.loop.fences = append(recent, now)
	if len(m.loop.fences) >= FlapFences && hooks.MayStepDown != nil && m.loop.asking.IsZero() {
		m.loop.asking = now
	}
}

// ask asks the group whether the member, which fenced too often, steps down, until the answer is
// known or the fences fall below FlapFences within the window, and steps down when the answer is to.
func (m *Member) ask(hooks Hooks, now time.Time) {
	if m.loop.asking.IsZero() {
		return
	}
	if m.recentFences(now) < FlapFences {
		m.loop.asking = time.Time{}
		return
	}
	switch hooks.MayStepDown(m.loop.asking) {
	case Stay:
		m.loop.asking = time.Time{}
	case StepDown:
		m.stepDown(hooks, now)
	}
}

// stepDown gives the work up for the flap window: the member is fenced at once and its work stopped
// again (the answer may have come after a renewal let it act, even within this round, whatever the
// loop last recorded), and sitOut releases its lease.
func (m *Member) stepDown(hooks Hooks, now time.Time) {
	m.mu.Lock()
	m.renewedAt = time.Time{}
	m.mu.Unlock()
	m.loop.fenced = true
	hooks.OnFence()
	m.loop.fences, m.loop.asking = nil, time.Time{}
	m.loop.downUntil, m.loop.releasing = now.Add(FlapWindowDurations*m.LeaseDuration), true
	if hooks.OnStepDown != nil {
		hooks.OnStepDown(m.loop.downUntil)
	}
}

// recentFences is how often the member fenced within the flap window before now. It reads the loop's
// state: call it from the goroutine of Step.
func (m *Member) recentFences(now time.Time) int {
	n := 0
	for _, at := range m.loop.fences {
		if now.Sub(at) < FlapWindowDurations*m.LeaseDuration {
			n++
		}
	}
	return n
}

// sitOut is a round while stepped down: it tries to release the lease until that succeeded, so that
// the others need not wait out the lease duration, and renews nothing. The release says the state of
// the partitions' work is lost: the fence stopped it without handing it over, so the next holders
// start them as after a crash (docs/sharding.md, "Gray failures").
func (m *Member) sitOut(ctx context.Context, now time.Time) time.Duration {
	if m.loop.releasing {
		ctx, cancel := context.WithTimeout(ctx, m.RetryPeriod)
		defer cancel()
		if err := m.Release(ctx, now, Leave{StateLost: true}); err == nil {
			m.loop.releasing = false
			m.mu.Lock()
			m.lease = nil
			m.mu.Unlock()
		}
	}
	return min(m.loop.downUntil.Sub(now), m.RetryPeriod)
}

// renewBefore renews with a deadline at the fence moment, or one retry period when fenced already.
func (m *Member) renewBefore(ctx context.Context, now time.Time) error {
	deadline := m.FenceAt()
	if m.Fenced(now) {
		deadline = now.Add(m.RetryPeriod)
	}
	ctx, cancel := context.WithTimeout(ctx, deadline.Sub(now))
	defer cancel()
	return m.Renew(ctx, now)
}
