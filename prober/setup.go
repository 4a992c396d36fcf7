package prober

import (
	"context"
	"fmt"

	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Options tune the prober of one replica.
type Options struct {
	// Workers bounds the probes and scale flows in flight.
	Workers int
	// ConcurrentReconciles bounds the Cluster reconciles in flight.
	ConcurrentReconciles int
	// PartitionCount is the sharding group's partition count.
	PartitionCount int
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
}

// Setup adds the prober to mgr, whose cache must have been built with CacheOptions: the Cluster
// controller, the scheduler, the dependent-resource cache and the scaler. The returned Manager is a
// sharding.PartitionHandler for coordinator, which also tells it what this replica owns.
func Setup(ctx context.Context, mgr manager.Manager, cfg *config.ProberConfig, coordinator *sharding.Coordinator, opts Options) (*Manager, error) {
	registerMetrics()
	if err := IndexClusters(ctx, mgr.GetFieldIndexer(), opts.PartitionCount); err != nil {
		return nil, fmt.Errorf("indexing clusters: %w", err)
	}
	dependents, err := NewDependentCache(mgr.GetConfig(), mgr.GetScheme(), cfg.DependentResourceInfos)
	if err != nil {
		return nil, err
	}
	scaleClient, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		Cache: &client.CacheOptions{Reader: dependents}})
	if err != nil {
		return nil, fmt.Errorf("creating the scale client: %w", err)
	}
	log := ctrl.Log.WithName("prober")
	clk := clock.RealClock{}
	m := &Manager{
		Config: cfg, Ownership: coordinator, Reader: mgr.GetCache(), Clock: clk, Log: log,
		Recorder:  mgr.GetEventRecorderFor("dependency-watchdog-prober"),
		Scheduler: NewScheduler(clk, opts.Workers, lagObserver(cfg.ProbeInterval.Duration)),
		Clients: &ShootClients{Timeout: cfg.ProbeTimeout.Duration, QPS: opts.QPS, Burst: opts.Burst, UserAgent: opts.UserAgent,
			Wrap: CountRequests("shoot", "prober")},
		Scaler: &scaler.Scaler{Client: scaleClient, APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorderFor("dependency-watchdog-prober"),
			Clock: clk, Log: log.WithName("scaler"), Resources: cfg.DependentResourceInfos},
	}
	for _, r := range []manager.Runnable{dependents, m.Scheduler} {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("prober").For(newCluster()).
		// A process runs one prober; tests run several, whose controllers would otherwise clash by name.
		WithOptions(controller.Options{MaxConcurrentReconciles: max(opts.ConcurrentReconciles, 1), SkipNameValidation: ptr.To(true)}).
		Complete(m)
	if err != nil {
		return nil, fmt.Errorf("creating the cluster controller: %w", err)
	}
	coordinator.AddHandler(m)
	return m, nil
}
