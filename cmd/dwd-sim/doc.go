// Command dwd-sim runs a local seed with simulated shoots, for `make demo` and the load benchmarks:
//
//	dwd-sim up --shoots N    start the seed and the shoots, print the kubeconfig path, run until
//	                         interrupted; --scenario and its flags make the shoots' API servers melt
//	                         down, fail or lie (a stale cache, a slow body, skewed clocks, huge lists)
//	dwd-sim demo             a seed with a few hundred shoots and three `dwd run` replicas, running as
//	                         the ServiceAccount of deploy/overlays/sharded (impersonated, so under exactly
//	                         its RBAC), playing a scripted outage with a live view (a meltdown, a recovery,
//	                         a kill -9, a return, a weeding, a graceful handover), ending with a summary
//	                         (exit 1 if a step failed)
//	dwd-sim bench            the load and fault benchmarks against `dwd run` processes (make bench),
//	                         written to benchmarks/results: the flags of package benchmarks' Run;
//	                         docs/benchmarks.md describes them
//	dwd-sim audit FILES...   check the files of dwd's --audit-log: no two processes held a partition
//	                         at once, every write came from the holder; the longest unheld gap
package main
