// Package dryrun is dwd's shadow mode (--dry-run): a replica probes, decides and runs its flows as
// usual, but sends none of the writes a shoot's control plane would see (no scale, no annotation, no
// pod delete, no Event). It logs and counts each write it would have made
// (dwd_dry_run_writes_total{kind,direction}), so that an operator can run dwd beside the original for a
// while and compare before switching (docs/operations.md, "Shadow mode").
//
// A scale flow decides each step from the state of the resources it reads, so a write that was not
// sent would be decided again at every probe. Writes therefore keeps what each not-sent patch would have
// made of its resource (an overlay) and hands it to the reads of that resource for as long as the
// resource itself has not changed (same resourceVersion): a shoot is "scaled down" once in dry run, as it
// would be once for real, and "scaled up" once its leases recover. When something else changes the
// resource (the original scaling it, a rollout), the overlay is dropped and the resource is read as it
// is. The overlay lives in the process: a shoot handed to another replica is decided afresh there.
//
// The replica's own coordination (its member, partition and leader Leases) is written as usual:
// without it there would be no shard to run in.
//
// Locking: a Writes serialises its state with a mutex and is safe for concurrent use.
package dryrun
