// Package prober checks, for every shoot namespace this replica owns, the shoot's kube-apiserver and
// node leases, and asks the scaler to scale the dependent control-plane components down when too many
// node leases have expired and back up when they recover.
//
// Probes are scheduled on a min-heap of next-run times feeding a bounded worker pool, never a goroutine
// per shoot; seed objects come from filtered informer caches, all registered at setup, and shoot
// clients are cached per Secret version. Scale flows run on a second scheduler with workers of their
// own, stepped so that their waits hold no worker. Every scale write asks the Ownership's Guard right
// before it is sent (Setup makes it the Scaler's Guard), so a replica past its renew deadline writes
// nothing even before its partitions are stopped. Which shoots are scaled down is read from the
// dependents' cache at scrape time (scaleddown.go), not from the probes, so that a shoot left at 0
// stays visible when its probe stops.
//
// # Decisions
//
// No single read decides a scale-down. The pure part is JudgeLease and DecideScaling: a lease is
// expired only when two reads showed its renewTime unchanged for a stability window on this replica's
// clock, and the age rule with the band of clock error taken off (or a longer watch) agrees; a lease
// not watched long enough is Unknown and blocks both directions. DecideScaling also says when the
// leases could first decide a scale-down should none renew (RecheckAt), and the probe's next cycle
// runs then when that is before its period is over; at an interval over 10 s, after a cycle that
// read a shoot scaled down, it runs after about a kubelet renewal (downRecheck), to find the
// recovery. A probe cycle confirms a scale-down with a
// consistent read, measures lease ages from the moment the request was sent (a slow answer counts; an
// oversized one is inconclusive), and publishes its decision as the shoot's verdict (verdict.go): a
// flow writes only while its verdict stands, and a verdict the other way ends it. What the probes saw
// travels with a partition released gracefully (sightings.go). docs/prober.md gives the reasoning.
//
// # Locking
//
// Manager.mu guards the probes and orders every start and stop of a probe. Stopping a probe waits for
// the probe's run in flight and its flow's step in flight, so neither outlives the ownership of the
// shoot; a reconcile of one namespace waits under mu, Released (a whole partition) decides under mu
// which probes stop and drops them, waits for them without mu, so that no reconcile or probe of
// another partition waits behind a slow run, and records their ages and sightings under mu again. No
// probe of the partition can start in between: it is no longer owned, and the coordinator holds the
// partition's lock until Released returns. The lock order across sharding and the roles is in the
// sharding package's doc: a partition's lock, then mu, then the coordinator's short lock. Manager.flowMu guards only the maps of running flows and of verdicts, and is never held
// while waiting (ending a flow takes it out of the map under the lock, then waits outside). A
// probe's memory (probeState) is touched only by its runs, which the scheduler never overlaps, also
// across a restart that swaps the job. ShootClients has its own lock around its map; requests are sent
// outside it. The budget of shoot answer bytes in flight (answerBudget) locks only its count and its
// waiters: an answer that holds no bytes may wait for some, one that holds bytes waits only when no
// other does, so no two answers wait on each other. dependentMarks (taken by the dependent informers' handlers) and scaledDownCollector
// (taken by a scrape) each lock only their own map.
package prober
