package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/sharded-dwd/dependency-watchdog/access"
	"github.com/sharded-dwd/dependency-watchdog/audit"
	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/internal/apimetrics"
	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/prober"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
	"github.com/sharded-dwd/dependency-watchdog/weeder"
)

// groupFor is the default sharding group of a role. The group of a role never depends on the other
// roles a replica runs: a replica that runs both is a member of both groups, so that adding or
// dropping a role in a rollout is a join or a departure of that role's group and never puts a second
// group on the shoots (docs/sharding.md, "A group per role"). A prober and a weeder deployed side by
// side never share partitions either (each would leave the shoots the other holds unwatched).
func groupFor(r role) string {
	return "dwd-" + string(r)
}

// newRunCommand builds `dwd run`, one replica of a sharded group.
func newRunCommand() *cobra.Command {
	// The group is left empty for complete to choose from the roles, which the flags give.
	o := newOptions("")
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one replica of a sharded watchdog group",
		Long: `Run one replica of a sharded watchdog group. The replicas of a group (normally the pods of one
StatefulSet) share the shoot namespaces of the seed: each probes and weeds only the namespaces it owns.
Give --prober-config, --weeder-config or both to choose the roles this replica runs.`,
		Example: `  dwd run --prober-config=/etc/dwd/prober.yaml --weeder-config=/etc/dwd/weeder.yaml --member-name=$(POD_NAME)`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.completeValidateRun(cmd)
		},
	}
	addSection(cmd.Flags(), sectionWatchdog, func(fs *pflag.FlagSet) {
		fs.StringVar(&o.proberConfigPath, "prober-config", "", "Path to the prober config file (the original's format); leave out to run no prober.")
		fs.StringVar(&o.weederConfigPath, "weeder-config", "", "Path to the weeder config file (the original's format); leave out to run no weeder.")
		o.addProberFlags(fs)
		o.addWeederFlags(fs)
	})
	o.addCommonFlags(cmd.Flags())
	addSection(cmd.Flags(), sectionSharding, func(fs *pflag.FlagSet) {
		fs.StringVar(&o.leaderElection.namespace, "leader-election-namespace", o.leaderElection.namespace,
			"Namespace of the leader leases of the original's mode ("+leaderLeaseName(roleProber)+", "+leaderLeaseName(roleWeeder)+
				"): while another process holds the one of a role there (the original, or dwd prober|weeder --enable-leader-election), this replica holds no shoot of that role.")
	})
	// The group's default depends on the roles, which only the parsed flags give.
	group := cmd.Flags().Lookup("shard-group")
	group.Usage += fmt.Sprintf(" (default: %s for the prober, %s for the weeder; a replica that runs both roles is a member of both groups and takes no --shard-group)",
		groupFor(roleProber), groupFor(roleWeeder))
	return cmd
}

// leaderLeaseName is the leader lease of role r in the original's mode, the original's name for it.
func leaderLeaseName(r role) string { return "dwd-" + string(r) + "-leader-election" }

// newRoleCommand builds `dwd prober` or `dwd weeder`, which take the original's command line.
func newRoleCommand(r role) *cobra.Command {
	o := newOptions(groupFor(r))
	o.leaderElection.id = leaderLeaseName(r)
	cmd := &cobra.Command{
		Use:   string(r),
		Short: roleShort[r],
		Long: roleShort[r] + `.

Takes the command line of the original dependency-watchdog's ` + string(r) + ` command, so that dwd can
replace it without changing a deployment. With --enable-leader-election and no sharding flag it runs as
the original does: the leader owns every shoot, and the only Lease it uses is the leader lease. With a
sharding flag, replicas of the same --shard-group share the shoot namespaces (behind the leader lease
too, if leader election is on).`,
		Example: roleExample[r],
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.proberConfigPath == "" && o.weederConfigPath == "" {
				return fmt.Errorf("--config-file is required")
			}
			o.leaderOnly = o.leaderElection.enabled && !shardingFlagGiven(cmd.Flags())
			return o.completeValidateRun(cmd)
		},
	}
	o.addRoleFlags(cmd.Flags(), r)
	o.addCommonFlags(cmd.Flags())
	return cmd
}

var roleShort = map[role]string{
	roleProber: "Probe shoot API servers and node leases, and scale dependent components down and up",
	roleWeeder: "Restart CrashLoopBackOff pods when the service they depend on is ready again",
}

var roleExample = map[role]string{
	roleProber: `  dwd prober --config-file=/etc/dependency-watchdog/config/dep-config.yaml --kube-api-qps=20.0 \
    --kube-api-burst=100 --zap-log-level=INFO --enable-leader-election=true`,
	roleWeeder: `  dwd weeder --config-file=/etc/dependency-watchdog/config/dep-config.yaml --enable-leader-election=true`,
}

// completeValidateRun completes and validates the options, prints every problem at once, and runs.
func (o *options) completeValidateRun(cmd *cobra.Command) error {
	errs := o.complete()
	errs = append(errs, o.validate(o.roles())...)
	if err := printErrors(cmd.ErrOrStderr(), errs); err != nil {
		return err
	}
	if o.zap.DestWriter == nil {
		o.zap.DestWriter = cmd.ErrOrStderr()
	}
	return o.run(cmd.Context())
}

// run starts the replica's manager and blocks until ctx ends.
func (o *options) run(ctx context.Context) error {
	// The process logs through one logger; dwd's own lines use it directly, so that they reach it even
	// where controller-runtime's logger was set before (it can be set only once, as tests do).
	logger := zap.New(zap.UseFlagOptions(&o.zap))
	ctrl.SetLogger(logger)
	log := logger.WithName("dwd")
	o.warnUnknownKeys(log)
	setBuildInfo()
	checker, err := o.accessChecker(logger.WithName("access"))
	if err != nil {
		return err
	}
	synced := &cacheSync{}
	mgr, err := o.newManager(ctx, checker, synced)
	if err != nil {
		o.closeAuditLogs()
		return fmt.Errorf("creating the manager: %w", err)
	}
	mode := "sharded"
	if o.leaderOnly {
		mode = "leader owns every shoot"
	}
	log.Info("Starting replica", "version", version, "roles", o.roles(), "mode", mode, "groups", o.groups(),
		"member", o.sharding.MemberName, "namespace", o.sharding.Namespace, "leaderElection", o.leaderElection.enabled)
	if le := o.leaderElection; o.leaderOnly {
		if window := sharding.LeaderFenceWindow(le.renewDeadline, le.leaseDuration); window < le.renewDeadline {
			log.Info("Warning: the leader stops writing sooner after a renewal than --leader-elect-renew-deadline says, to keep the fence margin before another replica may take the lease over",
				"renewDeadline", le.renewDeadline, "leaseDuration", le.leaseDuration, "writesUntil", window)
		}
	}
	// The checker runs beside the manager, not in it: the manager starts nothing else until its caches
	// synced, and a cache that may not list never does; the checker is what says why.
	checkCtx, stopChecks := context.WithCancel(ctx)
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		_ = checker.Start(checkCtx)
	}()
	err = runManager(ctx, mgr, synced)
	stopChecks()
	<-checked
	o.closeAuditLogs()
	if err != nil {
		return fmt.Errorf("running the manager: %w", err)
	}
	log.Info("Stopped replica")
	return nil
}

// runManager runs mgr until ctx ends and it has stopped, or, when ctx ends before the seed caches
// synced, returns at once: the manager then started nothing but its caches and servers (nothing holds
// a lease or does work), and controller-runtime's manager does not return while a cache it waits for
// cannot sync, as when a list is forbidden.
func runManager(ctx context.Context, mgr manager.Manager, synced *cacheSync) error {
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	select {
	case err := <-stopped:
		return err
	case <-ctx.Done():
	}
	if !synced.synced.Load() {
		synced.log.Info("Stopping before the seed caches synced: no work had started")
		return nil
	}
	return <-stopped
}

// newManager builds the controller-runtime manager with the metrics server, health endpoints and,
// for the original's command lines, leader election; then the replica's ownership and its roles.
func (o *options) newManager(ctx context.Context, checker *access.Checker, synced *cacheSync) (manager.Manager, error) {
	var lock *sharding.FencedLock
	if o.leaderOnly {
		var err error
		if lock, err = o.leaderLock(); err != nil {
			return nil, err
		}
	}
	mgr, err := o.controllerManager(lock)
	if err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := addAccessChecks(mgr, checker, synced); err != nil {
		return nil, err
	}
	// Events go through recorders that drop them while the replica may not write them.
	gated := eventGate{Manager: mgr, may: checker.MayRecord()}
	if o.leaderOnly {
		return mgr, o.addLeader(ctx, mgr, gated, lock)
	}
	return mgr, o.addShardingRunner(ctx, mgr, gated)
}

// controllerManager is the controller-runtime manager of the flags: scheme, caches of the roles,
// metrics, health and pprof endpoints, leader election with lock when it is set.
func (o *options) controllerManager(lock *sharding.FencedLock) (manager.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cacheOptions, err := o.cacheOptions()
	if err != nil {
		return nil, err
	}
	le := o.leaderElection
	return ctrl.NewManager(o.restConfig, manager.Options{
		Scheme:                              scheme,
		Cache:                               cacheOptions,
		Metrics:                             o.metricsOptions(),
		LeaderElectionResourceLockInterface: lockInterface(lock),
		HealthProbeBindAddress:              o.healthBindAddress,
		PprofBindAddress:                    o.pprofBindAddress,
		LeaderElection:                      le.enabled,
		LeaderElectionID:                    le.id,
		LeaderElectionNamespace:             le.namespace,
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       &le.leaseDuration,
		RenewDeadline:                       &le.renewDeadline,
		RetryPeriod:                         &le.retryPeriod,
	})
}

// addLeader adds the original's mode: a Leader fenced by lock, which owns every shoot while the
// process leads, and the roles under it.
func (o *options) addLeader(ctx context.Context, mgr, gated manager.Manager, lock *sharding.FencedLock) error {
	le := o.leaderElection
	// The metrics name the member by the host name (the pod's name), as a member of a sharded group is
	// named: the identity's UUID would make every restart a new series.
	host, uid, _ := strings.Cut(lock.Identity(), "_")
	var err error
	// The audit names the leader lease as the group, so that the checker tells the original's mode
	// from the sharded group of the same role and fails writes of both to one namespace
	// (auditcheck.Report.CrossGroupWrites).
	auditLog, err := o.openAuditLog(le.id, host, uid, sharding.LeaderPartitions, le.renewDeadline, le.leaseDuration)
	if err != nil {
		return err
	}
	if auditLog != nil {
		o.auditLogs = append(o.auditLogs, auditLog)
		lock.Audit = auditLog
	}
	leader := sharding.NewLeader(o.sharding.GroupName, host, lock, ctrl.Log.WithName("leader"))
	if err := mgr.Add(leader); err != nil {
		return err
	}
	return o.setupRoles(ctx, gated, leader, sharding.LeaderPartitions, auditLog)
}

// addShardingRunner adds this replica's member of the sharding group of each role it runs, the role
// under its group's coordinator, and the members' health and readiness checks.
func (o *options) addShardingRunner(ctx context.Context, mgr, gated manager.Manager) error {
	for _, r := range o.roles() {
		if err := o.addRoleMember(ctx, mgr, gated, r); err != nil {
			return err
		}
	}
	return o.forgoDroppedRoles(ctx)
}

// forgoDroppedRoles ends the returning leave of this member's earlier process in the group of each
// role this process does not run: a rolling update that drops a role is a departure from that role's
// group, so its members take this member's share there at once instead of keeping it for the return
// grace (docs/sharding.md, "A group per role"). It assumes the default group names, and does nothing
// for a process whose group --shard-group names. Failing to is no reason not to start: the share then
// waits for the grace, as before.
func (o *options) forgoDroppedRoles(ctx context.Context) error {
	for _, r := range o.roles() {
		if o.shardingFor(r).GroupName != groupFor(r) {
			return nil // groups named by --shard-group: the other role's group is not known
		}
	}
	cfg := rest.CopyConfig(o.baseRestConfig)
	cfg.Wrap(apimetrics.CountRequests("seed", "sharding"))
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the lease client: %w", err)
	}
	store := leases.APIStore{Leases: clientset.CoordinationV1().Leases(o.sharding.Namespace)}
	for _, r := range []role{roleProber, roleWeeder} {
		if slices.Contains(o.roles(), r) {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, o.sharding.MemberRenewDeadline)
		wrote, err := leases.ForgoReturn(wctx, store, groupFor(r), o.sharding.MemberName)
		cancel()
		switch {
		case err != nil:
			ctrl.Log.WithName("sharding").Info("Could not end this member's returning leave in the group of a role it no longer runs; the others keep its share there for the return grace",
				"group", groupFor(r), "error", err.Error())
		case wrote:
			ctrl.Log.WithName("sharding").Info("Ended this member's returning leave in the group of a role it no longer runs: the others take its share there at once",
				"group", groupFor(r), "member", o.sharding.MemberName)
		}
	}
	return nil
}

// addRoleMember adds the member of role r's group, the role under its coordinator, and its checks.
func (o *options) addRoleMember(ctx context.Context, mgr, gated manager.Manager, r role) error {
	s := o.shardingFor(r)
	opts, err := o.shardingRunnerOptions(gated, s, r)
	if err != nil {
		return err
	}
	incarnation := sharding.NewIncarnation()
	auditLog, err := o.openAuditLog(s.GroupName, s.MemberName, incarnation, s.PartitionCount, s.MemberRenewDeadline, s.MemberLeaseDuration)
	if err != nil {
		return err
	}
	if auditLog != nil {
		o.auditLogs = append(o.auditLogs, auditLog)
		opts.Audit = auditLog
	}
	opts.Incarnation = incarnation
	runner := sharding.NewRunner(opts)
	runner.Coordinator().SetNamespaces(shootNamespaces(gated.GetCache(), r == roleProber))
	if err := mgr.Add(runner); err != nil {
		return err
	}
	if err := o.setupRole(ctx, gated, r, runner.Coordinator(), s.PartitionCount, auditLog); err != nil {
		return err
	}
	check := "sharding-" + string(r)
	if err := mgr.AddHealthzCheck(check, runner.HealthCheck); err != nil {
		return err
	}
	// A standby waiting for the original's leader lease stays ready, or a surge rollout would wait on
	// a pod that cannot lead before the old one leaves.
	if o.leaderElection.enabled {
		return nil
	}
	return mgr.AddReadyzCheck(check, runner.ReadyCheck)
}

// closeAuditLogs closes the audit logs opened.
func (o *options) closeAuditLogs() {
	for _, l := range o.auditLogs {
		_ = l.Close()
	}
}

// openAuditLog opens the file of --audit-log for this process's member of group, if the flag was
// given; nil otherwise. The members of a replica that runs both roles append to the one file, each
// line whole and naming its group and incarnation.
func (o *options) openAuditLog(group, member, incarnation string, partitions int, renewDeadline, leaseDuration time.Duration) (*audit.Log, error) {
	if o.auditLogPath == "" {
		return nil, nil
	}
	return audit.Open(o.auditLogPath, audit.Process{Group: group, Member: member, Incarnation: incarnation,
		Partitions: partitions, RenewDeadline: renewDeadline, LeaseDuration: leaseDuration})
}

// cacheOptions are the seed caches of the roles this replica runs: only what they read.
func (o *options) cacheOptions() (cache.Options, error) {
	byObject := map[client.Object]cache.ByObject{}
	if o.proberConfig != nil {
		maps.Copy(byObject, prober.CacheOptions(o.proberConfig))
	}
	if o.weederConfig != nil {
		weederObjects, err := weeder.CacheOptions(o.weederConfig)
		if err != nil {
			return cache.Options{}, err
		}
		maps.Copy(byObject, weederObjects)
	}
	return cache.Options{ByObject: byObject}, nil
}

// setupRoles adds the prober and the weeder this replica runs, both under owner (the leader mode).
func (o *options) setupRoles(ctx context.Context, mgr manager.Manager, owner sharding.Owner, partitions int, auditLog *audit.Log) error {
	for _, r := range o.roles() {
		if err := o.setupRole(ctx, mgr, r, owner, partitions, auditLog); err != nil {
			return err
		}
	}
	return nil
}

// setupRole adds role r; owner starts and stops its work as its partitions (partitions of them) come
// and go.
func (o *options) setupRole(ctx context.Context, mgr manager.Manager, r role, owner sharding.Owner, partitions int, auditLog *audit.Log) error {
	if r == roleProber {
		opts := o.proberOptions()
		opts.PartitionCount, opts.Audit = partitions, auditLog
		if _, err := prober.Setup(ctx, mgr, o.proberConfig, owner, opts); err != nil {
			return fmt.Errorf("setting up the prober: %w", err)
		}
		return nil
	}
	if _, err := weeder.Setup(ctx, mgr, weeder.Options{Config: o.weederConfig, Owner: owner,
		MaxWindows: o.maxWeedingWindows, PartitionCount: partitions, Audit: auditLog}); err != nil {
		return fmt.Errorf("setting up the weeder: %w", err)
	}
	return nil
}

// proberOptions are the prober's settings from the flags.
func (o *options) proberOptions() prober.Options {
	return prober.Options{
		Workers: o.probeWorkers, ConcurrentReconciles: o.concurrentReconciles, PartitionCount: o.sharding.PartitionCount,
		QPS: float32(o.kubeAPIQPS), Burst: o.kubeAPIBurst,
		UserAgent:    "dwd-prober/" + version + " (" + o.sharding.MemberName + ")",
		ScaleWorkers: o.scaleWorkers, ScaleQPS: o.scaleQPS, ScaleBurst: o.scaleBurst,
		MaxResponseBytes: o.maxResponseBytes, MaxResponseItems: o.maxResponseItems,
		MaxResponseBytesInFlight: o.maxBytesInFlight, AllowInsecureKubeconfigs: o.allowInsecureShoots,
	}
}

// shardingRunnerOptions are this replica's member of role r's sharding group (settings s), with a
// Lease client whose rate limits cannot slow a handover down and a client of its own for renewals.
func (o *options) shardingRunnerOptions(mgr manager.Manager, s config.Sharding, r role) (sharding.RunnerOptions, error) {
	leaseConfig := sharding.LeaseClientConfig(o.baseRestConfig, s.PartitionCount)
	leaseConfig.Wrap(apimetrics.CountRequests("seed", "sharding"))
	client, err := kubernetes.NewForConfig(leaseConfig)
	if err != nil {
		return sharding.RunnerOptions{}, fmt.Errorf("creating the lease client: %w", err)
	}
	renewalConfig := sharding.RenewalClientConfig(o.baseRestConfig)
	renewalConfig.Wrap(apimetrics.CountRequests("seed", "sharding"))
	renewals, err := kubernetes.NewForConfig(renewalConfig)
	if err != nil {
		return sharding.RunnerOptions{}, fmt.Errorf("creating the member lease client: %w", err)
	}
	opts := sharding.RunnerOptions{Settings: s, Client: client, Renewals: renewals,
		Log: ctrl.Log.WithName("sharding").WithValues("group", s.GroupName)}
	// Outside a Pod (no $POD_NAME) the member name stands for the pod's; reading it fails if there is
	// no such Pod, and a graceful stop then hands the share over.
	pod := sharding.StatefulSetPod{Client: client, Pod: types.NamespacedName{Namespace: o.pod.Namespace, Name: cmp.Or(o.pod.Name, o.sharding.MemberName)}}
	opts.Departing = pod.Departing
	if o.sharding.LeaveMode == config.LeaveAuto {
		// The permissions StatefulSetPod needs are those of leave mode auto (options.needs).
		opts.WontReturn = pod.WontReturn
	}
	if o.pod.Name != "" {
		opts.Event = podEvent(mgr.GetEventRecorder("dependency-watchdog-sharding"), &o.pod)
	}
	return opts, nil
}

// shootNamespaces lists the shoot namespaces of the seed from the caches the roles already have:
// the prober's Clusters (named after their namespaces), else the namespaces of the weeder's
// EndpointSlices. It never starts an informer of its own.
func shootNamespaces(c cache.Cache, fromClusters bool) func(ctx context.Context) []string {
	return func(ctx context.Context) []string {
		var names []string
		if fromClusters {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(prober.ClusterGVK.GroupVersion().WithKind("ClusterList"))
			if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
				return nil
			}
			for _, item := range list.Items {
				names = append(names, item.GetName())
			}
			return names
		}
		list := &discoveryv1.EndpointSliceList{}
		if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		for _, item := range list.Items {
			names = append(names, item.Namespace)
		}
		return slices.Compact(slices.Sorted(slices.Values(names)))
	}
}
