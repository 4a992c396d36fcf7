// Command dwd-sim starts a local seed (a real kube-apiserver and etcd) with simulated shoots, for
// `make demo` and the load benchmarks.
package main
