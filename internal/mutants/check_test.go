package mutants

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sample copies the module of testdata/sample, a package with its tests, into a directory of the
// test's and returns it.
func sample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"go.mod", "max.go", "max_test.go"} {
		data, err := os.ReadFile(filepath.Join("testdata", "sample", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	return dir
}

func TestCheck(t *testing.T) {
	dir := sample(t)
	list, err := Load(writeList(t, dir, `
- {name: less, why: the comparison is reversed, file: max.go, original: a > b, mutant: a < b, tests: [TestMax, TestShortOnly]}
- {name: greater-or-equal, why: an equivalent mutant, file: max.go, original: a > b, mutant: a >= b, tests: [TestMax]}
- {name: gone, why: code that changed, file: max.go, original: a >= b, mutant: a > b, tests: [TestMax]}
- {name: undefined, why: a typo in the list, file: max.go, original: return a, mutant: return c, tests: [TestMax]}
`))
	require.NoError(t, err)
	var out bytes.Buffer
	results, err := Checker{Out: &out, Workers: 4}.Check(context.Background(), list) // all at once: the lines still come in the list's order
	require.NoError(t, err)
	require.Len(t, results, 4)
	assert.Equal(t, Result{Mutant: "less", Outcome: Killed, Detail: "by TestMax"}, results[0])
	assert.Equal(t, Result{Mutant: "greater-or-equal", Outcome: Survived, Detail: "passes TestMax"}, results[1])
	assert.Equal(t, Stale, results[2].Outcome)
	assert.Contains(t, results[2].Detail, "occurs 0 times in max.go")
	assert.Equal(t, Broken, results[3].Outcome)
	assert.Contains(t, results[3].Detail, "does not compile")
	assert.Contains(t, results[3].Detail, "undefined: c")
	assert.Regexp(t, `(?m)^killed +less +by TestMax \(\d+s\)\n^SURVIVED +greater-or-equal `, out.String())
	src, err := os.ReadFile(filepath.Join(dir, "max.go"))
	require.NoError(t, err)
	assert.Contains(t, string(src), "if a > b {", "the tree is never written")
}

// The tests a list names must pass on the code as it is: otherwise no mutant is checked.
func TestCheckNeedsTheTestsToPassWithoutMutation(t *testing.T) {
	for _, tt := range []struct{ name, tests, want string }{
		{"no such test", "[TestNope]", "TestNope must pass without mutation, but it did not run"},
		{"skipped without -short", "[TestShortOnly], controlPlane: true", "TestShortOnly must pass without mutation, but it was skipped"},
		{"failing", "[TestFails]", "TestFails must pass without mutation, but it failed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := sample(t)
			failing := "package sample\n\nimport \"testing\"\n\nfunc TestFails(t *testing.T) { t.Fatal(\"fails\") }\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, "fails_test.go"), []byte(failing), 0o644))
			list, err := Load(writeList(t, dir, "- {name: less, why: w, file: max.go, original: a > b, mutant: a < b, tests: "+tt.tests+"}"))
			require.NoError(t, err)
			_, err = Checker{}.Check(context.Background(), list)
			assert.ErrorContains(t, err, tt.want)
		})
	}
}

// With Passed, the tests are taken to have passed on the code as it is: a mutant is still killed only
// by a test that fails on it, and the run without mutation is left out (a test that fails on the code
// as it is, which the baseline would have refused, kills the mutant: make test runs the tests first).
func TestCheckWithPassedSkipsTheRunWithoutMutation(t *testing.T) {
	dir := sample(t)
	failing := "package sample\n\nimport \"testing\"\n\nfunc TestFails(t *testing.T) { t.Fatal(\"fails\") }\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fails_test.go"), []byte(failing), 0o644))
	list, err := Load(writeList(t, dir, `
- {name: less, why: w, file: max.go, original: a > b, mutant: a < b, tests: [TestFails]}
- {name: greater-or-equal, why: w, file: max.go, original: a > b, mutant: a >= b, tests: [TestMax]}
`))
	require.NoError(t, err)
	results, err := Checker{Passed: true}.Check(context.Background(), list)
	require.NoError(t, err, "no baseline refuses TestFails")
	require.Len(t, results, 2)
	assert.Equal(t, Killed, results[0].Outcome)
	assert.Equal(t, Survived, results[1].Outcome)
	_, err = Checker{}.Check(context.Background(), list)
	assert.ErrorContains(t, err, "TestFails must pass without mutation", "without Passed, the baseline runs")

	// A named test that is gone does not let its mutant pass for survived or killed, even beside a
	// named test that kills it.
	list, err = Load(writeList(t, dir, `
- {name: equal, why: w, file: max.go, original: a > b, mutant: a >= b, tests: [TestMax, TestNope]}
- {name: less, why: w, file: max.go, original: a > b, mutant: a < b, tests: [TestMax, TestNope]}
`))
	require.NoError(t, err)
	results, err = Checker{Passed: true}.Check(context.Background(), list)
	require.NoError(t, err)
	for i, name := range []string{"equal", "less"} {
		assert.Equal(t, Result{Mutant: name, Outcome: Broken, Detail: "names tests the package does not declare: TestNope"}, results[i])
	}

	// Nor does one that was skipped.
	list, err = Load(writeList(t, dir, "- {name: less, why: w, file: max.go, original: a > b, mutant: a >= b, tests: [TestShortOnly], controlPlane: true}"))
	require.NoError(t, err)
	results, err = Checker{Passed: true}.Check(context.Background(), list)
	require.NoError(t, err)
	assert.Equal(t, Result{Mutant: "less", Outcome: Broken, Detail: "tests that were skipped (controlPlane: true?): TestShortOnly"}, results[0])
}

// A baseline that fails says why with the failing test's own lines, however much the tests after it
// printed.
func TestABaselineFailureShowsTheFailingTestsLines(t *testing.T) {
	dir := sample(t)
	tests := `package sample

import "testing"

func TestFails(t *testing.T) { t.Log("the reason"); t.Fatal("fails") }

func TestNoisy(t *testing.T) {
	for i := range 100 {
		t.Log("noise", i)
	}
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fails_test.go"), []byte(tests), 0o644))
	list, err := Load(writeList(t, dir, "- {name: less, why: w, file: max.go, original: a > b, mutant: a < b, tests: [TestFails, TestNoisy]}"))
	require.NoError(t, err)
	_, err = Checker{}.Check(context.Background(), list)
	require.ErrorContains(t, err, "TestFails must pass without mutation, but it failed")
	assert.Contains(t, err.Error(), "the reason")
	assert.Contains(t, err.Error(), "--- FAIL: TestFails")
	assert.NotContains(t, err.Error(), "noise")
}

func TestTestLinesFallsBackToTheEndOfTheRun(t *testing.T) {
	out := []byte("=== RUN   TestOther\n--- PASS: TestOther (0.00s)\npanic: boom\nFAIL\n")
	assert.Equal(t, string(bytes.TrimRight(out, "\n")), testLines(out, "TestMissing"))
	long := "=== RUN   TestLong\n" + strings.Repeat("    x.go:1: line\n", 200) + "--- FAIL: TestLong (0.00s)\n    x.go:2: after\n=== RUN   TestNext\n"
	got := strings.Split(testLines([]byte(long), "TestLong"), "\n")
	assert.Len(t, got, 80)
	assert.Equal(t, []string{"--- FAIL: TestLong (0.00s)", "    x.go:2: after"}, got[78:])
}
