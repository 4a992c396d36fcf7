package sharding

import "context"

// PartitionHandler runs the work of the partitions this replica holds: the prober's probes and the
// weeder's windows for the shoot namespaces in them.
type PartitionHandler interface {
	// Acquired starts the work of a partition; it must not block. ctx ends when the partition is
	// released or the replica fenced.
	Acquired(ctx context.Context, partition int)
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
