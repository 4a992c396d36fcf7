package dwdproc

import (
	"fmt"

	"github.com/prometheus/procfs"
)

// Memory reads a memory field of the process's /proc/<pid>/status, in bytes: "VmRSS" (resident now),
// "VmHWM" (peak resident), "VmSize" or "VmPeak". It reads through prometheus/procfs, the parser
// client_golang's process collector uses for the same file.
func (p *Process) Memory(field string) (uint64, error) {
	proc, err := procfs.NewProc(p.Pid())
	if err != nil {
		return 0, err
	}
	status, err := proc.NewStatus()
	if err != nil {
		return 0, err
	}
	return statusField(status, field)
}

// statusField returns field of a parsed /proc/<pid>/status in bytes; a field the status lacks (0: the
// kernel reports these for every process with memory) or does not hold is an error.
func statusField(status procfs.ProcStatus, field string) (uint64, error) {
	values := map[string]uint64{"VmRSS": status.VmRSS, "VmHWM": status.VmHWM, "VmSize": status.VmSize, "VmPeak": status.VmPeak}
	v, ok := values[field]
	switch {
	case !ok:
		return 0, fmt.Errorf("%s: not a memory field of the process status (VmRSS, VmHWM, VmSize, VmPeak)", field)
	case v == 0:
		return 0, fmt.Errorf("no %s in the process status", field)
	}
	return v, nil
}
