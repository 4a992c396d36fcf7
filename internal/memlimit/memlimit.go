package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Fraction is the share of the cgroup's memory limit the Go runtime keeps its memory under.
const Fraction = 0.9

// Files are the cgroup files that may hold the memory limit, in the order read after those of the
// process's own cgroup (ownFiles), relative to the root of the file system: cgroup v2's, then cgroup
// v1's, at the root of the cgroup tree, which is the process's own in a container with its own
// cgroup namespace.
var Files = []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"}

// ownFiles are the files of the cgroup the process runs in, as /proc/self/cgroup names it: a
// container without a cgroup namespace of its own on cgroup v2 may see the whole tree at
// /sys/fs/cgroup, and its limit in its own folder of it (where the runtime mounts only the
// container's own folder, as runc does on cgroup v1, the file is missing and Files are read). A path
// that leaves the tree is ignored.
func ownFiles(root fs.FS) []string {
	content, err := fs.ReadFile(root, "proc/self/cgroup")
	if err != nil {
		return nil
	}
	var own []string
	for line := range strings.Lines(string(content)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		dir := strings.Trim(parts[2], "/")
		if dir == "" || !fs.ValidPath(dir) {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			own = append(own, path.Join("sys/fs/cgroup", dir, "memory.max"))
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			own = append(own, path.Join("sys/fs/cgroup/memory", dir, "memory.limit_in_bytes"))
		}
	}
	return own
}

// unlimitedFrom is where a limit counts as none: cgroup v1 writes "no limit" as the largest
// page-aligned int64 (9223372036854771712), cgroup v2 as "max".
const unlimitedFrom = int64(1) << 62

// Decision is what FromCgroup did.
type Decision struct {
	// Env is GOMEMLIMIT when it is set: the runtime applied it itself and nothing was changed.
	Env string
	// File is the cgroup file the limit was read from; "" when none exists.
	File string
	// CgroupLimit is the cgroup's memory limit in bytes; 0 when it has none.
	CgroupLimit int64
	// Limit is the Go memory limit set, in bytes; 0 when none was set.
	Limit int64
}

// FromCgroup sets the Go memory limit to Fraction of the cgroup's memory limit, read from root (the
// file system at /) in the first of the process's own cgroup files and Files that exists, with set
// (debug.SetMemoryLimit), unless getenv("GOMEMLIMIT") is set. A cgroup file that exists but cannot
// be read or holds no limit in bytes is an error naming it; then no limit is set.
func FromCgroup(root fs.FS, getenv func(string) string, set func(int64) int64) (Decision, error) {
	if env := getenv("GOMEMLIMIT"); env != "" {
		return Decision{Env: env}, nil
	}
	for _, file := range append(ownFiles(root), Files...) {
		content, err := fs.ReadFile(root, file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Decision{File: file}, fmt.Errorf("reading the cgroup memory limit from /%s: %w", file, err)
		}
		limit, err := parseLimit(string(content))
		if err != nil {
			return Decision{File: file}, fmt.Errorf("reading the cgroup memory limit from /%s: %w", file, err)
		}
		d := Decision{File: file, CgroupLimit: limit}
		if limit > 0 {
			d.Limit = int64(float64(limit) * Fraction)
			set(d.Limit)
		}
		return d, nil
	}
	return Decision{}, nil
}

// parseLimit reads a cgroup memory limit: bytes, or "max"; 0 for none.
func parseLimit(content string) (int64, error) {
	value := strings.TrimSpace(content)
	if value == "max" {
		return 0, nil
	}
	limit, err := strconv.ParseInt(value, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("%q is neither a number of bytes above zero nor \"max\"", truncate(value))
	}
	if limit >= unlimitedFrom {
		return 0, nil
	}
	return limit, nil
}

// truncate shortens what an error quotes of a file.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
