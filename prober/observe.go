package prober

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// defaultLeaseDuration is the kubelet's node lease duration when a lease does not say its own; the
// kubelet renews every quarter of it (10 s).
const defaultLeaseDuration = 40 * time.Second

// LeaseRead is one list of a shoot's node leases, with when this replica sent the request and when it
// had the answer, both on its own clock. The API server served the list somewhere in between.
type LeaseRead struct {
	Leases   []coordinationv1.Lease
	Sent     time.Time
	Received time.Time
}

// Sighting is a node lease's renewTime as this replica saw it, and when (on its own clock) it first
// saw that value: the Received time of the read that first showed it, the latest moment the renewal
// can have happened as far as this replica knows.
type Sighting struct {
	RenewTime time.Time
	Since     time.Time
}

// LeaseState is how one candidate's node lease is judged.
type LeaseState int

const (
	// Fresh: the kubelet renews its lease.
	Fresh LeaseState = iota
	// Expired: the kubelet has not renewed its lease for long enough, by both tests of JudgeLease.
	Expired
	// Unknown: the renewTime looks old but this replica has not watched it long enough to know.
	Unknown
)

// JudgeLease judges one node lease against what this replica saw of it before (prev, nil when
// nothing) and returns the state and the sighting to remember.
//
// renewTime is written with the kubelet's clock, and a list from the API server's watch cache may be
// old; neither the replica's clock, the node's, nor a stale answer may make a live lease look expired.
// So a lease is Expired only when both hold:
//   - by observation: this replica has seen the same renewTime for at least the lease's stability
//     window (1.5 renew intervals, see StableWindow) on its own clock, from the answer that first
//     showed it to the request of this read; a live kubelet changes it more often than that, whatever
//     the clocks say;
//   - by age: the renewTime is at least grace × 0.75 older than the moment the request was sent (the
//     original's rule, measured when the data was served at the latest), or the same value has been
//     seen for grace × 0.75 (a node clock running ahead cannot hide a dead kubelet for ever).
//
// A renewTime that changed since the last read is Fresh. A renewTime that is young by age is Fresh.
// A renewTime that looks old by age but has not been watched for the window (a first sight after a
// start or a takeover, or a value seen for less than the window) is Unknown, as is a lease without
// renewTime: no evidence either way.
func JudgeLease(lease *coordinationv1.Lease, prev *Sighting, read LeaseRead, grace time.Duration) (LeaseState, *Sighting) {
	if lease.Spec.RenewTime == nil {
		return Unknown, nil
	}
	renew := lease.Spec.RenewTime.Time
	if prev == nil || !prev.RenewTime.Equal(renew) {
		now := &Sighting{RenewTime: renew, Since: read.Received}
		if prev != nil || !LeaseExpired(lease, grace, read.Sent) {
			return Fresh, now
		}
		return Unknown, now
	}
	watched := read.Sent.Sub(prev.Since)
	byAge := LeaseExpired(lease, grace, read.Sent)
	switch {
	case watched >= StableWindow(lease) && (byAge || watched >= threeQuarters(grace)):
		return Expired, prev
	case !byAge:
		return Fresh, prev
	}
	return Unknown, prev
}

// StableWindow is how long a renewTime must stay the same, on this replica's clock, before the lease
// may count as expired: 1.5 times the kubelet's renew interval, which is a quarter of the lease's
// leaseDurationSeconds (40 s, so 10 s, when the lease does not say). Two reads that far apart can
// never show the same renewTime of a kubelet that renews.
func StableWindow(lease *coordinationv1.Lease) time.Duration {
	d := defaultLeaseDuration
	if s := lease.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		d = time.Duration(*s) * time.Second
	}
	return d / 4 * 3 / 2
}
