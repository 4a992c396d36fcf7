// Package sharding maps shoot namespaces to partitions and partitions to replicas, and runs this
// replica's side of the protocol (docs/sharding.md) so that at every instant at most one replica acts
// on a partition.
//
// The pieces:
//   - Ring: github.com/buraksezer/consistent with an xxhash hasher over the live members. A namespace
//     maps to partition xxhash(namespace) mod P (PartitionOf), independent of the members; the ring
//     gives each partition its owner.
//   - Plan: the pure decision per partition (keep, release, acquire).
//   - Coordinator: one reconcile step over the cached Leases — observe the member leases, build the
//     ring of the live members, release what moved away (work stopped first), acquire what moved here
//     (work started only after this process's own compare-and-swap). It tells the prober and the
//     weeder what this replica owns (Owns) and starts and stops their work (PartitionHandler).
//   - Runner: the coordinator against the API server — member lease loop, Lease cache, a reconcile
//     loop triggered by Lease events (at most one per 200 ms, throttle.go) and requeued at the next
//     moment a member lease can expire; a graceful stop that returns (a restart: the share stays
//     reserved), hands over, or departs. StatefulSetPod tells a restart from a departure, and
//     whether a member away on a returning leave will be back.
//   - Report: a group described from its Leases and the seed's Cluster names, what `dwd shards`
//     prints.
//   - Leader: the Ownership of the original's mode (`dwd prober|weeder --enable-leader-election` with no
//     sharding flag): one partition holding everything, owned while the process leads, with writes
//     fenced by the leader lease's renewals (FencedLock). No member or partition Leases.
//   - Settings, the checks (checks.go) and Guard: members that disagree change nothing, holders stop
//     on foreign writes, orphaned member leases are deleted, and every write on a shoot is checked
//     against ownership and the fence moment right before it is sent. docs/sharding.md says what each
//     rule protects against.
//
// Locking: reconcile steps run one at a time and own the observer and the ring. Each partition has a
// lock that orders its start and stop; a start re-checks the fence epoch under it and under fenceMu
// (shared), which a fence takes exclusively while it moves the epoch and lists the held partitions,
// so no work starts after the member lease loop has fenced the replica. A fence then waits for every
// partition's lock, so stops under way elsewhere count against its budget. A short RW lock guards the
// held set that Owns reads, and the handover state pending a release write.
//
// Lock order across sharding and the roles: a partition's lock, then a role's Manager.mu (the
// coordinator calls a handler's Acquired and Released holding the partition's lock and no other),
// then the coordinator's short lock and the member lease's (Owns, Holds and Guard, which a role asks
// under its own lock, take only those). No role takes a partition's lock, and the coordinator never calls a handler while it
// holds its short lock, so the order has no cycle. A handler's Released decides under its own lock
// and waits for its work outside it. An AheadHandler's RunAhead is called with no lock of the
// coordinator's held, from a reconcile (a peer announced its leave) or from the leave's lead.
//
// # The ring's defaults
//
// P = 887 partitions, replication factor 400, load bound 1.02 (DefaultRingConfig): how they were chosen,
// measured and re-checked for up to 30 members is in docs/ring.md (TestRingTable, TestRingScan and
// TestRingUpToThirtyMembers reproduce it).
package sharding
