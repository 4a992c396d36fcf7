// Command dwd-sim runs a local seed with simulated shoots, for `make demo` and the load benchmarks:
//
//	dwd-sim up --shoots N    start the seed and the shoots, print the kubeconfig path, run until interrupted
//	dwd-sim demo             a seed with a few hundred shoots and three `dwd run` replicas, playing a
//	                         scripted outage with a live view, ending with a summary (exit 1 if a step failed)
package main
