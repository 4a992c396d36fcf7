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
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"
	"github.com/sharded-dwd/dependency-watchdog/test"
)

// Groups are the sharding groups a `dwd run` replica of both roles is a member of: one per role.
var Groups = []string{"dwd-prober", "dwd-weeder"}

// Partitions is the partition count of each group the replicas run.
const Partitions = config.DefaultPartitionCount

// ReplicaSet starts dwd processes against the simulated seed, all with the same flags.
//
// Locking: mu guards the proxies and the audit logs, which replicas started or restarted side by
// side add to.
type ReplicaSet struct {
	// Dwd is the path of the dwd binary.
	Dwd string
	// Dir receives each replica's log, <file>.log (file is its name unless started with StartAs),
	// and what else it needs (<file>.pprof, a kubeconfig, audit logs).
	Dir string
	// Args are the flags every replica gets (until Replica.RestartWith gives one others).
	Args []string
	// Pprof, when set, gives every replica a pprof endpoint on a free loopback port, written to
	// <file>.pprof in Dir.
	Pprof bool
	// Command is the dwd command the replicas run: "run" when empty, which gets --member-name, or
	// "prober" or "weeder", the original's command lines, which get none (it is a sharding flag).
	Command string
	// ProxyTo, when set, runs each replica through a proxy of its own to this seed's API server
	// (Replica.Cut cuts it): its --kubeconfig points at the proxy, in place of the one in Args.
	ProxyTo *Seed
	// Audit, when set, gives every process an audit log of its own, --audit-log=<Dir>/<file>.<n>.audit,
	// n counting the processes started under that file name from 0; AuditLogs lists them.
	Audit bool

	mu        sync.Mutex
	proxies   []*test.Proxy
	starts    map[string]int
	auditLogs []string
}

// Start starts a replica named name, its files named after it.
func (rs *ReplicaSet) Start(name string) (*Replica, error) { return rs.StartAs(name, name) }

// StartAs starts a replica named name whose files are named file: a second process under the name
// of a running replica, which must not share its log.
func (rs *ReplicaSet) StartAs(name, file string) (*Replica, error) {
	metrics, err := dwdproc.FreePort()
	if err != nil {
		return nil, err
	}
	health, err := dwdproc.FreePort()
	if err != nil {
		return nil, err
	}
	r := &Replica{Name: name, Log: filepath.Join(rs.Dir, file+".log"), set: rs, file: file,
		metricsAddr: metrics, healthAddr: health, args: rs.Args}
	if cmp.Or(rs.Command, "run") == "run" {
		r.own = append(r.own, "--member-name="+name)
	}
	r.own = append(r.own, "--metrics-bind-addr="+metrics, "--health-bind-addr="+health)
	if rs.Pprof {
		if err := rs.pprof(r); err != nil {
			return nil, err
		}
	}
	if rs.ProxyTo != nil {
		if err := rs.proxied(r); err != nil {
			return nil, err
		}
	}
	return r, r.Restart()
}

// pprof gives r a pprof endpoint and writes its address to <file>.pprof.
func (rs *ReplicaSet) pprof(r *Replica) error {
	addr, err := dwdproc.FreePort()
	if err != nil {
		return err
	}
	r.own = append(r.own, "--pprof-bind-addr="+addr)
	return os.WriteFile(filepath.Join(rs.Dir, r.file+".pprof"), []byte("http://"+addr+"/debug/pprof/\n"), 0o644)
}

// proxied starts r's proxy to the seed and writes the kubeconfig through it that r runs with.
func (rs *ReplicaSet) proxied(r *Replica) error {
	u, err := url.Parse(rs.ProxyTo.Env.Config.Host)
	if err != nil {
		return fmt.Errorf("the seed's address %q: %w", rs.ProxyTo.Env.Config.Host, err)
	}
	proxy, err := test.StartProxy(u.Host)
	if err != nil {
		return err
	}
	rs.mu.Lock()
	rs.proxies = append(rs.proxies, proxy)
	rs.mu.Unlock()
	r.proxy = proxy
	data, err := proxy.Kubeconfig(rs.ProxyTo.Env.KubeConfig)
	if err != nil {
		return err
	}
	r.kubeconfig = filepath.Join(rs.Dir, "seed-via-proxy-"+r.file+".kubeconfig")
	return os.WriteFile(r.kubeconfig, data, 0o600)
}

// withKubeconfig is args with --kubeconfig=path in place of theirs.
func withKubeconfig(args []string, path string) []string {
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "--kubeconfig=") })
	return append(args, "--kubeconfig="+path)
}

// nextAuditLog is the audit log of the next process started under the file name, or "" unless the
// set gives audit logs.
func (rs *ReplicaSet) nextAuditLog(file string) string {
	if !rs.Audit {
		return ""
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.starts == nil {
		rs.starts = map[string]int{}
	}
	path := filepath.Join(rs.Dir, file+"."+strconv.Itoa(rs.starts[file])+".audit")
	rs.starts[file]++
	rs.auditLogs = append(rs.auditLogs, path)
	return path
}

// AuditLogs are the audit logs given to the processes started so far, in their order; a process
// that exited at once may have opened none.
func (rs *ReplicaSet) AuditLogs() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.auditLogs)
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

// AllReady reports whether the /readyz of every running replica answers 200: each holds its share.
func AllReady(ctx context.Context, replicas []*Replica) bool {
	for _, r := range replicas {
		if r.Running() && !r.Ready(ctx) {
			return false
		}
	}
	return true
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

// WriteConfigs writes the prober config into dir as proberFile and the weeder config as weeder.yaml,
// and returns the flags of `dwd run` that name them.
func WriteConfigs(dir, proberFile, prober, weeder string) ([]string, error) {
	proberPath, weederPath := filepath.Join(dir, proberFile), filepath.Join(dir, "weeder.yaml")
	if err := os.WriteFile(proberPath, []byte(prober), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(weederPath, []byte(weeder), 0o644); err != nil {
		return nil, err
	}
	return []string{"--prober-config=" + proberPath, "--weeder-config=" + weederPath}, nil
}

// TerminateRunning terminates the running replicas side by side, each within timeout
// (Replica.Terminate), and returns when all have stopped.
func TerminateRunning(replicas []*Replica, timeout time.Duration) {
	var wg sync.WaitGroup
	for _, r := range replicas {
		if r.Running() {
			wg.Go(func() { r.Terminate(timeout) })
		}
	}
	wg.Wait()
}

// PerReplica scrapes each replica and sums the samples of metric name whose labels include match
// ("k=v,k=v"), by replica name; a replica that does not answer counts 0.
func PerReplica(ctx context.Context, replicas []*Replica, name, match string) map[string]float64 {
	sums := make(map[string]float64, len(replicas))
	for _, r := range replicas {
		sums[r.Name] = r.Sum(ctx, name, match)
	}
	return sums
}
