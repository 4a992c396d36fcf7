package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// replica is one `dwd run` process of the demo.
type replica struct {
	name        string
	args        []string
	log         string
	metricsAddr string
	healthAddr  string
	cmd         *exec.Cmd
	exited      chan struct{}
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
	metrics, err := freePort()
	if err != nil {
		return nil, err
	}
	health, err := freePort()
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
		addr, err := freePort()
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
	out, err := os.OpenFile(r.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	r.cmd = exec.Command(dwd, r.args...)
	r.cmd.Stdout, r.cmd.Stderr = out, out
	if err := r.cmd.Start(); err != nil {
		_ = out.Close()
		return fmt.Errorf("starting %s: %w", r.name, err)
	}
	r.exited = make(chan struct{})
	go func() { _ = r.cmd.Wait(); _ = out.Close(); close(r.exited) }()
	return nil
}

// kill ends the process at once (SIGKILL): a crash.
func (r *replica) kill() {
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.exited
}

// terminate asks the process to stop (SIGTERM) and waits for it; after timeout it kills it and
// returns false.
func (r *replica) terminate(timeout time.Duration) bool {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-r.exited:
		return true
	case <-t.C:
		r.kill()
		return false
	}
}

func (r *replica) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

// ready asks the replica's /readyz, waiting a second at most.
func (r *replica) ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.healthAddr+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// metrics scrapes the replica's metrics; nil when it does not answer.
func (r *replica) metrics(ctx context.Context) map[string]*dto.MetricFamily {
	if !r.running() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metricsAddr+"/metrics", nil)
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

// sum adds up the samples of a counter or gauge whose labels include match ("k=v,k=v").
func sum(families map[string]*dto.MetricFamily, name, match string) float64 {
	f, ok := families[name]
	if !ok {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		if !labelsMatch(m.GetLabel(), match) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		}
	}
	return total
}

func labelsMatch(labels []*dto.LabelPair, match string) bool {
	if match == "" {
		return true
	}
	for _, kv := range strings.Split(match, ",") {
		k, v, _ := strings.Cut(kv, "=")
		found := false
		for _, l := range labels {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
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
