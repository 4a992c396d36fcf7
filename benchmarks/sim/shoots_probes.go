package sim

import (
	"slices"
	"time"
)

// ProbeStats is what a shoot's API server saw of its probes. A probe is a list of the Nodes or of the
// node Leases: every dwd probe cycle that reaches the shoot sends one of them first (the Nodes when it
// reads them, then the Leases unless the Nodes failed; again, milliseconds apart, when it confirms a
// decision with a consistent read), and nothing else asks for them. So a cycle whose Node list fails
// is a probe too. The window of MaxGap and Probers starts at
// the last MarkProbes (or when the shoot was added).
type ProbeStats struct {
	// Last is when the last probe arrived, before the mark or since.
	Last time.Time
	// MaxGap is the longest time between two probes in a row, by any caller, of which the second
	// arrived since the mark: a gap that spans the mark counts whole.
	MaxGap time.Duration
	// MaxGapEnd is when the probe that closed MaxGap arrived; MaxGapFrom and MaxGapTo are the callers
	// of the probes before and after the gap.
	MaxGapEnd            time.Time
	MaxGapFrom, MaxGapTo string
	// LastAgent is the caller of the last probe.
	LastAgent string
	// Probers are the callers that probed since the mark, in the order of their first probe then.
	Probers []Prober
}

// Prober is one caller's probes of a shoot since the mark, by User-Agent.
type Prober struct {
	Agent       string
	First, Last time.Time
	Probes      int
}

// observe records a probe from agent at now.
func (p *ProbeStats) observe(agent string, now time.Time) {
	if gap := now.Sub(p.Last); !p.Last.IsZero() && gap > p.MaxGap {
		p.MaxGap, p.MaxGapEnd, p.MaxGapFrom, p.MaxGapTo = gap, now, p.LastAgent, agent
	}
	p.Last, p.LastAgent = now, agent
	i := slices.IndexFunc(p.Probers, func(x Prober) bool { return x.Agent == agent })
	if i < 0 {
		p.Probers = append(p.Probers, Prober{Agent: agent, First: now})
		i = len(p.Probers) - 1
	}
	p.Probers[i].Last = now
	p.Probers[i].Probes++
}

// mark starts a new window: it forgets the gaps and probers, and keeps the last probe, from which
// the next gap runs.
func (p *ProbeStats) mark() {
	p.MaxGap, p.MaxGapEnd, p.MaxGapFrom, p.MaxGapTo, p.Probers = 0, time.Time{}, "", "", nil
}

// Gap is the longest gap of the window as of now: MaxGap, or the time since the last probe when that
// is longer, so that a shoot no longer probed shows. It is 0 for a shoot never probed.
func (p ProbeStats) Gap(now time.Time) time.Duration {
	if p.Last.IsZero() {
		return 0
	}
	return max(p.MaxGap, now.Sub(p.Last))
}

// By returns the probes of the caller with agent since the mark; ok is false when it sent none.
func (p ProbeStats) By(agent string) (Prober, bool) {
	i := slices.IndexFunc(p.Probers, func(x Prober) bool { return x.Agent == agent })
	if i < 0 {
		return Prober{}, false
	}
	return p.Probers[i], true
}

// clone returns a copy that shares nothing with p.
func (p ProbeStats) clone() ProbeStats {
	p.Probers = slices.Clone(p.Probers)
	return p
}

// MarkProbes starts a new window of every shoot's ProbeStats.
func (s *ShootServer) MarkProbes() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, sh := range s.shoots {
		sh.callerMu.Lock()
		sh.probes.mark()
		sh.callerMu.Unlock()
	}
}

// ProbeStats returns every shoot's probes since the last MarkProbes.
func (s *ShootServer) ProbeStats() map[string]ProbeStats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	stats := make(map[string]ProbeStats, len(s.shoots))
	for name, sh := range s.shoots {
		sh.callerMu.Lock()
		stats[name] = sh.probes.clone()
		sh.callerMu.Unlock()
	}
	return stats
}
