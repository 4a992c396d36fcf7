package scaler

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
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
// gives its reservation back (the shoot recovered: its Up flow must not wait behind a dead debt).
type TokenBucket struct {
	mu  sync.Mutex
	lim *rate.Limiter
}

var _ Budget = (*TokenBucket)(nil)

// NewTokenBucket returns a TokenBucket of qps tokens a second and burst tokens at most; qps <= 0 is no
// limit.
func NewTokenBucket(qps float32, burst int) *TokenBucket {
	limit := rate.Limit(qps)
	if qps <= 0 {
		limit = rate.Inf
	}
	return &TokenBucket{lim: rate.NewLimiter(limit, max(burst, 1))}
}

// Reserve implements Budget.
func (b *TokenBucket) Reserve(now time.Time, dir Direction, n int) (time.Duration, func(time.Time)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.lim.Burst() {
		n = b.lim.Burst() // never more than the bucket holds: it could never be granted
	}
	if dir == Down {
		r := b.lim.ReserveN(now, n)
		wait := r.DelayFrom(now)
		if wait <= 0 {
			return 0, nil
		}
		return wait, func(at time.Time) { b.cancel(r, at) }
	}
	if tokens := b.lim.TokensAt(now); tokens < float64(n) {
		return b.refill(float64(n) - tokens), nil
	}
	b.lim.AllowN(now, n)
	return 0, nil
}

// cancel gives back the tokens of a reservation not yet due.
func (b *TokenBucket) cancel(r *rate.Reservation, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r.CancelAt(at)
}

// refill is how long the bucket takes to gain missing tokens, at least a millisecond.
func (b *TokenBucket) refill(missing float64) time.Duration {
	limit := float64(b.lim.Limit())
	if limit <= 0 || math.IsInf(limit, 1) {
		return time.Millisecond
	}
	return max(time.Duration(missing/limit*float64(time.Second)), time.Millisecond)
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
