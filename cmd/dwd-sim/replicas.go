package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"

	dto "github.com/prometheus/client_model/go"
)

// replica is one `dwd run` process of the demo.
type replica struct {
	name        string
	args        []string
	log         string
	metricsAddr string
	healthAddr  string
	proc        *dwdproc.Process
}

// replicaSet starts `dwd run` processes against the simulated seed.
type replicaSet struct {
	dwd      string // path of the dwd binary
	dir      string
	baseArgs []string
	// pprof, when set, gives every replica a pprof endpoint on a free loopback port, written to
	// <name>.pprof in dir.
	pprof bool
	// kubeconfigOf, when set, gives each replica its own --kubeconfig by its name, in place of the one
	// in baseArgs.
	kubeconfigOf func(name string) string
	// command is the dwd command the replicas run: "run" when empty, which gets --member-name, or
	// "prober" or "weeder", the original's command lines, which get none (it is a sharding flag).
	command string
}

// start runs a replica named name, logging to a file in the folder.
func (rs *replicaSet) start(name string) (*replica, error) {
	metrics, err := dwdproc.FreePort()
	if err != nil {
		return nil, err
	}
	health, err := dwdproc.FreePort()
	if err != nil {
		return nil, err
	}
	r := &replica{name: name, log: filepath.Join(rs.dir, name+".log"), metricsAddr: metrics, healthAddr: health}
	r.args = append([]string{cmp.Or(rs.command, "run")}, rs.common(name)...)
	if cmp.Or(rs.command, "run") == "run" {
		r.args = append(r.args, "--member-name="+name)
	}
	r.args = append(r.args, "--metrics-bind-addr="+metrics, "--health-bind-addr="+health)
	if rs.pprof {
		addr, err := dwdproc.FreePort()
		if err != nil {
			return nil, err
		}
		r.args = append(r.args, "--pprof-bind-addr="+addr)
		if err := os.WriteFile(filepath.Join(rs.dir, name+".pprof"), []byte("http://"+addr+"/debug/pprof/\n"), 0o644); err != nil {
			return nil, err
		}
	}
	return r, r.run(rs.dwd)
}

// common is baseArgs with the replica's own kubeconfig, if it has one.
func (rs *replicaSet) common(name string) []string {
	if rs.kubeconfigOf == nil {
		return rs.baseArgs
	}
	args := slices.DeleteFunc(slices.Clone(rs.baseArgs), func(a string) bool { return strings.HasPrefix(a, "--kubeconfig=") })
	return append(args, "--kubeconfig="+rs.kubeconfigOf(name))
}

// run starts (or restarts) the replica's process.
func (r *replica) run(dwd string) error {
	p, err := dwdproc.Start(dwd, r.args, r.log)
	if err != nil {
		return fmt.Errorf("starting %s: %w", r.name, err)
	}
	r.proc = p
	return nil
}

// kill ends the process at once (SIGKILL): a crash.
func (r *replica) kill() { r.proc.Kill() }

// terminate asks the process to stop (SIGTERM) and waits for it; after timeout it kills it and
// returns false.
func (r *replica) terminate(timeout time.Duration) bool { return r.proc.Terminate(timeout) }

func (r *replica) running() bool { return r.proc.Running() }

// allReady reports whether the /readyz of every running replica answers 200: each holds its share.
func allReady(ctx context.Context, replicas []*replica) bool {
	for _, r := range replicas {
		if r.running() && !r.ready(ctx) {
			return false
		}
	}
	return true
}

// ready asks the replica's /readyz, waiting a second at most.
func (r *replica) ready(ctx context.Context) bool {
	return dwdproc.OK(ctx, "http://"+r.healthAddr+"/readyz")
}

// metrics scrapes the replica's metrics; nil when it does not answer.
func (r *replica) metrics(ctx context.Context) map[string]*dto.MetricFamily {
	if !r.running() {
		return nil
	}
	return dwdproc.Scrape(ctx, r.metricsAddr)
}

// sum adds up the samples of a counter or gauge whose labels include match ("k=v,k=v").
func sum(families map[string]*dto.MetricFamily, name, match string) float64 {
	return dwdproc.Sum(families, name, splitMatch(match)...)
}

// splitMatch splits "k=v,k=v" into its pairs; none for "".
func splitMatch(match string) []string {
	if match == "" {
		return nil
	}
	return strings.Split(match, ",")
}
