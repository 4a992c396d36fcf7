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

// kubelet is how one node lease's kubelet renews, carried from one scenario to the next: a kubelet
// that stopped (its shoot melted) shows the renewal it made last before it stopped on every read, and
// stays stopped while the next scenario melts it too, at the moment it first stopped; one that resumed
// shows that same renewal until its first renew instant after the resume, within one renew interval (a
// real kubelet retries a failed renewal with a backoff of up to 7 s). No read ever shows a renewal made
// while the kubelet was stopped. The zero value renews on schedule.
type kubelet struct {
	// stopped is when the kubelet stopped renewing; zero while it renews.
	stopped time.Time
	// frozen is its last renewal before it stopped, without a clock offset.
	frozen time.Time
	// resumed is when it renewed again after frozen; zero if it never stopped or stopped again since.
	resumed time.Time
}

// renewal is the lease's renewTime as of at, before a clock offset: its last renew instant at or
// before at, unless the kubelet was stopped then or has not renewed since it resumed.
func (k kubelet) renewal(at time.Time, phase, interval time.Duration) time.Time {
	if !k.stopped.IsZero() && at.After(k.stopped) {
		return k.frozen
	}
	t := lastRenew(at, phase, interval)
	if !k.resumed.IsZero() && t.After(k.frozen) && t.Before(k.resumed) {
		return k.frozen // a renewal while it was stopped, which never happened
	}
	return t
}

// firstRenewalAfterResume is the first renew instant at or after the kubelet resumed: its first
// renewal since it stopped.
func (k kubelet) firstRenewalAfterResume(phase, interval time.Duration) time.Time {
	t := lastRenew(k.resumed, phase, interval)
	if t.Before(k.resumed) {
		t = t.Add(interval)
	}
	return t
}

// next is the kubelet's state after a scenario change at now that leaves it stopped or renewing.
func (k kubelet) next(stop bool, now time.Time, phase, interval time.Duration) kubelet {
	switch {
	case stop && k.stopped.IsZero():
		return kubelet{stopped: now, frozen: k.renewal(now, phase, interval)}
	case !stop && !k.stopped.IsZero():
		return kubelet{frozen: k.frozen, resumed: now}
	}
	return k
}

// leaseTimes computes the renewTimes of a list served as of a moment.
type leaseTimes struct {
	interval time.Duration
	// nodeClockOffset is added to every renewTime: the kubelets write their own clocks.
	nodeClockOffset time.Duration
}

// node returns the renewTime of a node lease of the phase, renewed by k, as of at.
func (lt leaseTimes) node(at time.Time, phase time.Duration, k kubelet) time.Time {
	return k.renewal(at, phase, lt.interval).Add(lt.nodeClockOffset).Truncate(time.Microsecond)
}

// extra returns the renewTime of every extra lease as of at: they all renew at phase 0, so that their
// part of the list changes once per interval and can be encoded once for all requests until then.
func (lt leaseTimes) extra(at time.Time) time.Time {
	return lastRenew(at, 0, lt.interval).Add(lt.nodeClockOffset).Truncate(time.Microsecond)
}
