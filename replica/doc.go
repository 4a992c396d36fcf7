// Package replica assembles one dwd replica on a controller-runtime manager: the scheme, the seed
// caches of the roles it runs, its ownership (a member of each role's sharding group, or the Leader of
// the original's mode behind its leader lease), the prober and the weeder under that ownership, the
// permission self-check, the ownership audit log, and the health and readiness checks.
//
// The commands of cmd/dwd turn flags into Options; New builds the replica from them and Start runs it
// until its context ends. Nothing here parses flags or reads the environment, so that tests build the
// same replica the binary runs.
//
// # Data flow
//
// The manager's caches hold what the roles read (prober.CacheOptions, weeder.CacheOptions). The
// ownership (a sharding.Runner per role, or a sharding.Leader) starts a role's work as partitions are
// acquired and stops it as they are released; every write of a role asks the same owner first
// (sharding.Owner.Guard). The access checker runs beside the manager, not in it: the manager starts
// nothing until its caches synced, and a cache that may not list never does; the checker is what says
// why, and readiness fails meanwhile.
package replica
