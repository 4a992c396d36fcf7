package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

// Groups are the sharding groups a `dwd run` replica of both roles is a member of: one per role.
var Groups = []string{"dwd-prober", "dwd-weeder"}

// Partitions is the partition count of each group the replicas run.
const Partitions = config.DefaultPartitionCount

// Replica is one dwd process on the simulated seed, logging to Log. It keeps its name and command line
// across a kill or stop and Restart, as a StatefulSet's Pod does.
type Replica struct {
	// Name is its --member-name (when it runs `dwd run`) and the base name of its files.
	Name string
	// Log is the file its output goes to.
	Log string

	dwd         string
	args        []string
	metricsAddr string
	healthAddr  string
	// proxy, when the set runs its replicas through proxies, stands between it and the seed.
	proxy *test.Proxy
	proc  *dwdproc.Process
}

// ReplicaSet starts dwd processes against the simulated seed, all with the same flags.
type ReplicaSet struct {
	// Dwd is the path of the dwd binary.
	Dwd string
	// Dir receives each replica's log, <name>.log, and what else it needs (<name>.pprof, a kubeconfig).
	Dir string
	// Args are the flags every replica gets.
	Args []string
	// Pprof, when set, gives every replica a pprof endpoint on a free loopback port, written to
	// <name>.pprof in Dir.
	Pprof bool
	// Command is the dwd command the replicas run: "run" when empty, which gets --member-name, or
	// "prober" or "weeder", the original's command lines, which get none (it is a sharding flag).
	Command string
	// ProxyTo, when set, runs each replica through a proxy of its own to this seed's API server
	// (Replica.Cut cuts it): its --kubeconfig points at the proxy, in place of the one in Args.
	ProxyTo *Seed

	mu      sync.Mutex
	proxies []*test.Proxy
}

// Start starts a replica named name.
func (rs *ReplicaSet) Start(name string) (*Replica, error) {
	metrics, err := dwdproc.FreePort()
	if err != nil {
		return nil, err
	}
	health, err := dwdproc.FreePort()
	if err != nil {
		return nil, err
	}
	r := &Replica{Name: name, Log: filepath.Join(rs.Dir, name+".log"), dwd: rs.Dwd, metricsAddr: metrics, healthAddr: health}
	args := rs.Args
	if rs.ProxyTo != nil {
		if args, err = rs.proxied(r); err != nil {
			return nil, err
		}
	}
	r.args = append([]string{cmp.Or(rs.Command, "run")}, args...)
	if cmp.Or(rs.Command, "run") == "run" {
		r.args = append(r.args, "--member-name="+name)
	}
	r.args = append(r.args, "--metrics-bind-addr="+metrics, "--health-bind-addr="+health)
	if rs.Pprof {
		addr, err := dwdproc.FreePort()
		if err != nil {
			return nil, err
		}
		r.args = append(r.args, "--pprof-bind-addr="+addr)
		if err := os.WriteFile(filepath.Join(rs.Dir, name+".pprof"), []byte("http://"+addr+"/debug/pprof/\n"), 0o644); err != nil {
			return nil, err
		}
	}
	return r, r.Restart()
}

// proxied starts r's proxy to the seed, writes a kubeconfig through it and returns Args with it.
func (rs *ReplicaSet) proxied(r *Replica) ([]string, error) {
	u, err := url.Parse(rs.ProxyTo.Env.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("the seed's address %q: %w", rs.ProxyTo.Env.Config.Host, err)
	}
	proxy, err := test.StartProxy(u.Host)
	if err != nil {
		return nil, err
	}
	rs.mu.Lock()
	rs.proxies = append(rs.proxies, proxy)
	rs.mu.Unlock()
	r.proxy = proxy
	data, err := ProxiedKubeconfig(rs.ProxyTo.Env.KubeConfig, proxy.Addr())
	if err != nil {
		return nil, err
	}
	path := filepath.Join(rs.Dir, "seed-via-proxy-"+r.Name+".kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	return withKubeconfig(rs.Args, path), nil
}

// withKubeconfig is args with --kubeconfig=path in place of theirs.
func withKubeconfig(args []string, path string) []string {
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "--kubeconfig=") })
	return append(args, "--kubeconfig="+path)
}

// Close stops the proxies of the set's replicas; they are cut from the seed for good.
func (rs *ReplicaSet) Close() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, p := range rs.proxies {
		p.Close()
	}
	rs.proxies = nil
}

// ProxiedKubeconfig is a kubeconfig whose servers are reached at addr (host:port) instead: through a
// proxy. The servers' certificates name the loopback address, not a port, so they still verify.
func ProxiedKubeconfig(kubeconfig []byte, addr string) ([]byte, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, err
	}
	for name, c := range cfg.Clusters {
		u, err := url.Parse(c.Server)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		u.Host = addr
		c.Server = u.String()
	}
	return clientcmd.Write(*cfg)
}

// Restart starts the replica's process again under its name, after a kill or a stop.
func (r *Replica) Restart() error {
	p, err := dwdproc.Start(r.dwd, r.args, r.Log)
	if err != nil {
		return fmt.Errorf("starting %s: %w", r.Name, err)
	}
	r.proc = p
	return nil
}

// Kill ends the process at once (SIGKILL): a crash.
func (r *Replica) Kill() { r.proc.Kill() }

// Terminate asks the process to stop (SIGTERM) and waits for it; after timeout it kills it and
// returns false.
func (r *Replica) Terminate(timeout time.Duration) bool { return r.proc.Terminate(timeout) }

// Running reports whether the process runs.
func (r *Replica) Running() bool { return r.proc.Running() }

// State is how the process ended; nil while it runs.
func (r *Replica) State() *os.ProcessState { return r.proc.State() }

// Memory reads a field of the process's /proc status (VmRSS, VmHWM), in bytes.
func (r *Replica) Memory(field string) (uint64, error) { return r.proc.Memory(field) }

// MetricsAddr is the host:port of its metrics endpoint.
func (r *Replica) MetricsAddr() string { return r.metricsAddr }

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

// AllReady reports whether the /readyz of every running replica answers 200: each holds its share.
func AllReady(ctx context.Context, replicas []*Replica) bool {
	for _, r := range replicas {
		if r.Running() && !r.Ready(ctx) {
			return false
		}
	}
	return true
}

// Ready asks the replica's /readyz, waiting a second at most.
func (r *Replica) Ready(ctx context.Context) bool {
	return dwdproc.OK(ctx, "http://"+r.healthAddr+"/readyz")
}

// Metrics scrapes the replica's metrics; nil when it does not answer.
func (r *Replica) Metrics(ctx context.Context) map[string]*dto.MetricFamily {
	if !r.Running() {
		return nil
	}
	return dwdproc.Scrape(ctx, r.metricsAddr)
}

// Sum adds up the samples of a counter or gauge whose labels include match ("k=v,k=v").
func Sum(families map[string]*dto.MetricFamily, name, match string) float64 {
	return dwdproc.Sum(families, name, SplitMatch(match)...)
}

// SplitMatch splits "k=v,k=v" into its pairs; none for "".
func SplitMatch(match string) []string {
	if match == "" {
		return nil
	}
	return strings.Split(match, ",")
}

// FindDwd finds the dwd binary: path when given, else dwd next to the running binary.
func FindDwd(path string) (string, error) {
	if path != "" {
		return path, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	path = filepath.Join(filepath.Dir(self), "dwd")
	if _, err := os.Stat(path); err != nil {
		return "", errors.New("no dwd binary next to " + filepath.Base(self) + ": build it (make build) or give --dwd")
	}
	return path, nil
}
