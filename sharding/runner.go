package sharding

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationv1listers "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// Runner runs one replica's side of the sharding protocol against the API server: the member lease,
// a cache of the group's Leases, and the coordinator's reconcile loop, triggered by every Lease event
// and requeued at the next moment a member lease can expire. It is a manager.Runnable; NewRunner
// builds it from RunnerOptions.
type Runner struct {
	opts        RunnerOptions
	settings    config.Sharding
	client      kubernetes.Interface
	log         logr.Logger
	clock       clock.Clock
	member      *leases.Member
	coordinator *Coordinator
	caches      *leaseCaches
	deliveries  *deliveries // when the caches delivered each Lease version
	workCancel  context.CancelFunc
	synced      atomic.Bool // the Lease cache has synced
	// reconciling is when the reconcile in progress began (UnixNano), 0 between reconciles.
	reconciling atomic.Int64
	// lost is set when another process holds this member's name, or a fence overran.
	lost    atomic.Pointer[string]
	waiting atomic.Bool // the member lease waits for a predecessor's (logged once)
	// started is set when Start begins; done closes when it returns (Outlive).
	started atomic.Bool
	done    chan struct{}
}

// RunnerOptions are the settings and dependencies of a Runner. Settings and Client are required;
// NewRunner defaults the others on a copy.
type RunnerOptions struct {
	// Settings are the group's and this member's sharding settings.
	Settings config.Sharding
	// Client is the client of the partition leases and of the Lease caches; it should come from
	// LeaseClientConfig, so that rate limits cannot slow a handover down.
	Client kubernetes.Interface
	// Renewals is the client the member lease is taken, renewed and released through
	// (RenewalClientConfig): a connection and a rate limiter of its own, so that a renewal never
	// queues behind a rebalance's burst of partition lease writes (docs/sharding.md, "Rate limits").
	// Defaults to Client.
	Renewals kubernetes.Interface
	// Incarnation is this process's id in the member and partition leases and the audit; defaults to
	// a new NewIncarnation.
	Incarnation string
	// Handlers run the work of the partitions this member holds.
	Handlers []PartitionHandler
	// Caches, when set, are the replica's caches of the group's shoots that hold some partitions only
	// (Config.Caches).
	Caches Caches
	// Namespaces, when set, lists the shoot namespaces known to the replica from a cache, for the
	// shoots-owned metric (Config.Namespaces).
	Namespaces func(ctx context.Context) []string
	// Log defaults to a logger that discards.
	Log logr.Logger
	// Clock is the time of the member lease, the coordinator and the loops; defaults to the real clock.
	Clock clock.WithTicker
	// Departing tells a graceful stop with leave mode auto whether this member leaves the group for
	// good (a StatefulSet scale-down: true) or restarts (a rolling update: false). Without it, or when
	// it fails, the stop hands the share over (StatefulSetPod.Departing).
	Departing func(ctx context.Context) (bool, error)
	// WontReturn tells whether a member away on a returning leave will not be back within its grace,
	// so that its share is taken over at once (StatefulSetPod.WontReturn, Config.WontReturn). Without
	// it, a reservation lasts its grace.
	WontReturn func(ctx context.Context, member string) (bool, error)
	// Event records a Kubernetes Event about this member (normally on its Pod); eventType is
	// corev1.EventTypeNormal or corev1.EventTypeWarning, action one of the Action constants (what the
	// member did, as events.k8s.io/v1 asks for). Without it, no Event is recorded.
	Event func(eventType, reason, action, message string)
	// Exit ends the process when stopping the work after a fence takes longer than the margin the
	// lease timings leave; defaults to os.Exit.
	Exit func(code int)
	// Audit records the member lease's renewals and the partitions whose work starts and stops here
	// (the ownership audit, under the incarnation Incarnation returns); nothing is recorded without it.
	Audit Audit
}

// defaulted returns a copy of o with its unset dependencies defaulted.
func (o RunnerOptions) defaulted() RunnerOptions {
	if o.Renewals == nil {
		o.Renewals = o.Client
	}
	if o.Incarnation == "" {
		o.Incarnation = NewIncarnation()
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Exit == nil {
		o.Exit = os.Exit
	}
	return o
}

// memberSettings are the settings a member of s advertises. A member in dry run advertises its roles
// as dry-run.<role>: a dwd from before the dry run, which knows no dry-run field, then finds no role of
// its own there, and does not defer to the shadow either.
func memberSettings(ring RingConfig, s config.Sharding) string {
	if !s.DryRun {
		return Settings(ring, s.Roles)
	}
	roles := make([]string, 0, len(s.Roles))
	for _, r := range s.Roles {
		roles = append(roles, DryRunRolePrefix+r)
	}
	return WithDryRun(Settings(ring, roles))
}

// NewRunner prepares the sharding of one replica.
func NewRunner(opts RunnerOptions) *Runner {
	opts = opts.defaulted()
	settings, incarnation := opts.Settings, opts.Incarnation
	ring := RingConfigOf(settings)
	member := &leases.Member{
		Store: leases.APIStore{Leases: opts.Renewals.CoordinationV1().Leases(settings.Namespace)}, Group: settings.GroupName,
		Name: settings.MemberName, Incarnation: incarnation,
		LeaseDuration: settings.MemberLeaseDuration, RenewDeadline: settings.MemberRenewDeadline,
		RetryPeriod: settings.MemberRetryPeriod, Clock: opts.Clock, Settings: memberSettings(ring, settings), PodUID: settings.PodUID,
	}
	if opts.Audit != nil {
		member.Audit = opts.Audit
	}
	r := &Runner{opts: opts, settings: settings, client: opts.Client, log: opts.Log, clock: opts.Clock, member: member,
		caches: newLeaseCaches(opts.Client, settings), deliveries: newDeliveries(opts.Clock), done: make(chan struct{})}
	workCtx, cancel := context.WithCancel(context.Background())
	r.workCancel = cancel
	store := leases.APIStore{Leases: opts.Client.CoordinationV1().Leases(settings.Namespace)}
	r.coordinator = NewCoordinator(Config{
		Group: settings.GroupName, Member: settings.MemberName, Incarnation: incarnation, Ring: ring,
		LeaseDuration: settings.MemberLeaseDuration, RetryPeriod: settings.MemberRetryPeriod, WriteConcurrency: 16, AcquireBatch: handoverBatch,
		Settings: member.Settings, Event: r.event, Audit: opts.Audit, WontReturn: opts.WontReturn,
		Foreign: r.caches.foreign, Leaders: r.caches.leaders,
		WorkContext: workCtx, Store: store, Lister: r.caches.group, SeenAt: r.deliveries.seenAt, Liveness: member, Clock: opts.Clock, Log: opts.Log, Handlers: opts.Handlers, Namespaces: opts.Namespaces, Caches: opts.Caches,
	})
	member.MayJoin = r.coordinator.MayJoin
	return r
}

// handoverBatch is the Runner's Config.AcquireBatch: two rounds of writes at the write concurrency
// (docs/sharding.md, "Handover batches").
const handoverBatch = 32

// LeaseClientConfig returns a copy of cfg for the Lease client, with rate limits high enough that a
// rebalance, which writes each moved partition's lease twice, is not throttled.
func LeaseClientConfig(cfg *rest.Config, partitionCount int) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = max(cfg.QPS, float32(partitionCount)/2, 50)
	cfg.Burst = max(cfg.Burst, 2*partitionCount)
	return cfg
}

// RenewalClientConfig returns a copy of cfg for the client of the member lease's renewals (Runner.
// Renewals): a connection of its own, since client-go shares one between the clients of a config
// unless it dials itself, and a limiter that a member's one write per retry period never waits on.
func RenewalClientConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 5, 10
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = dialer.DialContext
	return cfg
}

// Incarnation returns the random id of this process's start, which the member and partition leases
// record.
func (r *Runner) Incarnation() string {
	return r.member.Incarnation
}

// Coordinator returns the coordinator, which tells the prober and the weeder what they own.
func (r *Runner) Coordinator() *Coordinator {
	return r.coordinator
}

// Outlive returns a channel that closes once the runner no longer works on any partition, after ctx
// ended: at once when Start was never called, else when Start has returned (after the leave and its
// announced lead). The work the partitions' handlers started (the prober's probes) may run until then.
func (r *Runner) Outlive(ctx context.Context) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		defer close(out)
		<-ctx.Done()
		if r.started.Load() {
			<-r.done
		}
	}()
	return out
}

// NeedLeaderElection is true so that, in the original's single-active mode, a replica waits for the
// leader lease before it joins the group; without leader election it starts at once.
func (r *Runner) NeedLeaderElection() bool {
	return true
}

// ReadyCheck is a readyz check: ready once the Lease cache is synced, the member lease is held, and
// the last reconcile left this member holding every partition the ring gives it, so that a rolling
// update waits for each member to hold its share again before it restarts the next.
func (r *Runner) ReadyCheck(_ *http.Request) error {
	switch {
	case !r.synced.Load():
		return errors.New("lease cache not synced")
	case r.coordinator.JoinRefused() != "" && r.member.Fenced(r.clock.Now()):
		return fmt.Errorf("member lease %s not taken: live members of the group advertise other settings (%s); scale the group to 0 and back to change a setting",
			r.member.LeaseName(), r.coordinator.JoinRefused())
	case r.member.Fenced(r.clock.Now()):
		return fmt.Errorf("member lease %s not held", r.member.LeaseName())
	case r.coordinator.DeferringTo() != "":
		return fmt.Errorf("holding no partition: live members of another group run a role of this one and were there first (%s)",
			r.coordinator.DeferringTo())
	case !r.coordinator.Ready():
		return errors.New("not holding the partitions the ring gives this member yet (see the sharding log for why)")
	}
	return nil
}

// HealthCheck is a healthz check: it fails while the reconcile loop is wedged (a reconcile running
// for longer than the renew deadline; the member stops renewing then, so that the others take
// over), and for good once another process holds this member's name or a fence overran.
func (r *Runner) HealthCheck(_ *http.Request) error {
	if lost := r.lost.Load(); lost != nil {
		return errors.New(*lost)
	}
	if !r.loopHealthy() {
		return errors.New("the sharding reconcile loop has been stuck for longer than the renew deadline")
	}
	return nil
}

// loopHealthy reports whether no reconcile has been running for longer than the renew deadline.
func (r *Runner) loopHealthy() bool {
	began := r.reconciling.Load()
	return began == 0 || r.clock.Since(time.Unix(0, began)) < r.settings.MemberRenewDeadline
}

// Start runs until ctx ends, then releases every partition and the member lease.
func (r *Runner) Start(ctx context.Context) error {
	r.started.Store(true)
	defer close(r.done)
	defer r.workCancel()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, r.settings.MemberRetryPeriod),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "sharding"})
	events := &throttle{clock: r.clock, interval: reconcileThrottle}
	if err := r.caches.start(ctx, r.delivered(func() { events.add(queue, r.settings.GroupName) })); err != nil {
		return err
	}
	r.synced.Store(true)
	memberCtx, stopMember := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		r.member.Run(memberCtx, leases.Hooks{OnFence: r.onFence, OnRenewFailure: r.onRenewFailure,
			OnRenew: r.onRenew, OnStepDown: r.onStepDown, Healthy: r.loopHealthy, MayStepDown: r.coordinator.MayStepDown})
	})
	go func() { <-ctx.Done(); queue.ShutDown() }()
	queue.Add(r.settings.GroupName)
	for r.reconcileNext(ctx, queue) {
	}
	r.shutdown(stopMember, &wg)
	return nil
}

// delivered returns what the Lease caches call on every event: it notes when the version arrived and
// calls reconcile unless the event is a steady renewal (startsReconcile).
func (r *Runner) delivered(reconcile func()) func(before, after *coordinationv1.Lease) {
	settled := func() bool { return r.reconciling.Load() == 0 && r.coordinator.settled() }
	steadyWithin := r.settings.MemberLeaseDuration / steadyRenewals
	return func(before, after *coordinationv1.Lease) {
		if r.deliveries.starts(before, after, steadyWithin, r.member.LeaseName(), settled) {
			reconcile()
		}
	}
}

// leaseCaches are the Lease caches of a member: its group's, the other groups' member leases in the
// shard namespace (few and small), and each leader lease of Sharding.LeaderLeases (one object each,
// by name; leaders is nil when it watches none). NewRunner builds them, so that the coordinator and
// the member get their listers at construction; Start starts them.
type leaseCaches struct {
	group, foreign leaseLister
	leaders        Lister
	factories      []informers.SharedInformerFactory
	informers      []cache.SharedIndexInformer
	// err is a selector that could not be built; Start returns it.
	err error
}

// newLeaseCaches builds the Lease caches of a member of settings s, read through client.
func newLeaseCaches(client kubernetes.Interface, s config.Sharding) *leaseCaches {
	c := &leaseCaches{}
	ownGroup := k8slabels.Set{leases.GroupLabel: s.GroupName}.AsSelector().String()
	otherGroups, err := k8slabels.Parse(fmt.Sprintf("%s=%s,%s!=%s", leases.KindLabel, leases.KindMember, leases.GroupLabel, s.GroupName))
	if err != nil {
		c.err = fmt.Errorf("selecting the other groups' member leases: %w", err)
		return c
	}
	add := func(namespace string, tweak func(*metav1.ListOptions)) leaseLister {
		factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithNamespace(namespace), informers.WithTweakListOptions(tweak))
		informer := factory.Coordination().V1().Leases()
		c.factories = append(c.factories, factory)
		c.informers = append(c.informers, informer.Informer())
		return leaseLister{informer.Lister().Leases(namespace)}
	}
	c.group = add(s.Namespace, func(o *metav1.ListOptions) { o.LabelSelector = ownGroup })
	c.foreign = add(s.Namespace, func(o *metav1.ListOptions) { o.LabelSelector = otherGroups.String() })
	var leaders multiLister
	for _, name := range s.LeaderLeases {
		byName := fields.OneTermEqualSelector("metadata.name", name).String()
		leaders = append(leaders, add(s.LeaderNamespace, func(o *metav1.ListOptions) { o.FieldSelector = byName }))
	}
	if len(leaders) > 0 {
		c.leaders = leaders
	}
	return c
}

// start calls delivered with the Lease before and after every event of the caches (before nil for an
// add, after nil for a delete), starts them and waits for them to sync. A leader lease this member
// may not read keeps it from syncing: it acts on nothing until it can tell whether the original's
// mode runs.
func (c *leaseCaches) start(ctx context.Context, delivered func(before, after *coordinationv1.Lease)) error {
	if c.err != nil {
		return c.err
	}
	synced := make([]cache.InformerSynced, 0, len(c.informers))
	for _, informer := range c.informers {
		_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { delivered(nil, leaseOf(obj)) },
			UpdateFunc: func(old, obj any) { delivered(leaseOf(old), leaseOf(obj)) },
			DeleteFunc: func(obj any) { delivered(leaseOf(obj), nil) },
		})
		if err != nil {
			return err
		}
		synced = append(synced, informer.HasSynced)
	}
	for _, factory := range c.factories {
		factory.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("the caches of the group's leases, the other groups' member leases and the leader leases did not sync")
	}
	return nil
}

// multiLister lists what each of its listers lists.
type multiLister []leaseLister

func (m multiLister) List() []*coordinationv1.Lease {
	var out []*coordinationv1.Lease
	for _, l := range m {
		out = append(out, l.List()...)
	}
	return out
}

// reconcileNext runs one reconcile; false when the queue has shut down.
func (r *Runner) reconcileNext(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string]) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)
	// Writes may not outlive the moment this member is fenced unless it renews.
	if at := r.member.FenceAt(); !at.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, at)
		defer cancel()
	}
	r.reconciling.Store(r.clock.Now().UnixNano())
	requeue, err := r.coordinator.Reconcile(ctx)
	r.reconciling.Store(0)
	if err != nil && ctx.Err() == nil {
		r.log.Error(err, "Reconciling partitions failed")
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	queue.AddAfter(key, requeue)
	return true
}

// shutdown leaves the group: it stops the work of every partition and releases their leases (see
// Coordinator.Leave), then stops renewing and writes the clean-leave marker into the member lease.
// A member that restarts keeps its share reserved for the return grace; a departing one hands it to
// the others at once. One leaving for good releases every partition, so that the first member that
// sees its marker deletes its member lease. It does not delete the lease itself: a member whose cache
// never showed the marker would judge the vanished lease by its last renewal and wait a lease
// duration.
//
// Its budget, counted from the signal: the leave mode and an announced leave's lead within LeaveLead,
// the leave within the renew deadline and a retry period, the member lease's release within the renew
// deadline (27 s at the defaults, under the manager's graceful shutdown timeout and the Pod's
// termination grace period of 30 s).
func (r *Runner) shutdown(stopMember context.CancelFunc, member *sync.WaitGroup) {
	signal := r.clock.Now()
	modeCtx, cancelMode := context.WithTimeout(context.Background(), min(r.settings.MemberRenewDeadline, LeaveLead))
	returning, departing := r.leaveMode(modeCtx)
	cancelMode()
	if !returning {
		r.announceLeave(signal)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.settings.MemberRenewDeadline)
	defer cancel()
	left, ok := r.leaveWithin(ctx, departing, returning)
	if !ok {
		// Stop renewing without the clean-leave marker: the others take the share over a lease duration
		// after the last renewal, and the guard refuses every write from the fence on.
		r.log.Info("Leaving took longer than the renew deadline: a partition's work does not stop; stopping the member lease renewals without the clean-leave marker",
			"group", r.settings.GroupName, "member", r.settings.MemberName)
		stopMember()
		member.Wait()
		return
	}
	stateLost, err := left.stateLost, left.err
	if err != nil {
		r.log.Error(err, "Handing over partitions on shutdown; their next holders start them as after a crash")
	}
	stopMember()
	member.Wait()
	releaseCtx, cancelRelease := context.WithTimeout(context.Background(), r.settings.MemberRenewDeadline)
	defer cancelRelease()
	leave := leases.Leave{StateLost: stateLost}
	if returning {
		leave.Returning = r.settings.ReturnGrace
	}
	if err := r.member.Release(releaseCtx, r.clock.Now(), leave); err != nil {
		r.log.Error(err, "Releasing the member lease on shutdown; the others take over after the lease duration")
		return
	}
	r.log.Info("Left the group", "group", r.settings.GroupName, "member", r.settings.MemberName,
		"returning", returning, "departing", departing)
}

// announceLeave, before a departing leave or a handover, tells the others that this member is about
// to hand its share over (leases.Member.AnnounceLeave) and gives their caches LeaveLead to list the
// partitions they will take while its work goes on: they then acquire each partition as soon as it
// is released instead of a list later (docs/sharding.md, "Graceful stops"). Nothing is announced or
// waited for when this member holds nothing, no other member is live to take over, or the members
// have no caches of their share to list (every replica caches the whole seed).
func (r *Runner) announceLeave(signal time.Time) {
	if r.opts.Caches == nil || len(r.coordinator.Held()) == 0 || !r.coordinator.OthersLive() {
		return
	}
	r.member.AnnounceLeave()
	until := signal.Add(LeaveLead)
	if !r.awaitClock(until, r.member.Announced) {
		r.log.Info("Could not announce the leave within its lead: leaving without it", "group", r.settings.GroupName)
		return
	}
	r.coordinator.runAhead(r.coordinator.Held(), until, RunAheadWindow)
	if rest := until.Sub(r.clock.Now()); rest > 0 {
		<-r.clock.After(rest)
	}
	r.log.Info("Announced the leave; the others had its lead to list this member's share", "group", r.settings.GroupName,
		"lead", r.clock.Since(signal).Round(time.Millisecond))
}

// LeaveLead is how long a member that announced its leave goes on working before it releases its
// partitions: about the time the others' caches take to list their part of its share under load
// (1–3 s for a third of 5,000 shoots, docs/caches.md), as PrewarmLead for a silent member.
const LeaveLead = PrewarmLead

// RunAheadWindow is how far past the end of an announced leave's lead the work due then is done
// during the lead instead (AheadHandler): longer than the others take from the release to the first
// probe of a shoot they took (up to 2 s at 5,000 shoots on the 2-core bench machine: the replicas'
// Rebalanced log lines during the handover benches of 2026-11-29), so that no moved shoot falls due
// in between.
const RunAheadWindow = 4 * time.Second

// awaitClock polls cond every 50 ms on the runner's clock until it holds or deadline has passed, and
// reports whether it held.
func (r *Runner) awaitClock(deadline time.Time, cond func() bool) bool {
	for !cond() {
		if !r.clock.Now().Before(deadline) {
			return false
		}
		<-r.clock.After(50 * time.Millisecond)
	}
	return true
}

// leaveResult is what the coordinator's leave returned.
type leaveResult struct {
	stateLost bool
	err       error
}

// leaveWithin runs the coordinator's leave (for good when departing) and waits for it until a retry
// period after ctx ends; false when it has not returned by then. A stop that never returns, such as a
// handler stuck in Released, must not keep the member renewing a share it no longer works on
// (docs/sharding.md, "Gray failures").
func (r *Runner) leaveWithin(ctx context.Context, departing, returning bool) (leaveResult, bool) {
	done := make(chan leaveResult, 1)
	go func() {
		var res leaveResult
		if departing {
			res.stateLost, res.err = r.coordinator.LeaveForGood(ctx)
		} else {
			res.stateLost, res.err = r.coordinator.Leave(ctx, returning)
		}
		done <- res
	}()
	select {
	case res := <-done:
		return res, true
	case <-ctx.Done():
	}
	grace := r.clock.NewTimer(r.settings.MemberRetryPeriod)
	defer grace.Stop()
	select {
	case res := <-done:
		return res, true
	case <-grace.C():
		return leaveResult{}, false
	}
}

// leaveMode decides whether a graceful stop is a restart (returning: the share stays reserved) or
// a departure for good (departing: the member lease is deleted); neither means a plain handover.
func (r *Runner) leaveMode(ctx context.Context) (returning, departing bool) {
	switch r.settings.LeaveMode {
	case config.LeaveReturn:
		return true, false
	case config.LeaveHandover:
		return false, false
	}
	if r.opts.Departing == nil {
		return false, false
	}
	departing, err := r.opts.Departing(ctx)
	if err != nil {
		r.log.Info("Cannot tell a restart from a departure: handing the share over", "reason", err.Error())
		return false, false
	}
	return !departing, departing
}

// onFence stops all work, within half the margin between the renew deadline and the lease
// duration: a stop that takes longer could still run when the others take over, so the process
// exits instead, as controller-runtime does when it loses its leader lease.
func (r *Runner) onFence() {
	held := len(r.coordinator.Held())
	r.log.Info("Member lease not renewed within the renew deadline: fencing", "lease", r.member.LeaseName(), "partitions", held)
	r.event(corev1.EventTypeWarning, "Fenced", ActionFence, fmt.Sprintf(
		"Member lease %s was not renewed within the renew deadline (%s): stopping the work of the %d partitions it holds; they resume once a renewal succeeds",
		r.member.LeaseName(), r.settings.MemberRenewDeadline, held))
	r.coordinator.metrics.fences.Inc()
	budget := (r.settings.MemberLeaseDuration - r.settings.MemberRenewDeadline) / 2
	done := make(chan struct{})
	go func() { r.coordinator.Fence(); close(done) }()
	select {
	case <-done:
		return
	case <-r.clock.After(budget):
	}
	r.coordinator.metrics.fenceOverruns.Inc()
	msg := fmt.Sprintf("stopping all work after a fence took longer than %s; exiting before another member may take over", budget)
	r.lost.Store(&msg)
	r.log.Error(nil, "Fence overran: exiting", "budget", budget)
	r.opts.Exit(1)
	<-done
}

func (r *Runner) onRenewFailure(err error) {
	switch {
	case errors.Is(err, leases.ErrNotJoining):
		return // MayJoin logged it
	case errors.Is(err, leases.ErrWaitingForPredecessor):
		if !r.waiting.Swap(true) {
			r.log.Info("Waiting before taking the member lease: it names an earlier process that left no proof of having stopped, or processes under this name keep crashing",
				"lease", r.member.LeaseName(), "reason", err.Error())
		}
		return
	case errors.Is(err, leases.ErrIdentityTaken):
		msg := "another process holds this member's name: " + err.Error()
		r.lost.Store(&msg)
		r.event(corev1.EventTypeWarning, "MemberNameTaken", ActionRenew, msg)
	case errors.Is(err, leases.ErrForeignWrite):
		r.event(corev1.EventTypeWarning, "MemberLeaseChanged", ActionFence, "Someone else changed or deleted this member's lease; all work stopped before it was taken back: "+err.Error())
	}
	r.waiting.Store(false)
	r.coordinator.metrics.renewFailures.Inc()
	r.log.Error(err, "Renewing the member lease failed", "fenceAt", r.member.FenceAt())
}

// onRenew exports the time of the member lease's last successful renewal, so that an alert sees a
// member failing to renew before it fences.
func (r *Runner) onRenew(sentAt time.Time) {
	r.coordinator.metrics.renewed(sentAt)
}

func (r *Runner) onStepDown(until time.Time) {
	r.coordinator.metrics.stepDowns.Inc()
	msg := fmt.Sprintf("Fenced %d times within %s: gave up the member lease so that the others take over; trying again at %s",
		leases.FlapFences, leases.FlapWindowDurations*r.settings.MemberLeaseDuration, until.Format(time.RFC3339))
	r.log.Info("Stepped down after fencing too often", "until", until)
	r.event(corev1.EventTypeWarning, "SteppedDown", ActionStepDown, msg)
}

// event records an Event about this member when the Runner has a way to.
func (r *Runner) event(eventType, reason, action, message string) {
	if r.opts.Event != nil {
		r.opts.Event(eventType, reason, action, message)
	}
}

// leaseLister lists the cached Leases of the group.
type leaseLister struct {
	lister coordinationv1listers.LeaseNamespaceLister
}

func (l leaseLister) List() []*coordinationv1.Lease {
	list, _ := l.lister.List(k8slabels.Everything())
	return list
}

// NewIncarnation returns a random id for a process's start (RunnerOptions.Incarnation).
func NewIncarnation() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
