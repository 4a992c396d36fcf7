package prober

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// throttleBackoff is the least a shoot is left alone after its API server answered 429.
const throttleBackoff = 10 * time.Second

// failingEventAfter is how many cycles in a row a probe must fail, while the shoot's dependents are
// scaled down, before it says so with a Warning Event.
const failingEventAfter = 3

// jitterAround spreads the period between probes uniformly over interval × [1 − factor/2, 1 + factor/2]
// (r in [0, 1) picks the point), so that the mean period is the configured probeInterval and the
// longest is interval × (1 + factor/2): 11 s for the defaults, which bounds how long an outage goes
// unseen. The original jitters upwards only, to interval × (1 + factor). The period never falls below
// a tenth of the interval, whatever the factor.
func jitterAround(interval time.Duration, factor, r float64) time.Duration {
	low := max(1-factor/2, 0.1)
	high := 1 + factor/2
	return time.Duration(float64(interval) * (low + (high-low)*r))
}

// shootProbe probes one shoot namespace: its API server, then its node leases; it starts a scale flow
// when the leases call for one that the cached Deployments show is needed. Its fields after spec are
// used by its runs only, which never overlap.
type shootProbe struct {
	m         *Manager
	namespace string
	spec      ProbeSpec
	// st is the probe's memory, kept across a restart with a new spec (the same pointer).
	st *probeState
}

// probeState is what a shoot's probe remembers between its cycles. Only the probe's runs use it, and
// the scheduler never runs two of them at once, also across a restart that swaps the job.
type probeState struct {
	// lastRun is when the last cycle began.
	lastRun time.Time
	// seen is what the probe saw of each candidate's node lease (see JudgeLease), and lastSent when it
	// sent the lease request of the read seen was last updated from.
	seen     map[string]Sighting
	lastSent time.Time
	// nodesKnown says a renewal was seen, so that nodeLag, the most the kubelets' clocks were seen
	// running behind this replica's (NodeClockLag) since lagAt, means something.
	nodesKnown bool
	nodeLag    time.Duration
	lagAt      time.Time
	// consistentLeft is how many more cycles read consistently, after the shoot's API server was
	// caught answering from a stale watch cache.
	consistentLeft int
	// failures counts the cycles in a row that failed; failingReported is set once the Warning Event
	// of the current run of failures was recorded.
	failures        int
	failingReported bool
	// tooLargeReported is set once the Warning Event of an oversized answer was recorded in the current
	// run of failures.
	tooLargeReported bool
	// recheckAt is when the last cycle's leases could first decide a scale-down (Decision.RecheckAt;
	// zero: none): the next cycle runs then if that is before the period is over.
	recheckAt time.Time
	// nodes are the shoot's Nodes as the last read of them showed them (slimNode), sent at nodesRead
	// (zero: none kept). A cycle decides on them instead of reading the Nodes again only while they
	// cannot change its decision (nodesSuffice, errNodesKept).
	nodes     []corev1.Node
	nodesRead time.Time
	// onKept is set when the last decision was made on the Nodes kept.
	onKept bool
	// machines are what the last list of the shoot's Machines showed (read only: a cycle may decide on
	// them again), at the generation machinesGen of MachineChanges; kept only when machinesKept.
	machines     []MachineInfo
	machinesGen  uint64
	machinesKept bool
}

// nodesMaxAge is, in probe intervals, how long a probe decides on the Nodes it read before: a change
// of a node that would only move the moment of a recheck is seen within it.
const nodesMaxAge = 10

// minRecheck is the least time between two cycles of a probe that its leases call earlier than the
// period: it bounds the extra reads of a shoot whose leases stopped.
const minRecheck = time.Second

// run is one probe cycle; it returns when the next should start.
func (p *shootProbe) run(ctx context.Context) time.Duration {
	p.st.lastRun = p.m.Clock.Now()
	next := p.m.period()
	result, err := p.cycle(ctx)
	probesTotal.WithLabelValues(result).Inc()
	if err == nil {
		lastSuccess.WithLabelValues(p.namespace).Set(float64(p.st.lastRun.UnixNano()) / 1e9)
	}
	if ctx.Err() != nil && err != nil {
		return next
	}
	p.track(ctx, result, err)
	if result == resultThrottled {
		return max(next, p.m.interval(), throttleBackoff, retryAfter(err, p.m.interval()))
	}
	return p.recheck(ctx, next, err == nil)
}

// downRecheck is the mean wait between two cycles of a probe whose shoot is scaled down, when the
// probe interval is longer: the kubelets' node lease renew interval (a quarter of the node lease's
// 40 s), the soonest a recovery can show in the leases. At Gardener's 30 s interval a shoot whose
// kubelets reach their API server again is read, and scaled up, within about 10 s rather than a
// period; at 10 s or less nothing changes.
const downRecheck = 10 * time.Second

// recheck shortens the period next when the leases could decide a scale-down before it is over: the
// next cycle runs when the expiry threshold is crossed (at least minRecheck from now), so that a
// meltdown is found at the rule's moment plus a round trip, not at the next tick. After a cycle that
// read the shoot (read), while the shoot is scaled down, it runs after about downRecheck instead, so
// that the recovery is found as soon as the kubelets renew; a shoot that cannot be read is read at
// its period. Such early runs are counted.
func (p *shootProbe) recheck(ctx context.Context, next time.Duration, read bool) time.Duration {
	wait, early := nextRun(next, p.m.Clock.Now(), p.st.recheckAt)
	if soon := p.m.downPeriod(); read &&
		p.m.interval() > downRecheck && wait > soon && p.scaledDown(ctx) {
		wait, early = soon, true
	}
	if early {
		earlyRuns.Inc()
	}
	return wait
}

// scaledDown tells whether the shoot is scaled down or on its way there: its verdict is a scale-down,
// or one of its dependents carries the meltdown marker (a scale-down by an earlier owner or process).
func (p *shootProbe) scaledDown(ctx context.Context) bool {
	if p.m.standing(p.namespace, scaler.Down) {
		return true
	}
	melted, err := p.m.Scaler.Melted(ctx, p.namespace)
	return err == nil && melted
}

// nextRun is the wait until the next cycle of a probe whose period is next, at now, when its leases
// could first decide a scale-down at recheckAt (zero: never): that moment, at least minRecheck from
// now, when it comes before the period is over (early).
func nextRun(next time.Duration, now, recheckAt time.Time) (wait time.Duration, early bool) {
	if recheckAt.IsZero() {
		return next, false
	}
	if wait = max(recheckAt.Sub(now), minRecheck); wait >= next {
		return next, false
	}
	return wait, true
}

// retryAfter is the Retry-After of a 429 answer, 0 when none was given, and at most maxRetryAfter (a
// shoot cannot switch its probe off).
func retryAfter(err error, interval time.Duration) time.Duration {
	seconds, ok := apierrors.SuggestsClientDelay(err)
	if !ok || seconds <= 0 {
		return 0
	}
	return min(time.Duration(seconds)*time.Second, maxRetryAfter(interval))
}

// maxRetryAfter is the longest Retry-After honoured: ten probe intervals, and at least two minutes.
func maxRetryAfter(interval time.Duration) time.Duration { return max(10*interval, 2*time.Minute) }

// track logs a change between succeeding and failing at info level, and records a Warning Event
// once a probe has failed failingEventAfter cycles in a row while the shoot's dependents are scaled
// down: nothing will scale them up while the probe cannot see the shoot.
func (p *shootProbe) track(ctx context.Context, result string, err error) {
	log := p.m.Log.WithValues("namespace", p.namespace)
	if err == nil {
		if p.st.failures > 0 {
			log.Info("Probe succeeds again", "failedCycles", p.st.failures, "result", result)
		}
		p.st.failures, p.st.failingReported, p.st.tooLargeReported = 0, false, false
		return
	}
	p.st.failures++
	if p.st.failures == 1 {
		log.Info("Probe failing", "result", result, "error", err.Error())
	} else {
		log.V(1).Info("Probe failed", "result", result, "failedCycles", p.st.failures, "error", err.Error())
	}
	if p.st.failures < failingEventAfter || p.st.failingReported {
		return
	}
	if down, _ := p.m.Scaler.NeedsScaling(ctx, p.namespace, scaler.Up); down {
		p.st.failingReported = true
		p.m.shootEvent(p.namespace, corev1.EventTypeWarning, "ProbeFailing",
			fmt.Sprintf("The dependents are scaled down and the probe failed %d cycles in a row (%s): nothing scales them up until it succeeds. Last error: %v", p.st.failures, result, err))
	}
}

// cycle runs the probes, within the cycle deadline, and returns the result label and the error that
// ended the cycle, if any.
func (p *shootProbe) cycle(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.m.cycleDeadline())
	defer cancel()
	shoot, err := p.client(ctx)
	if err != nil {
		return resultKubeconfig, err
	}
	// The seed's Machines first (a cache read), so that nothing waits on the seed while holding shoot
	// data whose age is being measured.
	machines, err := p.machines(ctx)
	if err != nil {
		return resultLeases, err
	}
	// No GET /version first, as the original sends: the lists need the API server as much, and a
	// read that fails decides nothing either way.
	result, err := p.decideAndAct(ctx, shoot, machines)
	if errors.Is(err, errNodesKept) {
		p.st.nodesRead = time.Time{}
		result, err = p.decideAndAct(ctx, shoot, machines)
	}
	return result, err
}

// errNodesKept ends a decision on the Nodes kept that the dependents need Nodes read now for: a
// scale-up is due, or may be on fewer candidates (see nodesSuffice).
var errNodesKept = errors.New("decided on the Nodes kept while the dependents need a scale-up")

// decideAndAct reads the shoot, decides and acts.
func (p *shootProbe) decideAndAct(ctx context.Context, shoot *ShootClient, machines []MachineInfo) (string, error) {
	start := p.m.Clock.Now()
	p.st.recheckAt = time.Time{}
	decision, err := p.decideConfirmed(ctx, shoot, machines)
	probeDuration.WithLabelValues("leases").Observe(p.m.Clock.Since(start).Seconds())
	if err != nil {
		return p.failure(failedRead(err), err)
	}
	expiredFraction.WithLabelValues(p.namespace).Set(decision.ExpiredFraction)
	p.st.recheckAt = decision.RecheckAt
	return p.act(ctx, decision)
}

// failedRead labels a failed read of the shoot: apiserver_failed when its API server gave no answer (it
// is down or out of reach: the original's GET /version would have failed too), leases_failed when it
// answered (an error status, or an answer the probe could not read, decode or hold).
func failedRead(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) || errors.As(err, new(answeredError)) || errors.Is(err, ErrAnswerTooLarge) || errors.As(err, new(inconclusive)) {
		return resultLeases
	}
	return resultAPIServer
}

// failure labels an error: 429 answers as throttled, inconclusive reads as inconclusive.
func (p *shootProbe) failure(result string, err error) (string, error) {
	var inc inconclusive
	switch {
	case apierrors.IsTooManyRequests(err):
		return resultThrottled, err
	case errors.Is(err, ErrAnswerTooLarge):
		inconclusiveTotal.WithLabelValues(reasonTooLarge).Inc()
		if p.st.tooLargeReported {
			return resultInconclusive, err
		}
		p.st.tooLargeReported = true
		p.m.Log.Info("Shoot answer too large", "namespace", p.namespace, "error", err.Error())
		p.m.shootEvent(p.namespace, corev1.EventTypeWarning, "ShootAnswerTooLarge",
			fmt.Sprintf("The shoot's API server answered more than the watchdog reads (--shoot-max-response-bytes, --shoot-max-response-items): %v. No scaling until it answers within the bounds.", err))
		return resultInconclusive, err
	case errors.As(err, &inc):
		inconclusiveTotal.WithLabelValues(inc.reason).Inc()
		return resultInconclusive, err
	}
	return result, err
}

// inconclusive is a read that cannot decide anything.
type inconclusive struct {
	reason string
	msg    string
}

func (e inconclusive) Error() string { return e.msg }

// Reasons of dwd_probe_inconclusive_total.
const (
	reasonTooLarge     = "too_large"     // an answer over the bounds
	reasonNotConfirmed = "not_confirmed" // a consistent read did not confirm a scale-down or a scale-up
	reasonStaleAnswer  = "stale_answer"  // renewTimes older than ones seen before
)

// consistentCycles is how many cycles a probe reads consistently after it caught its shoot's API
// server answering from a stale watch cache.
const consistentCycles = 10

// client returns the shoot client built from the cached kubeconfig Secret. A broken Secret is
// reported (log, Event on the Secret, metric) only when it changes, not on every cycle. The Secret is
// the cache's own (no deep copy every cycle): Clients.For and the report only read it.
func (p *shootProbe) client(ctx context.Context) (*ShootClient, error) {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: p.namespace, Name: p.m.Config.KubeConfigSecretName}
	if err := p.m.Reader.Get(ctx, key, secret, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("reading kubeconfig Secret %s: %w", key, err)
	}
	c, err := p.m.Clients.For(secret)
	if err != nil {
		p.m.reportBrokenSecret(secret, err)
	}
	return c, err
}

// decideConfirmed decides from the cheap reads (the API server's watch cache) and confirms what would
// act with consistent reads (resourceVersion unset) of the nodes and leases: a scale-down that the
// cache shows is still to be written, and a scale-up while the dependents are scaled down that rests
// on no renewal this read saw (a stale cache shows renewTimes older than they are, never younger, so
// a renewal it shows is real; what it can hide is leases). An action stands only when the decision on
// the consistent read agrees.
//
// A read that shows renewTimes older than seen before means the API server answers from a stale
// cache: the probe forgets what it saw. A confirmation that disagrees means the same, but the
// consistent read's sightings are kept (what they show is true). Either way the probe drops its idle
// connections (to be sent to another API server) and reads consistently for consistentCycles cycles;
// what those reads saw is kept when it goes back to cheap reads.
func (p *shootProbe) decideConfirmed(ctx context.Context, shoot *ShootClient, machines []MachineInfo) (Decision, error) {
	consistent := p.st.consistentLeft > 0
	if consistent {
		p.st.consistentLeft--
	}
	d, obs, err := p.decide(ctx, shoot, machines, consistent)
	if err != nil {
		return Decision{}, err
	}
	if d.Regressed > 0 {
		p.distrust(shoot, "renewTimes went back in time", true)
		return Decision{}, inconclusive{reason: reasonStaleAnswer,
			msg: fmt.Sprintf("%d node leases showed a renewTime older than one seen before", d.Regressed)}
	}
	if consistent || !p.confirms(ctx, d) {
		p.keep(obs)
		return d, nil
	}
	confirmed, obs, err := p.decide(ctx, shoot, machines, true)
	if err != nil {
		return Decision{}, fmt.Errorf("confirming %s: %w", d.Action, err)
	}
	p.keep(obs)
	if confirmed.Action != d.Action {
		p.distrust(shoot, "a consistent read disagreed", false)
		return Decision{}, inconclusive{reason: reasonNotConfirmed,
			msg: fmt.Sprintf("%s from the cached read (%d of %d leases expired) but %s from the consistent read (%d of %d)",
				d.Action, d.Expired, d.Candidates, confirmed.Action, confirmed.Expired, confirmed.Candidates)}
	}
	return confirmed, nil
}

// confirms tells whether a decision must be confirmed by a consistent read.
func (p *shootProbe) confirms(ctx context.Context, d Decision) bool {
	switch d.Action {
	case ScaleDown:
		needed, err := p.m.Scaler.NeedsScaling(ctx, p.namespace, scaler.Down)
		return err != nil || needed
	case ScaleUp:
		if d.Candidates > 0 && d.Renewed > 0 {
			return false
		}
		down, err := p.m.Scaler.NeedsScaling(ctx, p.namespace, scaler.Up)
		return err != nil || down
	}
	return false
}

// distrust switches the probe to consistent reads for consistentCycles cycles; after a regression it
// also forgets what it saw (forget).
func (p *shootProbe) distrust(shoot *ShootClient, why string, forget bool) {
	p.m.Log.Info("Shoot API server answers from a stale cache: reading consistently", "namespace", p.namespace,
		"why", why, "cycles", consistentCycles)
	if forget {
		p.forget()
	}
	p.st.consistentLeft = consistentCycles
	shoot.closeIdleConnections()
}

// forget drops what the probe saw of the leases and the clocks.
func (p *shootProbe) forget() {
	p.st.seen, p.st.lastSent, p.st.nodesKnown, p.st.nodeLag, p.st.lagAt = nil, time.Time{}, false, 0, time.Time{}
	p.st.nodes, p.st.nodesRead = nil, time.Time{}
}

// observation is what one read of the leases showed, for the probe to keep.
type observation struct {
	seen       map[string]Sighting
	sent       time.Time
	nodesKnown bool
	nodeLag    time.Duration
	lagAt      time.Time
}

// keep makes obs what the probe remembers.
func (p *shootProbe) keep(obs observation) {
	p.st.seen, p.st.lastSent, p.st.nodesKnown, p.st.nodeLag, p.st.lagAt = obs.seen, obs.sent, obs.nodesKnown, obs.nodeLag, obs.lagAt
}

// decide lists the shoot's nodes and node leases and decides; it returns what it saw for the probe to
// keep. The age of the leases is measured from the moment the lease request was sent, with the band of
// clock error taken off (AgeBand), and counts only when the clocks agree (ServerClockAgrees,
// NodeClockLag). A slow answer counts like any other: ages from the send time only look younger
// the slower it is, so it can delay a scale-down, never cause one; the request is bounded by the
// probe timeout.
//
// The Nodes are read with the leases when the read is consistent or the Nodes kept are older than
// nodesMaxAge probe intervals; otherwise the leases are judged over the Nodes kept, and the Nodes are
// read after all unless they could not make it a scale-down (nodesSuffice); act has them read for a
// scale-up (errNodesKept).
func (p *shootProbe) decide(ctx context.Context, shoot *ShootClient, machines []MachineInfo, consistent bool) (Decision, observation, error) {
	nodes, kept := p.st.nodes, !consistent && p.nodesKept()
	if !kept {
		var err error
		if nodes, err = p.readNodes(ctx, shoot, consistent); err != nil {
			return Decision{}, observation{}, err
		}
	}
	grace := p.spec.NodeMonitorGracePeriod
	sent := p.m.Clock.Now()
	leases, answer, err := shoot.NodeLeases(ctx, consistent)
	received := p.m.Clock.Now()
	if err != nil {
		return Decision{}, observation{}, fmt.Errorf("listing node leases: %w", err)
	}
	read := LeaseRead{Leases: leases, Sent: sent, Received: received}
	p.m.observeClockOffset(p.namespace, answer.Date, sent.Add(received.Sub(sent)/2))
	obs := observation{sent: sent, nodesKnown: p.st.nodesKnown, nodeLag: p.st.nodeLag, lagAt: p.st.lagAt}
	if lag, known := NodeClockLag(read, p.st.lastSent, p.st.seen); known {
		obs.nodesKnown = true
		obs.nodeLag, obs.lagAt = keepLag(obs.nodeLag, obs.lagAt, lag, sent)
	}
	read.TrustAge = ServerClockAgrees(read, answer.Date) && obs.nodesKnown && obs.nodeLag <= maxClockOffset
	read.Band = AgeBand(obs.nodeLag)
	fraction := *p.m.Config.NodeLeaseFailureFraction
	var d Decision
	d, obs.seen = DecideScaling(CandidateNodes(nodes, machines, p.spec), read, p.st.seen, grace, fraction)
	if kept && !p.nodesSuffice(d, nodes, leases) {
		if nodes, err = p.readNodes(ctx, shoot, false); err != nil {
			return Decision{}, observation{}, err
		}
		d, obs.seen = DecideScaling(CandidateNodes(nodes, machines, p.spec), read, p.st.seen, grace, fraction)
		kept = false
	}
	p.st.onKept = kept
	return d, obs, nil
}

// nodesKept tells whether the probe keeps Nodes read less than nodesMaxAge probe intervals ago.
func (p *shootProbe) nodesKept() bool {
	return !p.st.nodesRead.IsZero() && p.m.Clock.Since(p.st.nodesRead) < nodesMaxAge*p.m.interval()
}

// readNodes lists the shoot's Nodes and keeps what the probe decides on of them.
func (p *shootProbe) readNodes(ctx context.Context, shoot *ShootClient, consistent bool) ([]corev1.Node, error) {
	sent := p.m.Clock.Now()
	nodes, err := shoot.Nodes(ctx, consistent)
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	p.st.nodes = make([]corev1.Node, len(nodes))
	for i := range nodes {
		p.st.nodes[i] = slimNode(&nodes[i])
	}
	p.st.nodesRead = sent
	return p.st.nodes, nil
}

// nodesSuffice tells whether a decision over the Nodes kept is one the Nodes read now could not make
// a scale-down. The Machines are read fresh every cycle, so the Nodes read now can give other
// candidates only where a node came, went, or changed its annotation, labels or conditions. So the
// Nodes kept suffice when:
//   - every lease is of a Node kept: no node came;
//   - no Node kept is left out by a rule of its own (annotation, conditions, in-place update): such a
//     node may be a candidate by now, and its lease was not judged. So the candidates of the Nodes
//     read now are some of those kept;
//   - no lease of a candidate has expired: then none of fewer candidates has either, and no set of
//     them decides a scale-down.
//
// Fewer candidates could still make a scale-up none, or none a scale-up (one candidate left, or too
// few leases): act reads the Nodes when the dependents need a scale-up (errNodesKept). What else they
// could move is the moment of a recheck (Decision.RecheckAt); the first read that shows an expired
// lease reads them.
func (p *shootProbe) nodesSuffice(d Decision, nodes []corev1.Node, leases []coordinationv1.Lease) bool {
	if d.Expired > 0 {
		return false
	}
	names := make(map[string]struct{}, len(nodes))
	for i := range nodes {
		if excludedByNode(&nodes[i], p.spec) {
			return false
		}
		names[nodes[i].Name] = struct{}{}
	}
	for i := range leases {
		if _, ok := names[leases[i].Name]; !ok {
			return false
		}
	}
	return true
}

// keepLag returns the lag of the kubelets' clocks to keep, and since when, after a read at now showed
// lag: the most seen, until it is lagMemory old.
func keepLag(kept time.Duration, since time.Time, lag time.Duration, now time.Time) (time.Duration, time.Time) {
	if lag >= kept || now.Sub(since) > lagMemory {
		return lag, now
	}
	return kept, since
}

// machines reads the shoot's Machines from the seed cache, or returns those the probe read before
// when none of them has changed since (MachineChanges).
func (p *shootProbe) machines(ctx context.Context) ([]MachineInfo, error) {
	gen, known := p.m.MachineChanges.Generation(p.namespace)
	if known && p.st.machinesKept && p.st.machinesGen == gen {
		return p.st.machines, nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(MachineGVK.GroupVersion().WithKind("MachineList"))
	// Read only, into MachineInfo: the cache's own objects, not copies.
	if err := p.m.Reader.List(ctx, list, client.InNamespace(p.namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing machines: %w", err)
	}
	machines := make([]MachineInfo, 0, len(list.Items))
	for i := range list.Items {
		machines = append(machines, machineInfo(&list.Items[i]))
	}
	p.st.machines, p.st.machinesGen, p.st.machinesKept = machines, gen, known
	return machines, nil
}

// act publishes the decision as the shoot's latest verdict, which ends a flow in the other direction
// at once (written or not), and starts the scale flow the decision calls for when the cache shows it
// would change anything; the flow runs on the flow pool, not in this probe's turn, and writes only
// while the verdict stands. A healthy shoot also gets the replicas annotations the original left
// behind removed. A decision of None publishes nothing: no evidence either way.
//
// A decision on the Nodes kept that a scale-up would follow, or that fewer candidates could make
// one (None: one candidate left, or too few leases), ends with errNodesKept while the dependents need
// a scale-up: one read of the dependents decides it, so that no change of them between two reads
// starts a flow on Nodes kept.
func (p *shootProbe) act(ctx context.Context, d Decision) (string, error) {
	dir, result := scaler.Up, resultScaledUp
	switch d.Action {
	case ScaleDown:
		dir, result = scaler.Down, resultScaledDown
	case ScaleUp:
	default:
		if p.st.onKept {
			if needs, err := p.m.Scaler.NeedsOf(ctx, p.namespace, scaler.Up); err == nil && needs.Scaling {
				return resultNoDecision, errNodesKept
			}
		}
		return resultNoDecision, nil
	}
	needs, err := p.m.Scaler.NeedsOf(ctx, p.namespace, dir)
	if err == nil && dir == scaler.Up && needs.Scaling && p.st.onKept {
		return resultNoDecision, errNodesKept // before the verdict: the Nodes read now decide it
	}
	epoch := p.m.publish(p.namespace, dir)
	if err != nil {
		return resultScaleFailed, err
	}
	if needs.Cleanup {
		p.cleanup(ctx)
	}
	if !needs.Scaling {
		return resultHealthy, nil
	}
	why := scaler.Reason{Message: fmt.Sprintf("%d of %d candidate node leases expired", d.Expired, d.Candidates), ExpiredFraction: d.ExpiredFraction}
	p.m.startFlow(p.namespace, dir, epoch, why)
	return result, nil
}

// cleanup removes replicas annotations left on running dependents (by the original, which never
// removed them), without a scale flow. It is best effort: a failure is logged and tried again on the
// next healthy probe, and never keeps a scale-up from starting.
func (p *shootProbe) cleanup(ctx context.Context) {
	err := p.m.Scaler.Cleanup(ctx, p.namespace)
	if err != nil && !errors.Is(err, scaler.ErrRefused) { // a refusal was logged by the Scaler
		p.m.Log.Info("Removing leftover replicas annotations failed", "namespace", p.namespace, "error", err.Error())
	}
}
