package prober

import (
	"encoding/json"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/leases"
)

// HandoverKey is the partition lease annotation in which a releasing replica hands over how long
// before the release each shoot of the partition was last probed, so that the next holder probes
// the longest unprobed first. Ages are durations on the releasing replica's clock: clock offsets
// between replicas do not matter.
const HandoverKey = leases.HandoverAnnotationPrefix + "prober"

// overdueRun is when a shoot handed over age after its last probe first runs here: at once, ordered
// by age on the scheduler's heap (the longest unprobed first) but never more than a few
// milliseconds in the past, so that the probe lag metric does not count the handover.
func overdueRun(now time.Time, age time.Duration) time.Time {
	return now.Add(-age / 1000)
}

// keepAgeLocked records how long ago the stopped probe of ns was last run, for HandoverState;
// m.mu must be held, and the probe's run in flight has been waited for.
func (m *Manager) keepAgeLocked(p int, ns string, probe *shootProbe) {
	if probe.st.lastRun.IsZero() {
		return
	}
	if m.released == nil {
		m.released = map[int]map[string]time.Duration{}
	}
	if m.released[p] == nil {
		m.released[p] = map[string]time.Duration{}
	}
	m.released[p][ns] = m.Clock.Since(probe.st.lastRun)
}

// RunAhead probes, before the work of partitions stops here at stop (an announced leave), their
// shoots whose next probe falls due within window after it, spread over the time left until
// aheadMargin before the stop: their next holders start a moment after the stop, and these would
// wait for them. Those due within aheadMargin before the stop are brought forward too. A probe that
// has not run yet keeps its time (Scheduler.RunAhead): it may wait out the initial delay of a control
// plane coming up.
func (m *Manager) RunAhead(partitions []int, stop time.Time, window time.Duration) {
	n := m.Scheduler.RunAhead(stop.Add(-aheadMargin), window+aheadMargin, m.namespacesIn(partitions))
	if n > 0 {
		m.Log.Info("Probing ahead of a leave the shoots due right after it", "shoots", n, "partitions", len(partitions),
			"stop", stop.UTC().Format(time.RFC3339Nano), "window", window.String())
	}
}

// namespacesIn returns the namespaces of partitions that have a probe or a paused one here.
func (m *Manager) namespacesIn(partitions []int) map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := map[string]bool{}
	for _, p := range partitions {
		for ns := range m.byPartition[p] {
			in[ns] = true
		}
	}
	return in
}

// aheadMargin is how long before the stop the probes RunAhead brings forward are started by: a probe
// that starts in the last moments before the stop, or late in a burst of them, may be cut by it.
const aheadMargin = time.Second

// AdvisoryStateKey makes the probe ages advisory state: a departing replica does not write a
// partition lease for them alone (see sharding.AdvisoryStateHandler).
func (m *Manager) AdvisoryStateKey() string { return HandoverKey }

// HandoverState hands the next holder of released partition p the ages of its shoots' last probes.
func (m *Manager) HandoverState(p int) (string, string) {
	m.mu.Lock()
	ages := m.released[p]
	delete(m.released, p)
	m.mu.Unlock()
	if len(ages) == 0 {
		return HandoverKey, ""
	}
	millis := make(map[string]int64, len(ages))
	for ns, age := range ages {
		millis[ns] = age.Milliseconds()
	}
	data, err := json.Marshal(millis)
	if err != nil {
		return HandoverKey, ""
	}
	return HandoverKey, string(data)
}

// takeOverdue records the ages of partition p's shoots: those handed over in state, else those this
// replica kept when it stopped the partition itself (a resume after a fence). Unreadable state is
// ignored: the shoots then start after the usual jitter.
func (m *Manager) takeOverdue(p int, state string) {
	var millis map[string]int64
	if state != "" {
		if err := json.Unmarshal([]byte(state), &millis); err != nil {
			m.Log.Error(err, "Ignoring unreadable probe ages handed over", "partition", p)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := m.released[p]
	delete(m.released, p)
	if m.overdue == nil {
		m.overdue = map[string]time.Duration{}
	}
	for ns, age := range kept {
		m.overdue[ns] = age
	}
	for ns, ms := range millis {
		if ms >= 0 && m.Ownership.Partition(ns) == p {
			m.overdue[ns] = time.Duration(ms) * time.Millisecond
		}
	}
}

// dropHanded forgets what was handed over (or kept) for partition p's shoots whose probe did not
// start: their probe ages and their node lease sightings.
func (m *Manager) dropHanded(p int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dropPartition(m.overdue, m.Ownership, p)
	dropPartition(m.handedSeen, m.Ownership, p)
}

// dropPartition deletes the entries of partition p's namespaces from byNamespace.
func dropPartition[V any](byNamespace map[string]V, own interface{ Partition(string) int }, p int) {
	for ns := range byNamespace {
		if own.Partition(ns) == p {
			delete(byNamespace, ns)
		}
	}
}
