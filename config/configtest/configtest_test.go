package configtest

import (
	"strings"
	"testing"
)

// recorder is a testing.TB that records a fatal failure instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	_ = args
}

func TestAFixtureWithAnUnknownKeyFailsTheTest(t *testing.T) {
	r := &recorder{TB: t}
	Weeder(r, "watchDuration: 2m\nwatchTimeout: 1m\nservicesAndDependantSelectors: {}\n")
	if !strings.Contains(r.failed, "does not decode strictly") {
		t.Fatalf("an unknown key passed: %q", r.failed)
	}
	r = &recorder{TB: t}
	if cfg := Weeder(r, "watchDuration: 2m\nservicesAndDependantSelectors:\n  etcd-main-client:\n    podSelectors:\n    - matchExpressions:\n      - {key: role, operator: In, values: [apiserver]}\n"); r.failed != "" || cfg == nil {
		t.Fatalf("a valid config failed: %q", r.failed)
	}
}
