package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/audit"
)

// writeAudit writes an audit file of a process that holds partition 0 of 1 from start on.
func writeAudit(t *testing.T, dir, member string, start time.Time) string {
	t.Helper()
	path := filepath.Join(dir, member+".audit")
	clk := &steppedClock{now: start}
	l, err := audit.Open(path, audit.Process{Group: "g", Member: member, Incarnation: "i", Partitions: 1,
		RenewDeadline: 10 * time.Second, LeaseDuration: 15 * time.Second, Clock: clk})
	require.NoError(t, err)
	l.Renewed(start.Add(10 * time.Second))
	clk.now = start.Add(time.Second)
	l.Acquired(0, "fresh")
	require.NoError(t, l.Close())
	return path
}

// steppedClock is a clock.PassiveClock the test sets.
type steppedClock struct{ now time.Time }

func (c *steppedClock) Now() time.Time                  { return c.now }
func (c *steppedClock) Since(t time.Time) time.Duration { return c.now.Sub(t) }

func runAudit(args ...string) (string, error) {
	cmd := newAuditCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestAuditCommand(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	first := writeAudit(t, dir, "dwd-0", t0)

	out, err := runAudit(first)
	require.NoError(t, err)
	assert.Contains(t, out, "processes 1, acquires 1, releases 0, renewals 1")
	assert.Contains(t, out, "overlaps: 0")

	second := writeAudit(t, dir, "dwd-1", t0.Add(2*time.Second))
	out, err = runAudit(first, second)
	require.ErrorContains(t, err, "1 overlapping holds")
	assert.Contains(t, out, "group g partition 0: dwd-0/i/")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad"), []byte("{\n"), 0o644))
	_, err = runAudit(filepath.Join(dir, "bad"))
	assert.ErrorContains(t, err, "bad:1:")

	_, err = runAudit()
	assert.ErrorContains(t, err, "requires at least 1 arg")
}
