// Package auditcheck proves the invariant of the sharding protocol (at every instant at most one
// member acts on a partition) from the ownership audit files of all replicas of a run (package audit,
// docs/sharding.md, "Ownership audit"); dwd-sim audit and the chaos suite run it.
//
// The checker (Check, CheckFiles) judges a process (member, incarnation, pid) to hold partition p
// validly at time t when it acquired p before t, did not release it before t, and its latest renewal
// before t has a fence after t, ordering each process's lines by its monotonic clock. It reports
// overlapping valid holds, writes sent without a valid hold of the namespace's partition (judged by
// their send lines, answered or not), and the longest time a partition had no valid holder between
// two holds. The wall clocks of the processes are compared with each other, so the files of one run must
// come from machines whose clocks agree (the tests run every replica on one machine).
package auditcheck
