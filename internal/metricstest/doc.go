// Package metricstest checks dwd's metrics against Prometheus' naming rules in tests: Lint registers a
// package's metrics in a fresh registry, gives every labelled one a placeholder series (a vector with
// no series is not gathered, and so would not be linted), runs promlint over them, and fails on any
// problem of a dwd_* metric that the package's allowlist does not name. Each package with metrics keeps
// one list of them, which its register function registers and its TestMetricsLint lints.
//
// Sum and Gathered read the metrics of the process as its endpoint serves them (controller-runtime's
// registry): the one reader the tests of every package use.
package metricstest
