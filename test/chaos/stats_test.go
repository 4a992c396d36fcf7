package chaos

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/audit"
)

// stats is what the rounds found, for the soak's summary.
type stats struct {
	order    []string
	rounds   map[string]int
	failed   map[string]int
	failures []string
	// overlaps and nonHolderWrites are what the audit found over the whole run so far; audited counts
	// the rounds that ran it.
	overlaps, nonHolderWrites, audited int
	// unheldCrash, unheldGraceful and unheldOutage are the audit's longest times a partition had no
	// valid holder, that began in a round: after a fence expired (a crash, a cut, a pause), after a
	// release (a graceful change), and during an API server outage (every member fences).
	unheldCrash, unheldGraceful, unheldOutage time.Duration
	// metricsUnheld is the longest time some partition was held by no answering replica, by the
	// replicas' metrics, over rounds without an outage.
	metricsUnheld time.Duration
	spurious      int
	panics        int
	peakRSS       uint64
}

func newStats() *stats {
	return &stats{rounds: map[string]int{}, failed: map[string]int{}}
}

// record notes one round that ran from start to end.
func (s *stats) record(sc scenario, start, end time.Time, err error, unheld time.Duration, spurious, panics int, a auditOutcome) {
	if _, ok := s.rounds[sc.name]; !ok {
		s.order = append(s.order, sc.name)
	}
	s.rounds[sc.name]++
	if err != nil {
		s.failed[sc.name]++
		s.failures = append(s.failures, sc.name+": "+err.Error())
	}
	if !sc.outage {
		s.metricsUnheld = max(s.metricsUnheld, unheld)
	}
	s.spurious += spurious
	s.panics = panics
	if !a.ran {
		return
	}
	s.audited++
	s.overlaps, s.nonHolderWrites = a.overlaps, a.nonHolder
	for _, g := range a.gaps {
		if g.From.Before(start) || !g.From.Before(end) {
			continue
		}
		switch {
		case sc.outage:
			s.unheldOutage = max(s.unheldOutage, g.Duration)
		case g.Cause == audit.CauseFenceExpired:
			s.unheldCrash = max(s.unheldCrash, g.Duration)
		default:
			s.unheldGraceful = max(s.unheldGraceful, g.Duration)
		}
	}
}

// write prints the summary table.
func (s *stats) write(w io.Writer, elapsed time.Duration) {
	fmt.Fprintf(w, "Chaos soak: %s, lease duration %s, renew deadline %s\n\n", elapsed.Round(time.Second), leaseDuration, renewDeadline)
	fmt.Fprintf(w, "%-42s %7s %7s\n", "scenario", "rounds", "failed")
	names := slices.Clone(s.order)
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(w, "%-42s %7d %7d\n", name, s.rounds[name], s.failed[name])
	}
	fmt.Fprintln(w)
	audit := func(n int) string {
		if s.audited == 0 {
			return "n/a (no audit logs)"
		}
		return fmt.Sprint(n)
	}
	rows := [][2]string{
		{"overlaps found (audit)", audit(s.overlaps)},
		{"writes by a non-holder (audit)", audit(s.nonHolderWrites)},
		{"rounds audited", fmt.Sprint(s.audited)},
		{"longest unheld after a crash (audit)", s.auditText(s.unheldCrash)},
		{"longest unheld after a graceful change (audit)", s.auditText(s.unheldGraceful)},
		{"longest unheld across an API server outage (audit)", s.auditText(s.unheldOutage)},
		{"longest with a partition held by no answering replica (metrics)", s.metricsUnheld.Round(10 * time.Millisecond).String()},
		{"spurious scalings (Deployments of healthy shoots written)", fmt.Sprint(s.spurious)},
		{"panic lines in replica logs", fmt.Sprint(s.panics)},
		{"peak RSS facing the huge list (VmHWM)", fmt.Sprintf("%d MiB", s.peakRSS>>20)},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-66s %s\n", r[0], r[1])
	}
	for _, f := range s.failures {
		fmt.Fprintf(w, "\nFAILED %s\n", f)
	}
}

func (s *stats) auditText(d time.Duration) string {
	if s.audited == 0 {
		return "n/a (no audit logs)"
	}
	return d.Round(10 * time.Millisecond).String()
}
