package sharding

import "context"

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
}

// StateHandler is a PartitionHandler whose work has state that travels with a partition when it is
// released gracefully, in an annotation of the partition lease written by the release itself.
type StateHandler interface {
	PartitionHandler
	// HandoverState is called after Released for a graceful release; it returns the annotation key
	// (with prefix leases.HandoverAnnotationPrefix) and the value to hand over, or an empty value.
	HandoverState(partition int) (key, value string)
}

// TakeoverCause says how this replica came to hold a partition.
type TakeoverCause int

const (
	// Fresh: nobody held the partition before (a new group, or a lease released without a handover).
	Fresh TakeoverCause = iota
	// Handover: the previous holder released the partition, or left the group, gracefully; its
	// handlers' state, if any, is in Takeover.State.
	Handover
	// Crash: the previous holder's lease expired, or this member itself held the partition before a
	// restart or a fence; whatever its work was doing is lost.
	Crash
)

func (c TakeoverCause) String() string {
	switch c {
	case Handover:
		return "handover"
	case Crash:
		return "crash"
	}
	return "fresh"
}

// Takeover tells a handler how this replica came to hold a partition.
type Takeover struct {
	Cause TakeoverCause
	// State holds the handover annotations of the partition lease, by key.
	State map[string]string
}
