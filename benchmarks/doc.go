// Package benchmarks holds the load scenarios that drive real dwd processes against simulated shoots,
// their recorded results, and the micro-benchmarks of the hot paths. The simulated seed and shoots
// live in benchmarks/sim.
package benchmarks
