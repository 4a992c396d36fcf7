package scaler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Budget hands out the tokens of the scale path without blocking: a flow asks for what it needs and
// comes back when told, so that no worker waits for the budget.
type Budget interface {
	// Reserve asks, at now, for n tokens for requests of direction dir. wait == 0: they are taken.
	// wait > 0 and cancel != nil: they are reserved for now+wait, and the caller sends its requests
	// then (cancel, called at the moment given, gives back what is not yet due). wait > 0 and
	// cancel == nil: nothing was taken; ask again after wait.
	Reserve(now time.Time, dir Direction, n int) (wait time.Duration, cancel func(now time.Time))
}

// TokenBucket is the Budget of a token bucket of qps tokens a second and burst tokens at most, in which
// scale-downs go first. A Down request reserves the next free tokens in the order of asking, even when
// they are due only later (the bucket goes into debt), so that the meltdowns found first are written
// first; an Up request takes tokens only when they are free at once and no Down reservation is
// pending, else it asks again when the bucket will have them. A Down flow stopped before its time
// gives its reservation back, whatever its place in the queue (the shoot recovered: its Up flow must
// not wait behind a dead debt). golang.org/x/time/rate restores a cancelled reservation's tokens only
// when no later one was made, so that a recovery that ends a queue of Down flows oldest first would
// give back nothing, and every Up flow would wait out the whole dead queue (measured: no scale-up for
// 30 s after a 600-shoot blip on one replica).
type TokenBucket struct {
	mu sync.Mutex
	// rate is tokens a second, 0 for no limit; tokens is the bucket's content as of last, at most
	// burst, below zero while Down reservations are pending (the debt).
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

var _ Budget = (*TokenBucket)(nil)

// NewTokenBucket returns a TokenBucket of qps tokens a second and burst tokens at most; qps <= 0 is no
// limit.
func NewTokenBucket(qps float32, burst int) *TokenBucket {
	b := max(float64(burst), 1)
	return &TokenBucket{rate: max(float64(qps), 0), burst: b, tokens: b}
}

// Reserve implements Budget.
func (b *TokenBucket) Reserve(now time.Time, dir Direction, n int) (time.Duration, func(time.Time)) {
	if b.rate == 0 {
		return 0, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advance(now)
	want := min(float64(n), b.burst) // never more than the bucket holds: it could never be granted
	if dir == Down {
		b.tokens -= want
		if b.tokens >= -tokenSlack {
			return 0, nil
		}
		budgetDeferrals.WithLabelValues(dir.String()).Inc()
		due := now.Add(b.refill(-b.tokens))
		return due.Sub(now), func(at time.Time) { b.cancel(want, due, at) }
	}
	if b.tokens < want-tokenSlack {
		budgetDeferrals.WithLabelValues(dir.String()).Inc()
		return b.refill(want - b.tokens), nil
	}
	b.tokens -= want
	return 0, nil
}

// Tokens returns what the bucket holds at now, without changing it: at most its burst, below zero by
// the scale-downs reserved ahead of the refill (the debt). A bucket without a limit holds its burst.
func (b *TokenBucket) Tokens(now time.Time) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rate == 0 {
		return b.burst
	}
	return b.at(now)
}

// Export makes b the bucket that dwd_scale_budget_tokens reads, at clk's time: the process's one
// scale budget. The first call registers the metric.
func (b *TokenBucket) Export(clk clock.PassiveClock) {
	exported.Store(&exportedBucket{bucket: b, clock: clk})
	registerTokens.Do(func() { metrics.Registry.MustRegister(budgetTokens) })
}

var registerTokens sync.Once

// exportedBucket is the bucket of dwd_scale_budget_tokens and the clock it is read at.
type exportedBucket struct {
	bucket *TokenBucket
	clock  clock.PassiveClock
}

var exported atomic.Pointer[exportedBucket]

// exportedTokens is the value of dwd_scale_budget_tokens: the exported bucket's content now (the
// metric is registered only once one is).
func exportedTokens() float64 {
	e := exported.Load()
	if e == nil {
		return 0
	}
	return e.bucket.Tokens(e.clock.Now())
}

// tokenSlack absorbs the rounding of the token arithmetic: a token gained over a second in tenths is
// a whole token.
const tokenSlack = 1e-9

// advance adds the tokens gained since the last change, up to the burst.
func (b *TokenBucket) advance(now time.Time) {
	if now.After(b.last) {
		b.tokens, b.last = b.at(now), now
	}
}

// at is what the bucket holds at now: its tokens and those gained since the last change, up to the
// burst (nothing is gained before the first change, or at a moment before it).
func (b *TokenBucket) at(now time.Time) float64 {
	if b.last.IsZero() || !now.After(b.last) {
		return b.tokens
	}
	return min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
}

// cancel gives back, at at, the n tokens of a reservation due at due, unless it is due already.
func (b *TokenBucket) cancel(n float64, due, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !at.Before(due) {
		return
	}
	b.advance(at)
	b.tokens = min(b.burst, b.tokens+n)
}

// refill is how long the bucket takes to gain missing tokens, at least a millisecond.
func (b *TokenBucket) refill(missing float64) time.Duration {
	return max(time.Duration(missing/b.rate*float64(time.Second)), time.Millisecond)
}

// waitBudget takes n tokens of direction dir, sleeping on the Scaler's clock until they are granted,
// for the callers that may wait (Cleanup); it returns the error of ctx when ctx ends first. A Budget
// of nil grants everything.
func (s *Scaler) waitBudget(ctx context.Context, dir Direction, n int) error {
	if s.Limiter == nil {
		return nil
	}
	for {
		wait, cancel := s.Limiter.Reserve(s.clock().Now(), dir, n)
		if wait <= 0 {
			return nil
		}
		if err := s.sleep(ctx, wait); err != nil {
			if cancel != nil {
				cancel(s.clock().Now())
			}
			return err
		}
		if cancel != nil {
			return nil // the reservation is due
		}
	}
}
