package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// The scale budget flags of `dwd run` and their defaults, and the shoot answer bounds. A binary built
// before they existed has none of them: the bench passes them only when `dwd run --help` shows them.
const (
	flagScaleWorkers     = "--scale-workers"
	flagScaleQPS         = "--scale-qps"
	flagScaleBurst       = "--scale-burst"
	flagMaxResponseBytes = "--shoot-max-response-bytes"
	flagMaxResponseItems = "--shoot-max-response-items"
	// flagLeaderElectionNamespace is where dwd run looks for a leader of the original's mode.
	flagLeaderElectionNamespace = "--leader-election-namespace"
	flagCacheSharding           = "--cache-sharding"
	// flagLeaveMode is what a graceful stop does with a replica's share; the rolling scenario passes it.
	flagLeaveMode = "--leave-mode"

	defaultScaleWorkers     = 16
	defaultScaleQPS         = 20.0
	defaultScaleBurst       = 100
	defaultMaxResponseBytes = 32 << 20
	defaultMaxResponseItems = 20000
)

// The original's seed client limits: client-go's defaults, which it keeps.
const (
	originalKubeAPIQPS   = 5.0
	originalKubeAPIBurst = 10
)

// gardenerMCMScaleUpDelay is machine-controller-manager's scaleUp initialDelay in Gardener's prober
// config.
const gardenerMCMScaleUpDelay = 30 * time.Second

// dwdFlags returns which of the flags `dwd run --help` lists.
func dwdFlags(ctx context.Context, dwd string, flags ...string) (map[string]bool, error) {
	out, err := exec.CommandContext(ctx, dwd, "run", "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s run --help: %w: %s", dwd, err, out)
	}
	has := map[string]bool{}
	for _, f := range flags {
		has[f] = bytes.Contains(out, []byte(f+" ")) || bytes.Contains(out, []byte(f+"="))
	}
	return has, nil
}

// replicaProfile is how the replicas of a scenario are started: their seed client limits and
// prober settings.
type replicaProfile struct {
	// name names the profile's prober config file.
	name string
	// interval is the probeInterval; zero for --probe-interval's.
	interval     time.Duration
	kubeAPIQPS   float64
	kubeAPIBurst int
	// scaleBudget passes the scale budget flags at their defaults, when the binary has them.
	scaleBudget bool
	// responseBounds passes the shoot answer bounds at their defaults, when the binary has them.
	responseBounds bool
	probeTimeout   time.Duration
	// mcmScaleUpDelay is machine-controller-manager's scaleUp initialDelay.
	mcmScaleUpDelay time.Duration
}

// benchProfile is the steady, handover and meltdown scenarios' profile: Gardener's client limits,
// the demo's prober config at the bench's probe interval.
var benchProfile = replicaProfile{name: "bench", kubeAPIQPS: benchKubeAPIQPS, kubeAPIBurst: benchKubeAPIBurst,
	probeTimeout: 5 * time.Second, mcmScaleUpDelay: 2 * time.Second}

// The values of Options.Profile: the prober settings the blip and detection scenarios run at.
const (
	ProfileDefault  = "default"
	ProfileGardener = "gardener"
	ProfileBoth     = "both"
)

// benchGrace is kcmNodeMonitorGraceDuration in every profile's prober config: a lease counts as
// expired expiryOfGrace × that after its last renewal.
const (
	benchGrace    = 40 * time.Second
	expiryOfGrace = 0.75
)

// gardenerTimings is the prober config and client limits Gardener deploys the watchdog with:
// probeInterval 30s, kcmNodeMonitorGraceDuration 40s, probeTimeout 30s (the original's default,
// which Gardener keeps), machine-controller-manager's scaleUp initialDelay 30s, --kube-api-qps=20
// --kube-api-burst=100, with the scale budget and the shoot answer bounds at their defaults.
var gardenerTimings = replicaProfile{name: "gardener-30s", interval: 30 * time.Second, kubeAPIQPS: benchKubeAPIQPS,
	kubeAPIBurst: benchKubeAPIBurst, scaleBudget: true, responseBounds: true, probeTimeout: 30 * time.Second,
	mcmScaleUpDelay: gardenerMCMScaleUpDelay}

// timings are the profiles --profile names: benchProfile (the bench's own, at --probe-interval) for
// default, gardenerTimings for gardener, both in that order for both.
func timings(profile string) []replicaProfile {
	switch profile {
	case ProfileDefault:
		return []replicaProfile{benchProfile}
	case ProfileGardener:
		return []replicaProfile{gardenerTimings}
	case ProfileBoth:
		return []replicaProfile{benchProfile, gardenerTimings}
	}
	return nil
}

// probeInterval is the profile's probeInterval, given --probe-interval.
func (p replicaProfile) probeInterval(flag time.Duration) time.Duration {
	if p.interval > 0 {
		return p.interval
	}
	return flag
}

// profile describes the profile for a result: its name is the --profile value that chose it.
func (b *bench) profile(p replicaProfile) Profile {
	name := ProfileDefault
	if p.name == gardenerTimings.name {
		name = ProfileGardener
	}
	return Profile{Name: name, ProbeIntervalSeconds: p.probeInterval(b.opts.Interval).Seconds(),
		GraceSeconds: benchGrace.Seconds(), ProbeTimeoutSeconds: p.probeTimeout.Seconds(),
		MCMScaleUpDelaySeconds: p.mcmScaleUpDelay.Seconds(), Client: p.limits(b.dwdHas)}
}

// limits are the client limits the profile's replicas run with, given the flags the binary has.
func (p replicaProfile) limits(has map[string]bool) ClientLimits {
	l := ClientLimits{KubeAPIQPS: p.kubeAPIQPS, KubeAPIBurst: p.kubeAPIBurst}
	if p.scaleBudget && has[flagScaleWorkers] && has[flagScaleQPS] && has[flagScaleBurst] {
		l.ScaleWorkers, l.ScaleQPS, l.ScaleBurst = defaultScaleWorkers, defaultScaleQPS, defaultScaleBurst
	}
	return l
}

// scaleBudget is the rate and burst of the scale writes of one replica: the scale budget when it
// was given, else the seed client's, which a binary without one scales through. A binary with a scale
// budget whose flags were left out runs at the defaults.
func scaleBudget(l ClientLimits, has map[string]bool) (float64, int) {
	switch {
	case l.ScaleQPS > 0:
		return l.ScaleQPS, l.ScaleBurst
	case has[flagScaleQPS]:
		return defaultScaleQPS, defaultScaleBurst
	}
	return l.KubeAPIQPS, l.KubeAPIBurst
}

// replicaSet writes the profile's prober config and returns the set its replicas start from.
func (b *bench) replicaSet(p replicaProfile) (*sim.ReplicaSet, error) {
	configs, err := sim.WriteConfigs(b.opts.Dir, "prober-"+p.name+".yaml",
		benchProberConfig(p.probeInterval(b.opts.Interval), p.probeTimeout, p.mcmScaleUpDelay), sim.WeederConfig)
	if err != nil {
		return nil, err
	}
	limits := p.limits(b.dwdHas)
	args := append(configs, "--kubeconfig="+b.seed.KubeconfigPath(),
		"--shard-namespace="+benchNamespace, "--probe-workers="+strconv.Itoa(b.opts.ProbeWorkers),
		"--kube-api-qps="+strconv.FormatFloat(limits.KubeAPIQPS, 'f', -1, 64), "--kube-api-burst="+strconv.Itoa(limits.KubeAPIBurst),
		"--zap-log-level=info", "--zap-time-encoding=rfc3339nano")
	if limits.ScaleQPS > 0 {
		args = append(args, flagScaleWorkers+"="+strconv.Itoa(limits.ScaleWorkers),
			flagScaleQPS+"="+strconv.FormatFloat(limits.ScaleQPS, 'f', -1, 64), flagScaleBurst+"="+strconv.Itoa(limits.ScaleBurst))
	}
	if b.opts.CacheSharding != "" {
		args = append(args, flagCacheSharding+"="+b.opts.CacheSharding)
	}
	if b.dwdHas[flagLeaderElectionNamespace] { // as the base StatefulSet's replicas, whose RBAC it has
		args = append(args, flagLeaderElectionNamespace+"="+benchNamespace)
	}
	if p.responseBounds && b.dwdHas[flagMaxResponseBytes] && b.dwdHas[flagMaxResponseItems] {
		args = append(args, flagMaxResponseBytes+"="+strconv.Itoa(defaultMaxResponseBytes), flagMaxResponseItems+"="+strconv.Itoa(defaultMaxResponseItems))
	}
	return &sim.ReplicaSet{Dwd: b.dwd, Dir: b.opts.Dir, Pprof: b.opts.Pprof, Args: args}, nil
}

// benchProberConfig is the demo's prober config at another probe interval, probe timeout and
// machine-controller-manager scale-up delay.
func benchProberConfig(interval, probeTimeout, mcmScaleUpDelay time.Duration) string {
	return sim.ProberConfigWith(interval, probeTimeout, benchGrace, mcmScaleUpDelay)
}
