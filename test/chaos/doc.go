// Package chaos proves on real processes that the sharded watchdog keeps its promises under faults:
// three `dwd run` processes (built once per test run) against a real kube-apiserver and etcd and
// about thirty simulated shoots. The seed, the shoots and the processes are benchmarks/sim's, as the
// demo's and the benchmarks' are: a sim.ReplicaSet starts the replicas, each reaching the API server
// through its own loopback proxy that a scenario can cut, with an audit log per process, and kills,
// terminates, pauses, restarts (with other flags in a rolling update) and scrapes them. This package
// holds the scenarios (processes_test.go, groups_test.go, seed_test.go, shoots_test.go), the checks
// that follow each round (round_test.go, checks_test.go, scaling_test.go) and the soak's summary
// (stats_test.go); cluster_test.go sets the stage and waits for convergence.
//
// The scenarios kill replicas (SIGKILL, SIGTERM, SIGSTOP), start a second process under a running
// replica's name, cut a replica's network for longer than the member lease, drop the weeder role from
// two replicas and add it back in rolling updates, cut every replica off three times in a row (a
// brownout, in which none may step down), roll a settings change out and back (the incumbents hold
// every partition until the last one left), stop the kube-apiserver
// and start it again on the same etcd, restart every replica in turn during a meltdown, let shoots
// lie and fail (stale caches, slow bodies, clock offsets, huge lists, timeouts, 5xx, 429, malformed
// JSON, a wrong CA, leases without renewTime) and put broken objects into the seed. After each one
// the suite checks, without restarting anything, that every partition is held and every shoot
// probed again, that no replica panicked, that dwd wrote no Deployment of a shoot that did not melt
// and each dependent of one that did exactly twice (down, up), counted by metadata.generation between
// two reads rather than by a watch that may miss changes, and runs the ownership audit over the
// replicas' audit logs when the binary writes them.
//
// `go test ./test/chaos` runs a few rounds of each scenario (skipped under -short);
// `go test ./test/chaos -run TestSoak -soak=30m` (make soak) runs scenarios at random until the time
// is up and prints a summary, also written to -soak-report.
//
// Every test shares one cluster (seed, shoots, replicas), started by the first test that needs it:
// the scenarios run one after the other, never in parallel, since each asserts on the whole group.
package chaos
