package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sharded-dwd/dependency-watchdog/access"
	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/dryrun"
	"github.com/sharded-dwd/dependency-watchdog/internal/apimetrics"
	"github.com/sharded-dwd/dependency-watchdog/shardcache"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// Replica is one dwd replica: a controller-runtime manager with the replica's ownership and roles,
// and the permission self-check beside it.
type Replica struct {
	opts Options
	// base is the seed client config without request counting, for clients that count under their
	// own name; counted is the same, counting as "watchdog", for the manager.
	base, counted *rest.Config
	log           logr.Logger
	mgr           manager.Manager
	checker       *access.Checker
	synced        *cacheSync
	// shares are what the seed caches of each role hold, the share of the role's group; none for a
	// role whose caches hold the whole seed (--cache-sharding=off, the original's mode).
	shares map[Role]*shardcache.Share
	// newInformer builds the informers of the seed caches: of the kinds of a role with a share, those
	// hold the share only.
	newInformer shardcache.NewInformerFunc
	// auditLogs write the ownership audit's file, one per group of the replica; none without
	// Options.AuditLogPath. leaderAudit is the one of the original's mode.
	auditLogs   []*audit.Log
	leaderAudit *audit.Log
	// dryRun records the writes not sent, with Options.DryRun; nil otherwise.
	dryRun *dryrun.Writes
}

// New builds the replica of opts on the seed that cfg reaches. ctx bounds the setup's own requests
// (the end of a dropped role's returning leave); the replica runs under Start's context.
func New(ctx context.Context, cfg *rest.Config, opts Options) (*Replica, error) {
	if len(opts.Roles()) == 0 {
		return nil, errors.New("a replica runs the prober, the weeder or both: give at least one config")
	}
	if opts.LeaderOnly && !opts.LeaderElection.Enabled {
		return nil, errors.New("the original's mode (LeaderOnly) needs leader election")
	}
	if opts.DryRun && opts.LeaderElection.Enabled {
		return nil, errors.New("a replica in dry run must not take the original's leader lease (LeaderElection)")
	}
	if opts.Log.GetSink() == nil {
		opts.Log = ctrl.Log
	}
	r := &Replica{opts: opts, base: rest.CopyConfig(cfg), counted: rest.CopyConfig(cfg), log: opts.Log.WithName("dwd")}
	r.counted.Wrap(apimetrics.CountRequests("seed", "watchdog"))
	r.warnAboutTheFenceMargin()
	if opts.DryRun {
		r.dryRun = dryrun.New(r.log.WithName("dry-run"))
		r.log.Info("Dry run: nothing is scaled, no pod is deleted and no Event is recorded; every such write is logged and counted (dwd_dry_run_writes_total) instead. The sharding leases are written as usual")
	}
	checker, err := r.accessChecker()
	if err != nil {
		return nil, err
	}
	r.checker, r.synced = checker, &cacheSync{}
	// Every seed client but the checker's own: a 403 answer brings the next permission check forward.
	r.base.Wrap(checker.WatchForbidden)
	r.counted.Wrap(checker.WatchForbidden)
	r.shareCaches()
	if err := r.newManager(ctx); err != nil {
		r.closeAuditLogs()
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	return r, nil
}

// warnAboutTheFenceMargin logs a warning when the leader of the original's mode stops writing sooner
// after a renewal than its renew deadline says, to keep the fence margin.
func (r *Replica) warnAboutTheFenceMargin() {
	le := r.opts.LeaderElection
	if !r.opts.LeaderOnly {
		return
	}
	if window := sharding.LeaderFenceWindow(le.RenewDeadline, le.LeaseDuration); window < le.RenewDeadline {
		r.log.Info("Warning: the leader stops writing sooner after a renewal than --leader-elect-renew-deadline says, to keep the fence margin before another replica may take the lease over",
			"renewDeadline", le.RenewDeadline, "leaseDuration", le.LeaseDuration, "writesUntil", window)
	}
}

// Start runs the replica until ctx ends and its manager has stopped, and closes its audit logs.
func (r *Replica) Start(ctx context.Context) error {
	// The checker runs beside the manager, not in it: the manager starts nothing else until its caches
	// synced, and a cache that may not list never does; the checker is what says why.
	checkCtx, stopChecks := context.WithCancel(ctx)
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		_ = r.checker.Start(checkCtx)
	}()
	err := r.runManager(ctx)
	stopChecks()
	<-checked
	r.closeAuditLogs()
	if err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	r.log.Info("Stopped replica")
	return nil
}

// runManager runs the manager until ctx ends and it has stopped, or, when ctx ends before the seed
// caches synced, returns at once: the manager then started nothing but its caches and servers
// (nothing holds a lease or does work), and controller-runtime's manager does not return while a
// cache it waits for cannot sync, as when a list is forbidden.
func (r *Replica) runManager(ctx context.Context) error {
	stopped := make(chan error, 1)
	go func() { stopped <- r.mgr.Start(ctx) }()
	select {
	case err := <-stopped:
		return err
	case <-ctx.Done():
	}
	if !r.synced.synced.Load() {
		r.synced.log.Info("Stopping before the seed caches synced: no work had started")
		return nil
	}
	return <-stopped
}

// newManager builds the controller-runtime manager with the metrics server, health endpoints and,
// in the original's mode, leader election; then the replica's ownership and its roles.
func (r *Replica) newManager(ctx context.Context) error {
	var leader *sharding.Leader
	var lock *sharding.FencedLock
	if r.opts.LeaderOnly {
		var err error
		if leader, err = r.newLeader(); err != nil {
			return err
		}
		lock = leader.Lock()
	}
	mgr, err := r.controllerManager(lock)
	if err != nil {
		return err
	}
	r.mgr = mgr
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := r.addAccessChecks(); err != nil {
		return err
	}
	// Events go through recorders that drop them while the replica may not write them.
	gated := eventGate{Manager: mgr, may: r.checker.MayRecord(), dryRun: r.dryRun}
	if leader != nil {
		return r.addLeader(ctx, gated, leader)
	}
	return r.addShardingRunners(ctx, gated)
}

// controllerManager is the controller-runtime manager of the options: scheme, caches of the roles,
// metrics, health and pprof endpoints, leader election with lock when it is set.
func (r *Replica) controllerManager(lock *sharding.FencedLock) (manager.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	r.newInformer = shardcache.NewInformer(scheme, r.shardedKinds())
	cacheOptions, err := r.cacheOptions()
	if err != nil {
		return nil, err
	}
	le, servers := r.opts.LeaderElection, r.opts.Servers
	return ctrl.NewManager(r.counted, manager.Options{
		Scheme:                              scheme,
		Cache:                               cacheOptions,
		Metrics:                             r.metricsOptions(),
		LeaderElectionResourceLockInterface: lockInterface(lock),
		HealthProbeBindAddress:              servers.HealthBindAddress,
		PprofBindAddress:                    servers.PprofBindAddress,
		LeaderElection:                      le.Enabled,
		LeaderElectionID:                    le.ID,
		LeaderElectionNamespace:             le.Namespace,
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       &le.LeaseDuration,
		RenewDeadline:                       &le.RenewDeadline,
		RetryPeriod:                         &le.RetryPeriod,
	})
}

// addLeader adds the original's mode: leader, which owns every shoot while the process leads, and the
// roles under it.
func (r *Replica) addLeader(ctx context.Context, gated manager.Manager, leader *sharding.Leader) error {
	if err := r.mgr.Add(leader); err != nil {
		return err
	}
	for _, role := range r.opts.Roles() {
		if err := r.setupRole(ctx, gated, role, leader, r.leaderAudit); err != nil {
			return err
		}
	}
	return nil
}

// openAuditLog opens the audit file for the process p of one group, if the options name one; nil
// otherwise. The members of a replica that runs both roles append to the one file, each line whole
// and naming its group and incarnation.
func (r *Replica) openAuditLog(p audit.Process) (*audit.Log, error) {
	if r.opts.AuditLogPath == "" {
		return nil, nil
	}
	l, err := audit.Open(r.opts.AuditLogPath, p)
	if err != nil {
		return nil, err
	}
	r.auditLogs = append(r.auditLogs, l)
	return l, nil
}

// closeAuditLogs closes the audit logs opened.
func (r *Replica) closeAuditLogs() {
	for _, l := range r.auditLogs {
		_ = l.Close()
	}
}
