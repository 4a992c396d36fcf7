package benchmarks

import (
	"context"
	"errors"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// partitionEvents are the partition leases' holders as the seed's watch events tell them and, since
// the last mark, the writes, the holders at the mark and the leases held meanwhile by a member other
// than their holder at the mark. Not safe for concurrent use: leaseTracker locks it.
type partitionEvents struct {
	holders map[string]string // lease name → holder, "" when released
	atMark  map[string]string
	others  map[string]bool
	writes  PartitionWrites
}

func newPartitionEvents() *partitionEvents {
	e := &partitionEvents{holders: map[string]string{}}
	e.mark()
	return e
}

// mark forgets the writes so far and takes the holders now as the ones to compare with.
func (e *partitionEvents) mark() {
	e.atMark = make(map[string]string, len(e.holders))
	for name, holder := range e.holders {
		e.atMark[name] = holder
	}
	e.others, e.writes = map[string]bool{}, PartitionWrites{}
}

// observe records a write of a partition lease that left holder; created says it made the lease.
func (e *partitionEvents) observe(name, holder string, created bool) {
	before := e.holders[name]
	e.holders[name] = holder
	e.writes.Total++
	switch {
	case created:
		e.writes.Creates++
	case holder == "":
		e.writes.Releases++
	case holder != before:
		e.writes.Acquires++
	default:
		e.writes.Rewrites++
	}
	if holder != "" && holder != e.atMark[name] {
		e.others[name] = true
	}
}

// moved counts the leases whose holder now differs from the one at the mark, released ones included.
func (e *partitionEvents) moved() int {
	n := 0
	for name, holder := range e.holders {
		if e.atMark[name] != holder {
			n++
		}
	}
	for name := range e.atMark {
		if _, ok := e.holders[name]; !ok {
			n++
		}
	}
	return n
}

// leaseTracker keeps partitionEvents up to date from an informer on the leases of the prober's group
// in the replicas' namespace (the weeder's group moves the same way beside it), and counts the writes
// of its member leases since the mark. It is safe for concurrent use.
type leaseTracker struct {
	cancel       context.CancelFunc
	mu           sync.Mutex
	events       *partitionEvents
	memberWrites int
	markedAt     time.Time
}

// startLeaseTracker starts the informer, waits until it has synced and marks; stop ends it.
func startLeaseTracker(ctx context.Context, cfg *rest.Config) (*leaseTracker, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &leaseTracker{cancel: cancel, events: newPartitionEvents()}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(benchNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = k8slabels.Set{leases.GroupLabel: sim.Groups[0]}.String()
		}))
	informer := factory.Coordination().V1().Leases().Informer()
	observe := func(obj any, created bool) {
		l, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		switch l.Labels[leases.KindLabel] {
		case leases.KindPartition:
			t.events.observe(l.Name, leases.Holder(l), created)
		case leases.KindMember:
			t.memberWrites++
		}
	}
	err = runInformer(ctx, factory, informer, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { observe(obj, true) },
		// A relist delivers every lease as an update, changed or not: only a new resourceVersion is a write.
		UpdateFunc: func(old, obj any) {
			o, n := old.(*coordinationv1.Lease), obj.(*coordinationv1.Lease)
			if o.ResourceVersion != n.ResourceVersion {
				observe(obj, false)
			}
		},
	}, "the partition lease informer")
	if err != nil {
		cancel()
		return nil, err
	}
	t.mark()
	return t, nil
}

// runInformer adds handler to informer, starts factory and waits until the informer has synced;
// what names it in the error. The factory shuts down when ctx ends.
func runInformer(ctx context.Context, factory informers.SharedInformerFactory, informer cache.SharedIndexInformer,
	handler cache.ResourceEventHandler, what string) error {
	if _, err := informer.AddEventHandler(handler); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		factory.Shutdown()
		return errors.New(what + " did not sync")
	}
	go func() { <-ctx.Done(); factory.Shutdown() }()
	return nil
}

// stop ends the informer.
func (t *leaseTracker) stop() { t.cancel() }

// mark forgets the writes so far and takes the holders now as the ones to compare with.
func (t *leaseTracker) mark() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events.mark()
	t.memberWrites, t.markedAt = 0, time.Now()
}

// memberWritesPerSecond is the rate of member lease writes since the mark.
func (t *leaseTracker) memberWritesPerSecond() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return float64(t.memberWrites) / time.Since(t.markedAt).Seconds()
}

// writes are the writes since the mark.
func (t *leaseTracker) writes() PartitionWrites {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events.writes
}

// moved counts the partitions whose holder now differs from the one at the mark, and those held
// since the mark by a member other than that one.
func (t *leaseTracker) moved() (moved, heldByOthers int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events.moved(), len(t.events.others)
}

// minus is the writes of a that b does not count: the writes between two readings.
func minus(a, b PartitionWrites) PartitionWrites {
	return PartitionWrites{Total: a.Total - b.Total, Creates: a.Creates - b.Creates, Acquires: a.Acquires - b.Acquires,
		Releases: a.Releases - b.Releases, Rewrites: a.Rewrites - b.Rewrites}
}
