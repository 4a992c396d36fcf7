package main

import (
	"os"
	"testing"

	"github.com/sharded-dwd/dependency-watchdog/test"
)

// TestMain removes the dwd binary the tests built (test.BuildDwd).
func TestMain(m *testing.M) {
	code := m.Run()
	test.RemoveBuilt()
	os.Exit(code)
}
