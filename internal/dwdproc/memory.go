package dwdproc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Memory reads a memory field of the process's /proc/<pid>/status, such as "VmRSS" (resident now)
// or "VmHWM" (peak resident), in bytes.
func (p *Process) Memory(field string) (uint64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(p.Pid()) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return statusBytes(f, field)
}

// statusBytes finds the "<field>: <n> kB" line of a /proc/<pid>/status and returns n in bytes.
func statusBytes(status io.Reader, field string) (uint64, error) {
	lines := bufio.NewScanner(status)
	for lines.Scan() {
		value, ok := strings.CutPrefix(lines.Text(), field+":")
		if !ok {
			continue
		}
		kib, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(value), "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: %w", field, value, err)
		}
		return kib * 1024, nil
	}
	if err := lines.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no %s in the process status", field)
}
