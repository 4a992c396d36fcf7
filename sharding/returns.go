package sharding

import (
	"context"
	"time"
)

// returnCheckEvery is how often a member asks again whether a member away on a returning leave will
// be back: a Pod that cannot be scheduled shows it only after the scheduler tried.
const returnCheckEvery = 5 * time.Second

// returnCheck is what Config.WontReturn said of a member away, for the change of its lease that
// showed its leave.
type returnCheck struct {
	leave time.Time // when this member observed the leave
	at    time.Time // when it asked
	wont  bool
	err   string
}

// checkReturns asks Config.WontReturn, at most every returnCheckEvery per member, about the members
// away on a returning leave, and forgets those no longer away. A reservation ends early only on a
// clear answer (docs/sharding.md, "Graceful stops"): a scale-down decided after the member's stop, or
// a new Pod that cannot start; a failed read keeps it for its grace.
func (c *Coordinator) checkReturns(ctx context.Context, r rings, now time.Time) {
	if c.cfg.WontReturn == nil {
		return
	}
	for m := range c.returns {
		if !c.away(m, now) {
			delete(c.returns, m)
		}
	}
	if r.present == nil {
		return
	}
	for _, m := range r.all.Members() {
		if !c.away(m, now) {
			continue
		}
		leave, _, _ := c.observer.Seen(m)
		last, ok := c.returns[m]
		if ok && last.leave.Equal(leave) && (last.wont || now.Sub(last.at) < returnCheckEvery) {
			continue
		}
		c.returns[m] = c.askWontReturn(ctx, m, leave, last, now)
	}
}

// askWontReturn asks Config.WontReturn about member m and logs a change of the answer.
func (c *Coordinator) askWontReturn(ctx context.Context, m string, leave time.Time, last returnCheck, now time.Time) returnCheck {
	check := returnCheck{leave: leave, at: now}
	wont, err := c.cfg.WontReturn(ctx, m)
	check.wont = wont && err == nil
	if err != nil {
		check.err = err.Error()
		if check.err != last.err {
			c.log.Info("Cannot tell whether a member away on a returning leave will be back: its share stays reserved for its grace",
				"member", m, "reason", check.err)
		}
	}
	if check.wont {
		c.log.Info("A member away on a returning leave will not be back within its grace: its reserved partitions are taken over",
			"member", m)
	}
	return check
}
