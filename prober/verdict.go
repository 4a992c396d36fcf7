package prober

import (
	"time"

	"github.com/sharded-dwd/dependency-watchdog/scaler"
)

// verdict is the latest scaling verdict of a shoot's probe: the direction its leases call for, and
// since when. epoch changes with the direction only, so that a flow knows whether the verdict it acts
// on still stands; at is when a probe last gave it.
type verdict struct {
	dir   scaler.Direction // 0: none yet
	epoch uint64
	at    time.Time
}

// verdictTTL is how long a verdict stands without a probe that repeats it: the longest jittered
// period plus a cycle deadline. A flow whose verdict has not been repeated for that long (its probes
// fail, or decide nothing) writes nothing more: no write on doubt.
func (m *Manager) verdictTTL() time.Duration {
	return time.Duration(float64(m.interval())*(1+*m.Config.BackoffJitterFactor/2)) + m.cycleDeadline()
}

// publish records the verdict of a probe of ns in direction dir and returns its epoch. A flow of ns in
// the other direction ends at once, whether or not it has written (its step in flight is waited for,
// and the budget it reserved given back): the state on the resources lets the opposite flow undo
// what it did.
func (m *Manager) publish(ns string, dir scaler.Direction) uint64 {
	m.flowMu.Lock()
	if m.verdicts == nil {
		m.verdicts = map[string]verdict{}
	}
	v := m.verdicts[ns]
	if v.dir != dir {
		v.dir, v.epoch = dir, v.epoch+1
	}
	v.at = m.Clock.Now()
	m.verdicts[ns] = v
	running, ok := m.flows[ns]
	stale := ok && running.Direction() != dir
	m.flowMu.Unlock()
	if stale {
		m.Log.Info("Ending scale flow: the shoot's verdict changed", "namespace", ns, "from", running.Direction().String(), "to", dir.String())
		m.endFlow(ns, running)
	}
	return v.epoch
}

// current tells whether the verdict of ns in direction dir with epoch still stands.
func (m *Manager) current(ns string, dir scaler.Direction, epoch uint64) bool {
	v, ok := m.standingVerdict(ns)
	return ok && v.dir == dir && v.epoch == epoch
}

// standing tells whether the verdict of ns is dir and still stands, whatever its epoch.
func (m *Manager) standing(ns string, dir scaler.Direction) bool {
	v, ok := m.standingVerdict(ns)
	return ok && v.dir == dir
}

// standingVerdict returns the verdict of ns if it still stands (verdictTTL).
func (m *Manager) standingVerdict(ns string) (verdict, bool) {
	m.flowMu.Lock()
	v, ok := m.verdicts[ns]
	m.flowMu.Unlock()
	return v, ok && m.Clock.Since(v.at) <= m.verdictTTL()
}

// forgetVerdict drops the verdict of ns, whose probe stopped here: no flow of it writes any more.
func (m *Manager) forgetVerdict(ns string) {
	m.flowMu.Lock()
	delete(m.verdicts, ns)
	m.flowMu.Unlock()
}
