package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logLine is one line of a replica's log: its text and, for the JSON lines of dwd's logger, its fields.
type logLine struct {
	file   string
	number int
	text   string
	fields map[string]any
}

func (l logLine) String() string {
	return fmt.Sprintf("%s:%d: %s", filepath.Base(l.file), l.number, l.text)
}

// readLogs reads every line of the replica logs (*.log) in dir.
func readLogs(t *testing.T, dir string) []logLine {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, paths, "no replica log in %s", dir)
	var lines []logLine
	for _, path := range paths {
		f, err := os.Open(path)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for n := 1; sc.Scan(); n++ {
			l := logLine{file: path, number: n, text: sc.Text()}
			_ = json.Unmarshal(sc.Bytes(), &l.fields) // klog's text lines have no fields
			lines = append(lines, l)
		}
		require.NoError(t, errors.Join(sc.Err(), f.Close()))
	}
	return lines
}

// permissionLines returns the lines that report a permission missing (message "Missing permission",
// or "Missing optional permission" when optional).
func permissionLines(lines []logLine, optional bool) []logLine {
	msg := "Missing permission"
	if optional {
		msg = "Missing optional permission"
	}
	var out []logLine
	for _, l := range lines {
		if l.fields["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// names reports whether a "Missing permission" line names verb (among its verbs) on resource in group
// and namespace.
func names(l logLine, verb, group, resource, namespace string) bool {
	verbs, _ := l.fields["verbs"].([]any)
	return slices.Contains(verbs, any(verb)) && fmt.Sprint(l.fields["group"]) == group && l.fields["resource"] == resource &&
		fmt.Sprint(l.fields["namespace"]) == namespace
}

// forbiddenLines returns, per log file, the lines that mention "forbidden".
func forbiddenLines(lines []logLine) map[string][]logLine {
	out := map[string][]logLine{}
	for _, l := range lines {
		if strings.Contains(strings.ToLower(l.text), "forbidden") {
			out[l.file] = append(out[l.file], l)
		}
	}
	return out
}

// assertPermissionsSuffice checks the replicas' logs: no required permission reported missing, at
// most one line per process for the missing optional permissions of one resource (Events: one line
// that says none are recorded), and no log with more than one line that
// mentions "forbidden" (a refusal logged once is a report; logged again it is spam, as Events the
// replica may not write would be).
func assertPermissionsSuffice(t *testing.T, dir string) []logLine {
	t.Helper()
	lines := readLogs(t, dir)
	assert.Empty(t, permissionLines(lines, false), "a required permission is missing")
	reported := map[string]bool{}
	for _, l := range permissionLines(lines, true) {
		key := fmt.Sprint(l.file, l.fields["group"], l.fields["resource"], l.fields["namespace"])
		assert.False(t, reported[key], "reported again: %s", l)
		reported[key] = true
	}
	for file, forbidden := range forbiddenLines(lines) {
		assert.LessOrEqual(t, len(forbidden), 1, "%s repeats forbidden lines: %v", filepath.Base(file), forbidden)
		t.Log("A line mentions forbidden:", forbidden)
	}
	return lines
}

func TestForbiddenAndPermissionLines(t *testing.T) {
	dir := t.TempDir()
	log := strings.Join([]string{
		`{"level":"info","msg":"Missing permission","verbs":["list"],"group":"coordination.k8s.io","resource":"leases","namespace":"garden"}`,
		`{"level":"info","msg":"Missing optional permission","verbs":["create","patch"],"group":"events.k8s.io","resource":"events","namespace":""}`,
		`E0101 00:00:00.000000 1 reflector.go:1] "Unhandled Error" err="leases is forbidden: User cannot list"`,
		`{"level":"info","msg":"Leading: every shoot is this replica's"}`,
	}, "\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dwd-0.log"), []byte(log), 0o600))
	lines := readLogs(t, dir)
	require.Len(t, lines, 4)

	missing := permissionLines(lines, false)
	require.Len(t, missing, 1)
	assert.True(t, names(missing[0], "list", "coordination.k8s.io", "leases", "garden"))
	assert.False(t, names(missing[0], "watch", "coordination.k8s.io", "leases", "garden"))
	optional := permissionLines(lines, true)
	require.Len(t, optional, 1)
	assert.True(t, names(optional[0], "create", "events.k8s.io", "events", ""))
	forbidden := forbiddenLines(lines)[filepath.Join(dir, "dwd-0.log")]
	require.Len(t, forbidden, 1)
	assert.Equal(t, 3, forbidden[0].number)
}
