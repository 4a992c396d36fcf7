// Package benchmarks holds the load benchmarks' results: the Result written to
// benchmarks/results/<name>.json by `dwd-sim bench` (make bench), its Markdown table and its PNG chart.
// The scenarios themselves drive real dwd processes from cmd/dwd-sim; the simulated seed and shoots
// live in benchmarks/sim; the micro-benchmarks of the hot paths sit next to the code they measure
// (make bench-micro).
package benchmarks
