package sharding

import (
	"context"
	"errors"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// PartitionHandler runs the work of the partitions this replica holds: the prober's probes and the
// weeder's windows for the shoot namespaces in them.
type PartitionHandler interface {
	// Acquired starts the work of a partition; it must not block. ctx ends when the partition is
	// released or the replica fenced. takeover says how the partition came here.
	Acquired(ctx context.Context, partition int, takeover Takeover)
	// Released returns only after the partition's work has stopped: the next holder starts right
	// after.
	Released(partition int)
}

// Ownership tells the prober and the weeder which shoot namespaces this replica acts on now.
type Ownership interface {
	// Owns reports whether this replica holds the partition of namespace and may act on it.
	Owns(namespace string) bool
	// Partition returns the partition of namespace.
	Partition(namespace string) int
	// Guard is called right before a write that acts on namespace (a scale write, a pod delete). It
	// fails with ErrNotOwner or ErrFenced when this replica may not act on namespace now, and else
	// returns a context that ends at the moment this replica's member lease fences it, so that a
	// write still waiting to be sent then is never sent. The caller must call cancel.
	Guard(ctx context.Context, namespace string) (guarded context.Context, cancel context.CancelFunc, err error)
}

// Owner is what the prober and the weeder take from a replica's ownership: which namespaces it acts
// on, and where the work that starts and stops with partitions registers. A Coordinator is one (the
// sharded group), a Leader another (the original's single active replica).
type Owner interface {
	Ownership
	// AddHandler registers h; call it before the manager starts.
	AddHandler(h PartitionHandler)
}

// Errors of Guard.
var (
	// ErrNotOwner: this replica does not hold the namespace's partition (any more), or is leaving.
	ErrNotOwner = errors.New("this replica does not hold the namespace's partition")
	// ErrFenced: the member lease was not renewed within the renew deadline; another member may take
	// the partition over.
	ErrFenced = errors.New("this replica's member lease is past its renew deadline")
)

// StateHandler is a PartitionHandler whose work has state that travels with a partition when it is
// released gracefully, in an annotation of the partition lease written by the release itself.
type StateHandler interface {
	PartitionHandler
	// HandoverState is called after Released for a graceful release; it returns the annotation key
	// (with prefix leases.HandoverAnnotationPrefix) and the value to hand over, or an empty value.
	HandoverState(partition int) (key, value string)
}

// AdvisoryStateHandler is a StateHandler whose state only helps the next holder start better (the
// prober's probe ages): a departing member's leave does not write a partition lease for it alone, so
// that the others need not wait for those writes to take the share over.
type AdvisoryStateHandler interface {
	StateHandler
	// AdvisoryStateKey returns the annotation key of the handler's state.
	AdvisoryStateKey() string
}

// AheadHandler is a PartitionHandler whose work falls due at times (the prober's probes). Told that
// the work of partitions stops here at about stop (an announced leave: the leaving member's share,
// and what the others hand each other as the ring changes), it does before then what would fall due
// in them within window after it: the next holders start a moment after the stop, and a shoot due in
// between would wait for them.
type AheadHandler interface {
	PartitionHandler
	RunAhead(partitions []int, stop time.Time, window time.Duration)
}

// Audit records this replica's ownership for the ownership audit: the renewals that let it act, and
// the partitions whose work starts and stops here. *audit.Log implements it; package audit imports this
// one (for PartitionOf), so the dependency cannot run the other way.
type Audit interface {
	leases.Audit
	// Acquired is called before the work of partition starts, with the cause (AcquireCause).
	Acquired(partition int, cause string)
	// Released is called once the work of partition has stopped, with the cause (one of the
	// Release… constants).
	Released(partition int, cause string)
}

// Causes of a release in the audit.
const (
	// ReleaseHandover: the ring gives the partition to another member.
	ReleaseHandover = "handover"
	// ReleaseLeave: a graceful stop hands the share over.
	ReleaseLeave = "leave"
	// ReleaseReturning: a graceful stop of a member that restarts keeps its share reserved for it.
	ReleaseReturning = "returning"
	// ReleaseFence: the member lease was not renewed within the renew deadline.
	ReleaseFence = "fence"
	// ReleaseLost: someone else wrote the partition lease.
	ReleaseLost = "lost"
	// ReleaseStop: a leader stopped leading.
	ReleaseStop = "stop"
)

// AcquireLeading is the cause of a leader's acquire in the audit: it began leading.
const AcquireLeading = "leading"

// AcquireCause is the cause of an acquire in the audit: fresh, handover, expired-holder (a Crash) or
// resume.
func AcquireCause(c TakeoverCause) string {
	if c == Crash {
		return "expired-holder"
	}
	return c.String()
}

// TakeoverCause says how this replica came to hold a partition.
type TakeoverCause int

const (
	// Fresh: nobody held the partition before (a new group, or a lease released without a handover).
	Fresh TakeoverCause = iota
	// Handover: the previous holder released the partition, or left the group, gracefully; its
	// handlers' state, if any, is in Takeover.State.
	Handover
	// Crash: the previous holder's lease expired, or a previous process of this member held the
	// partition before a restart; whatever its work was doing is lost.
	Crash
	// Resume: this process held the partition before a fence and re-took it by its own
	// compare-and-swap; nobody else held it in between, and what its handlers kept may go on.
	Resume
)

func (c TakeoverCause) String() string {
	switch c {
	case Handover:
		return "handover"
	case Crash:
		return "crash"
	case Resume:
		return "resume"
	}
	return "fresh"
}

// Takeover tells a handler how this replica came to hold a partition.
type Takeover struct {
	Cause TakeoverCause
	// State holds the handover annotations of the partition lease, by key.
	State map[string]string
}
