// Package benchmarks holds the load and fault benchmarks of `dwd-sim bench` (make bench) and their
// results. Run starts a seed with simulated shoots (package sim), starts `dwd run` replicas on it as
// separate processes and plays the scenarios Options name: steady load, handovers, meltdowns, the
// fault scenarios (a mass meltdown, shoot API servers that lie), the restart scenarios (a rolling
// restart, a seed API outage) and the verdict scenarios (a blip, detection times). It measures them
// from the replicas' metrics, the shoot server's view of who probed what, and informers on the seed's
// Leases and Deployments, and judges the figures against the goals (goals.go).
//
// The Result is written to benchmarks/results/<name>.json, with its Markdown table (report*.go) and
// its PNG chart (chart.go); docs/benchmarks.md describes the scenarios and the figures. The
// micro-benchmarks of the hot paths sit next to the code they measure (make bench-micro).
package benchmarks
