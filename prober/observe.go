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
	// TrustAge says whether the clocks were found to agree (see ServerClockAgrees and NodeClockLag):
	// only then may a lease's age by its renewTime count towards its expiry.
	TrustAge bool
	// Band is how far the kubelets' clocks may run behind this replica's while TrustAge holds: it is
	// taken off every age, so that the clock errors the trust checks tolerate never make a lease look
	// older than it is (AgeBand plus the lag seen, NodeClockLag).
	Band time.Duration
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
	// Expired is set once the value was judged Expired (here, or by the replica that handed the shoot
	// over): a value that has not changed since stays expired, whatever later reads can tell of the
	// clocks, since its kubelet has only been silent longer.
	Expired bool
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
// So a lease is Expired only when it was seen unchanged by two reads and both hold:
//   - by observation: the same renewTime has gone unrenewed for at least the lease's stability window
//     (1.5 renew intervals, see StableWindow) on this replica's clock, from the latest moment the
//     renewal can have happened to the request of this read; a live kubelet changes it more often
//     than that, whatever the clocks say. That moment is the answer that first showed the value, or,
//     when the clocks agree, renewTime plus the band of clock error (the kubelet wrote it then);
//   - by age: the renewTime plus grace × 0.75 plus the band of clock error (read.Band) is no later
//     than the moment the request was sent (the original's
//     rule, measured when the data was served at the latest, with every tolerated clock error taken
//     off), counted only when the clocks agree (read.TrustAge); or the same value has been seen for
//     grace × 0.75 (so that a dead kubelet is found whatever the clocks say, only later).
//
// A value once judged Expired stays Expired while it does not change. A renewTime that advanced since
// the last read is Fresh, and stays Fresh for the stability window. A
// renewTime that is young by a trusted age is Fresh. A renewTime older than the one seen before is
// Regressed, and the newer sighting is kept. Anything else is Unknown: a first sight (one read proves
// nothing), a value whose age cannot be trusted (after a start or a takeover, until a renewal shows
// the clocks agree) and not watched for grace × 0.75, and a lease without renewTime: no evidence
// either way.
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
	stable := read.Sent.Sub(unrenewedSince(prev, read))
	old := read.TrustAge && !read.Sent.Before(ageThreshold(prev, read, grace))
	switch {
	case prev.Expired:
		return Expired, prev
	case stable >= StableWindow(lease) && (old || watched >= threeQuarters(grace)):
		expired := *prev
		expired.Expired = true
		return Expired, &expired
	case young, prev.Renewed && watched < StableWindow(lease):
		return Fresh, prev
	}
	return Unknown, prev
}

// unrenewedSince is the latest moment, on this replica's clock, at which the renewal of the value seen
// can have happened: when the clocks agree, renewTime plus the band of clock error, and at the latest
// when the answer that first showed it arrived.
func unrenewedSince(s *Sighting, read LeaseRead) time.Time {
	if at := s.RenewTime.Add(read.Band); read.TrustAge && at.Before(s.Since) {
		return at
	}
	return s.Since
}

// ageThreshold is when, on this replica's clock, the lease seen is old by the age rule: renewTime plus
// grace × 0.75 plus the band of clock error.
func ageThreshold(s *Sighting, read LeaseRead, grace time.Duration) time.Time {
	return s.RenewTime.Add(threeQuarters(grace) + read.Band)
}

// ExpiresAt is the earliest moment, on this replica's clock, at which JudgeLease can find the lease
// seen Expired if it is never renewed again and the clocks are judged as in read: the later of the
// end of its stability window and the age threshold (the observation of grace × 0.75 without trusted
// clocks).
func ExpiresAt(lease *coordinationv1.Lease, s *Sighting, read LeaseRead, grace time.Duration) time.Time {
	stable := unrenewedSince(s, read).Add(StableWindow(lease))
	by := s.Since.Add(threeQuarters(grace))
	if read.TrustAge {
		if age := ageThreshold(s, read, grace); age.Before(by) {
			by = age
		}
	}
	if stable.After(by) {
		return stable
	}
	return by
}

// StableWindow is how long a renewTime must stay the same, on this replica's clock, before the lease
// may count as expired: 1.5 times the kubelet's renew interval, which is a quarter of the lease's
// leaseDurationSeconds (40 s, so 10 s, when the lease does not say). Two reads that far apart can
// never show the same renewTime of a kubelet that renews.
func StableWindow(lease *coordinationv1.Lease) time.Duration {
	return renewInterval(lease) * 3 / 2
}

// maxClockOffset is how far apart the clocks may be for a lease's age by its renewTime to count.
const maxClockOffset = 5 * time.Second

// AgeBand is the band of clock error taken off the ages of a read (LeaseRead.Band): the most the trust
// checks let this replica's clock run ahead of a kubelet's (maxClockOffset), or the lag seen of the
// kubelets' clocks (NodeClockLag) when that is more.
func AgeBand(nodeLag time.Duration) time.Duration {
	return max(maxClockOffset, nodeLag)
}

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

// NodeClockLag returns the most that a read shows a kubelet's clock running behind this replica's,
// from the leases whose renewTime advanced since the previous read (sent at prevSent). The previous
// read showed the renewTime seen then, so the kubelet's next renewal, one renew interval later by its
// clock, happened after prevSent on this replica's clock, as did the renewal this read shows: so
// prevSent − (seen renewTime + renew interval) and prevSent − renewTime, when positive, are lower
// bounds of the kubelet's lag, at any probe interval. A kubelet that renewed late (a stall) looks the
// same: the safe side. known is false when no lease advanced. A probe keeps the most lag it saw for
// lagMemory and takes it off the ages with the band; more than maxClockOffset distrusts them. A
// kubelet clock ahead only makes the age rule late; the watch of grace × 0.75 still finds a dead
// kubelet.
func NodeClockLag(read LeaseRead, prevSent time.Time, seen map[string]Sighting) (lag time.Duration, known bool) {
	if prevSent.IsZero() {
		return 0, false
	}
	for i := range read.Leases {
		lease := &read.Leases[i]
		prev, ok := seen[lease.Name]
		if !ok || lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(prev.RenewTime) {
			continue
		}
		known = true
		next := prev.RenewTime.Add(renewInterval(lease))
		if lease.Spec.RenewTime.Time.Before(next) {
			next = lease.Spec.RenewTime.Time
		}
		lag = max(lag, prevSent.Sub(next))
	}
	return lag, known
}

// lagMemory is how long a probe keeps the most lag it saw of a shoot's kubelet clocks (NodeClockLag)
// before a smaller one replaces it: a stall looks like a lag, and must not distrust the ages for ever.
const lagMemory = 5 * time.Minute

// renewInterval is how often the kubelet renews the lease: a quarter of its duration.
func renewInterval(lease *coordinationv1.Lease) time.Duration {
	d := defaultLeaseDuration
	if s := lease.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
		d = time.Duration(*s) * time.Second
	}
	return d / 4
}
