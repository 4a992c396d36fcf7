// Package sharding maps shoot namespaces to partitions and partitions to replicas, and runs the
// coordinator that acquires and releases partition leases so that at every instant at most one replica
// acts on a partition.
//
// The ring is github.com/buraksezer/consistent with an xxhash hasher over the live members; a namespace
// maps to a partition with FindPartitionID. The coordinator exposes an ownership view (Owns) and
// acquire/release hooks to the prober and the weeder.
package sharding
