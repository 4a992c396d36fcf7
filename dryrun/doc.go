// Package dryrun is dwd's shadow mode (--dry-run): a replica probes, decides and runs its flows as
// usual, but sends none of the writes a shoot's control plane would see (no scale, no annotation, no
// pod delete, no Event). It logs and counts each write it would have made
// (dwd_dry_run_writes_total{kind,direction}), so that an operator can run dwd beside the original for a
// while and compare before switching (docs/operations.md, "Shadow mode").
//
// A scale flow decides each step from the state of the resources it reads, so a write that was not
// sent would be decided again at every probe. Writes therefore keeps what the not-sent patches would
// have made of their resource (an overlay) and hands it to the reads of that resource for as long as the
// fields they touch (the replicas, dwd's annotations) keep the values they had before them, whatever
// else changes (the status, a rollout of the pod template): a shoot is "scaled down" once in dry run, as
// it would be once for real, and "scaled up" once its leases recover. When someone else changes a
// touched field (the original scaling the resource), the patches would have conflicted: the overlay is
// dropped and the resource is read as it is. The overlay lives in the process: a shoot handed to another
// replica is decided afresh there.
//
// The replica's own coordination (its member, partition and leader Leases) is written as usual:
// without it there would be no shard to run in.
//
// Locking: a Writes serialises its state with a mutex and is safe for concurrent use.
package dryrun
