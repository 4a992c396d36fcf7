package prober

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"
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
	// TrustAge says whether the clocks were found to agree (see ServerClockAgrees and NodeClocksBehind):
	// only then may a lease's age by its renewTime count towards its expiry.
	TrustAge bool
}

// Sighting is a node lease's renewTime as this replica saw it, and when (on its own clock) it first
// saw that value: the Received time of the read that first showed it, the latest moment the renewal
// can have happened as far as this replica knows.
type Sighting struct {
	// UID is the lease's: a lease deleted and created again (a node registered anew) is a new lease.
	UID       types.UID
	RenewTime time.Time
	Since     time.Time
	// Renewed is set when this replica saw the renewTime advance to this value: the kubelet renewed
	// between two reads.
	Renewed bool
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
	// Regressed: the renewTime is older than one this replica saw before: the answer came from a
	// source that lags (a stale watch cache), so it says nothing. It counts as Unknown.
	Regressed
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
//     original's rule, measured when the data was served at the latest), counted only when the clocks
//     agree (read.TrustAge); or the same value has been seen for grace × 0.75 (so that a dead kubelet
//     is found whatever the clocks say, only later).
//
// A renewTime that advanced since the last read is Fresh, and stays Fresh for the stability window. A
// renewTime that is young by a trusted age is Fresh. A renewTime older than the one seen before is
// Regressed, and the newer sighting is kept. Anything else is Unknown: a first sight that is old by
// age, or whose age cannot be trusted (after a start or a takeover, until a renewal shows the clocks
// agree), a value not watched long enough, and a lease without renewTime: no evidence either way.
func JudgeLease(lease *coordinationv1.Lease, prev *Sighting, read LeaseRead, grace time.Duration) (LeaseState, *Sighting) {
	if lease.Spec.RenewTime == nil {
		return Unknown, nil
	}
	renew := lease.Spec.RenewTime.Time
	young := read.TrustAge && !LeaseExpired(lease, grace, read.Sent)
	switch {
	case prev != nil && renew.Before(prev.RenewTime):
		return Regressed, prev
	case prev == nil || !prev.RenewTime.Equal(renew):
		now := &Sighting{UID: lease.UID, RenewTime: renew, Since: read.Received, Renewed: prev != nil}
		if now.Renewed || young {
			return Fresh, now
		}
		return Unknown, now
	}
	watched := read.Sent.Sub(prev.Since)
	old := read.TrustAge && LeaseExpired(lease, grace, read.Sent)
	switch {
	case watched >= StableWindow(lease) && (old || watched >= threeQuarters(grace)):
		return Expired, prev
	case young, prev.Renewed && watched < StableWindow(lease):
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

// maxClockOffset is how far apart the clocks may be for a lease's age by its renewTime to count.
const maxClockOffset = 5 * time.Second

// ServerClockAgrees tells whether the shoot API server's Date header (serverDate, one-second
// resolution; zero when it sent none) is within maxClockOffset of this replica's clock at the middle of
// the request: this replica's clock is not off.
func ServerClockAgrees(read LeaseRead, serverDate time.Time) bool {
	if serverDate.IsZero() {
		return false
	}
	mid := read.Sent.Add(read.Received.Sub(read.Sent) / 2)
	slack := maxClockOffset + time.Second + read.Received.Sub(read.Sent)/2
	offset := serverDate.Sub(mid)
	return offset <= slack && offset >= -slack
}

// NodeClocksBehind tells whether a kubelet's clock is behind this replica's by more than
// maxClockOffset, from the leases whose renewTime advanced since the previous read (sent at
// prevSent): such a lease was renewed after prevSent on this replica's clock, so renewTime − prevSent
// bounds its kubelet's clock offset from above. known is false when no lease advanced. A stale read
// that catches up looks the same, which distrusts the age: the safe side. A kubelet clock ahead only
// makes the age rule late; the watch of grace × 0.75 still finds a dead kubelet.
func NodeClocksBehind(read LeaseRead, prevSent time.Time, seen map[string]Sighting) (behind, known bool) {
	if prevSent.IsZero() {
		return false, false
	}
	for i := range read.Leases {
		lease := &read.Leases[i]
		prev, ok := seen[lease.Name]
		if !ok || lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(prev.RenewTime) {
			continue
		}
		known = true
		if lease.Spec.RenewTime.Sub(prevSent) < -maxClockOffset {
			return true, true
		}
	}
	return false, known
}
