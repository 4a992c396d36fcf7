package mutants

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Outcome is what became of a mutant.
type Outcome string

const (
	// Killed: a test named for the mutant failed on it.
	Killed Outcome = "killed"
	// Survived: every test named for the mutant passed on it.
	Survived Outcome = "SURVIVED"
	// Stale: its original is not in its file exactly once.
	Stale Outcome = "stale"
	// Broken: the mutant does not compile, or its run failed outside the named tests.
	Broken Outcome = "BROKEN"
)

// Result is the outcome of one mutant, with what shows it (the tests that failed, or why not).
type Result struct {
	Mutant  string
	Outcome Outcome
	Detail  string
}

// Checker checks lists of mutants.
type Checker struct {
	// Go is the go command; defaults to "go".
	Go string
	// Out receives one line per mutant, in the order of the list; defaults to io.Discard.
	Out io.Writer
	// Workers is how many mutants are built and run at once; defaults to GOMAXPROCS. Each build
	// compiles the mutated package and links its tests, mostly on one core.
	Workers int
	// Slots, when set, is shared by Checkers that check lists at once: every build and run holds one
	// of its slots, so that its capacity bounds them all together.
	Slots chan struct{}
	// Passed, when set, says that the tests the mutants name passed on the code as it is, with the
	// flags the mutants' runs use, right before (make test checks the mutants whose tests need the
	// control plane once its tests passed): the baseline is not built and run again.
	Passed bool
}

// Check builds the tests of the list's package once as they are and runs those the list names,
// which must pass (unless Passed says they did), then once per mutant (Workers at a time), and
// returns the outcome of each mutant. An error means no mutant could be checked: the package does
// not build, or a named test does not pass without mutation.
func (c Checker) Check(ctx context.Context, list *List) ([]Result, error) {
	work, err := os.MkdirTemp("", "dwd-mutants-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(work) }()
	dir, err := filepath.Abs(list.Dir)
	if err != nil {
		return nil, err
	}
	if !c.Passed {
		if err := c.baseline(ctx, dir, work, list.Mutants); err != nil {
			return nil, fmt.Errorf("%s: %w", list.Path, err)
		}
	}
	declared, err := DeclaredTests(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", list.Path, err)
	}
	return c.mutants(ctx, dir, work, list.Mutants, declared), nil
}

// mutants checks the mutants, Workers at a time in the order of the list, each in a work folder of
// its own, and prints each line in that order; declared are the package's top-level tests.
func (c Checker) mutants(ctx context.Context, dir, work string, mutants []Mutant, declared map[string]bool) []Result {
	results := make([]Result, len(mutants))
	took := make([]time.Duration, len(mutants))
	done := make([]chan struct{}, len(mutants))
	next := make(chan int, len(mutants))
	for i := range mutants {
		done[i] = make(chan struct{})
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(c.workers(), len(mutants)) {
		wg.Go(func() {
			for i := range next {
				release := c.slot()
				start := time.Now()
				results[i] = c.mutant(ctx, dir, filepath.Join(work, fmt.Sprint(i)), mutants[i], declared)
				took[i] = time.Since(start)
				release()
				close(done[i])
			}
		})
	}
	for i, m := range mutants {
		<-done[i]
		r := results[i]
		_, _ = fmt.Fprintf(c.out(), "%-9s %-28s %s (%s)\n", r.Outcome, m.Name, r.Detail, took[i].Round(time.Second))
	}
	wg.Wait()
	return results
}

// slot waits for one of Slots, when set, and returns its release.
func (c Checker) slot() func() {
	if c.Slots == nil {
		return func() {}
	}
	c.Slots <- struct{}{}
	return func() { <-c.Slots }
}

// baseline requires every test the mutants name to pass on the code as it is.
func (c Checker) baseline(ctx context.Context, dir, work string, mutants []Mutant) error {
	defer c.slot()()
	bin := filepath.Join(work, "base.test")
	if out, err := c.build(ctx, dir, bin, ""); err != nil {
		return fmt.Errorf("building the tests: %w\n%s", err, out)
	}
	for _, controlPlane := range []bool{false, true} {
		var tests []string
		for _, m := range mutants {
			if m.ControlPlane == controlPlane {
				tests = append(tests, m.Tests...)
			}
		}
		if len(tests) == 0 {
			continue
		}
		slices.Sort(tests)
		tests = slices.Compact(tests)
		out, _ := c.run(ctx, dir, bin, tests, controlPlane)
		status := outcomes(out)
		for _, t := range tests {
			if status[t] != "PASS" {
				return fmt.Errorf("%s must pass without mutation, but %s\n%s", t, describe(status[t]), testLines(out, t))
			}
		}
	}
	return nil
}

// mutant builds the tests with m applied in work and runs those that must kill it. A mutant that
// names a test the package does not declare is broken, even when another it names would kill it:
// with Passed nothing else finds a test renamed or removed beside one that fails.
func (c Checker) mutant(ctx context.Context, dir, work string, m Mutant, declared map[string]bool) Result {
	r := Result{Mutant: m.Name}
	if missing := m.Undeclared(declared); len(missing) > 0 {
		r.Outcome, r.Detail = Broken, "names tests the package does not declare: "+strings.Join(missing, ", ")
		return r
	}
	overlay, err := writeMutant(dir, work, m)
	if errors.Is(err, ErrStale) {
		r.Outcome, r.Detail = Stale, err.Error()
		return r
	}
	if err != nil {
		r.Outcome, r.Detail = Broken, err.Error()
		return r
	}
	bin := filepath.Join(work, "mutant.test")
	if out, err := c.build(ctx, dir, bin, overlay); err != nil {
		r.Outcome, r.Detail = Broken, "does not compile: "+firstLines(out, 3)
		return r
	}
	out, err := c.run(ctx, dir, bin, m.Tests, m.ControlPlane)
	status := outcomes(out)
	var failed []string
	for _, t := range m.Tests {
		if status[t] == "FAIL" {
			failed = append(failed, t)
		}
	}
	var missing, skipped []string
	for _, t := range m.Tests {
		switch status[t] {
		case "":
			missing = append(missing, t)
		case "SKIP":
			skipped = append(skipped, t)
		}
	}
	switch {
	case len(missing) > 0 && err == nil:
		// Without the run without mutation (Passed) nothing else says that a named test is gone.
		r.Outcome, r.Detail = Broken, "tests that did not run: "+strings.Join(missing, ", ")
	case len(skipped) > 0 && len(failed) == 0:
		r.Outcome, r.Detail = Broken, "tests that were skipped (controlPlane: true?): "+strings.Join(skipped, ", ")
	case len(failed) > 0:
		r.Outcome, r.Detail = Killed, "by "+strings.Join(failed, ", ")
	case bytes.Contains(out, []byte("panic: test timed out")):
		r.Outcome, r.Detail = Killed, "by a test that timed out"
	case err != nil:
		r.Outcome, r.Detail = Broken, fmt.Sprintf("the run failed outside %s: %v\n%s", strings.Join(m.Tests, ", "), err, tail(out))
	default:
		r.Outcome, r.Detail = Survived, "passes "+strings.Join(m.Tests, ", ")
	}
	return r
}

// writeMutant writes m's file, mutated, into work, and the overlay that puts it in place of the
// real one; it returns the overlay's path.
func writeMutant(dir, work string, m Mutant) (string, error) {
	file := filepath.Join(dir, m.File)
	src, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", m.File, err)
	}
	mutated, err := m.Apply(src)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", err
	}
	copyPath := filepath.Join(work, filepath.Base(file))
	if err := os.WriteFile(copyPath, mutated, 0o644); err != nil {
		return "", err
	}
	data, err := json.Marshal(map[string]map[string]string{"Replace": {file: copyPath}})
	if err != nil {
		return "", err
	}
	overlay := filepath.Join(work, "overlay.json")
	return overlay, os.WriteFile(overlay, data, 0o644)
}

// build compiles the package's tests in dir into bin, with the overlay when one is given. Vet is
// off: a mutant may well look suspicious to it. With -race, as make test builds its test binaries,
// only the mutated package and those above it compile; the rest comes from the build cache.
func (c Checker) build(ctx context.Context, dir, bin, overlay string) ([]byte, error) {
	args := []string{"test", "-c", "-race", "-vet=off", "-ldflags=-s -w", "-o", bin}
	if overlay != "" {
		args = append(args, "-overlay="+overlay)
	}
	cmd := exec.CommandContext(ctx, c.goCommand(), append(args, ".")...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// run runs the tests of bin in dir, with -short unless they need the control plane, and returns
// their verbose output.
func (c Checker) run(ctx context.Context, dir, bin string, tests []string, controlPlane bool) ([]byte, error) {
	args := []string{"-test.run=^(" + strings.Join(tests, "|") + ")$", "-test.count=1", "-test.v", "-test.timeout=10m"}
	if !controlPlane {
		args = append(args, "-test.short")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

func (c Checker) workers() int {
	if c.Workers <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return c.Workers
}

func (c Checker) goCommand() string {
	if c.Go == "" {
		return "go"
	}
	return c.Go
}

func (c Checker) out() io.Writer {
	if c.Out == nil {
		return io.Discard
	}
	return c.Out
}

// topLevel is the verbose output's line of a top-level test's end.
var topLevel = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (Test[A-Za-z0-9_]*) `)

// outcomes returns PASS, FAIL or SKIP for every top-level test in the verbose output.
func outcomes(out []byte) map[string]string {
	status := map[string]string{}
	s := bufio.NewScanner(bytes.NewReader(out))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		if m := topLevel.FindStringSubmatch(s.Text()); m != nil {
			status[m[2]] = m[1]
		}
	}
	return status
}

func describe(status string) string {
	switch status {
	case "":
		return "it did not run (no such test, or the run ended before it)"
	case "SKIP":
		return "it was skipped (does it need controlPlane: true?)"
	}
	return "it failed"
}

// tail is the end of a run's output, enough to see why it failed.
func tail(out []byte) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-30, 0):], "\n")
}

// testLines is what a run printed of test name (go test -v): from its "=== RUN" line to its result
// line and the indented lines after it, at most the last 80 of them, so that a test that failed
// among many shows why; the end of the run when it printed nothing of name.
func testLines(out []byte, name string) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	start := slices.Index(lines, "=== RUN   "+name)
	if start < 0 {
		return tail(out)
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if m := topLevel.FindStringSubmatch(lines[i]); m != nil && m[2] == name {
			for end = i + 1; end < len(lines) && strings.HasPrefix(lines[end], " "); end++ {
			}
			break
		}
	}
	own := lines[start:end]
	return strings.Join(own[max(len(own)-80, 0):], "\n")
}

// firstLines is the first n lines of out, on one line.
func firstLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[:min(n, len(lines))], " | ")
}
