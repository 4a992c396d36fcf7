package prober

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/sharded-dwd/dependency-watchdog/config/configtest"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

const cycleNS = "shoot--p--lies"

// cycleConfig is the original's example with a 1 s probe interval.
const cycleConfig = `
kubeConfigSecretName: shoot-access-dependency-watchdog-probe
probeInterval: 1s
dependentResourceInfos:
  - ref: {kind: Deployment, name: kube-controller-manager, apiVersion: apps/v1}
    scaleUp: {level: 0}
    scaleDown: {level: 1}
  - ref: {kind: Deployment, name: machine-controller-manager, apiVersion: apps/v1}
    scaleUp: {level: 1, initialDelay: 30s}
    scaleDown: {level: 0}
  - ref: {kind: Deployment, name: cluster-autoscaler, apiVersion: apps/v1}
    optional: true
    scaleUp: {level: 2}
    scaleDown: {level: 0}
`

var cycleDependents = []string{"kube-controller-manager", "machine-controller-manager", "cluster-autoscaler"}

// lyingShoot is a shoot API server whose lease answers a test scripts. Every kubelet renews every 10 s
// on its own phase, on the test's fake clock plus nodeClock, unless the shoot melted.
type lyingShoot struct {
	clk   *clocktesting.FakeClock
	nodes []string

	mu         sync.Mutex
	nodeClock  time.Duration // added to every renewTime the kubelets write
	meltedAt   time.Time     // when the kubelets stopped renewing (zero: they renew)
	melting    []string      // the nodes whose kubelets stop at meltedAt (nil: all)
	unmanaged  []string      // the nodes annotated as not managed by MCM
	unhealthy  []string      // the nodes with a True KernelDeadlock condition
	staleAt    time.Time     // resourceVersion=0 answers are frozen at this time (zero: fresh)
	bodyDelay  time.Duration // stepped on the fake clock after the answer is fixed, before it is sent
	extra      int           // extra leases of no candidate
	hidden     bool          // resourceVersion=0 answers hold no lease (a watch cache that lost them)
	body       []byte        // non-nil: the answer to every lease list
	retryAfter string        // non-empty: every request is answered 429 with this Retry-After

	consistent, cached  atomic.Int32
	nodeLists, versions atomic.Int32
}

func newLyingShoot(t *testing.T, clk *clocktesting.FakeClock, nodes int) (*lyingShoot, *httptest.Server) {
	s := &lyingShoot{clk: clk}
	for i := range nodes {
		s.nodes = append(s.nodes, fmt.Sprintf("node-%d", i))
	}
	srv := httptest.NewTLSServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *lyingShoot) set(f func(*lyingShoot)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// renewTime is the renewTime of kubelet i as served at at.
func (s *lyingShoot) renewTime(i int, at time.Time) time.Time {
	if !s.meltedAt.IsZero() && at.After(s.meltedAt) && (s.melting == nil || slices.Contains(s.melting, s.nodes[i])) {
		at = s.meltedAt
	}
	phase := time.Duration(i) * 10 * time.Second / time.Duration(len(s.nodes))
	last := at.Add(-phase).Truncate(10 * time.Second).Add(phase)
	return last.Add(s.nodeClock)
}

func (s *lyingShoot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Date", s.clk.Now().UTC().Format(http.TimeFormat)) // the shoot API server's clock is right
	if s.retryAfter != "" {
		w.Header().Set("Retry-After", s.retryAfter)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	var obj any
	switch r.URL.Path {
	case "/version":
		s.versions.Add(1)
	case "/api/v1/nodes":
		s.nodeLists.Add(1)
		list := &corev1.NodeList{}
		for _, n := range s.nodes {
			node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{LabelWorkerPool: "pool"}}}
			if slices.Contains(s.unmanaged, n) {
				node.Annotations = map[string]string{AnnotationNotManagedByMCM: "1"}
			}
			if slices.Contains(s.unhealthy, n) {
				node.Status.Conditions = []corev1.NodeCondition{{Type: "KernelDeadlock", Status: corev1.ConditionTrue}}
			}
			list.Items = append(list.Items, node)
		}
		obj = list
	case "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases":
		if s.body != nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(s.body)
			return
		}
		obj = s.leases(r.URL.Query().Get("resourceVersion") == "")
	default:
		http.NotFound(w, r)
		return
	}
	s.clk.Step(s.bodyDelay)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	switch o := obj.(type) {
	case *corev1.NodeList:
		o.Kind, o.APIVersion = "NodeList", "v1"
		_ = enc.Encode(o, w)
	case *coordinationv1.LeaseList:
		o.Kind, o.APIVersion = "LeaseList", "coordination.k8s.io/v1"
		_ = enc.Encode(o, w)
	default:
		_, _ = fmt.Fprint(w, `{"major":"1","minor":"36"}`)
	}
}

// leases answers a lease list, consistent or from the (maybe stale) watch cache.
func (s *lyingShoot) leases(consistent bool) *coordinationv1.LeaseList {
	at := s.clk.Now()
	if consistent {
		s.consistent.Add(1)
	} else {
		s.cached.Add(1)
		if !s.staleAt.IsZero() {
			at = s.staleAt
		}
	}
	list := &coordinationv1.LeaseList{}
	if s.hidden && !consistent {
		return list
	}
	for i, n := range s.nodes {
		list.Items = append(list.Items, nodeLease(n, s.renewTime(i, at)))
	}
	for i := range s.extra {
		list.Items = append(list.Items, nodeLease(fmt.Sprintf("tenant-%d", i), at))
	}
	return list
}

// cycleFixture is one shoot's probe with everything below the API boundary faked: the seed reads
// from a fake client, the shoot from a lyingShoot.
type cycleFixture struct {
	shoot    *lyingShoot
	clk      *clocktesting.FakeClock
	m        *Manager
	p        *shootProbe
	recorder *events.FakeRecorder
}

func newCycleFixture(t *testing.T, nodes int) *cycleFixture {
	registerMetrics()
	clk := clocktesting.NewFakeClock(time.Now())
	shoot, srv := newLyingShoot(t, clk, nodes)
	cfg := configtest.Prober(t, cycleConfig)
	objs := []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cfg.KubeConfigSecretName, Namespace: cycleNS},
		Data: map[string][]byte{KubeconfigKey: kubeconfig(srv.URL, map[string]any{"token": "t"})}}}
	for _, name := range cycleDependents {
		objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cycleNS}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}})
	}
	c := fake.NewClientBuilder().WithObjects(objs...).Build()
	recorder := events.NewFakeRecorder(100)
	machines := make([]unstructured.Unstructured, 0, nodes)
	for _, n := range shoot.nodes {
		u := newMachine()
		u.SetName("m-" + n)
		u.SetNamespace(cycleNS)
		u.SetLabels(map[string]string{MachineNodeLabel: n})
		machines = append(machines, *u)
	}
	m := &Manager{Config: cfg, Ownership: partitionOwnership{}, Reader: machineReader{Client: c, machines: machines}, Clock: clk, Log: testr.New(t), Recorder: recorder,
		// A limit far above the cycles' pace: client-go's default (5 QPS) would pace them in real time.
		Clients: &ShootClients{Timeout: 5 * time.Second, MaxBytes: 4 << 20, MaxItems: 1000, QPS: 1000, Burst: 1000},
		Scaler:  &scaler.Scaler{Client: c, Clock: clk, Resources: cfg.DependentResourceInfos},
		Flows:   NewScheduler(clk, 1, nil)}
	p := &shootProbe{m: m, namespace: cycleNS, spec: ProbeSpec{NodeMonitorGracePeriod: 40 * time.Second}, st: &probeState{}}
	return &cycleFixture{shoot: shoot, clk: clk, m: m, p: p, recorder: recorder}
}

// machineReader serves the shoot's Machines, which the fake client cannot list as unstructured.
type machineReader struct {
	client.Client
	machines []unstructured.Unstructured
}

func (r machineReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if u, ok := list.(*unstructured.UnstructuredList); ok {
		u.Items = append(u.Items[:0], r.machines...)
		return nil
	}
	return r.Client.List(ctx, list, opts...)
}

// cycles runs n probe cycles, the fake clock stepping by every between them, and returns their results.
func (f *cycleFixture) cycles(t *testing.T, n int, every time.Duration) []string {
	var results []string
	for range n {
		result, _ := f.p.cycle(context.Background())
		results = append(results, result)
		f.clk.Step(every)
	}
	return results
}

// flowStarted reports the direction of the shoot's scale flow, if one was started.
func (f *cycleFixture) flowStarted() (scaler.Direction, bool) {
	f.m.flowMu.Lock()
	defer f.m.flowMu.Unlock()
	fl, ok := f.m.flows[cycleNS]
	if !ok {
		return 0, false
	}
	return fl.Direction(), true
}

func TestStaleWatchCacheIsConfirmedAgainstAConsistentRead(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.cycles(t, 3, 10*time.Second) // the probe has seen the leases renew
	// The watch cache freezes: its renewTimes age; etcd's stay fresh.
	f.shoot.set(func(s *lyingShoot) { s.staleAt = s.clk.Now() })
	results := f.cycles(t, 12, 10*time.Second)
	_, started := f.flowStarted()
	assert.False(t, started, "no scale flow on a stale cache: %v", results)
	assert.Contains(t, results, resultInconclusive)
	assert.Positive(t, f.shoot.consistent.Load(), "the scale-down was checked with a consistent read")
	assert.Less(t, int(f.shoot.consistent.Load()), 12, "a consistent read only before a would-be scale-down")

	// When etcd says the same, the scale-down goes ahead: the probe reads consistently now, and finds
	// the leases unchanged for 0.75 × grace.
	f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.staleAt })
	f.cycles(t, 5, 10*time.Second)
	dir, started := f.flowStarted()
	require.True(t, started)
	assert.Equal(t, scaler.Down, dir)
}

// A confirmation that disagrees keeps what the consistent read saw (docs/prober.md,
// "Stale answers switch the shoot to consistent reads"): it is true, and a meltdown it shows in
// progress goes on from it rather than from the stale cache's view.
func TestADisagreeingConfirmationKeepsTheConsistentSightings(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.cycles(t, 3, 10*time.Second)
	var staleAt time.Time
	f.shoot.set(func(s *lyingShoot) { staleAt, s.staleAt = s.clk.Now(), s.clk.Now() })
	var results []string
	for range 12 {
		results = append(results, f.cycles(t, 1, 10*time.Second)...)
		if results[len(results)-1] == resultInconclusive {
			break
		}
	}
	require.Equal(t, resultInconclusive, results[len(results)-1], "a stale cache's scale-down not confirmed: %v", results)
	require.Len(t, f.p.st.seen, 5)
	for name, sighting := range f.p.st.seen {
		assert.True(t, sighting.RenewTime.After(staleAt), "%s: the consistent read's renewal, not the stale cache's", name)
	}
}

func TestHealthyShootsMakeNoConsistentReads(t *testing.T) {
	f := newCycleFixture(t, 5)
	results := f.cycles(t, 20, 10*time.Second)
	assert.Zero(t, f.shoot.consistent.Load())
	assert.Equal(t, int32(20), f.shoot.cached.Load())
	assert.Equal(t, resultNoDecision, results[0], "a first sight proves nothing until a renewal shows the clocks agree")
	for _, r := range results[1:] {
		assert.Equal(t, resultHealthy, r)
	}
}

// A healthy shoot's Nodes are read once every nodesMaxAge probe intervals, its leases every cycle, and
// no GET /version: the lists are the API server probe.
func TestHealthyShootsReadTheirNodesOncePerNodesMaxAge(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.m.Config.ProbeInterval.Duration = 10 * time.Second
	results := f.cycles(t, 25, 10*time.Second)
	assert.Equal(t, int32(3), f.shoot.nodeLists.Load(), "at 0, 100 and 200 s: %v", results)
	assert.Equal(t, int32(25), f.shoot.cached.Load())
	assert.Zero(t, f.shoot.versions.Load())
	assert.Equal(t, resultHealthy, results[len(results)-1])
}

// The Nodes kept are decided on only while they cannot change the decision: a lease that looks old,
// a lease of no Node kept, or dependents to scale up make the cycle read the Nodes.
func TestNodesAreReadWhenTheyCouldChangeTheDecision(t *testing.T) {
	t.Run("a meltdown of the nodes that are candidates now", func(t *testing.T) {
		f := newCycleFixture(t, 5)
		f.m.Config.ProbeInterval.Duration = 10 * time.Second
		f.cycles(t, 3, 10*time.Second)
		// Two nodes leave MCM and two of the other three stop renewing: 2 of 3 candidates (over the
		// fraction), where the Nodes kept say 2 of 5 (under it).
		f.shoot.set(func(s *lyingShoot) {
			s.unmanaged = []string{"node-0", "node-1"}
			s.meltedAt, s.melting = s.clk.Now(), []string{"node-2", "node-3"}
		})
		results := f.cycles(t, 5, 10*time.Second) // up to 70 s after the Nodes were read: still kept
		dir, started := f.flowStarted()
		require.True(t, started, "scaled down from the Nodes as they are now: %v", results)
		assert.Equal(t, scaler.Down, dir)
	})
	t.Run("a meltdown of nodes that were no candidates when read", func(t *testing.T) {
		f := newCycleFixture(t, 5)
		f.m.Config.ProbeInterval.Duration = 10 * time.Second
		f.shoot.set(func(s *lyingShoot) { s.unmanaged = []string{"node-0", "node-1", "node-2"} })
		f.cycles(t, 3, 10*time.Second)
		// The three come back under MCM and their kubelets stop: 3 of 5 candidates (the fraction),
		// where the Nodes kept have them annotated and say 0 of 2.
		f.shoot.set(func(s *lyingShoot) {
			s.unmanaged = nil
			s.meltedAt, s.melting = s.clk.Now(), []string{"node-0", "node-1", "node-2"}
		})
		results := f.cycles(t, 7, 10*time.Second) // their leases expire 40 s after they stopped; the Nodes were read 90 s before the last cycle
		dir, started := f.flowStarted()
		require.True(t, started, "scaled down from the Nodes as they are now: %v", results)
		assert.Equal(t, scaler.Down, dir)
	})
	t.Run("a lease of no node kept", func(t *testing.T) {
		f := newCycleFixture(t, 5)
		f.m.Config.ProbeInterval.Duration = 10 * time.Second
		f.shoot.set(func(s *lyingShoot) { s.extra = 1 })
		f.cycles(t, 5, 10*time.Second)
		assert.Equal(t, int32(5), f.shoot.nodeLists.Load())
	})
	t.Run("dependents to scale up", func(t *testing.T) {
		f := newCycleFixture(t, 5)
		f.m.Config.ProbeInterval.Duration = 10 * time.Second
		mcm := &appsv1.Deployment{}
		require.NoError(t, f.m.Scaler.Client.Get(context.Background(), client.ObjectKey{Namespace: cycleNS, Name: "machine-controller-manager"}, mcm))
		mcm.Spec.Replicas = ptr.To[int32](0)
		require.NoError(t, f.m.Scaler.Client.Update(context.Background(), mcm))
		f.cycles(t, 5, 10*time.Second)
		assert.Equal(t, int32(5), f.shoot.nodeLists.Load())
	})
}

// A scale-up is decided on Nodes read in the same cycle, not on Nodes kept, also where the Nodes kept
// would decide nothing: a lone node left out since (a True pool condition) leaves no candidate, and no
// candidate while scaled down means recover.
func TestAScaleUpIsNotDecidedOnNodesKept(t *testing.T) {
	f := newCycleFixture(t, 1)
	f.m.Config.ProbeInterval.Duration = 10 * time.Second
	results := f.cycles(t, 3, 10*time.Second)
	require.Equal(t, []string{resultNoDecision, resultNoDecision, resultNoDecision}, results, "one candidate decides nothing")
	require.Equal(t, int32(1), f.shoot.nodeLists.Load())
	mcm := &appsv1.Deployment{}
	require.NoError(t, f.m.Scaler.Client.Get(context.Background(), client.ObjectKey{Namespace: cycleNS, Name: "machine-controller-manager"}, mcm))
	mcm.Spec.Replicas = ptr.To[int32](0)
	require.NoError(t, f.m.Scaler.Client.Update(context.Background(), mcm))
	f.shoot.set(func(s *lyingShoot) { s.unhealthy = []string{"node-0"} })
	results = f.cycles(t, 1, 10*time.Second)
	assert.Greater(t, f.shoot.nodeLists.Load(), int32(1), "the Nodes are read (and again by the consistent read that confirms)")
	dir, started := f.flowStarted()
	require.True(t, started, "%v", results)
	assert.Equal(t, scaler.Up, dir)
}

func TestLeaseAgeIsMeasuredWhenTheListWasSent(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.cycles(t, 3, 10*time.Second)
	// Every answer is fixed, then takes 27 s to arrive: by the time it has, every lease is 27-37 s old.
	f.shoot.set(func(s *lyingShoot) { s.bodyDelay = 27 * time.Second })
	results := f.cycles(t, 10, time.Second)
	_, started := f.flowStarted()
	assert.False(t, started, "%v", results)
	assert.NotContains(t, results, resultInconclusive, "a slow answer counts")
}

// An overloaded shoot API server (a common cause of a meltdown) answers every list 15 s late, under
// the probe timeout: the meltdown is still found, and scaled down.
func TestSlowAnswersStillFindAMeltdown(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.cycles(t, 3, 10*time.Second)
	f.shoot.set(func(s *lyingShoot) {
		s.bodyDelay = 15 * time.Second
		s.meltedAt = s.clk.Now()
	})
	results := f.cycles(t, 4, time.Second) // a cycle of three or five late answers takes 45-75 s
	dir, started := f.flowStarted()
	require.True(t, started, "%v", results)
	assert.Equal(t, scaler.Down, dir)
	assert.NotContains(t, results, resultInconclusive)
}

func TestSkewedNodeClocksScaleNothingDown(t *testing.T) {
	for _, skew := range []time.Duration{-90 * time.Second, 90 * time.Second, -time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			f := newCycleFixture(t, 5)
			f.shoot.set(func(s *lyingShoot) { s.nodeClock = skew })
			results := f.cycles(t, 30, 10*time.Second)
			_, started := f.flowStarted()
			assert.False(t, started, "%v", results)
		})
	}
}

func TestMeltdownIsScaledDownAfterConfirmation(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.cycles(t, 3, 10*time.Second)
	f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	results := f.cycles(t, 5, 10*time.Second)
	dir, started := f.flowStarted()
	require.True(t, started, "%v", results)
	assert.Equal(t, scaler.Down, dir)
	assert.Contains(t, results, resultScaledDown)
	assert.Positive(t, f.shoot.consistent.Load())
}

func TestHugeLeaseListIsInconclusiveWithBoundedMemory(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.m.Clients.MaxItems = 20000
	f.m.Clients.MaxBytes = 8 << 20
	f.shoot.set(func(s *lyingShoot) {
		s.extra = 200000
		var buf bytes.Buffer
		list := s.leases(false)
		list.Kind, list.APIVersion = "LeaseList", "coordination.k8s.io/v1"
		require.NoError(t, json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{}).Encode(list, &buf))
		s.body = buf.Bytes()
		t.Logf("the tenant's lease list: %d MiB", len(s.body)>>20)
	})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	result, err := f.p.cycle(context.Background())
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrAnswerTooLarge)
	assert.Equal(t, resultInconclusive, result)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(40<<20), "the answer is cut off at the byte bound, not decoded")
	assert.Contains(t, <-f.recorder.Events, "ShootAnswerTooLarge")
	_, started := f.flowStarted()
	assert.False(t, started)
}

func TestTooManyItemsIsInconclusive(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.shoot.set(func(s *lyingShoot) { s.extra = 1000 }) // 1005 leases, over MaxItems 1000, under MaxBytes
	result, err := f.p.cycle(context.Background())
	require.ErrorIs(t, err, ErrAnswerTooLarge)
	assert.Equal(t, resultInconclusive, result)
	for range 3 {
		f.p.run(context.Background())
	}
	assert.Len(t, f.recorder.Events, 1, "one Event per run of failures, not one per cycle")
}

func TestThrottlingNeverShortensThePeriod(t *testing.T) {
	for _, tt := range []struct {
		retryAfter string
		atLeast    time.Duration
	}{
		{"1", time.Duration(float64(time.Second) * 0.9)}, // probeInterval 1s, jitter 0.2: at least 0.9 s, and the 10 s floor
		{"25", 25 * time.Second},
		{"100000", 0},
	} {
		t.Run(tt.retryAfter, func(t *testing.T) {
			f := newCycleFixture(t, 3)
			f.shoot.set(func(s *lyingShoot) { s.retryAfter = tt.retryAfter })
			next := f.p.run(context.Background())
			assert.GreaterOrEqual(t, next, max(tt.atLeast, throttleBackoff))
			assert.LessOrEqual(t, next, maxRetryAfter(f.m.interval()), "a shoot cannot switch its probe off")
		})
	}
}

func TestProbeFailingWhileScaledDownIsReported(t *testing.T) {
	f := newCycleFixture(t, 3)
	// The dependents are down (at 0, marked) and the shoot answers nothing but 429.
	f.scaledDown(t)
	f.shoot.set(func(s *lyingShoot) { s.retryAfter = "1" })
	for range failingEventAfter - 1 {
		f.p.run(context.Background())
	}
	assert.Empty(t, f.recorder.Events)
	f.p.run(context.Background())
	f.p.run(context.Background())
	require.Len(t, f.recorder.Events, 1, "one Event per run of failures")
	assert.Contains(t, <-f.recorder.Events, "ProbeFailing")
}

func TestFirstRunWaitsInitialDelayWhereTheOriginalDid(t *testing.T) {
	f := newCycleFixture(t, 1)
	f.m.Config.InitialDelay = &metav1.Duration{Duration: 30 * time.Second}
	now := f.clk.Now()
	cluster := func(created time.Time) *unstructured.Unstructured {
		c := newCluster()
		c.SetName(cycleNS)
		c.SetCreationTimestamp(metav1.NewTime(created))
		return c
	}
	shoot := func(opType string, updated time.Time) *Shoot {
		return &Shoot{Status: ShootStatus{LastOperation: &LastOperation{Type: opType, State: LastOperationStateSucceeded, LastUpdateTime: &metav1.Time{Time: updated}}}}
	}
	old := now.Add(-time.Hour)
	tests := []struct {
		name    string
		cluster *unstructured.Unstructured
		shoot   *Shoot
		paused  bool
		want    time.Time // zero: within the takeover jitter
	}{
		{"a new cluster", cluster(now.Add(-10 * time.Second)), shoot(LastOperationTypeCreate, now.Add(-10*time.Second)), false, now.Add(20 * time.Second)},
		{"a create that just succeeded", cluster(now.Add(-10 * time.Minute)), shoot(LastOperationTypeCreate, now.Add(-5*time.Second)), false, now.Add(25 * time.Second)},
		{"a restore (migration) that just succeeded", cluster(old), shoot(LastOperationTypeRestore, now.Add(-time.Second)), false, now.Add(29 * time.Second)},
		{"a wake-up after this replica paused the probe", cluster(old), shoot(LastOperationTypeReconcile, old), true, now.Add(30 * time.Second)},
		{"a takeover or restart of a running shoot", cluster(old), shoot(LastOperationTypeReconcile, now), false, time.Time{}},
		{"an old restore", cluster(old), shoot(LastOperationTypeRestore, old), false, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.paused {
				f.m.pauseLocked(cycleNS, NotProbedHibernated)
			}
			got := f.m.firstRun(cycleNS, tt.cluster, tt.shoot)
			if tt.want.IsZero() {
				assert.False(t, got.Before(now))
				assert.Less(t, got.Sub(now), takeoverJitter)
				return
			}
			assert.Equal(t, tt.want, got)
			assert.NotContains(t, f.m.paused, cycleNS, "a pause is used once")
		})
	}
}

func TestAFlowInTheOtherDirectionReplacesTheRunningOne(t *testing.T) {
	f := newCycleFixture(t, 1)
	f.m.startFlow(cycleNS, scaler.Down, 1, scaler.Reason{})
	first := f.m.flows[cycleNS]
	f.m.startFlow(cycleNS, scaler.Down, 1, scaler.Reason{})
	assert.Same(t, first, f.m.flows[cycleNS], "the same direction keeps the running flow")
	f.m.startFlow(cycleNS, scaler.Up, 2, scaler.Reason{})
	dir, ok := f.flowStarted()
	require.True(t, ok)
	assert.Equal(t, scaler.Up, dir)
	assert.True(t, f.m.Flows.scheduled(cycleNS))
	f.m.stopFlow(cycleNS)
	_, ok = f.flowStarted()
	assert.False(t, ok)
	assert.False(t, f.m.Flows.scheduled(cycleNS))
}

// blockingLimiter never hands out a token: a scale budget that is used up. It counts the requests
// told to wait.
type blockingLimiter struct{ waits atomic.Int32 }

func (l *blockingLimiter) Reserve(time.Time, scaler.Direction, int) (time.Duration, func(time.Time)) {
	l.waits.Add(1)
	return time.Hour, nil
}

// A melted shoot whose scale flow cannot get a write through keeps being probed at its cadence, on a
// probe pool of a single worker: the flow holds no probe worker (nor a flow worker: it waits for its
// budget on the flow scheduler's clock).
func TestProbesKeepTheirCadenceWhileAFlowWaits(t *testing.T) {
	f := newCycleFixture(t, 5)
	limiter := &blockingLimiter{}
	f.m.Scaler.Limiter = limiter
	f.m.Scheduler = NewScheduler(f.clk, 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.m.Scheduler.Start(ctx) })
	wg.Go(func() { _ = f.m.Flows.Start(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	f.m.Scheduler.Schedule(cycleNS, f.clk.Now(), f.p.run)
	lists := func() int32 { return f.shoot.cached.Load() + f.shoot.consistent.Load() }
	step := func() {
		before, start := lists(), f.clk.Now()
		// The flow's wait for its budget is a timer too: step until the probe has run again.
		require.Eventually(t, func() bool {
			if lists() > before {
				return true
			}
			if f.clk.HasWaiters() && f.clk.Since(start) < 2*time.Second {
				f.clk.Step(100 * time.Millisecond)
			}
			return false
		}, 10*time.Second, time.Millisecond)
		require.LessOrEqual(t, f.clk.Since(start), 2*time.Second, "the probe runs within its longest jittered 1 s period")
	}
	require.Eventually(t, func() bool { return lists() == 1 }, 10*time.Second, time.Millisecond)
	for range 3 {
		step()
	}
	f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	require.Eventually(t, func() bool {
		step()
		return limiter.waits.Load() > 0
	}, 30*time.Second, time.Millisecond, "the scale-down flow started and waits for its budget")
	for range 5 {
		step() // the probe still runs every period
	}
	dir, ok := f.flowStarted()
	require.True(t, ok)
	assert.Equal(t, scaler.Down, dir)
}

// scaledDown sets the shoot's dependents to 0 replicas, marked, as a scale-down leaves them.
func (f *cycleFixture) scaledDown(t *testing.T) {
	for _, name := range cycleDependents {
		d := &appsv1.Deployment{}
		require.NoError(t, f.m.Scaler.Client.Get(context.Background(), client.ObjectKey{Namespace: cycleNS, Name: name}, d))
		d.Spec.Replicas = ptr.To[int32](0)
		d.Annotations = map[string]string{scaler.MeltdownProtectionAnnotation: "", scaler.ReplicasAnnotation: "1"}
		require.NoError(t, f.m.Scaler.Client.Update(context.Background(), d))
	}
}

// The watch cache freezes, then the kubelets die: the probe must not flip between the two sources
// for ever, and must never scale up.
func TestMeltdownBehindAStaleWatchCacheIsScaledDown(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.cycles(t, 3, 10*time.Second)
	f.shoot.set(func(s *lyingShoot) { s.staleAt = s.clk.Now() })
	f.cycles(t, 3, 10*time.Second)
	f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	results := f.cycles(t, 10, 10*time.Second)
	dir, started := f.flowStarted()
	require.True(t, started, "%v", results)
	assert.Equal(t, scaler.Down, dir)
	assert.NotContains(t, results, resultScaledUp)
}

// A new owner takes over a shoot its predecessor scaled down, during the meltdown, and its API
// server's watch cache has lost the node leases: a list without leases has no candidate with a lease,
// which alone would call for a scale-up. The consistent read that confirms it shows the leases, and no
// scale-up happens. (A stale cache cannot make a lease look younger than it is, so hidden leases are
// what the confirmation of a scale-up is for.)
func TestLeasesHiddenByAStaleCacheDoNotScaleUp(t *testing.T) {
	f := newCycleFixture(t, 5)
	f.scaledDown(t)
	f.shoot.set(func(s *lyingShoot) {
		s.meltedAt = s.clk.Now().Add(-time.Minute)
		s.hidden = true
	})
	results := f.cycles(t, 12, 10*time.Second)
	assert.NotContains(t, results, resultScaledUp, "%v", results)
	if dir, started := f.flowStarted(); started {
		assert.Equal(t, scaler.Down, dir)
	}
	assert.Positive(t, f.shoot.consistent.Load(), "the scale-up was confirmed")
}

// A failed read is apiserver_failed when the shoot's API server gave no answer, leases_failed when it
// answered.
func TestFailedReadLabels(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://shoot", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("listing nodes: %w", refused), resultAPIServer},
		{fmt.Errorf("listing node leases: %w", context.DeadlineExceeded), resultAPIServer},
		{fmt.Errorf("listing nodes: %w", apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no"))), resultLeases},
		{fmt.Errorf("listing node leases: %w", apierrors.NewInternalError(errors.New("etcd"))), resultLeases},
		{fmt.Errorf("listing node leases: %w", ErrAnswerTooLarge), resultLeases},
		{inconclusive{reason: reasonStaleAnswer}, resultLeases},
		{fmt.Errorf("listing node leases: %w", answeredError{errors.New("unexpected EOF")}), resultLeases},
		{fmt.Errorf("listing node leases: %w", answeredError{context.DeadlineExceeded}), resultLeases},
	} {
		assert.Equal(t, tt.want, failedRead(tt.err), "%v", tt.err)
	}
}

// A read the shoot's API server answered but the probe could not use counts as leases_failed, not as
// an API server that gave no answer: its answer did not decode, or came in an encoding it cannot count.
func TestAnAnswerThatCannotBeUsedIsLeasesFailed(t *testing.T) {
	for _, body := range []string{`{"kind": "LeaseList", "items": [`, "not json"} {
		t.Run(body, func(t *testing.T) {
			f := newCycleFixture(t, 5)
			f.shoot.set(func(s *lyingShoot) { s.body = []byte(body) })
			results := f.cycles(t, 1, time.Second)
			assert.Equal(t, []string{resultLeases}, results)
		})
	}
}
