// Package sharding maps shoot namespaces to partitions and partitions to replicas, and runs this
// replica's side of the protocol (DESIGN §4) so that at every instant at most one replica acts on a
// partition.
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
//     loop triggered by every Lease event and requeued at the next moment a member lease can expire;
//     a graceful stop that returns (a restart: the share stays reserved), hands over, or departs.
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
// # Choosing the defaults
//
// Goals, measured by TestRingTable on 5,000 shoot namespaces (shoot--<project>--<name>, 250 projects ×
// 20 names drawn with a seeded PRNG) for groups of N = 3, 5 and 10 StatefulSet members dwd-0..dwd-(N-1):
//   - balance: the member with the most shoots holds at most 1.10 × the mean;
//   - moved fraction: when dwd-N joins, or one member leaves (the highest ordinal, as in a scale-down,
//     and each member in turn, as in a crash), the fraction of shoots whose owner changes is at most
//     1.25 × the ideal (1/(N+1) for a join, 1/N for a leave);
//   - cost: each partition whose owner changes costs 2 partition lease writes (release, acquire), so
//     writes grow with P; among the configurations meeting the goals, the fewest writes win.
//
// Chosen: P = 887, replication factor 400, load bound 1.02 (ratios are moved fraction / ideal):
//
//	 N | max/mean | join ratio writes | scale-down ratio writes | crash ratio mean worst | writes mean worst
//	 3 |    1.052 |      1.131    508 |            0.970    578 |             1.044 1.101 |        617   642
//	 5 |    1.051 |      1.096    312 |            1.002    384 |             1.059 1.169 |        378   418
//	10 |    1.070 |      1.197    190 |            1.072    204 |             1.113 1.180 |        199   208
//
// The library defaults (P = 271, replication factor 20, load bound 1.25) miss both goals:
//
//	 N | max/mean | join ratio writes | scale-down ratio writes | crash ratio mean worst | writes mean worst
//	 3 |    1.210 |      1.040    140 |            0.990    180 |             1.000 1.210 |        181   218
//	 5 |    1.210 |      0.784     70 |            1.210    136 |             1.022 1.210 |        110   136
//	10 |    1.328 |      1.318     64 |            1.024     56 |             1.128 1.620 |         61    84
//
// The scan (TestRingScan with DWD_RING_SCAN=1: P in {271, 521, 769, 887, 1021, 2053, 4099}, replication
// factor in {20, 50, 100, 200, 400}, load bound in {1.02, 1.05, 1.08, 1.10, 1.15, 1.25}) also counts on
// how many of 50 other samples of 5,000 namespaces, and for how many group sizes N = 3..12, a
// configuration meets the goals, to tell a good configuration from one that is lucky on the table.
// Excerpt (per N = 3, 5, 10: balance, join, scale-down, worst crash; writes join/scale-down):
//
//	   P  RF    L | N=3                 | N=5                 | N=10                | writes                    | ok    | samples | N=3..12
//	 271  20 1.25 | 1.21 1.04 0.99 1.21 | 1.21 0.78 1.21 1.21 | 1.33 1.32 1.02 1.62 | 140/180 70/136 64/56      | false |  0/50   |  0/10
//	 271 200 1.05 | 1.05 1.13 1.01 1.05 | 1.04 1.18 1.05 1.13 | 1.14 1.38 1.05 1.36 | 156/180 100/116 68/58     | false |  0/50   |  3/10
//	 521 200 1.05 | 1.05 1.07 1.02 1.05 | 1.08 1.15 1.24 1.24 | 1.09 1.17 1.05 1.25 | 276/350 200/250 106/108   | true  | 16/50   |  8/10
//	 769 200 1.05 | 1.06 1.05 0.99 1.06 | 1.09 1.11 1.16 1.16 | 1.07 1.13 1.05 1.21 | 408/510 280/346 158/170   | true  | 20/50   |  9/10
//	 769 400 1.02 | 1.03 1.08 0.96 1.10 | 1.04 1.06 1.10 1.11 | 1.13 1.14 1.13 1.25 | 428/500 270/336 160/174   | false | 42/50   |  6/10
//	 887 200 1.02 | 1.04 1.00 1.03 1.06 | 1.05 1.17 1.10 1.12 | 1.08 1.23 1.04 1.28 | 456/602 332/412 202/202   | false |  9/50   |  6/10
//	 887 400 1.02 | 1.05 1.13 0.97 1.10 | 1.05 1.10 1.00 1.17 | 1.07 1.20 1.07 1.18 | 508/578 312/384 190/204   | true  | 36/50   |  9/10
//	1021 400 1.02 | 1.03 1.13 0.95 1.08 | 1.04 1.00 1.00 1.11 | 1.10 1.17 1.15 1.23 | 574/652 354/422 220/240   | true  | 32/50   |  8/10
//	2053 400 1.02 | 1.04 1.15 0.93 1.11 | 1.04 1.00 1.08 1.11 | 1.06 1.09 1.14 1.16 | 1162/1326 716/844 414/462 | true  | 39/50   | 10/10
//
// What the scan shows:
//   - No configuration with P = 271 meets the goals at N = 10 (27 partitions per member): the worst
//     crash moves 1.23 to 1.67 × the ideal, and the few near 1.25 need a load bound of 1.10 or more,
//     which puts the busiest member at 1.14 × the mean or worse.
//   - The moved fraction is a property of where the members' points fall and is erratic: a small change
//     of P or the replication factor flips a worst crash between 1.1 and 1.4 × the ideal. More points
//     per member (400) make it steadier; the load bound must be tight (1.02) for balance, which makes
//     the bounded-load cascade on a leave worse unless the ring has many points.
//   - 521/200/1.05 is the cheapest configuration that meets the goals on the table, but it sits at the
//     limits (1.24, 1.25) and meets them on only 16 of 50 other samples: lucky, not chosen.
//     769/400/1.02 does best on the other samples (42/50) but misses the table (1.13 at N = 10) and
//     4 of the 10 group sizes.
//     887/400/1.02 meets them on the table with 3% to spare, on 36/50 other samples and for 9 of the
//     10 group sizes 3..12. It costs 1.7 × the writes of 521/200/1.05 and 1.16 × those of 769/200/1.05
//     (which meets the goals on only 20/50 samples); a join moves at least 1/(N+1) of the partitions,
//     so 2 × 887/4 ≈ 444 writes is the floor at N = 3. Larger P is steadier (2053: 39/50, 10/10) but
//     costs 2.3 × the writes and 2,053 Leases per seed for little gain.
//   - The balance goal is near the statistical floor at N = 10: 5,000 shoots hashed uniformly onto 10
//     members already give a busiest member of ≈ 1.065 × the mean, above 1.10 on about 1 sample in 10,
//     whatever the ring; about half of the samples the chosen defaults miss fail only on that.
//
// Re-checked for up to 30 members (TestRingUpToThirtyMembers with DWD_RING_SCAN=1, the table's
// namespaces; shoots max/mean, then the moved fractions of a join, a scale-down and the worst crash):
//
//	 N | 887/400/1.02              | 2053/400/1.02             | 4099/400/1.02
//	15 | 1.059  1.19 1.14 1.36     | 1.131  1.16 1.30 1.30     | 1.098  1.13 1.10 1.21
//	20 | 1.104  1.11 1.31 1.64     | 1.156  1.35 1.29 1.43     | 1.136  1.09 1.04 1.33
//	30 | 1.128  1.20 1.51 1.81     | 1.176  1.11 1.44 1.60     | 1.170  1.05 1.30 1.41
//
// At 30 members the balance of 1.10 cannot be promised at 5,000 shoots by any hashing of namespaces:
// about 167 shoots per member vary by ± 13, so the busiest of 30 is ≈ 1.15 × the mean on average; the
// defaults give 1.128 on the table. No configuration of P in {887, 2053}, replication factor in
// {200, 400} and load bound in {1.02 … 1.25} meets both goals at N = 20 or 30: a looser bound moves
// fewer shoots and balances worse. The moves cost little there in absolute terms (a worst crash at
// N = 30 rewrites about 100 partition leases and moves 6 % of the shoots instead of 3.3 %), so the
// defaults stay, chosen for N = 3 to 12.
//
// Cost of the points: the library sorts all points again after adding each member, so building the
// ring takes time growing with N² × replication factor: about 1 ms for 3 members, 4 ms for 10 and 270 ms for 100
// (BenchmarkNewRing). The ring is immutable, so build it once per live member set, not per reconcile.
package sharding
