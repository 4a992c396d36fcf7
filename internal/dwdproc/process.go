package dwdproc

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a running (or ended) child process.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs path with args, appending its output to the file log.
func Start(path string, args []string, log string) (*Process, error) {
	out, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = out.Close(); close(p.exited) }()
	return p, nil
}

// Kill ends the process at once (SIGKILL, which also ends a stopped process: a crash) and waits for it.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Terminate sends SIGTERM and waits for the exit; after timeout it kills the process and returns
// false.
func (p *Process) Terminate(timeout time.Duration) bool {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		p.Kill()
		return false
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) { _ = p.cmd.Process.Signal(sig) }

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Exited is closed once the process has exited and its log is closed.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// State is the process's exit state; nil while it runs.
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.exited:
		return p.cmd.ProcessState
	default:
		return nil
	}
}
