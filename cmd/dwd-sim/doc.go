// Command dwd-sim runs a local seed with simulated shoots, for `make demo` and the load benchmarks. It
// only parses flags: the seed is package sim's, the demo package demo's, the benchmarks package
// benchmarks', the audit check package auditcheck's.
//
//	dwd-sim up --shoots N    start the seed and the shoots, print the kubeconfig path, run until
//	                         interrupted; --scenario and its flags make the shoots' API servers melt
//	                         down, fail or lie (a stale cache, a slow body, skewed clocks, huge lists)
//	dwd-sim demo             a seed with a few hundred shoots and three `dwd run` replicas, running as
//	                         the ServiceAccount of deploy/overlays/sharded (impersonated, so under exactly
//	                         its RBAC), playing a scripted outage with a live view (a meltdown, a recovery,
//	                         a kill -9, a return, a weeding, a graceful handover), ending with a summary
//	                         (exit 1 if a step failed): the flags of package demo's Run
//	dwd-sim bench            the load and fault benchmarks against `dwd run` processes (make bench),
//	                         written to benchmarks/results: the flags of package benchmarks' Run;
//	                         docs/benchmarks.md describes them
//	dwd-sim audit FILES...   check the files of dwd's --audit-log: no two processes held a partition
//	                         at once, every write came from the holder; the longest unheld gap
//
// Its tests hold the end-to-end stories: the demo's whole script (TestDemo), the original's command
// lines under Gardener's RBAC, a rule taken out of each story's RBAC, the dashboards and alerts on a
// real Prometheus, and no secret in any replica's log.
package main
