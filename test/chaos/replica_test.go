package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// process is one `dwd run` process; a replica runs one process after the other under its name.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// replica is one member of the group: a name, its own proxy to the API server, and its current
// process. Every start gets new metrics and health ports, its own audit log and appends to the
// replica's log.
//
// Locking: mu guards the current process and its ports, which a restart replaces while the
// scenario's samplers read them.
type replica struct {
	name       string
	kubeconfig string
	log        string

	mu      sync.Mutex
	metrics string
	health  string
	current *process

	// starts counts the processes started under this replica, for the audit logs' names.
	starts int
	// paused is set while the process is stopped (SIGSTOP).
	paused atomic.Bool
}

// resume continues a stopped process (SIGCONT).
func (r *replica) resume() {
	r.proc().signal(syscall.SIGCONT)
	r.paused.Store(false)
}

// start starts a new process of the replica with the common args; auditLog, when not empty, is given
// to --audit-log.
func (r *replica) start(dwd string, common []string, auditLog string) error {
	metrics, err := freePort()
	if err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	args := append([]string{"run"}, common...)
	args = append(args, "--member-name="+r.name, "--kubeconfig="+r.kubeconfig,
		"--metrics-bind-addr="+metrics, "--health-bind-addr="+health)
	if auditLog != "" {
		args = append(args, "--audit-log="+auditLog)
	}
	p, err := startProcess(dwd, args, r.log)
	if err != nil {
		return fmt.Errorf("starting %s: %w", r.name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current, r.metrics, r.health = p, metrics, health
	r.starts++
	return nil
}

// proc is the replica's current process.
func (r *replica) proc() *process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}

// addrs are the current process's metrics and health addresses.
func (r *replica) addrs() (metrics, health string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.metrics, r.health
}

// alive reports whether the replica has a running process.
func (r *replica) alive() bool {
	p := r.proc()
	return p != nil && p.running()
}

// startProcess starts dwd with args, appending its output to log.
func startProcess(dwd string, args []string, log string) (*process, error) {
	out, err := os.OpenFile(log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(dwd, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = out.Close(); close(p.exited) }()
	return p, nil
}

// kill ends the process at once (SIGKILL, which also ends a stopped process) and waits for it.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// terminate sends SIGTERM and waits for the exit; after timeout it kills the process and returns
// false.
func (p *process) terminate(timeout time.Duration) bool {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		p.kill()
		return false
	}
}

func (p *process) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// peakRSS is the process's peak resident memory (VmHWM), in bytes.
func (p *process) peakRSS() (uint64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(p.cmd.Process.Pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return statusField(bufio.NewScanner(f), "VmHWM:")
}

// statusField reads a "<field> <n> kB" line of /proc/<pid>/status, in bytes.
func statusField(lines *bufio.Scanner, field string) (uint64, error) {
	for lines.Scan() {
		value, ok := strings.CutPrefix(lines.Text(), field)
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
	return 0, fmt.Errorf("no %s", field)
}

// ready asks the replica's /readyz.
func (r *replica) ready(ctx context.Context) bool {
	if !r.alive() {
		return false
	}
	_, health := r.addrs()
	return httpOK(ctx, "http://"+health+"/readyz")
}

func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// scrape reads the replica's metrics; nil when its process does not answer.
func (r *replica) scrape(ctx context.Context) map[string]*dto.MetricFamily {
	if !r.alive() {
		return nil
	}
	metrics, _ := r.addrs()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+metrics+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil
	}
	return families
}

// sum adds up the samples of a counter or gauge whose labels include every k=v of match.
func sum(families map[string]*dto.MetricFamily, name string, match ...string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		if !labelsMatch(m.GetLabel(), match) {
			continue
		}
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return total
}

func labelsMatch(labels []*dto.LabelPair, match []string) bool {
	for _, kv := range match {
		k, v, _ := strings.Cut(kv, "=")
		found := false
		for _, l := range labels {
			found = found || l.GetName() == k && l.GetValue() == v
		}
		if !found {
			return false
		}
	}
	return true
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
