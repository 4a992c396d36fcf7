package sim

import (
	"hash/fnv"
	"time"
)

// A kubelet renews its node lease every renew interval (10 s by default) on its own schedule, so a
// healthy lease read at any moment was renewed between 0 and one interval before. The simulated
// kubelets renew at phase + k × interval (Unix time), with a phase per lease taken from its name: no
// goroutine runs per node, and the renewTime a list shows is a pure function of the lease's name and
// of the moment the list is served.

// renewPhase is the lease's offset in [0, interval) from the instants that are whole multiples of
// interval, in whole milliseconds so that JSON (microseconds) and protobuf carry the same time.
func renewPhase(name string, interval time.Duration) time.Duration {
	ms := int64(interval / time.Millisecond)
	if ms <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(name)) // a hash never fails to write
	return time.Duration(h.Sum64()%uint64(ms)) * time.Millisecond
}

// lastRenew is the last instant at or before at when a lease of the phase was renewed: at minus
// (at - phase) mod interval.
func lastRenew(at time.Time, phase, interval time.Duration) time.Time {
	if interval <= 0 {
		return at
	}
	since := (at.UnixNano() - int64(phase)) % int64(interval)
	if since < 0 {
		since += int64(interval)
	}
	return at.Add(-time.Duration(since))
}

// leaseTimes computes the renewTimes of a list served as of a moment.
type leaseTimes struct {
	interval time.Duration
	// meltedAt is when the scenario that expired some leases was set: their kubelets stopped renewing
	// then, and each renewTime stays at its last renewal before that moment.
	meltedAt time.Time
	// nodeClockOffset is added to every renewTime: the kubelets write their own clocks.
	nodeClockOffset time.Duration
}

// node returns the renewTime of a node lease of the phase as of at: its last renew, at or before the
// melt for an expired one, which then stands still on every read (a kubelet that stopped does not
// renew: its lease ages from there, as a real one does, and never jumps back in time).
func (lt leaseTimes) node(at time.Time, phase time.Duration, expired bool) time.Time {
	if expired && at.After(lt.meltedAt) {
		at = lt.meltedAt
	}
	t := lastRenew(at, phase, lt.interval)
	return t.Add(lt.nodeClockOffset).Truncate(time.Microsecond)
}

// extra returns the renewTime of every extra lease as of at: they all renew at phase 0, so that their
// part of the list changes once per interval and can be encoded once for all requests until then.
func (lt leaseTimes) extra(at time.Time) time.Time {
	return lastRenew(at, 0, lt.interval).Add(lt.nodeClockOffset).Truncate(time.Microsecond)
}
