// Package memlimit sets the Go runtime's soft memory limit from the memory limit of the process's
// cgroup when GOMEMLIMIT does not set one: a replica that takes over a dead peer's share grows, and a
// runtime that knows its limit collects harder before it, where one that does not is OOM-killed, and
// its share moves on to the next replica (docs/operations.md, "Memory").
//
// It reads cgroup v2's memory.max, then cgroup v1's memory.limit_in_bytes, first in the folder of the
// process's own cgroup that /proc/self/cgroup names (a container without a cgroup namespace of its
// own), then at the root of the cgroup file system as a container with one sees it, and sets the
// limit to Fraction of it (debug.SetMemoryLimit), leaving the rest to what the runtime does not
// account for (the binary, thread stacks outside the heap's accounting, kernel buffers). The command
// logs what it decided.
package memlimit
