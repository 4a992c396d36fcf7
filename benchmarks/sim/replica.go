package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

// Replica is one dwd process on the simulated seed, logging to Log. It keeps its name, ports and
// command line across a kill or stop and Restart, as a StatefulSet's Pod does.
//
// Locking: mu guards the current process, its pause and its flags, which a restart replaces while
// others read them (a sampler scraping the replica).
type Replica struct {
	// Name is its --member-name (when it runs `dwd run`).
	Name string
	// Log is the file its output goes to; every process of the replica appends to it.
	Log string

	set *ReplicaSet
	// file is the base name of its files in the set's Dir.
	file string
	// own are its own flags: its member name, ports and pprof endpoint.
	own         []string
	metricsAddr string
	healthAddr  string
	// proxy, when the set runs its replicas through proxies, stands between it and the seed;
	// kubeconfig is the kubeconfig through it.
	proxy      *test.Proxy
	kubeconfig string

	mu     sync.Mutex
	args   []string
	proc   *dwdproc.Process
	paused bool
}

// Restart starts the replica's process again under its name, after a kill or a stop.
func (r *Replica) Restart() error {
	r.mu.Lock()
	args := r.args
	r.mu.Unlock()
	return r.RestartWith(args)
}

// RestartWith starts the replica's process again with args in place of the set's Args, for this
// process and the next ones: a rolling update that changes the replicas' flags.
func (r *Replica) RestartWith(args []string) error {
	p, err := dwdproc.Start(r.set.Dwd, r.commandLine(args), r.Log)
	if err != nil {
		return fmt.Errorf("starting %s: %w", r.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.args, r.proc, r.paused = slices.Clone(args), p, false
	return nil
}

// commandLine is the command line of a new process with args: the command, args (with the
// kubeconfig through its proxy), its own flags and its audit log.
func (r *Replica) commandLine(args []string) []string {
	if r.kubeconfig != "" {
		args = withKubeconfig(args, r.kubeconfig)
	}
	line := append([]string{cmp.Or(r.set.Command, "run")}, args...)
	line = append(line, r.own...)
	if log := r.set.nextAuditLog(r.file); log != "" {
		line = append(line, "--audit-log="+log)
	}
	return line
}

// process is the current process; nil before the first start.
func (r *Replica) process() *dwdproc.Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

// Kill ends the process at once (SIGKILL, which ends a paused one too): a crash.
func (r *Replica) Kill() {
	if p := r.process(); p != nil {
		p.Kill()
	}
}

// Terminate asks the process to stop (SIGCONT, in case it is paused, then SIGTERM) and waits for it;
// after timeout it kills it and returns false.
func (r *Replica) Terminate(timeout time.Duration) bool {
	p := r.process()
	if p == nil {
		return true
	}
	r.Resume()
	return p.Terminate(timeout)
}

// Pause stops the process where it is (SIGSTOP), as a long garbage collection or a frozen VM would,
// until Resume.
func (r *Replica) Pause() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.Signal(syscall.SIGSTOP)
		r.paused = true
	}
}

// Resume lets a paused process go on (SIGCONT, which one that runs ignores).
func (r *Replica) Resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.Signal(syscall.SIGCONT)
		r.paused = false
	}
}

// Paused reports whether the process is paused: it runs, but cannot answer.
func (r *Replica) Paused() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paused && r.proc.Running()
}

// Running reports whether the process runs.
func (r *Replica) Running() bool {
	p := r.process()
	return p != nil && p.Running()
}

// State is how the process ended; nil while it runs.
func (r *Replica) State() *os.ProcessState {
	if p := r.process(); p != nil {
		return p.State()
	}
	return nil
}

// Memory reads a field of the process's /proc status (VmRSS, VmHWM), in bytes.
func (r *Replica) Memory(field string) (uint64, error) {
	p := r.process()
	if p == nil {
		return 0, errors.New(r.Name + " has no process")
	}
	return p.Memory(field)
}

// MetricsAddr is the host:port of its metrics endpoint.
func (r *Replica) MetricsAddr() string { return r.metricsAddr }

// Sum scrapes metric name alone from the replica and sums its samples whose labels include match
// ("k=v,k=v", see the package's Sum); 0 when the replica does not answer.
func (r *Replica) Sum(ctx context.Context, name, match string) float64 {
	return Sum(r.Metrics(ctx, name), name, match)
}

// Cut cuts the replica from the seed's API server: every connection through its proxy drops and new
// ones fail until Heal. It needs a set with ProxyTo.
func (r *Replica) Cut() error {
	if r.proxy == nil {
		return errors.New(r.Name + " runs through no proxy")
	}
	r.proxy.Cut()
	return nil
}

// Heal lets the replica reach the seed's API server again after Cut.
func (r *Replica) Heal() {
	if r.proxy != nil {
		r.proxy.Heal()
	}
}

// Ready asks the replica's /readyz, waiting a second at most; false when it does not run.
func (r *Replica) Ready(ctx context.Context) bool {
	return r.Running() && dwdproc.OK(ctx, "http://"+r.healthAddr+"/readyz")
}

// Metrics scrapes the replica's metrics, only the families named when there are names; nil when
// it does not answer.
func (r *Replica) Metrics(ctx context.Context, names ...string) map[string]*dto.MetricFamily {
	if !r.Running() {
		return nil
	}
	return dwdproc.Scrape(ctx, r.metricsAddr, names...)
}
