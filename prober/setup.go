package prober

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/dryrun"
	"github.com/sharded-dwd/dependency-watchdog/internal/apimetrics"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Options tune the prober of one replica.
type Options struct {
	// Config is the prober config (the original's format); required.
	Config *config.ProberConfig
	// Owner tells what this replica owns and fences its writes (a sharding Coordinator, or the Leader
	// of the original's mode); required. The returned Manager is added to it as a PartitionHandler.
	Owner sharding.Owner
	// Workers bounds the probes in flight; 0 bounds them by the shoots only (a shoot has at most one in
	// flight), so that a shoot that answers late never delays another's probe. Scale flows have their
	// own scheduler (ScaleWorkers).
	Workers int
	// ConcurrentReconciles bounds the Cluster reconciles in flight.
	ConcurrentReconciles int
	// QPS and Burst limit each shoot client.
	QPS   float32
	Burst int
	// UserAgent is what the shoot clients send as User-Agent, so that a shoot's audit log tells which
	// replica probes it (default "dwd-prober").
	UserAgent string
	// ScaleWorkers bounds the scale flow steps in flight; flows run on their own pool, never on the
	// probe workers, and their waits hold no worker.
	ScaleWorkers int
	// ScaleQPS and ScaleBurst are the scale path's own budget of seed requests (scale writes and the
	// reads they need); Events and caches never take from it.
	ScaleQPS   float32
	ScaleBurst int
	// MaxResponseBytes and MaxResponseItems bound every shoot answer; over either, the probe is
	// inconclusive (no action).
	MaxResponseBytes int64
	MaxResponseItems int
	// MaxResponseBytesInFlight bounds the bytes of the shoot answers the replica holds at once, from
	// their arrival until they are decoded; an answer with no room within its request's timeout makes
	// the probe inconclusive (no action). Zero: DefaultMaxResponseBytesInFlight(MaxResponseBytes).
	MaxResponseBytesInFlight int64
	// AllowInsecureKubeconfigs lets shoot kubeconfigs skip the verification of the server's
	// certificate (insecure-skip-tls-verify) or name a plain http:// server: for labs only.
	AllowInsecureKubeconfigs bool
	// Audit, when set, records every scale write sent (--audit-log).
	Audit *audit.Log
	// DryRun, when set, is the shadow mode (--dry-run): the scale writes and the Events are recorded
	// there, not sent (scaler.Scaler.DryRun).
	DryRun *dryrun.Writes
	// Clock is the time of the schedulers, the probes and the scaler; defaults to the real clock.
	Clock clock.WithTicker
	// NewInformer, when set, builds the informers of the dependents' caches (controller-runtime's
	// cache.Options.NewInformer): the replica's, which hold its share only.
	NewInformer func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer
}

// Defaults of the Options a caller leaves at zero.
const (
	DefaultScaleWorkers     = 16
	DefaultScaleQPS         = 20
	DefaultScaleBurst       = 100
	DefaultMaxResponseBytes = 32 << 20
	DefaultMaxResponseItems = 20000
)

// defaulted returns a copy of o with the zero scale and bound settings and a nil Clock defaulted.
func (o Options) defaulted() Options {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.ScaleWorkers <= 0 {
		o.ScaleWorkers = DefaultScaleWorkers
	}
	if o.ScaleQPS <= 0 {
		o.ScaleQPS = DefaultScaleQPS
	}
	if o.ScaleBurst <= 0 {
		o.ScaleBurst = DefaultScaleBurst
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.MaxResponseItems <= 0 {
		o.MaxResponseItems = DefaultMaxResponseItems
	}
	if o.MaxResponseBytesInFlight <= 0 {
		o.MaxResponseBytesInFlight = DefaultMaxResponseBytesInFlight(o.MaxResponseBytes)
	}
	return o
}

// Setup adds the prober to mgr, whose cache must have been built with CacheOptions: the Cluster
// controller, the probe and flow schedulers, the dependent-resource cache, the scaler, and this
// replica's part of dwd_shoot_scaled_down (the marked shoots it owns, see scaledDownCollector). The returned
// Manager is a sharding.PartitionHandler of opts.Owner, which also tells it what this replica owns.
//
// Every seed informer a probe reads is registered here: Clusters, kubeconfig Secrets and Machines in
// the manager's cache, whose sync the manager waits for before it starts the prober, and the dependents
// in their own caches, whose sync the schedulers wait for before the first probe. No probe ever waits
// for a first sync while it holds shoot data whose age it measures.
func Setup(ctx context.Context, mgr manager.Manager, opts Options) (*Manager, error) {
	if opts.Config == nil || opts.Owner == nil {
		return nil, errors.New("setting up the prober: Options.Config and Options.Owner are required")
	}
	registerMetrics()
	opts = opts.defaulted()
	cfg, coordinator := opts.Config, opts.Owner
	machines, err := registerInformers(ctx, mgr, opts.Owner.Partition)
	if err != nil {
		return nil, err
	}
	dependents, err := NewDependentCache(mgr.GetConfig(), mgr.GetScheme(), cfg.DependentResourceInfos, opts.NewInformer)
	if err != nil {
		return nil, err
	}
	m, err := newManager(mgr, cfg, coordinator, opts, dependents)
	if err != nil {
		return nil, err
	}
	m.MachineChanges = machines
	if err := addRunnables(mgr, m, dependents, coordinator); err != nil {
		return nil, err
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("prober").For(newCluster()).
		// A process runs one prober; tests run several, whose controllers would otherwise clash by name.
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.ConcurrentReconciles, 1), SkipNameValidation: ptr.To(true)}).
		Complete(m)
	if err != nil {
		return nil, fmt.Errorf("creating the cluster controller: %w", err)
	}
	for _, h := range m.Handlers() {
		coordinator.AddHandler(h)
	}
	return m, nil
}

// registerInformers indexes the Clusters by partition and registers the informers of the kubeconfig
// Secrets and the Machines, so that the manager's cache syncs them before anything reads them, and
// follows the Machines' changes.
func registerInformers(ctx context.Context, mgr manager.Manager, partition func(string) int) (*MachineChanges, error) {
	if err := IndexClusters(ctx, mgr.GetFieldIndexer(), partition); err != nil {
		return nil, fmt.Errorf("indexing clusters: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Secret{}); err != nil {
		return nil, fmt.Errorf("registering the Secret informer: %w", err)
	}
	machines, err := mgr.GetCache().GetInformer(ctx, newMachine())
	if err != nil {
		return nil, fmt.Errorf("registering the Machine informer: %w", err)
	}
	changes, err := FollowMachines(machines)
	if err != nil {
		return nil, fmt.Errorf("following the Machines: %w", err)
	}
	return changes, nil
}

// ProbeBatch is the probe scheduler's Batch: probes start at multiples of 50 ms, at most that late,
// which halved a steady replica's CPU per probe (docs/benchmarks.md) and is nothing against the
// stability window of seconds that a lease's expiry needs anyway.
const ProbeBatch = 50 * time.Millisecond

// newManager builds the prober's Manager: its schedulers, shoot clients and scaler.
func newManager(mgr manager.Manager, cfg *config.ProberConfig, coordinator sharding.Owner, opts Options, dependents *DependentCache) (*Manager, error) {
	scaleClient, scaleReader, err := scaleClients(mgr, dependents)
	if err != nil {
		return nil, err
	}
	log := ctrl.Log.WithName("prober")
	clk := opts.Clock
	recorder, scaleLog := mgr.GetEventRecorder("dependency-watchdog-prober"), log.WithName("scaler")
	if opts.DryRun != nil {
		recorder, scaleLog = opts.DryRun.Recorder(), scaleLog.WithValues("dryRun", true)
	}
	scaler.InitMetrics(cfg.DependentResourceInfos)
	probeIntervalSeconds.Set(cfg.ProbeInterval.Duration.Seconds())
	probes := NewScheduler(clk, opts.Workers, lagObserver(cfg.ProbeInterval.Duration))
	probes.Batch = ProbeBatch
	budget := scaler.NewTokenBucket(opts.ScaleQPS, opts.ScaleBurst)
	budget.Export(clk)
	return &Manager{
		Config: cfg, Ownership: coordinator, Reader: mgr.GetCache(), Clock: clk, Log: log, Recorder: recorder,
		Scheduler: probes,
		Flows:     NewScheduler(clk, opts.ScaleWorkers, nil),
		Clients: &ShootClients{Timeout: cfg.ProbeTimeout.Duration, QPS: opts.QPS, Burst: opts.Burst, UserAgent: opts.UserAgent,
			MaxBytes: opts.MaxResponseBytes, MaxItems: opts.MaxResponseItems, MaxBytesInFlight: opts.MaxResponseBytesInFlight,
			AllowInsecure: opts.AllowInsecureKubeconfigs, Wrap: apimetrics.CountRequests("shoot", "prober")},
		// Every scale write asks the coordinator right before it is sent, and goes out bounded by the fence.
		Scaler: &scaler.Scaler{Client: scaleClient, APIReader: scaleReader, Recorder: recorder,
			Limiter: budget,
			Clock:   clk, Log: scaleLog, Resources: cfg.DependentResourceInfos, Guard: coordinator.Guard,
			Audit: opts.Audit, Partition: coordinator.Partition, DryRun: opts.DryRun},
	}, nil
}

// addRunnables adds the dependents' caches and what waits for them to the manager. The schedulers
// start once the dependents' caches (which the manager does not own) have synced; until then the
// replica is not ready, since it probes nothing (a forbidden list never syncs).
func addRunnables(mgr manager.Manager, m *Manager, dependents *DependentCache, coordinator sharding.Owner) error {
	synced := &syncedFlag{elected: mgr.Elected()}
	scaledDownShoots := &scaledDownSource{Shoots: dependents.marks.shoots, Owns: coordinator.Owns}
	for _, r := range []manager.Runnable{dependents, afterSync{dependents.WaitForCacheSync, m.Scheduler},
		afterSync{dependents.WaitForCacheSync, m.Flows}, afterSync{dependents.WaitForCacheSync, synced},
		afterSync{dependents.marks.waitForSync, scaledDownShoots}} {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	return mgr.AddReadyzCheck("prober-dependents", synced.check)
}

// afterSync runs a Runnable once wait reports the caches it reads synced; it returns at once when ctx
// ends first.
type afterSync struct {
	wait func(context.Context) bool
	run  manager.Runnable
}

func (a afterSync) Start(ctx context.Context) error {
	if !a.wait(ctx) {
		return nil
	}
	return a.run.Start(ctx)
}

// syncedFlag is a Runnable that records that it was started, for a readiness check that fails until
// then once this process leads (the dependents' caches run on the leader only, so a standby waiting for
// the leader lease is not held back by them).
type syncedFlag struct {
	elected <-chan struct{}
	started atomic.Bool
}

func (f *syncedFlag) Start(context.Context) error {
	f.started.Store(true)
	return nil
}

func (f *syncedFlag) check(*http.Request) error {
	select {
	case <-f.elected:
	default:
		return nil
	}
	if !f.started.Load() {
		return errors.New("the caches of the dependent resources have not synced")
	}
	return nil
}

// scaleClients builds the scale path's clients: they read the dependents from their cache, and send
// their requests with no rate limiter of their own, counted as client "scaler", because the Scaler's
// Limiter is the scale path's whole budget. Events go through the manager's recorder, whose client has
// a budget of its own.
func scaleClients(mgr manager.Manager, dependents *DependentCache) (client.Client, client.Reader, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
	cfg.WrapTransport = apimetrics.CountRequests("seed", "scaler")
	live, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the scale client: %w", err)
	}
	cached, err := client.New(cfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		Cache: &client.CacheOptions{Reader: dependents}})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the scale client: %w", err)
	}
	return cached, live, nil
}
