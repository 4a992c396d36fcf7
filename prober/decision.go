package prober

import (
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// LeaseExpired reports whether a node lease has expired: now >= spec.renewTime + grace × 0.75, the
// original's formula (grace is the kube-controller-manager node monitor grace period; the 0.75 leaves
// the watchdog a margin to act before kube-controller-manager marks the node NotReady).
//
// grace × 0.75 is computed exactly in integer nanoseconds (rounded down), without overflow. A nil
// lease or a lease without renewTime counts as expired: it was never renewed, so it is no evidence that
// the kubelet reaches its API server (kube-controller-manager does not count it as a heartbeat either;
// a kubelet always sets renewTime when it creates its lease). The original panicked here.
func LeaseExpired(lease *coordinationv1.Lease, grace time.Duration, now time.Time) bool {
	if lease == nil || lease.Spec.RenewTime == nil {
		return true
	}
	return !now.Before(lease.Spec.RenewTime.Add(threeQuarters(grace)))
}

// threeQuarters returns floor(d × 0.75) for d >= 0 without overflowing.
func threeQuarters(d time.Duration) time.Duration {
	return d/4*3 + d%4*3/4
}

// Action is what the node-lease probe asks of the scaler.
type Action int

const (
	// None leaves the dependents as they are.
	None Action = iota
	// ScaleUp scales the dependents up if they were scaled down.
	ScaleUp
	// ScaleDown scales the dependents down.
	ScaleDown
)

// String returns the name of the action.
func (a Action) String() string {
	switch a {
	case None:
		return "None"
	case ScaleUp:
		return "ScaleUp"
	case ScaleDown:
		return "ScaleDown"
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Decision is the outcome of one node-lease probe.
type Decision struct {
	Action Action
	// Candidates is the number of candidate nodes that have a lease: the denominator.
	Candidates int
	// Expired is how many of those leases have expired.
	Expired int
	// Unknown is how many of those leases look old but have not been watched long enough to tell,
	// Regressed included.
	Unknown int
	// Regressed is how many of those leases showed a renewTime older than one seen before: the read
	// came from a source that lags.
	Regressed int
	// ExpiredFraction is Expired / Candidates, 0 without candidates.
	ExpiredFraction float64
	// WithoutLease is the number of candidate nodes without a lease; they are not judged.
	WithoutLease int
	// Renewed is how many of the leases this read showed renewed since the read before.
	Renewed int
	// RecheckAt is the earliest moment, on this replica's clock, at which a read could decide
	// ScaleDown should no lease be renewed from now on (see ExpiresAt); without trusted clocks, no
	// later than the end of the stability window of a lease that looks old, when a renewal of another
	// may show that the clocks agree. Zero when the decision is ScaleDown, or when leases alone can
	// never make it one.
	RecheckAt time.Time
}

// DecideScaling decides over the candidate nodes and a read of the shoot's kube-node-lease Leases,
// given the sightings of earlier reads (by lease name; see JudgeLease). It returns the decision and
// the sightings to keep, those of the candidates only.
//
// Only leases named like a candidate count, each candidate once. A candidate node without a lease is
// left out of the count, as in the original: a new node whose kubelet has not created its lease yet
// must not count as expired, and without a lease there is nothing to judge. So the denominator is the
// number of candidates with a lease, and the table reads:
//   - 0 → ScaleUp (if the dependents were scaled down: with no evidence of an outage, recover);
//   - 1 → None (one node says too little either way);
//   - fewer candidates with a lease than without → None: too few leases to speak for the shoot;
//   - Expired/Candidates >= fraction → ScaleDown;
//   - (Expired+Unknown)/Candidates >= fraction → None: the leases this replica cannot judge yet
//     could tip it either way, so it neither scales down nor up;
//   - otherwise ScaleUp.
func DecideScaling(candidates []string, read LeaseRead, seen map[string]Sighting, grace time.Duration, fraction float64) (Decision, map[string]Sighting) {
	pending := make(map[string]struct{}, len(candidates))
	for _, name := range candidates {
		pending[name] = struct{}{}
	}
	keep := make(map[string]Sighting, len(candidates))
	var d Decision
	var crossings []time.Time
	var look time.Time
	for i := range read.Leases {
		lease := &read.Leases[i]
		if _, ok := pending[lease.Name]; !ok {
			continue
		}
		delete(pending, lease.Name)
		d.Candidates++
		var prev *Sighting
		if s, ok := seen[lease.Name]; ok && s.UID == lease.UID {
			prev = &s
		}
		state, now := JudgeLease(lease, prev, read, grace)
		if now != nil {
			keep[lease.Name] = *now
			if state != Expired {
				crossings = append(crossings, ExpiresAt(lease, now, read, grace))
			}
			if state == Fresh && now.Renewed && now.Since.Equal(read.Received) {
				d.Renewed++
			}
			if state == Unknown && !read.TrustAge {
				look = earliest(look, now.Since.Add(StableWindow(lease)))
			}
		}
		switch state {
		case Expired:
			d.Expired++
		case Regressed:
			d.Regressed++
			d.Unknown++
		case Unknown:
			d.Unknown++
		}
	}
	d.WithoutLease = len(pending)
	if d.Candidates > 0 {
		d.ExpiredFraction = float64(d.Expired) / float64(d.Candidates)
	}
	d.Action = scalingAction(d, fraction)
	if d.Action != ScaleDown && d.Candidates > 1 && d.Candidates >= d.WithoutLease {
		d.RecheckAt = recheckAt(crossings, needed(d.Candidates, fraction)-d.Expired, look)
	}
	return d, keep
}

// needed is the least number of expired leases among candidates that decides ScaleDown.
func needed(candidates int, fraction float64) int {
	k := 0
	for float64(k)/float64(candidates) < fraction && k < candidates {
		k++
	}
	return max(k, 1)
}

// recheckAt is the moment the k-th earliest of the crossings is due (zero: fewer crossings than k),
// or look when that is earlier.
func recheckAt(crossings []time.Time, k int, look time.Time) time.Time {
	var at time.Time
	if k >= 1 && k <= len(crossings) {
		slices.SortFunc(crossings, func(a, b time.Time) int { return a.Compare(b) })
		at = crossings[k-1]
	}
	return earliest(at, look)
}

// earliest returns the earlier of two moments, a zero one counting as none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// scalingAction applies the decision table to the counts.
func scalingAction(d Decision, fraction float64) Action {
	switch {
	case d.Candidates == 0:
		return ScaleUp
	case d.Candidates == 1, d.Candidates < d.WithoutLease:
		return None
	case d.ExpiredFraction >= fraction:
		return ScaleDown
	case float64(d.Expired+d.Unknown)/float64(d.Candidates) >= fraction:
		return None
	}
	return ScaleUp
}
