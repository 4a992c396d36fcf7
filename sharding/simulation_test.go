package sharding

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// The deterministic simulation of the sharding protocol: members with their own clocks (offset and
// rate), caches that lag behind the store, an in-memory store with compare-and-swap, and faults
// injected at random from a seed — joins, graceful leaves, crashes, restarts under the same name,
// members cut off from the store, bursts of watch delay and failing writes. After every step it
// checks safety (no partition acted on by two members; a member acts only while the store names it
// holder); after each quiet period of D plus a few seconds it checks liveness (every partition held
// by its ring owner).

const (
	simPartitions    = 61
	simLeaseDuration = 15 * time.Second
	simRenewDeadline = 10 * time.Second
	simRetryPeriod   = 2 * time.Second
	simStep          = 200 * time.Millisecond
	simQuiet         = simLeaseDuration + 10*time.Second // a quiet period: D plus a few seconds
)

// protocolVariant builds a member's coordinator; the broken variants prove the checker can fail.
type protocolVariant struct {
	name string
	// neverFence makes members act on regardless of their member lease.
	neverFence bool
	// observedDuration is how long others wait before a lease counts as expired.
	observedDuration time.Duration
}

var correctProtocol = protocolVariant{name: "correct", observedDuration: simLeaseDuration}

// simNode is one member process (or its absence after a crash).
type simNode struct {
	name        string
	generation  int
	running     bool
	cutOff      bool
	cutOffUntil time.Time
	lag         time.Duration // how far its cache trails the store
	offset      time.Duration // clock offset from the simulation's time
	rate        float64       // clock rate
	clock       *clocktesting.FakeClock
	member      *leases.Member
	coordinator *Coordinator
	view        *cacheView
	nextRenew   time.Time
	nextRun     time.Time
	fenced      bool
	cancel      context.CancelFunc
}

// localNow is the node's clock reading at simulation time now.
func (n *simNode) localNow(start, now time.Time) time.Time {
	return start.Add(n.offset + time.Duration(float64(now.Sub(start))*n.rate))
}

type simulation struct {
	t       testing.TB
	seed    uint64
	rng     *rand.Rand
	variant protocolVariant
	store   *leasestest.Store
	start   time.Time
	now     time.Time
	step    int
	nodes   []*simNode
	nextID  int
	// acting records which member runs each partition's work, as the handlers see it.
	actingMu sync.Mutex
	acting   map[int]string
	failure  error
	// lastFault is the time of the last injected fault.
	lastFault time.Time
	// faults counts the injected faults by kind, and livenessChecks the quiet periods checked.
	faults         map[string]int
	livenessChecks int
}

func newSimulation(t testing.TB, seed uint64, variant protocolVariant) *simulation {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &simulation{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), variant: variant,
		store: leasestest.NewStore(), start: start, now: start, acting: map[int]string{}, faults: map[string]int{}}
	s.store.Now = func() time.Time { return s.now }
	return s
}

// fail records the first safety or liveness violation.
func (s *simulation) fail(format string, args ...any) {
	if s.failure == nil {
		s.failure = fmt.Errorf("seed %d, step %d, t=%s: %s", s.seed, s.step, s.now.Sub(s.start), fmt.Sprintf(format, args...))
	}
}

// writeFault fails a write when the node is cut off, and one write in a hundred at random.
func (s *simulation) writeFault(n *simNode) error {
	if n.cutOff {
		return errCutOff
	}
	if s.rng.IntN(100) == 0 {
		return errors.New("injected write failure")
	}
	return nil
}

// simHandler is a node's partition work: it records in the simulation who acts on what.
type simHandler struct {
	sim  *simulation
	node string
}

func (h simHandler) Acquired(_ context.Context, p int, _ Takeover) {
	h.sim.actingMu.Lock()
	defer h.sim.actingMu.Unlock()
	if other, ok := h.sim.acting[p]; ok && other != h.node {
		h.sim.fail("partition %d acted on by %s and %s at once", p, other, h.node)
	}
	h.sim.acting[p] = h.node
}

func (h simHandler) Released(p int) {
	h.sim.actingMu.Lock()
	defer h.sim.actingMu.Unlock()
	if h.sim.acting[p] == h.node {
		delete(h.sim.acting, p)
	}
}

// neverFenced is the broken liveness of a member that acts on without a renewed lease.
type neverFenced struct{}

func (neverFenced) Fenced(time.Time) bool { return false }

func (neverFenced) FenceAt() time.Time { return time.Now().Add(time.Hour) }

func (neverFenced) UnfencedAt() time.Time { return time.Time{} }

func (neverFenced) ViewStale(string, time.Time, time.Duration) bool { return false }

// boot starts a node's process: a new incarnation with an empty cache.
func (s *simulation) boot(n *simNode) {
	n.generation++
	n.running, n.fenced = true, true
	n.clock = clocktesting.NewFakeClock(n.localNow(s.start, s.now))
	n.view = newCacheView(s.store)
	conn := memberConn{sim: s, node: n}
	incarnation := fmt.Sprintf("%s/%d", n.name, n.generation)
	n.member = &leases.Member{Store: conn, Group: "sim", Name: n.name, Incarnation: incarnation,
		LeaseDuration: simLeaseDuration, RenewDeadline: simRenewDeadline, RetryPeriod: simRetryPeriod, Clock: n.clock}
	var liveness Liveness = n.member
	if s.variant.neverFence {
		liveness = neverFenced{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.coordinator = NewCoordinator(ctx, Config{
		Group: "sim", Member: n.name, Incarnation: incarnation,
		Ring:          RingConfig{PartitionCount: simPartitions, ReplicationFactor: DefaultReplicationFactor, LoadBound: DefaultLoadBound},
		LeaseDuration: s.variant.observedDuration, RetryPeriod: simRetryPeriod, WriteConcurrency: 1,
	}, conn, n.view, liveness, n.clock, logr.Discard(), simHandler{sim: s, node: n.name})
	n.nextRenew, n.nextRun = n.clock.Now(), n.clock.Now()
}

// crash ends a node's process at once: its work is gone with it.
func (s *simulation) crash(n *simNode) {
	n.running = false
	n.cancel()
	s.actingMu.Lock()
	for p, m := range s.acting {
		if m == n.name {
			delete(s.acting, p)
		}
	}
	s.actingMu.Unlock()
}

// leave shuts a node down gracefully, as the Runner does: all work stopped, then the member lease
// released.
func (s *simulation) leave(n *simNode) {
	lost, _ := n.coordinator.Leave(context.Background(), false)
	_ = n.member.Release(context.Background(), n.clock.Now(), leases.Leave{StateLost: lost})
	s.crash(n)
}

// tick runs one step of one node: its cache catches up, it renews when due, fences when its renew
// deadline has passed, and reconciles when its cache changed or its requeue time has come.
func (s *simulation) tick(n *simNode) {
	ctx := context.Background()
	local := n.localNow(s.start, s.now)
	n.clock.SetTime(local)
	if n.cutOff && !s.now.Before(n.cutOffUntil) {
		n.cutOff = false
	}
	changed := !n.cutOff && n.view.catchUp(s.now.Add(-n.lag))
	if !local.Before(n.nextRenew) {
		_ = n.member.Renew(ctx, local)
		n.nextRenew = local.Add(simRetryPeriod)
	}
	if fenced := n.member.Fenced(local); fenced && !n.fenced && !s.variant.neverFence {
		n.coordinator.Fence()
	}
	n.fenced = n.member.Fenced(local)
	if changed || !local.Before(n.nextRun) {
		requeue, _ := n.coordinator.Reconcile(ctx)
		n.nextRun = local.Add(requeue)
	}
}

// checkSafety checks that every member acts only on partitions whose stored lease names it.
func (s *simulation) checkSafety() {
	for _, n := range s.nodes {
		if !n.running {
			continue
		}
		for _, p := range n.coordinator.Held() {
			if h := s.store.Holder(leases.PartitionLeaseName("sim", p)); h != n.name {
				s.fail("%s acts on partition %d whose lease names %q", n.name, p, h)
			}
		}
	}
}

// checkLiveness checks that every partition's work runs on its owner on the ring of the running,
// connected members, and nowhere else.
func (s *simulation) checkLiveness() {
	var live []string
	for _, n := range s.nodes {
		if n.running && !n.cutOff {
			live = append(live, n.name)
		}
	}
	if len(live) == 0 {
		return
	}
	ring, err := NewRing(live, RingConfig{PartitionCount: simPartitions, ReplicationFactor: DefaultReplicationFactor, LoadBound: DefaultLoadBound})
	if err != nil {
		s.fail("ring: %v", err)
		return
	}
	for p := 0; p < simPartitions; p++ {
		if got := s.acting[p]; got != ring.Owner(p) {
			s.fail("%s after the last fault, partition %d is acted on by %q, want its ring owner %q",
				s.now.Sub(s.lastFault), p, got, ring.Owner(p))
			return
		}
	}
}

// advance runs the simulation for d, injecting faults when chaos is on.
func (s *simulation) advance(d time.Duration, chaos bool) {
	for end := s.now.Add(d); s.now.Before(end) && s.failure == nil; s.now = s.now.Add(simStep) {
		s.step++
		if chaos {
			s.injectFault()
		}
		for _, i := range s.rng.Perm(len(s.nodes)) {
			if n := s.nodes[i]; n.running {
				s.tick(n)
			}
		}
		s.checkSafety()
	}
}

// addNode creates and boots a member with a clock of its own.
func (s *simulation) addNode() *simNode {
	n := &simNode{name: fmt.Sprintf("dwd-%d", s.nextID), rate: 1 + (s.rng.Float64()-0.5)*0.002,
		offset: time.Duration(s.rng.IntN(20_000)-10_000) * time.Millisecond}
	s.nextID++
	s.nodes = append(s.nodes, n)
	s.boot(n)
	return n
}

// injectFault picks at most one fault per step, each rare enough that the protocol has time to act.
func (s *simulation) injectFault() {
	running := s.pick(func(n *simNode) bool { return n.running })
	stopped := s.pick(func(n *simNode) bool { return !n.running })
	var fault string
	switch r := s.rng.IntN(1000); {
	case r < 3 && len(s.nodes) < 9:
		fault = "join"
		s.addNode()
	case r < 6 && running != nil && s.runningCount() > 2:
		fault = "leave"
		s.leave(running)
	case r < 9 && running != nil && s.runningCount() > 2:
		fault = "crash"
		s.crash(running)
	case r < 14 && stopped != nil:
		fault = "restart"
		s.boot(stopped)
	case r < 18 && running != nil && !running.cutOff:
		fault = "cut off"
		running.cutOff = true
		running.cutOffUntil = s.now.Add(time.Duration(1+s.rng.IntN(40)) * time.Second)
	case r < 24 && running != nil:
		fault = "long watch delay"
		running.lag = time.Duration(s.rng.IntN(20_000)) * time.Millisecond
	case r < 40 && running != nil:
		fault = "short watch delay"
		running.lag = time.Duration(s.rng.IntN(1_000)) * time.Millisecond
	default:
		return
	}
	s.faults[fault]++
	s.lastFault = s.now
}

func (s *simulation) pick(match func(*simNode) bool) *simNode {
	var candidates []*simNode
	for _, n := range s.nodes {
		if match(n) {
			candidates = append(candidates, n)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	return candidates[s.rng.IntN(len(candidates))]
}

func (s *simulation) runningCount() int {
	count := 0
	for _, n := range s.nodes {
		if n.running {
			count++
		}
	}
	return count
}

// heal ends every cut-off and watch delay, as at the start of a quiet period.
func (s *simulation) heal() {
	for _, n := range s.nodes {
		n.cutOff, n.lag = false, time.Duration(s.rng.IntN(300))*time.Millisecond
	}
	s.lastFault = s.now
}

// run plays rounds of chaos, each followed by a quiet period after which liveness is checked, until
// the simulation has taken at least steps steps or found a violation.
func (s *simulation) run(steps int) error {
	for range 5 {
		s.addNode()
	}
	for s.step < steps && s.failure == nil {
		s.advance(time.Duration(30+s.rng.IntN(90))*time.Second, true)
		s.heal()
		s.advance(simQuiet, false)
		if s.failure == nil {
			s.checkLiveness()
			s.livenessChecks++
		}
	}
	for _, n := range s.nodes {
		if n.running {
			n.cancel()
		}
	}
	return s.failure
}

func TestSimulatedProtocolKeepsItsInvariant(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6}
	steps := 2_000
	if testing.Short() {
		seeds, steps = seeds[:2], 1_000
	}
	total, checks, faults := 0, 0, map[string]int{}
	for _, seed := range seeds {
		s := newSimulation(t, seed, correctProtocol)
		if err := s.run(steps); err != nil {
			t.Fatalf("%v (reproduce with seed %d)", err, seed)
		}
		total, checks = total+s.step, checks+s.livenessChecks
		for k, v := range s.faults {
			faults[k] += v
		}
	}
	t.Logf("%d steps over %d seeds without a violation; %d liveness checks; faults: %v", total, len(seeds), checks, faults)
}

func TestSimulationCatchesBrokenProtocols(t *testing.T) {
	for _, variant := range []protocolVariant{
		{name: "no self-fencing", neverFence: true, observedDuration: simLeaseDuration},
		{name: "takeover before the holder fences", observedDuration: simRenewDeadline / 2},
	} {
		t.Run(variant.name, func(t *testing.T) {
			caught := 0
			for seed := uint64(1); seed <= 6; seed++ {
				if err := newSimulation(t, seed, variant).run(4_000); err != nil {
					caught++
					t.Logf("caught: %v", err)
				}
			}
			if caught == 0 {
				t.Fatalf("the checker found no violation of the broken protocol %q in 6 seeds", variant.name)
			}
		})
	}
}
