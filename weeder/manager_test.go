package weeder

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/sharded-dwd/dependency-watchdog/config"
	"github.com/sharded-dwd/dependency-watchdog/dryrun"
	"github.com/sharded-dwd/dependency-watchdog/internal/clocktimer/clocktimertest"
	"github.com/sharded-dwd/dependency-watchdog/internal/metricstest"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// ownershipStub plays sharding.Ownership: it owns every namespace unless fenced; a namespace's
// partition is given by partitions (0 when absent). Guard refuses with the next of refusals (a nil
// one, or none left, lets the write through) and counts its calls.
type ownershipStub struct {
	fenced     atomic.Bool
	partitions map[string]int

	mu       sync.Mutex
	refusals []error
	guards   int
}

func (o *ownershipStub) Owns(string) bool { return !o.fenced.Load() }

// AddHandler registers nothing: the tests call the Manager's handler methods themselves.
func (o *ownershipStub) AddHandler(sharding.PartitionHandler) {}

func (o *ownershipStub) Partition(namespace string) int { return o.partitions[namespace] }

func (o *ownershipStub) Guard(ctx context.Context, _ string) (context.Context, context.CancelFunc, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.guards++
	if len(o.refusals) > 0 {
		err := o.refusals[0]
		o.refusals = o.refusals[1:]
		if err != nil {
			return ctx, func() {}, err
		}
	}
	guarded, cancel := context.WithCancel(ctx)
	return guarded, cancel, nil
}

func (o *ownershipStub) guardCalls() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.guards
}

const testWatchDuration = 5 * time.Minute

// managerFixture is a Manager on a fake clientset and a fake clock, whose namespaces are those of
// the slices fed to it, all in partition 0 unless the ownership stub says otherwise.
type managerFixture struct {
	m     *Manager
	own   *ownershipStub
	clock *clocktesting.FakeClock
}

func newManagerFixture(t *testing.T, maxWindows int) *managerFixture {
	return newManagerFixtureOn(t, maxWindows, nil)
}

// newManagerFixtureOn is newManagerFixture whose manager reads the time from clk, a clock over the
// fixture's fake clock (nil: the fake clock itself).
func newManagerFixtureOn(t *testing.T, maxWindows int, clk func(*clocktesting.FakeClock) clock.WithTicker) *managerFixture {
	selector := []*metav1.LabelSelector{{MatchLabels: map[string]string{"role": "apiserver"}}}
	cfg := &config.WeederConfig{WatchDuration: &metav1.Duration{Duration: testWatchDuration},
		ServicesAndDependantSelectors: map[string]config.DependantSelectors{
			"etcd-main-client": {PodSelectors: selector}, "kube-apiserver": {PodSelectors: selector},
		}}
	f := &managerFixture{own: &ownershipStub{partitions: map[string]int{}}, clock: clocktesting.NewFakeClock(registryT0)}
	var managerClock clock.WithTicker = f.clock
	if clk != nil {
		managerClock = clk(f.clock)
	}
	m, err := newManager(Options{Config: cfg, MaxWindows: maxWindows, Owner: f.own, Clock: managerClock},
		managerDeps{client: fake.NewClientset(), recorder: events.NewFakeRecorder(10), log: logr.Discard(), namespaces: f.namespaces})
	require.NoError(t, err)
	f.m = m
	t.Cleanup(func() { m.cancelWork(); m.stopAll() })
	return f
}

// namespaces lists the tracked namespaces of partition p.
func (f *managerFixture) namespaces(p int) []string {
	f.m.tracker.mu.RLock()
	defer f.m.tracker.mu.RUnlock()
	var in []string
	for ns := range f.m.tracker.namespaces {
		if f.own.Partition(ns) == p {
			in = append(in, ns)
		}
	}
	return in
}

// ready feeds a slice that makes key's service ready now.
func (f *managerFixture) ready(key ServiceKey) {
	f.m.OnAdd(endpointSliceOf(key.Namespace, key.Service, key.Service+"-x", ptr.To(true)), false)
}

// fence plays the coordinator's fence: the replica owns nothing, then its partitions are released.
func (f *managerFixture) fence(partitions ...int) {
	f.own.fenced.Store(true)
	for _, p := range partitions {
		f.m.Released(p)
	}
}

// acquire plays the coordinator's acquire of partition p.
func (f *managerFixture) acquire(p int, cause sharding.TakeoverCause) {
	f.own.fenced.Store(false)
	f.m.Acquired(context.Background(), p, sharding.Takeover{Cause: cause})
}

func svcKey(ns, service string) ServiceKey { return ServiceKey{Namespace: ns, Service: service} }

func TestResumeAfterAFenceReopensOnlyWhatRanOrWasMissed(t *testing.T) {
	var (
		old      = []ServiceKey{svcKey("a", "etcd-main-client"), svcKey("b", "etcd-main-client"), svcKey("c", "etcd-main-client")}
		running  = svcKey("a", "kube-apiserver")
		turnedUp = svcKey("b", "kube-apiserver") // while fenced
	)
	tests := []struct {
		name        string
		whileFenced func(f *managerFixture)
		want        func(resumedAt time.Time) []Window
	}{
		{
			name: "the windows that ran before, for their remaining time",
			want: func(time.Time) []Window {
				return []Window{{Key: running, Deadline: registryAt(10*time.Minute + testWatchDuration)}}
			},
		},
		{
			name:        "and a window for a service that turned ready while fenced",
			whileFenced: func(f *managerFixture) { f.ready(turnedUp) },
			want: func(resumedAt time.Time) []Window {
				return []Window{{Key: running, Deadline: registryAt(10*time.Minute + testWatchDuration)},
					{Key: turnedUp, Deadline: resumedAt.Add(testWatchDuration)}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newManagerFixture(t, 10)
			f.acquire(0, sharding.Fresh)
			for _, k := range old {
				f.ready(k) // their windows end long before the fence
			}
			f.clock.Step(10 * time.Minute)
			f.m.expire()
			f.ready(running)
			before := f.m.Running()
			require.Equal(t, []Window{{Key: running, Deadline: registryAt(10*time.Minute + testWatchDuration)}}, before)

			f.fence(0)
			require.Empty(t, f.m.Running())
			f.clock.Step(time.Minute)
			if tt.whileFenced != nil {
				tt.whileFenced(f)
			}
			f.clock.Step(time.Second)
			f.acquire(0, sharding.Resume)

			assert.Equal(t, tt.want(f.clock.Now()), f.m.Running(), "no window for the services that were ready all along")
			assert.Zero(t, f.m.registry.QueuedLen())
		})
	}
}

func TestResumeSoonAfterTheStartOpensNoWindowForServicesReadyAtTheStart(t *testing.T) {
	f := newManagerFixture(t, 10)
	initial := []ServiceKey{svcKey("a", "etcd-main-client"), svcKey("b", "kube-apiserver")}
	f.own.fenced.Store(true) // the initial list arrives before the first partition is acquired
	for _, k := range initial {
		f.m.OnAdd(endpointSliceOf(k.Namespace, k.Service, k.Service+"-x", ptr.To(true)), true) // the informer's initial list
	}
	f.acquire(0, sharding.Handover) // a start that took the partition over with no window to resume
	require.Empty(t, f.m.Running())
	f.clock.Step(time.Second)
	f.fence(0) // an outage right after the start, well within a watch duration
	f.clock.Step(time.Minute)
	f.acquire(0, sharding.Resume)
	assert.Empty(t, f.m.Running(), "services ready before this process started did not turn ready while it was fenced")
	assert.Zero(t, f.m.registry.QueuedLen())
}

func TestCrashTakeoverOpensSyntheticWindowsThatYieldToAReadinessChange(t *testing.T) {
	f := newManagerFixture(t, 2)
	f.own.fenced.Store(true) // the services were ready before the partition came here
	for _, ns := range []string{"a", "b", "c", "d"} {
		f.ready(svcKey(ns, "etcd-main-client"))
	}
	f.clock.Step(time.Minute)
	f.acquire(0, sharding.Crash)
	require.Len(t, f.m.Running(), 2, "the cap is full of synthetic windows")
	require.Equal(t, 2, f.m.registry.QueuedLen())
	for _, w := range f.m.Running() {
		require.True(t, w.Synthetic)
	}

	f.clock.Step(time.Second)
	changed := svcKey("e", "kube-apiserver")
	f.ready(changed)

	running := f.m.Running()
	assert.Contains(t, running, Window{Key: changed, Deadline: f.clock.Now().Add(testWatchDuration)}, "started at once")
	assert.Len(t, running, 2, "within the cap")
	assert.Equal(t, 3, f.m.registry.QueuedLen(), "the synthetic window it displaced waits again")
}

func TestAQueuedWindowWhoseDeadlinePassedNeverStarts(t *testing.T) {
	f := newManagerFixture(t, 1)
	f.own.partitions["b"] = 1
	f.acquire(0, sharding.Fresh)
	f.ready(svcKey("a", "etcd-main-client"))
	f.clock.Step(time.Minute)
	f.ready(svcKey("b", "etcd-main-client")) // partition 1, queued
	require.Equal(t, 1, f.m.registry.QueuedLen())

	f.clock.Step(2 * testWatchDuration) // both deadlines pass before the expiry loop runs
	f.m.Released(0)                     // which frees the slot

	assert.Empty(t, f.m.Running(), "the queued window is dropped, not started")
	assert.Zero(t, f.m.registry.QueuedLen())
}

func TestHandedOverWindowsKeepTheirKind(t *testing.T) {
	windows := []Window{win(winEtcdA, time.Minute), synth(winEtcdB, 2*time.Minute)}
	got, err := decodeWindows(encodeWindows(windows))
	require.NoError(t, err)
	assert.Equal(t, windows, got)

	older, err := decodeWindows(`[{"namespace":"shoot--a","service":"etcd-main-client","deadline":"2026-01-01T12:01:00Z"}]`)
	require.NoError(t, err)
	assert.Equal(t, []Window{win(winEtcdA, time.Minute)}, older, "a window handed over without a kind is real")
}

// acquireHandedOver plays the coordinator's acquire of partition p by a graceful handover that
// carries handed, the windows the previous holder had open.
func (f *managerFixture) acquireHandedOver(p int, cause sharding.TakeoverCause, handed ...Window) {
	f.own.fenced.Store(false)
	f.m.Acquired(context.Background(), p, sharding.Takeover{Cause: cause, State: map[string]string{HandoverKey: encodeWindows(handed)}})
}

func TestReadinessChangeDuringAHandoverOpensAWindow(t *testing.T) {
	key := svcKey("a", "etcd-main-client")
	acquiredAt := registryAt(time.Hour)
	tests := []struct {
		name     string
		readyAgo time.Duration // before the acquire
		handed   time.Duration // the handed window's deadline after the acquire; 0: none handed
		want     time.Duration // the running window's deadline after the acquire; 0: none
	}{
		{"turned ready in the gap: the window the change opened", time.Second, 0, testWatchDuration - time.Second},
		{"ready long before the gap: none", 2 * testWatchDuration, 0, 0},
		{"its window ended in the gap: not opened again", testWatchDuration, 0, 0},
		{"ready before the gap: its handed window resumes as it was", time.Minute, testWatchDuration - time.Minute, testWatchDuration - time.Minute},
		{"turned ready again in the gap: its handed window is extended", time.Second, time.Minute, testWatchDuration - time.Second},
		{"ready before the gap with no handed window (missed by the previous holder): the rest of its window",
			time.Minute, 0, testWatchDuration - time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newManagerFixture(t, 10)
			f.own.fenced.Store(true) // another replica holds the partition, then nobody (the gap)
			f.clock.SetTime(acquiredAt.Add(-tt.readyAgo))
			f.ready(key)
			require.Empty(t, f.m.Running(), "no window opens where this replica holds nothing")
			f.clock.SetTime(acquiredAt)
			var handed []Window
			if tt.handed != 0 {
				handed = []Window{{Key: key, Deadline: acquiredAt.Add(tt.handed)}}
			}
			f.acquireHandedOver(0, sharding.Handover, handed...)
			if tt.want == 0 {
				assert.Empty(t, f.m.Running())
				return
			}
			assert.Equal(t, []Window{{Key: key, Deadline: acquiredAt.Add(tt.want)}}, f.m.Running())
		})
	}
}

func TestHandedOverWindowsRunAtMostTheWatchDuration(t *testing.T) {
	far, near := svcKey("a", "etcd-main-client"), svcKey("b", "etcd-main-client")
	for _, cause := range []sharding.TakeoverCause{sharding.Handover, sharding.Resume} {
		t.Run(cause.String(), func(t *testing.T) {
			f := newManagerFixture(t, 10)
			acquiredAt := f.clock.Now()
			// A wrong clock or a forged annotation at the releasing replica.
			f.acquireHandedOver(0, cause, Window{Key: far, Deadline: acquiredAt.Add(10 * time.Hour)},
				Window{Key: near, Deadline: acquiredAt.Add(time.Minute)})
			assert.Equal(t, []Window{{Key: far, Deadline: acquiredAt.Add(testWatchDuration)}, {Key: near, Deadline: acquiredAt.Add(time.Minute)}},
				f.m.Running(), "clamped to the watch duration; an earlier deadline is kept")

			f.clock.Step(testWatchDuration)
			f.m.expire()
			assert.Empty(t, f.m.Running(), "no window outlasts the watch duration")
		})
	}
}

// Released decides under the manager's lock and waits outside it (the package doc, Locking): while
// the window of a released partition finishes a pod delete in flight, a window of another partition
// opens, and the running windows can be read.
func TestReleasedWaitsForItsWindowsOutsideTheLock(t *testing.T) {
	f := newManagerFixture(t, 10)
	f.own.partitions = map[string]int{"shoot--a": 0, "shoot--b": 1}
	entered, unblock := make(chan struct{}, 1), make(chan struct{})
	var end sync.Once
	unblockDelete := func() { end.Do(func() { close(unblock) }) }
	t.Cleanup(unblockDelete) // before the fixture's, should the test fail while the delete is blocked
	client := f.m.Client.(*fake.Clientset)
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		entered <- struct{}{}
		<-unblock
		return false, nil, nil
	})
	pod := crashLoopingPod("stuck", "1")
	pod.Labels = map[string]string{"role": "apiserver"}
	_, err := client.CoreV1().Pods("shoot--a").Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	f.ready(svcKey("shoot--a", "kube-apiserver"))
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the window of shoot--a never deleted its crash-looping pod")
	}

	released := make(chan struct{})
	go func() { defer close(released); f.m.Released(0) }()
	opened := make(chan struct{})
	go func() { defer close(opened); f.ready(svcKey("shoot--b", "kube-apiserver")) }()
	select {
	case <-opened:
	case <-time.After(10 * time.Second):
		unblockDelete()
		t.Fatal("a window of another partition waited for the release of partition 0")
	}
	require.Eventually(t, func() bool {
		return slices.Equal([]ServiceKey{svcKey("shoot--b", "kube-apiserver")}, keysOf(f.m.Running()))
	}, 10*time.Second, time.Millisecond, "the window of partition 0 is taken out under the lock, which is then free")
	select {
	case <-released:
		t.Fatal("Released returned while the delete of its window was in flight")
	default:
	}
	unblockDelete()
	select {
	case <-released:
	case <-time.After(30 * time.Second):
		t.Fatal("Released did not return after the delete ended")
	}
}

func keysOf(windows []Window) []ServiceKey {
	keys := make([]ServiceKey, 0, len(windows))
	for _, w := range windows {
		keys = append(keys, w.Key)
	}
	return keys
}

// In dry run a delete that passes the Guard is counted once per pod and not sent, and its Event is
// counted, not recorded: the mutation check's quick proof of the rule (dryrun_test.go runs it for real).
func TestDryRunTryDeleteSendsNothing(t *testing.T) {
	f := newManagerFixture(t, 1)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shoot--a", Name: "kube-apiserver-0", UID: "u1"}}
	client := f.m.Client.(*fake.Clientset)
	_, err := client.CoreV1().Pods("shoot--a").Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	recorded := events.NewFakeRecorder(10)
	f.m.Recorder, f.m.DryRun = recorded, dryrun.New(logr.Discard())
	deletes := metricstest.Sum(t, "dwd_dry_run_writes_total", map[string]string{"kind": dryrun.KindPodDelete})

	for range 2 {
		assert.False(t, f.m.tryDelete(context.Background(), svcKey("shoot--a", "etcd-main-client"), pod, false))
	}
	_, err = client.CoreV1().Pods("shoot--a").Get(context.Background(), pod.Name, metav1.GetOptions{})
	assert.NoError(t, err, "the pod is not deleted")
	assert.Equal(t, deletes+1, metricstest.Sum(t, "dwd_dry_run_writes_total", map[string]string{"kind": dryrun.KindPodDelete}), "counted once")
	assert.Len(t, recorded.Events, 1, "the Event of the one delete goes to the Recorder (a dry run's records none)")
}

// A step of the clock while the expiry loop makes its timer must not make it sleep past the next
// deadline: the timer, made for the wait measured before the step, would fire that much later
// (TestWindowCapHoldsAcrossNamespaces lost windows now and then to this).
func TestTheExpiryWaitEndsAtTheDeadlineWhenTheClockMovesWhileItsTimerIsMade(t *testing.T) {
	var stepping *clocktimertest.SteppingClock
	f := newManagerFixtureOn(t, 10, func(fake *clocktesting.FakeClock) clock.WithTicker {
		stepping = clocktimertest.NewSteppingClock(fake, time.Minute)
		stepping.Disarm()
		return stepping
	})
	f.acquire(0, sharding.Fresh)
	f.ready(svcKey("a", "etcd-main-client"))
	require.Len(t, f.m.Running(), 1)
	select { // the wake-up of the opening
	case <-f.m.wake:
	default:
	}
	stepping.Arm()
	slept := make(chan bool, 1)
	go func() { slept <- f.m.sleep(context.Background()) }()
	require.Eventually(t, func() bool { return !stepping.Armed() && f.clock.HasWaiters() }, 5*time.Second, time.Millisecond)
	f.clock.Step(testWatchDuration - time.Minute) // the window's deadline
	select {
	case ok := <-slept:
		assert.True(t, ok)
	case <-time.After(5 * time.Second):
		t.Fatal("the expiry loop sleeps past the window's deadline")
	}
}

// A relist shows only the state at its end: a ready slice that changed while the cache listed may
// have gone unready and ready again unseen, so the weeder opens a synthetic window for its service,
// as at a restart. A watch event sends every change, and a state listed unchanged hides nothing.
func TestAReadySliceThatChangedWhileTheCacheListedOpensASyntheticWindow(t *testing.T) {
	key := svcKey("a", "etcd-main-client")
	tests := []struct {
		name string
		next *discoveryv1.EndpointSlice
		want []Window
	}{
		{name: "listed, changed and ready: a synthetic window", next: sliceAt(key, "2", true, true),
			want: []Window{{Key: key, Deadline: registryAt(10*time.Minute + testWatchDuration), Synthetic: true}}},
		{name: "watched, changed and ready: none, the watch sent every change", next: sliceAt(key, "2", false, true)},
		{name: "listed unchanged: none", next: sliceAt(key, "1", true, true)},
		{name: "listed, changed and not ready: none", next: sliceAt(key, "2", true, false)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := readySinceTheStart(t, key)
			f.m.OnUpdate(sliceAt(key, "1", false, true), tt.next)
			if tt.want == nil {
				assert.Empty(t, f.m.Running())
				return
			}
			assert.Equal(t, tt.want, f.m.Running())
		})
	}
}

func TestTrimmedSlicesKeepWhetherAListGaveThem(t *testing.T) {
	s := endpointSliceOf("a", "etcd-main-client", "etcd-x", ptr.To(true))
	s.Annotations = map[string]string{ListedAnnotation: "true", "endpoints.kubernetes.io/last-change-trigger-time": "t"}
	trimmed, err := trimSlice(s)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{ListedAnnotation: "true"}, trimmed.(*discoveryv1.EndpointSlice).Annotations)
	s.Annotations = nil
	trimmed, err = trimSlice(s)
	require.NoError(t, err)
	assert.Nil(t, trimmed.(*discoveryv1.EndpointSlice).Annotations)
}

// A replica fenced when the list came opens nothing then; the service counts as turned ready at that
// moment, so the resume opens its window.
func TestAChangeAListHidWhileFencedOpensItsWindowAtTheResume(t *testing.T) {
	key := svcKey("a", "etcd-main-client")
	f := readySinceTheStart(t, key)
	f.fence(0)
	f.m.OnUpdate(sliceAt(key, "1", false, true), sliceAt(key, "2", true, true))
	require.Empty(t, f.m.Running(), "a fenced replica owns nothing")
	f.clock.Step(time.Second)
	f.acquire(0, sharding.Resume)
	assert.Equal(t, []Window{{Key: key, Deadline: f.clock.Now().Add(testWatchDuration)}}, f.m.Running())
}

// sliceAt is the slice of key's service at resource version rv, given by a list or not, ready or not.
func sliceAt(key ServiceKey, rv string, listed, ready bool) *discoveryv1.EndpointSlice {
	s := endpointSliceOf(key.Namespace, key.Service, key.Service+"-x", ptr.To(ready))
	s.ResourceVersion = rv
	if listed {
		s.Annotations = map[string]string{ListedAnnotation: "true"}
	}
	return s
}

// readySinceTheStart is a manager whose partition 0 came by a handover with no window to resume,
// key's service ready (its slice at version 1) since before the start, ten minutes ago.
func readySinceTheStart(t *testing.T, key ServiceKey) *managerFixture {
	f := newManagerFixture(t, 10)
	f.own.fenced.Store(true) // the initial list arrives before the partition
	f.m.OnAdd(sliceAt(key, "1", false, true), true)
	f.acquire(0, sharding.Handover)
	require.Empty(t, f.m.Running())
	f.clock.Step(10 * time.Minute)
	return f
}
