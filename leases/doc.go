// Package leases holds the Lease arithmetic and writes of the sharding protocol (docs/sharding.md):
//
//   - the member lease <group>-member-<name> that each replica takes, renews every retry period, and
//     releases on graceful shutdown; a replica that has not renewed within the renew deadline is fenced
//     and must stop all work (Member);
//   - the partition leases <group>-partition-<k>, whose holder changes only by compare-and-swap on
//     resourceVersion and which are never renewed periodically (Acquire, Release);
//   - expiry by observation: another member's lease is expired only when it has not changed for the
//     lease duration on this process's own clock since the change was first seen (Observer), so clock
//     offsets between machines do not matter.
//
// Everything that decides takes `now` as an argument; Member is the only part with a loop of its own.
// Writes go through Store, which the API server or an in-memory store in tests implements.
package leases
