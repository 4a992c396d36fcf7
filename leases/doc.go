// Package leases holds the Lease arithmetic and writes of the sharding protocol: a replica's member
// lease (acquire, renew every retry period, self-fence when the renew deadline passes, release on
// shutdown) and the partition leases whose holder changes only by compare-and-swap on resourceVersion.
//
// Lease state is a pure function of (lease, now); nothing here reads a wall clock on its own.
package leases
