// Package audit is the ownership audit of the sharding protocol (docs/sharding.md,
// "Ownership audit"): each replica appends a JSON line to its audit file for every event that bears
// on the invariant (at every instant at most one member acts on a partition), and a checker proves
// the invariant from the files of all replicas (auditcheck).
//
// What a replica records (Log; the flag --audit-log of dwd run, dwd prober and dwd weeder):
//   - start: once per process, with the group's partition count, renew deadline and lease duration;
//   - renew: every successful renewal of the member lease (or of the leader lease in the original's
//     mode), with the fence: the wall time until which the process may act on it (the renewal's send
//     time plus the renew deadline). It is written before the renewal is published to the process,
//     so no work can rest on a renewal that has no record yet;
//   - acquire and release: a partition whose work starts (after the process's own compare-and-swap)
//     or stops here, with the cause. An acquire is written before the work starts, a release after
//     it has stopped, so that every write of the work lies between them;
//   - send and write: every scale write and pod delete, twice: a send line right before the request,
//     with the moment just before it was sent, and a write line with its result after the answer,
//     paired by an id. A write in flight when the process is killed has its send line.
//
// Every line carries the wall time (RFC 3339 with nanoseconds), the nanoseconds on the process's
// monotonic clock since the Log was opened (which orders one process's lines even if its wall clock
// jumps), the member, the incarnation, the group and the process id. A line is written by one
// write(2) on a file opened with O_APPEND, so lines of several processes sharing a file, and the last
// line of a killed process, are whole.
//
// The checker of the files is the package auditcheck, one floor up (it needs the group's partition
// function); this package is what a replica links: the Log and the Record, and ReadFile.
//
// Locking: a Log serialises its writes with a mutex; it is safe for concurrent use, and a nil *Log
// records nothing, so callers need no checks.
package audit
