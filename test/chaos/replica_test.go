package chaos

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"

	dto "github.com/prometheus/client_model/go"
)

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
	current *dwdproc.Process

	// starts counts the processes started under this replica, for the audit logs' names.
	starts int
	// paused is set while the process is stopped (SIGSTOP).
	paused atomic.Bool
}

// resume continues a stopped process (SIGCONT).
func (r *replica) resume() {
	r.proc().Signal(syscall.SIGCONT)
	r.paused.Store(false)
}

// start starts a new process of the replica with the common args; auditLog, when not empty, is given
// to --audit-log.
func (r *replica) start(dwd string, common []string, auditLog string) error {
	metrics, err := dwdproc.FreePort()
	if err != nil {
		return err
	}
	health, err := dwdproc.FreePort()
	if err != nil {
		return err
	}
	args := append([]string{"run"}, common...)
	args = append(args, "--member-name="+r.name, "--kubeconfig="+r.kubeconfig,
		"--metrics-bind-addr="+metrics, "--health-bind-addr="+health)
	if auditLog != "" {
		args = append(args, "--audit-log="+auditLog)
	}
	p, err := dwdproc.Start(dwd, args, r.log)
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
func (r *replica) proc() *dwdproc.Process {
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
	return p != nil && p.Running()
}

// ready asks the replica's /readyz.
func (r *replica) ready(ctx context.Context) bool {
	if !r.alive() {
		return false
	}
	_, health := r.addrs()
	return dwdproc.OK(ctx, "http://"+health+"/readyz")
}

// scrape reads the replica's metrics; nil when its process does not answer.
func (r *replica) scrape(ctx context.Context) map[string]*dto.MetricFamily {
	if !r.alive() {
		return nil
	}
	metrics, _ := r.addrs()
	return dwdproc.Scrape(ctx, metrics)
}
