// Package dwdproc runs dwd as child processes and reads them from outside, for the replicas of the
// simulated seed (benchmarks/sim: the demo, the benchmarks, the end-to-end stories) and the chaos suite (test/chaos): start one with its output appended to a
// log file, signal it (SIGKILL as a crash, SIGTERM as a graceful stop, SIGSTOP as a pause), scrape its
// metrics and ask its readiness.
package dwdproc
