package sharding

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// and requeued at the next moment a member lease can expire. It is a manager.Runnable.
type Runner struct {
	settings    config.Sharding
	client      kubernetes.Interface
	log         logr.Logger
	clock       clock.Clock
	member      *leases.Member
	coordinator *Coordinator
	workCancel  context.CancelFunc
	synced      atomic.Bool // the Lease cache has synced

	// Departing, when set, tells a graceful stop with leave mode auto whether this member leaves the
	// group for good (a StatefulSet scale-down: true) or restarts (a rolling update: false). Without
	// it, or when it fails, the stop hands the share over.
	Departing func(ctx context.Context) (bool, error)
	// Event, when set, records a Kubernetes Event about this member (normally on its Pod); eventType
	// is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Event func(eventType, reason, message string)
	// Exit ends the process when stopping the work after a fence takes longer than the margin the
	// lease timings leave; os.Exit when nil.
	Exit func(code int)
}

// NewRunner prepares the sharding of one replica; handlers run the work of the partitions it holds.
// client should come from LeaseClientConfig, so that rate limits cannot slow a handover down.
func NewRunner(settings config.Sharding, client kubernetes.Interface, log logr.Logger, handlers ...PartitionHandler) *Runner {
	incarnation := newIncarnation()
	clk := clock.RealClock{}
	store := leases.APIStore{Leases: client.CoordinationV1().Leases(settings.Namespace)}
	member := &leases.Member{
		Store: store, Group: settings.GroupName, Name: settings.MemberName, Incarnation: incarnation,
		LeaseDuration: settings.MemberLeaseDuration, RenewDeadline: settings.MemberRenewDeadline,
		RetryPeriod: settings.MemberRetryPeriod, Clock: clk,
	}
	r := &Runner{settings: settings, client: client, log: log, clock: clk, member: member}
	workCtx, cancel := context.WithCancel(context.Background())
	r.workCancel = cancel
	r.coordinator = NewCoordinator(workCtx, Config{
		Group: settings.GroupName, Member: settings.MemberName, Incarnation: incarnation,
		Ring:          RingConfig{PartitionCount: settings.PartitionCount, ReplicationFactor: settings.ReplicationFactor, LoadBound: settings.RingLoadBound},
		LeaseDuration: settings.MemberLeaseDuration, RetryPeriod: settings.MemberRetryPeriod, WriteConcurrency: 16,
	}, store, nil, member, clk, log, handlers...)
	return r
}

// LeaseClientConfig returns a copy of cfg for the Lease client, with rate limits high enough that a
// rebalance, which writes each moved partition's lease twice, is not throttled.
func LeaseClientConfig(cfg *rest.Config, partitionCount int) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = max(cfg.QPS, float32(partitionCount)/2, 50)
	cfg.Burst = max(cfg.Burst, 2*partitionCount)
	return cfg
}

// Coordinator returns the coordinator, which tells the prober and the weeder what they own.
func (r *Runner) Coordinator() *Coordinator {
	return r.coordinator
}

// NeedLeaderElection is true so that, in the original's single-active mode, a replica waits for the
// leader lease before it joins the group; without leader election it starts at once.
func (r *Runner) NeedLeaderElection() bool {
	return true
}

// ReadyCheck is a readyz check: ready once the Lease cache is synced and the member lease is held.
func (r *Runner) ReadyCheck(_ *http.Request) error {
	if !r.synced.Load() {
		return errors.New("lease cache not synced")
	}
	if r.member.Fenced(r.clock.Now()) {
		return fmt.Errorf("member lease %s not held", r.member.LeaseName())
	}
	return nil
}

// Start runs until ctx ends, then releases every partition and the member lease.
func (r *Runner) Start(ctx context.Context) error {
	defer r.workCancel()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, r.settings.MemberRetryPeriod),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "sharding"})
	lister, err := r.startCache(ctx, func() { queue.Add(r.settings.GroupName) })
	if err != nil {
		return err
	}
	r.coordinator.lister = lister
	memberCtx, stopMember := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.member.Run(memberCtx, r.onFence, r.onRenewFailure) })
	go func() { <-ctx.Done(); queue.ShutDown() }()
	queue.Add(r.settings.GroupName)
	for r.reconcileNext(ctx, queue) {
	}
	r.shutdown(stopMember, &wg)
	return nil
}

// startCache starts the informer on the group's Leases and waits for it to sync.
func (r *Runner) startCache(ctx context.Context, trigger func()) (Lister, error) {
	factory := informers.NewSharedInformerFactoryWithOptions(r.client, 0,
		informers.WithNamespace(r.settings.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = k8slabels.Set{leases.GroupLabel: r.settings.GroupName}.String()
		}))
	informer := factory.Coordination().V1().Leases()
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { trigger() },
		UpdateFunc: func(any, any) { trigger() },
		DeleteFunc: func(any) { trigger() },
	})
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		return nil, errors.New("the cache of the group's leases did not sync")
	}
	r.synced.Store(true)
	return leaseLister{informer.Lister().Leases(r.settings.Namespace)}, nil
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
	requeue, err := r.coordinator.Reconcile(ctx)
	if err != nil && ctx.Err() == nil {
		r.log.Error(err, "Reconciling partitions failed")
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	queue.AddAfter(key, requeue)
	return true
}

// shutdown leaves the group: it stops the work of every partition (handing over the state of those
// that have any), then stops renewing and releases the member lease. The others see a released member
// lease at once and take its partitions over without waiting for the lease duration.
func (r *Runner) shutdown(stopMember context.CancelFunc, member *sync.WaitGroup) {
	ctx, cancel := context.WithTimeout(context.Background(), r.settings.MemberRenewDeadline)
	defer cancel()
	if err := r.coordinator.Leave(ctx); err != nil {
		r.log.Error(err, "Handing over partitions on shutdown; their state is lost")
	}
	stopMember()
	member.Wait()
	if err := r.member.Release(ctx, r.clock.Now()); err != nil {
		r.log.Error(err, "Releasing the member lease on shutdown; the others take over after the lease duration")
		return
	}
	r.log.Info("Left the group", "group", r.settings.GroupName, "member", r.settings.MemberName)
}

func (r *Runner) onFence() {
	r.log.Info("Member lease not renewed within the renew deadline: fencing", "lease", r.member.LeaseName())
	r.coordinator.metrics.fences.Inc()
	r.coordinator.Fence()
}

func (r *Runner) onRenewFailure(err error) {
	r.coordinator.metrics.renewFailures.Inc()
	r.log.Error(err, "Renewing the member lease failed", "fenceAt", r.member.FenceAt())
}

// leaseLister lists the cached Leases of the group.
type leaseLister struct {
	lister coordinationv1listers.LeaseNamespaceLister
}

func (l leaseLister) List() []*coordinationv1.Lease {
	list, _ := l.lister.List(k8slabels.Everything())
	return list
}

// newIncarnation returns a random id for this process's start.
func newIncarnation() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
