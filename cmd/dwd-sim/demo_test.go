package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDemo plays the demo's whole script with a small seed, so that `make demo` keeps working.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a seed and three dwd processes")
	}
	quietLogs()
	dir := t.TempDir()
	dwd := filepath.Join(dir, "dwd")
	out, err := exec.Command("go", "build", "-o", dwd, "github.com/sharded-dwd/dependency-watchdog/cmd/dwd").CombinedOutput()
	require.NoError(t, err, string(out))

	var buf bytes.Buffer
	err = runDemo(context.Background(), &buf, demoOptions{shoots: 30, nodes: 2, replicas: 3, dwd: dwd, dir: dir})
	if err != nil {
		t.Log(buf.String())
	}
	require.NoError(t, err)
	require.Contains(t, buf.String(), "All 6 steps did what they should.")
}
