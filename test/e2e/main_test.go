package e2e

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/sharded-dwd/dependency-watchdog/test"
)

// TestMain removes the dwd binary the tests built (test.BuildDwd).
func TestMain(m *testing.M) {
	code := m.Run()
	test.RemoveBuilt()
	os.Exit(code)
}

// quietLogs keeps controller-runtime's own logs out of the test's output.
func quietLogs() {
	ctrl.SetLogger(logr.Discard())
}
