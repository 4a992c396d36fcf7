package main

import (
	"testing"

	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
)

// TestMetricsLint checks the command's own metrics against Prometheus' naming rules (promlint); each
// package that defines metrics checks its own the same way.
func TestMetricsLint(t *testing.T) {
	metricstest.Lint(t, nil, unknownFields, buildInfo)
}
