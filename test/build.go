package test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	buildDir  string
	builtDwd  string
	buildErr  error
)

// BuildDwd builds cmd/dwd once per test binary, with the race detector, and returns the binary's
// path; Main removes it after the tests, and a package whose TestMain does not call Main calls
// RemoveBuilt. With -race the build only links: make test compiled every package with -race for the
// test binaries, and a build without it would compile the whole dependency graph once more (about
// five minutes of a newcomer's first make test on two cores).
func BuildDwd(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, err = os.MkdirTemp("", "dwd-test-bin-"); err != nil {
			buildErr = err
			return
		}
		builtDwd = filepath.Join(buildDir, "dwd")
		// -w: no DWARF, which the tests never read; its link takes about a third less CPU.
		cmd := exec.Command("go", "build", "-race", "-ldflags=-w", "-o", builtDwd, "./cmd/dwd")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build -race -ldflags=-w ./cmd/dwd: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtDwd
}

// RemoveBuilt removes what BuildDwd built.
func RemoveBuilt() {
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
}
