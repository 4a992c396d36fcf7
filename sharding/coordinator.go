package sharding

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// Lister returns the group's Leases as this replica's cache has them; it may lag behind the store. A
// changed Lease is a new object, as in an informer's cache: the ones it returned are never altered.
type Lister interface {
	List() []*coordinationv1.Lease
}

// Liveness tells whether this replica's member lease lets it act (see leases.Member).
type Liveness interface {
	Fenced(now time.Time) bool
	// FenceAt is the moment the replica is fenced unless a renewal succeeds before; the zero time
	// when it is fenced already.
	FenceAt() time.Time
	// Outage is the last time span, from the last successful renewal to the next, after which the
	// replica was fenced for want of renewals: it could not observe the others either.
	Outage() (from, to time.Time)
	// ViewStale reports whether a cache that shows the member lease at cachedVersion has missed a
	// renewal sent more than lag before now.
	ViewStale(cachedVersion string, now time.Time, lag time.Duration) bool
	// SentAt is when the member sent the write that produced version of its lease, if it knows.
	SentAt(version string) (time.Time, bool)
	// PredecessorFencedBy is when an earlier process under this member's name is fenced at the
	// latest, when the member lease was taken without proof that it stopped (deleted or cleared by
	// someone); zero otherwise. Partitions that name that process are resumed only from then on.
	PredecessorFencedBy() time.Time
	// ContinuousSince is since when the member lease has been held so that no other member can have
	// judged it expired (leases.Member.ContinuousSince): partitions whose work a fence stopped, started
	// after that moment and written by nobody since, resume without a write.
	ContinuousSince() time.Time
}

// Config is what a Coordinator needs to know about its group, and its dependencies. NewCoordinator
// defaults Clock, Log and WorkContext on a copy when they are left nil.
type Config struct {
	Group       string
	Member      string
	Incarnation string
	Ring        RingConfig
	// LeaseDuration is how long another member's lease must stay unchanged before it counts as expired.
	LeaseDuration time.Duration
	// RetryPeriod bounds the time between two reconciles.
	RetryPeriod time.Duration
	// WriteConcurrency bounds the partition lease writes in flight; 1 writes in partition order.
	WriteConcurrency int
	// AcquireBatch, when above 0, bounds the partitions one reconcile acquires of those their
	// holders released, earliest release first; a reconcile that acquired some and left some for
	// later runs the next at once. Releases arrive one by one: a partition released while a
	// reconcile writes is taken after the releases before it, AcquireBatch at a time, not after
	// everything that reconcile had seen (docs/sharding.md, "Handover batches"). Partitions taken
	// from an expired holder or acquired cold, which are free all at once, are not bounded.
	AcquireBatch int
	// Settings are what every member of the group must agree on (see Settings); a member that sees a
	// live member advertising others changes nothing.
	Settings string
	// Event, when set, records a Kubernetes Event about this member (see RunnerOptions.Event).
	Event func(eventType, reason, action, message string)
	// Audit, when set, records the partitions whose work starts and stops here (the ownership audit).
	Audit Audit
	// Foreign, when set, lists the member leases of the other groups in the shard namespace: while a
	// live one that runs a role of this member's is senior to it, it holds no partition (foreign.go).
	Foreign Lister
	// Leaders, when set, lists the leader leases of the original's mode for this member's roles (the
	// original dependency-watchdog, or dwd with --enable-leader-election): while one is held and
	// renewed, this member holds no partition, whoever came first (foreign.go).
	Leaders Lister
	// WontReturn, when set, tells whether a member away on a returning leave will not be back within
	// its grace (StatefulSetPod.WontReturn); if so, the partitions reserved for it are taken over at
	// once instead of at the end of the grace (returns.go).
	WontReturn func(ctx context.Context, member string) (bool, error)

	// Store is where the partition leases are read and written by compare-and-swap.
	Store leases.Store
	// Lister lists the group's Leases from the replica's cache.
	Lister Lister
	// SeenAt, when set, returns when the caches delivered the version of a Lease that Lister, Foreign
	// or Leaders returns, or now when they have not said (Runner.deliveries): a change counts as
	// observed then, not at the reconcile that reads it. Renewals start no reconcile, so a reconcile
	// may read a renewal up to a retry period after it arrived; judging a member by that moment would
	// keep it live as much longer.
	SeenAt func(l *coordinationv1.Lease, now time.Time) time.Time
	// Liveness is this replica's member lease (leases.Member), which fences its work.
	Liveness Liveness
	// Handlers run the work of the partitions this member holds; AddHandler adds more before the
	// first reconcile.
	Handlers []PartitionHandler
	// Caches, when set, are the replica's caches of the group's shoots that hold some partitions
	// only (--cache-sharding): every reconcile tells them the partitions to hold, and a partition is
	// acquired only once they hold it.
	Caches Caches
	// Namespaces, when set, lists the shoot namespaces known to the replica, for the shoots-owned
	// metric; it must answer from a cache and give up when its context ends.
	Namespaces func(ctx context.Context) []string
	// Clock defaults to the real clock.
	Clock clock.PassiveClock
	// Log defaults to a logger that discards.
	Log logr.Logger
	// WorkContext is the parent of every partition's work context; defaults to context.Background().
	WorkContext context.Context
}

// Coordinator runs this replica's side of the sharding protocol (docs/sharding.md): it decides from
// the cached Leases which partitions to release and to acquire, writes the partition leases by
// compare-and-swap, and starts and stops the partitions' work through its PartitionHandlers.
//
// Locking: reconcile steps run one at a time (the observer and the ring belong to them). Each
// partition has a lock that orders its start and stop, so a partition's work is never started while
// its stop runs or after a fence; mu guards the set of held partitions that Owns reads.
type Coordinator struct {
	cfg      Config
	store    leases.Store
	lister   Lister
	liveness Liveness
	clock    clock.PassiveClock
	log      logr.Logger
	handlers []PartitionHandler
	metrics  *memberMetrics
	// namespaces lists the shoot namespaces known to the replica, for the shoots-owned metric.
	namespaces func(ctx context.Context) []string
	// fences counts the fences; work starts only if none happened since its reconcile began, so a
	// write sent before a fence never starts work after it.
	fences atomic.Uint64
	// leaving is set when a graceful leave begins: from then on the replica owns no namespace, so
	// that stopping one partition never starts work (a queued weeding window, say) in another.
	leaving atomic.Bool
	// heldChanges counts the starts and stops of partitions' work, so that the shoots-owned gauge is
	// recounted only when they changed; counted is the last count's (reconcile steps own it).
	heldChanges atomic.Uint64
	counted     struct {
		changes uint64
		at      time.Time
		owned   int // the count, for the Rebalanced line
	}

	workCtx  context.Context
	observer *leases.Observer
	// warmingSince is when each partition to acquire was first found not held by the caches
	// (warmOnly; reconcile steps own it).
	warmingSince map[int]time.Time
	// prewarmRing is the ring without the one silent member whose partitions the caches hold ahead
	// of its expiry, prewarmFor that member (prewarm; reconcile steps own them).
	prewarmRing *Ring
	prewarmFor  string
	// ranAheadFor is the leaving member for whose leave this one's handlers ran their work ahead
	// (prewarm; reconcile steps own it).
	ranAheadFor string
	rings       rings
	partitions  []sync.Mutex
	// fenceMu orders starts against fences: a start holds it shared while it checks the fence epoch
	// and records the partition, a fence exclusively while it moves the epoch and lists what to stop.
	fenceMu sync.RWMutex
	// deferredTo is the end of the last outage the observer was deferred for; checks holds what the last
	// reconcile found (reconcile steps own both).
	deferredTo time.Time
	checks     checks
	// foreign tracks the other groups' member leases (reconcile steps own it); deferringTo names those
	// the last reconcile deferred to.
	foreign     foreignMembers
	deferringTo atomic.Pointer[string]
	// joinRefused says why MayJoin last kept this member out of the group, "" when it did not.
	joinMu      sync.Mutex
	joinRefused string
	ready       atomic.Bool
	// rebalance tallies the change of the held partitions under way, for its summary line.
	rebalance rebalance
	// returns is what WontReturn last said of each member away (reconcile steps own it).
	returns map[string]returnCheck
	// broken switches off single rules of the protocol, for the simulation to prove that each is needed.
	broken breakage
	// predecessorLogged is set once the wait for a predecessor under this name was logged.
	predecessorLogged atomic.Bool
	// peers is what the last reconcile saw of the other members that could take this one's share
	// over (see seenPeers), in Unix nanoseconds, for MayStepDown.
	peers struct{ steadyAt, allSeenAt, ownShownAt atomic.Int64 }
	// othersLive is set when the last reconcile saw another live member in the ring (OthersLive).
	othersLive atomic.Bool
	// lastHolders is, by partition, the holder the cache last showed (zero after a release); reconcile
	// steps own it.
	lastHolders []holderID
	// read is what snapshot read from each cached Lease, by the cache's object: the informer replaces
	// an object on every change and never alters one, so a steady reconcile parses nothing twice.
	// Reconcile steps own it.
	read map[*coordinationv1.Lease]leaseRead

	mu   sync.RWMutex
	held map[int]*heldPartition
	// pending holds the handover state of partitions stopped here whose release write has not
	// succeeded yet, so that a retry hands it over.
	pending map[int]map[string]string
	// releasedFrom holds, by partition released here, the version of the lease the release replaced:
	// while the cache still shows that version, the release is done and is not sent again.
	releasedFrom map[int]string
	// fenced holds, by partition whose work a fence stopped, what resumption needs to know.
	fenced map[int]fencedPartition
	// shownRenewal is when this process sent the renewal of its member lease that the cache showed at
	// the start of the reconcile step (zero when it shows none of its latest); reconcile steps set it
	// before the partitions' writes, which only read it.
	shownRenewal time.Time
}

// fencedPartition is what a fence recorded of a partition whose work it stopped: the version of the
// lease this process had last written (or resumed), when that write's answer had arrived, and when
// the fence stopped it.
type fencedPartition struct {
	version string
	wroteAt time.Time
	at      time.Time
}

// ownRenewalShown returns when this process sent the write of its member lease that the cache shows,
// the zero time when it does not know.
func (c *Coordinator) ownRenewalShown(snap snapshot) time.Time {
	own := snap.members[c.cfg.Member]
	if own == nil {
		return time.Time{}
	}
	sent, _ := c.liveness.SentAt(own.ResourceVersion)
	return sent
}

// heldPartition is a partition whose work runs here.
type heldPartition struct {
	lease   *coordinationv1.Lease // this process's last write
	base    *coordinationv1.Lease // the copy that write replaced; nil when it created the lease
	wroteAt time.Time             // when the write's answer had arrived
	shown   bool                  // the cache has shown lease
	cancel  context.CancelFunc
}

// NewCoordinator returns the Coordinator of cfg.
func NewCoordinator(cfg Config) *Coordinator {
	if cfg.WriteConcurrency < 1 {
		cfg.WriteConcurrency = 1
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	if cfg.WorkContext == nil {
		cfg.WorkContext = context.Background()
	}
	m := newMemberMetrics(cfg.Group, cfg.Member)
	m.setSettings(cfg.Ring.PartitionCount, cfg.Settings)
	return &Coordinator{
		cfg: cfg, store: cfg.Store, lister: cfg.Lister, liveness: cfg.Liveness, clock: cfg.Clock, log: cfg.Log,
		handlers: cfg.Handlers, namespaces: cfg.Namespaces,
		metrics:      m,
		workCtx:      cfg.WorkContext,
		observer:     leases.NewObserver(cfg.LeaseDuration),
		partitions:   make([]sync.Mutex, cfg.Ring.PartitionCount),
		held:         map[int]*heldPartition{},
		pending:      map[int]map[string]string{},
		releasedFrom: map[int]string{},
		fenced:       map[int]fencedPartition{},
		returns:      map[string]returnCheck{},
	}
}

// AddHandler adds a handler of the partitions' work. Call it before the first reconcile.
func (c *Coordinator) AddHandler(h PartitionHandler) {
	c.handlers = append(c.handlers, h)
}

// runAhead tells the handlers that do work at times (AheadHandler) that the work of partitions stops
// here at about stop, so that they do before then what would fall due in them within window after
// it. It holds no lock of the coordinator's.
func (c *Coordinator) runAhead(partitions []int, stop time.Time, window time.Duration) {
	if len(partitions) == 0 {
		return
	}
	for _, h := range c.handlers {
		if a, ok := h.(AheadHandler); ok {
			a.RunAhead(partitions, stop, window)
		}
	}
}

// Partition returns the partition of namespace.
func (c *Coordinator) Partition(namespace string) int {
	return c.cfg.Ring.Partitions().Of(namespace)
}

// Owns reports whether this replica runs the work of namespace's partition now and may act on it:
// it holds the partition and is not fenced. Once a graceful leave has begun it owns nothing.
func (c *Coordinator) Owns(namespace string) bool {
	return !c.leaving.Load() && c.Holds(c.Partition(namespace)) && !c.liveness.Fenced(c.clock.Now())
}

// Guard implements Ownership: the check right before a write, and a context that ends at the fence
// moment.
func (c *Coordinator) Guard(ctx context.Context, namespace string) (context.Context, context.CancelFunc, error) {
	noop := func() {}
	p := c.Partition(namespace)
	if c.leaving.Load() || !c.Holds(p) {
		c.metrics.guardRefusals.WithLabelValues("not_owner").Inc()
		return ctx, noop, fmt.Errorf("%w: %s is in partition %d", ErrNotOwner, namespace, p)
	}
	now := c.clock.Now()
	at := c.liveness.FenceAt()
	if at.IsZero() || !now.Before(at) {
		c.metrics.guardRefusals.WithLabelValues("fenced").Inc()
		return ctx, noop, fmt.Errorf("%w: acting on %s", ErrFenced, namespace)
	}
	guarded, cancel := context.WithTimeout(ctx, at.Sub(now))
	return guarded, cancel, nil
}

// Holds reports whether this replica runs the work of partition p now.
func (c *Coordinator) Holds(p int) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.held[p]
	return ok
}

// Held returns the partitions whose work runs here, in no particular order.
func (c *Coordinator) Held() []int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	held := make([]int, 0, len(c.held))
	for p := range c.held {
		held = append(held, p)
	}
	return held
}

// heldMask returns, by partition, whether its work runs here.
func (c *Coordinator) heldMask() []bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	mask := make([]bool, c.cfg.Ring.PartitionCount)
	for p := range c.held {
		mask[p] = true
	}
	return mask
}

// Reconcile runs one step of the protocol and returns how long to wait at most before the next.
// Whatever else it finds, it first stops the work of held partitions whose leases someone else
// wrote. While the replica is fenced, sees a live member with other settings, or has a cache that
// has missed its own renewals, it keeps what it holds and acquires and releases nothing.
func (c *Coordinator) Reconcile(ctx context.Context) (time.Duration, error) {
	c.metrics.reconciles.Inc()
	epoch := c.fences.Load()
	now := c.clock.Now()
	heldBefore := len(c.Held())
	// A change that a step ending early saw (a foreign write, the live set) began with that step.
	defer c.rebalance.beginIfTouched(now, heldBefore)
	snap := c.snapshot()
	c.stopForeignWrites(snap)
	c.observe(snap, now)
	c.notePeers(snap, now)
	c.updateUnheld(snap, now)
	if c.liveness.Fenced(now) {
		if len(c.Held()) > 0 {
			c.Fence()
		}
		c.ready.Store(false)
		return c.cfg.RetryPeriod, nil
	}
	c.deleteOrphans(ctx, snap, now)
	rings, err := c.ringsAt(now)
	if err != nil {
		return c.cfg.RetryPeriod, err
	}
	if deferring, until, err := c.deferToIncumbents(ctx, snap, now); deferring {
		c.ready.Store(false)
		c.updateMetrics()
		return min(c.cfg.RetryPeriod, max(until, time.Millisecond)), err
	}
	if !c.check(snap, now) {
		c.ready.Store(false)
		c.updateMetrics()
		return c.requeueAfter(now), nil
	}
	c.checkReturns(ctx, rings, now)
	c.shownRenewal = c.ownRenewalShown(snap)
	release, acquire := c.plan(rings.owners, snap, now)
	acquire, cold, warming := c.warmOnly(rings.owners, acquire, now)
	acquire, more := c.acquireBatch(acquire, cold, snap)
	errs := c.forEach(ctx, release, func(p int) error {
		if v, ok := snap.vanished[p]; ok {
			return c.releaseVanished(ctx, p, snap.parts[p], v)
		}
		return c.release(ctx, p, snap.parts[p], "")
	})
	confirm := c.newExpiryConfirmer()
	heldBeforeAcquire := len(c.Held())
	errs = append(errs, c.forEach(ctx, acquire, func(p int) error {
		return c.acquire(ctx, p, snap.parts[p], snap.vanished[p], now, confirm, epoch)
	})...)
	c.ready.Store(c.holdsShare(rings.owners, snap, now))
	c.updateMetrics()
	c.updateShootsOwned(ctx, now)
	c.finishRebalance(rings.all, now, heldBefore, c.ready.Load() && len(errs) == 0)
	return c.nextReconcile(now, more && len(c.Held()) > heldBeforeAcquire, warming), errors.Join(errs...)
}

// nextReconcile is how long a reconcile waits at most before the next: none when it acquired a batch
// and left more (one that acquired nothing, its writes' races lost behind a cache, waits for the
// events and the throttle as any does), the warm poll period while the caches list a partition to
// acquire, else until the next live member can expire.
func (c *Coordinator) nextReconcile(now time.Time, nextBatch, warming bool) time.Duration {
	switch {
	case nextBatch:
		return 0
	case warming:
		return min(c.requeueAfter(now), warmPollPeriod)
	}
	return c.requeueAfter(now)
}

// acquireBatch keeps of acquire, when it holds more than AcquireBatch partitions that their
// holders released, the partitions without a release, those acquired cold (they waited out
// MaxWarmWait already) and the AcquireBatch released earliest; more reports that it left some for
// the next reconcile. The ones left out are warm: the caches keep holding them.
func (c *Coordinator) acquireBatch(acquire []int, cold map[int]bool, snap snapshot) (batch []int, more bool) {
	if c.cfg.AcquireBatch <= 0 || len(acquire) <= c.cfg.AcquireBatch {
		return acquire, false
	}
	type released struct {
		p  int
		at time.Time
	}
	var free []released
	for _, p := range acquire {
		if l := snap.parts[p]; l != nil && leases.Holder(l) == "" && !cold[p] {
			if at, ok := leases.ReleasedAt(l); ok {
				free = append(free, released{p, at})
				continue
			}
		}
		batch = append(batch, p)
	}
	if len(free) <= c.cfg.AcquireBatch {
		return acquire, false
	}
	slices.SortStableFunc(free, func(a, b released) int { return a.at.Compare(b.at) })
	for _, r := range free[:c.cfg.AcquireBatch] {
		batch = append(batch, r.p)
	}
	return batch, true
}

// warmPollPeriod is how soon a reconcile that waits for the caches to hold a partition runs again.
const warmPollPeriod = 100 * time.Millisecond

// MaxWarmWait bounds the wait for the caches to hold a partition: a cache that cannot list, or an
// object it never gets, must not leave the partition without an owner for good. After it the
// partition is acquired cold, logged and counted (dwd_sharding_cold_acquisitions_total); its work
// then finds what the caches lack missing and does nothing on it until they have it.
const MaxWarmWait = 15 * time.Second

// Caches are the replica's caches of a group's shoots when they hold some partitions only
// (shardcache.Share).
type Caches interface {
	// Hold sets the partitions whose shoots the caches hold, indexed by partition.
	Hold(partitions []bool)
	// Warm reports whether the caches hold every shoot of partition p.
	Warm(p int) bool
}

// warmOnly tells the caches to hold this member's share and what it holds or is about to acquire,
// and keeps of acquire the partitions the caches hold already, or waited for MaxWarmWait: work on a
// partition starts only with its shoots in the caches, so that a handover never starts from an empty
// view. cold are those of ready that waited out MaxWarmWait; warming reports that some wait.
func (c *Coordinator) warmOnly(owners []string, acquire []int, now time.Time) (ready []int, cold map[int]bool, warming bool) {
	if c.cfg.Caches == nil {
		return acquire, nil, false
	}
	hold := c.heldMask()
	for p, owner := range owners {
		hold[p] = hold[p] || owner == c.cfg.Member
	}
	for _, p := range acquire {
		hold[p] = true
	}
	c.prewarm(hold, now)
	c.cfg.Caches.Hold(hold)
	ready = acquire[:0:0]
	waiting := make(map[int]time.Time, len(acquire))
	for _, p := range acquire {
		since, seen := c.warmingSince[p]
		switch {
		case c.cfg.Caches.Warm(p):
			ready = append(ready, p)
		case seen && now.Sub(since) >= MaxWarmWait:
			if cold == nil {
				cold = map[int]bool{}
			}
			ready, cold[p] = append(ready, p), true
		case seen:
			waiting[p] = since
		default:
			waiting[p] = now
		}
	}
	if len(waiting) == 0 && len(c.warmingSince) > 0 {
		first := now
		for _, since := range c.warmingSince {
			if since.Before(first) {
				first = since
			}
		}
		c.log.Info("The caches hold the partitions to acquire", "partitions", len(ready), "waited", now.Sub(first).Round(time.Millisecond))
	}
	c.warmingSince = waiting
	if len(cold) > 0 {
		c.metrics.coldAcquisitions.Add(float64(len(cold)))
		c.log.Info("Acquiring partitions whose shoots the caches do not hold yet: the caches have not listed them within the wait; their work does nothing on a shoot whose objects the caches lack until they have them",
			"partitions", len(cold), "waited", MaxWarmWait)
	}
	c.metrics.warming.Set(float64(len(waiting)))
	return ready, cold, len(waiting) > 0
}

// seenPeers looks at the other live members that hold their lease with this member's settings and
// have neither left nor announced their leave, each as of its last renewal that this process has
// seen: when it happened (the earlier of the lease's renewTime and the moment this process saw it,
// so that neither a clock ahead nor a watch event delivered late dates it later) and whether it
// advertised no fence within the flap window. It returns the latest such renewal without a fence
// (0: none), and the earliest of the members' last renewals (math.MaxInt64 when there is no such
// member), in Unix nanoseconds.
func (c *Coordinator) seenPeers(snap snapshot, now time.Time) (steadyAt, allSeenAt int64) {
	allSeenAt = math.MaxInt64
	for m, l := range snap.members {
		if m == c.cfg.Member || !c.observer.Live(m, now) {
			continue
		}
		since, advert, ok := c.observer.Seen(m)
		if !ok || !advert.Held || advert.Left || advert.Leaving || advert.Settings != c.cfg.Settings {
			continue
		}
		if l.Spec.RenewTime == nil {
			allSeenAt = math.MinInt64 // a renewal this process cannot date
			continue
		}
		at := since
		if rt := l.Spec.RenewTime.Time; rt.Before(at) {
			at = rt
		}
		allSeenAt = min(allSeenAt, at.UnixNano())
		if advert.RecentFences == 0 {
			steadyAt = max(steadyAt, at.UnixNano())
		}
	}
	return steadyAt, allSeenAt
}

// notePeers keeps what MayStepDown answers from: the others' renewals (seenPeers) and this member's own
// renewal the cache shows.
func (c *Coordinator) notePeers(snap snapshot, now time.Time) {
	steadyAt, allSeenAt := c.seenPeers(snap, now)
	c.peers.steadyAt.Store(steadyAt)
	c.peers.allSeenAt.Store(allSeenAt)
	if shown := c.ownRenewalShown(snap); !shown.IsZero() {
		c.peers.ownShownAt.Store(shown.UnixNano())
	}
}

// MayStepDown tells the member loop whether this member, which fenced too often, steps down (see
// leases.Hooks): only once it has seen another member that could take its share over renew after
// fencedAt without having fenced, so that stepping down hands the share to a member that does not
// fence. It stays when it is alone, or when every other member renewed after fencedAt with fences
// of its own (brownouts of the API server; docs/sharding.md, "Gray failures"). Nothing is known
// until the cache shows a renewal of this member's own sent after fencedAt: a view from before it
// may show the others expired only because this member could not see them.
func (c *Coordinator) MayStepDown(fencedAt time.Time) leases.StepDownAnswer {
	switch at := fencedAt.UnixNano(); {
	case c.peers.ownShownAt.Load() <= at:
		return leases.NotYetKnown
	case c.peers.steadyAt.Load() > at:
		return leases.StepDown
	case c.peers.allSeenAt.Load() > at:
		return leases.Stay
	}
	return leases.NotYetKnown
}

// Ready reports whether the last reconcile left this replica holding every partition the plan gives
// it, unfenced and in agreement with the group.
func (c *Coordinator) Ready() bool {
	return c.ready.Load()
}

// settled reports whether the last reconcile left this replica ready and holding partitions: a
// fence since empties what it holds.
func (c *Coordinator) settled() bool {
	if !c.Ready() {
		return false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.held) > 0
}

// holdsShare reports whether every partition whose desired owner is this member runs here, but those
// kept free for a member away on a returning leave (Plan keeps them; readiness must not drop on every
// peer's restart).
func (c *Coordinator) holdsShare(owners []string, snap snapshot, now time.Time) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for p, owner := range owners {
		if _, ok := c.held[p]; owner != c.cfg.Member || ok {
			continue
		}
		if r := leases.ReservedFor(snap.parts[p]); r == "" || !c.away(r, now) || c.returns[r].wont {
			return false
		}
	}
	return true
}

// snapshot is the group's Leases as the cache has them: member leases by member, partition leases by
// partition, and the number of held partition leases written under another partition count.
type snapshot struct {
	members    map[string]*coordinationv1.Lease
	parts      []*coordinationv1.Lease
	otherCount int
	// vanished are the partitions whose lease is gone, or names no holder without a release, by the
	// holder this process saw last (see lastHolders).
	vanished map[int]holderID
}

// holderID is a partition lease's holder: a member's name and the incarnation that wrote it.
type holderID struct{ name, incarnation string }

func (c *Coordinator) snapshot() snapshot {
	snap := snapshot{members: map[string]*coordinationv1.Lease{}, parts: make([]*coordinationv1.Lease, c.cfg.Ring.PartitionCount)}
	list := c.lister.List()
	if c.read == nil {
		c.read = make(map[*coordinationv1.Lease]leaseRead, len(list))
	}
	for _, l := range list {
		r, ok := c.read[l]
		if !ok {
			r = c.readLease(l)
			c.read[l] = r
		}
		switch {
		case r.member != "":
			snap.members[r.member] = l
		case r.otherCount:
			snap.otherCount++
		case r.partition >= 0:
			snap.parts[r.partition] = l
		}
	}
	if len(c.read) > 2*len(list)+64 {
		// Objects gone from the cache (an object replaced by its update is one) are dropped once
		// they are as many as those in it: not on every renewal of another member.
		read := make(map[*coordinationv1.Lease]leaseRead, len(list))
		for _, l := range list {
			read[l] = c.read[l]
		}
		c.read = read
	}
	c.findVanished(&snap)
	return snap
}

// leaseRead is what a snapshot reads from one Lease of the cache.
type leaseRead struct {
	// member is the member a member lease of this group stands for; "" for any other Lease.
	member string
	// partition is the partition a partition lease of this group stands for; -1 for any other Lease.
	partition int
	// otherCount marks a held partition lease of this group written for another partition count.
	otherCount bool
	// released is set when the lease carries a release time.
	released bool
	// incarnation is the one the holder's last write recorded.
	incarnation string
}

func (c *Coordinator) readLease(l *coordinationv1.Lease) leaseRead {
	r := leaseRead{partition: -1}
	if m, ok := leases.MemberOf(c.cfg.Group, l); ok {
		r.member = m
		return r
	}
	if l.Labels[leases.KindLabel] != leases.KindPartition || l.Labels[leases.GroupLabel] != c.cfg.Group {
		return r
	}
	if count, ok := leases.PartitionCount(l); (!ok || count != c.cfg.Ring.PartitionCount) && leases.Holder(l) != "" {
		r.otherCount = true
		return r
	}
	if p, ok := leases.PartitionOf(c.cfg.Group, c.cfg.Ring.PartitionCount, l); ok {
		r.partition = p
	}
	_, r.released = leases.ReleasedAt(l)
	r.incarnation = leases.Incarnation(l)
	return r
}

// findVanished records the holder of each partition lease the cache shows held, and puts into
// snap.vanished the partitions whose lease disappeared, or lost its holder without a release, since
// it showed them held. Such a lease proves nothing about that holder (docs/sharding.md,
// "A partition lease gone from under its holder stays the holder's"): someone deleted or cleared it,
// and a holder cut off from the API server, or whose watch lags, acts on until its fence or until its
// cache shows the change. So it stays that holder's until the holder expires by observation, or until
// the holder, its work stopped, marks it released with its state lost (ReleaseVanished, in release).
// A process learns the holders from its first snapshot on.
func (c *Coordinator) findVanished(snap *snapshot) {
	if c.lastHolders == nil {
		c.lastHolders = make([]holderID, len(snap.parts))
	}
	for p, l := range snap.parts {
		read := c.read[l]
		switch h := leases.Holder(l); {
		case h != "":
			c.lastHolders[p] = holderID{name: h, incarnation: read.incarnation}
		case read.released || c.broken.ignoreVanished:
			c.lastHolders[p] = holderID{}
		case c.lastHolders[p].name != "":
			if snap.vanished == nil {
				snap.vanished = map[int]holderID{}
			}
			snap.vanished[p] = c.lastHolders[p]
		}
	}
}

// observe feeds the member leases to the observer. Members the observer knows whose lease is gone,
// and holders of partitions that have no member lease, are observed as absent: the former keep their
// last change, the latter count as live for a full lease duration from now. Members gone, expired
// and named by no partition are forgotten. After an outage of this replica, nobody's silence during
// it counts.
func (c *Coordinator) observe(snap snapshot, now time.Time) {
	for m, l := range snap.members {
		c.observer.Observe(m, l, c.seenAt(l, now))
	}
	named := map[string]bool{}
	holders := make([]string, 0, len(snap.parts)+len(snap.vanished))
	for _, l := range snap.parts {
		holders = append(holders, leases.Holder(l))
	}
	for _, v := range snap.vanished {
		holders = append(holders, v.name)
	}
	last := ""
	for _, h := range holders {
		if h == "" || h == last || named[h] {
			continue // most partitions in a row name the same few holders
		}
		last, named[h] = h, true
		if snap.members[h] == nil {
			c.observer.ObserveAbsent(h, now)
		}
	}
	for _, m := range c.observer.Members() {
		if snap.members[m] == nil && !named[m] {
			if c.observer.ObserveAbsent(m, now); !c.observer.Live(m, now) {
				c.observer.Forget(m)
			}
		}
	}
	if from, to := c.liveness.Outage(); to.After(c.deferredTo) {
		// Without a renewal before the failures, this process observed nobody before them: every
		// observation began after its start, and none needs deferring.
		if !from.IsZero() {
			c.observer.Defer(from, to)
		}
		c.deferredTo = to
	}
}

// seenAt is when l's version was first seen: when the caches delivered it (Config.SeenAt), never
// after now.
func (c *Coordinator) seenAt(l *coordinationv1.Lease, now time.Time) time.Time {
	if c.cfg.SeenAt == nil {
		return now
	}
	if at := c.cfg.SeenAt(l, now); at.Before(now) {
		return at
	}
	return now
}

// rings are what a reconcile plans on: the ring over every live member (this one included: it is not
// fenced), the ring over those of them not away on a returning leave (nil while none is), and the
// desired owner of every partition. A partition goes by the first ring unless it gives the partition
// to a member that is away; then by the second: a member restarting gets back what is reserved for it
// (Plan keeps that free) and attracts nothing new while it is away, such as a share of a member that
// crashed meanwhile, or partitions a join moves (docs/sharding.md, "Graceful stops"). Partitions of
// the members present stay where the first ring puts them, so a rolling restart moves none.
type rings struct {
	all, present *Ring
	owners       []string
}

// ringsAt returns the rings at now, rebuilt only when the live or the present members changed.
func (c *Coordinator) ringsAt(now time.Time) (rings, error) {
	live := c.observer.LiveMembers(now)
	if !containsString(live, c.cfg.Member) {
		live = append(live, c.cfg.Member)
	}
	all, err := c.ringOver(c.rings.all, live)
	if err != nil {
		return rings{}, err
	}
	c.othersLive.Store(len(live) > 1)
	if all != c.rings.all {
		c.membersChanged(all, c.rings.all != nil)
	}
	var present *Ring
	if others := slices.DeleteFunc(slices.Clone(live), func(m string) bool { return c.away(m, now) }); len(others) < len(live) {
		if present, err = c.ringOver(c.rings.present, others); err != nil {
			return rings{}, err
		}
	}
	if all == c.rings.all && present == c.rings.present {
		return c.rings, nil
	}
	owners := all.Assignment()
	for p, owner := range owners {
		if present != nil && c.away(owner, now) {
			owners[p] = present.Owner(p)
		}
	}
	c.rings = rings{all: all, present: present, owners: owners}
	return c.rings, nil
}

// ringOver returns ring if it is over members, else a new ring over them.
func (c *Coordinator) ringOver(ring *Ring, members []string) (*Ring, error) {
	if ring != nil && sameMembers(ring.Members(), members) {
		return ring, nil
	}
	ring, err := NewRing(members, c.cfg.Ring)
	if err != nil {
		return nil, fmt.Errorf("building the ring over %s: %w", strings.Join(members, ","), err)
	}
	return ring, nil
}

// membersChanged records a new ring over the live members.
func (c *Coordinator) membersChanged(ring *Ring, rebalanced bool) {
	if rebalanced {
		c.metrics.rebalances.Inc()
	}
	c.rebalance.membersChanged()
	c.log.V(1).Info("Live members changed", "members", ring.Members())
	c.metrics.liveMembers.Set(float64(len(ring.Members())))
}

// away reports whether a live peer is away on a returning leave: it stopped to restart and is
// within its grace. This member is never away, whatever its cache still shows of the leave of the
// process before it: otherwise the share kept for it would go to the others in its own ring, and it
// would be ready without holding it.
func (c *Coordinator) away(m string, now time.Time) bool {
	if m == c.cfg.Member {
		return false
	}
	_, advert, ok := c.observer.Seen(m)
	return ok && advert.Left && advert.Returning > 0 && c.observer.Live(m, now)
}

// plan decides every partition with Plan, against the desired owners.
func (c *Coordinator) plan(owners []string, snap snapshot, now time.Time) (release, acquire []int) {
	parts := snap.parts
	live := func(m string) bool { return c.observer.Live(m, now) }
	if c.broken.expiryByRenewTime {
		live = c.liveByRenewTime(now)
	}
	returning := func(m string) bool { return c.away(m, now) && !c.returns[m].wont }
	held := c.heldMask()
	for p := range parts {
		state := PartitionState{Holder: leases.Holder(parts[p]), Active: held[p], Desired: owners[p],
			ReservedFor: leases.ReservedFor(parts[p])}
		if v, ok := snap.vanished[p]; ok {
			// Still that holder's: this member's own is acquired again or marked released.
			state.Holder = v.name
		}
		switch Plan(c.cfg.Member, state, live, returning) {
		case Release:
			release = append(release, p)
		case Acquire:
			acquire = append(acquire, p)
		}
	}
	return release, acquire
}

// requeueAfter is the time until the next live member can expire, or go silent for the caches'
// prewarm (untilPrewarm), capped at the retry period.
func (c *Coordinator) requeueAfter(now time.Time) time.Duration {
	next := c.cfg.RetryPeriod
	if d, ok := c.observer.NextExpiry(now); ok && d < next {
		next = d
	}
	if d, ok := c.untilPrewarm(now); ok && d < next {
		next = d
	}
	return max(next, time.Millisecond)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sameMembers(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[string]bool, len(a))
	for _, m := range a {
		seen[m] = true
	}
	for _, m := range b {
		if !seen[m] {
			return false
		}
	}
	return true
}

// isLostRace reports errors that mean another write came first; the cache catches up and the next
// reconcile decides again.
func isLostRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
}
