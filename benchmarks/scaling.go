package benchmarks

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// scaleEvents are the dependents' replicas of every shoot as the seed's watch events tell them, and,
// per shoot, the first moment since the last mark at which all its dependents were at 0 (down), all
// back at their replicas (up), or one below its replicas (below). Only a change is recorded: a shoot
// already down at the mark is recorded down at its next event that leaves it down, not before.
// writes counts the changes of a dependent's replicas since the mark (the first sighting of a
// dependent is none); decreases are those that lowered them, in the order seen, and restored is, per
// shoot, the last moment since the mark at which it went from a dependent below its replicas to all
// back. Not safe for concurrent use: scaleTracker locks it.
type scaleEvents struct {
	replicas        map[string]map[string]int32 // namespace → dependent → spec.replicas
	down, up, below map[string]time.Time
	restored        map[string]time.Time
	decreases       []scaleWrite
	writes          int
}

// scaleWrite is a write that lowered a dependent's replicas, as the seed's watch showed it at a
// moment: a little after it was sent.
type scaleWrite struct {
	shoot, dependent string
	at               time.Time
}

func newScaleEvents() *scaleEvents {
	e := &scaleEvents{replicas: map[string]map[string]int32{}}
	e.mark()
	return e
}

// mark forgets the moments recorded so far.
func (e *scaleEvents) mark() {
	e.down, e.up, e.below = map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	e.restored, e.decreases, e.writes = map[string]time.Time{}, nil, 0
}

// observe records that a Deployment of a shoot has the replicas at now; other Deployments are
// ignored.
func (e *scaleEvents) observe(ns, name string, replicas int32, now time.Time) {
	if _, dependent := sim.Dependents[name]; !dependent {
		return
	}
	if e.replicas[ns] == nil {
		e.replicas[ns] = map[string]int32{}
	}
	_, wasUp, _ := e.state(ns)
	if was, seen := e.replicas[ns][name]; seen && was != replicas {
		e.writes++
		if replicas < was {
			e.decreases = append(e.decreases, scaleWrite{shoot: ns, dependent: name, at: now})
		}
	}
	e.replicas[ns][name] = replicas
	down, up, below := e.state(ns)
	if up && !wasUp {
		e.restored[ns] = now
	}
	record := func(moments map[string]time.Time, happened bool) {
		if _, seen := moments[ns]; happened && !seen {
			moments[ns] = now
		}
	}
	record(e.down, down)
	record(e.up, up)
	record(e.below, below)
}

// state says whether all dependents of a shoot are at 0, all at their replicas, or one below; a
// dependent not seen yet counts as at its replicas.
func (e *scaleEvents) state(ns string) (down, up, below bool) {
	down, up = true, true
	for name, want := range sim.Dependents {
		got, seen := e.replicas[ns][name]
		if !seen {
			got = want
		}
		down = down && got == 0
		up = up && got == want
		below = below || got < want
	}
	return down, up, below
}

// scaleTracker keeps scaleEvents up to date from one informer on the seed's Deployments. It is safe
// for concurrent use.
type scaleTracker struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	events *scaleEvents
}

// startScaleTracker starts the informer, waits until it has synced and returns; stop ends it.
func startScaleTracker(ctx context.Context, cfg *rest.Config) (*scaleTracker, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &scaleTracker{cancel: cancel, events: newScaleEvents()}
	factory := informers.NewSharedInformerFactory(cs, 0)
	informer := factory.Apps().V1().Deployments().Informer()
	// Keep only what is tracked: 15,000 Deployments with their pod templates would cost the bench
	// memory for nothing.
	if err := informer.SetTransform(trimDeployment); err != nil {
		cancel()
		return nil, err
	}
	observe := func(obj any) {
		if d, ok := obj.(*appsv1.Deployment); ok && d.Spec.Replicas != nil {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.events.observe(d.Namespace, d.Name, *d.Spec.Replicas, time.Now())
		}
	}
	err = runInformer(ctx, factory, informer, cache.ResourceEventHandlerFuncs{
		AddFunc: observe, UpdateFunc: func(_, obj any) { observe(obj) },
	}, "the Deployment informer")
	if err != nil {
		cancel()
		return nil, err
	}
	return t, nil
}

// trimDeployment keeps a Deployment's name, namespace and replicas.
func trimDeployment(obj any) (any, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace, ResourceVersion: d.ResourceVersion},
		Spec: appsv1.DeploymentSpec{Replicas: d.Spec.Replicas}}, nil
}

// stop ends the informer.
func (t *scaleTracker) stop() { t.cancel() }

// mark forgets the moments recorded so far, and returns now.
func (t *scaleTracker) mark() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events.mark()
	return time.Now()
}

// moments returns, per shoot, when it went down, came up and went below since the last mark.
func (t *scaleTracker) moments() (down, up, below map[string]time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.events.down), maps.Clone(t.events.up), maps.Clone(t.events.below)
}

// writes counts the changes of a dependent's replicas since the last mark.
func (t *scaleTracker) writes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events.writes
}

// since returns the writes that lowered a dependent's replicas, and the moments each shoot was
// restored, since the last mark.
func (t *scaleTracker) since() ([]scaleWrite, map[string]time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.events.decreases), maps.Clone(t.events.restored)
}

// atZero counts the shoots named with a dependent at 0 replicas now.
func (t *scaleTracker) atZero(names []string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, ns := range names {
		for name := range sim.Dependents {
			if got, seen := t.events.replicas[ns][name]; seen && got == 0 {
				n++
				break
			}
		}
	}
	return n
}

// allUp reports whether every dependent of every shoot named is at its replicas now.
func (t *scaleTracker) allUp(names []string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ns := range names {
		if _, up, _ := t.events.state(ns); !up {
			return false
		}
	}
	return true
}
