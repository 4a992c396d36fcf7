package weeder

import "time"

// readyService is a service that is ready, and when it last turned ready.
type readyService struct {
	Key   ServiceKey
	Since time.Time
}

// missedWindows decides which readiness changes a replica may have missed while the work of a
// partition was stopped, from stoppedAt (a fence) until now: while fenced it owns nothing, so a
// service turning ready opens no window. Missed are the services of ready that
//   - turned ready after stoppedAt, or
//   - have no kept window and turned ready within watch before stoppedAt: their window would still
//     have run at the stop, so its opening was refused (a fence begins before the work stops).
//
// A service that turned ready earlier had its window end before the stop, so a Resume does not
// reopen every ready service. Each missed service gets a real window of watch from now, in the order
// of ready: its readiness change is not older than the fence, and the pods depending on it were not
// weeded since.
func missedWindows(kept []Window, ready []readyService, stoppedAt, now time.Time, watch time.Duration) []Window {
	covered := make(map[ServiceKey]bool, len(kept))
	for _, w := range kept {
		covered[w.Key] = true
	}
	var missed []Window
	for _, s := range ready {
		if s.Since.After(stoppedAt) || (!covered[s.Key] && s.Since.After(stoppedAt.Add(-watch))) {
			missed = append(missed, Window{Key: s.Key, Deadline: now.Add(watch)})
		}
	}
	return missed
}

// handoverMissed decides which readiness changes a graceful handover may have hidden: the releasing
// holder stops its work before its release is written, and this replica owns the partition only
// once its acquire has been written, so a service turning ready in between (a second or two, in
// either replica's clock) opens no window anywhere. Every replica's tracker saw the change, so the
// acquirer opens for each service of ready the window the change would have opened, Since + watch,
// unless that has passed or a handed window already runs as long.
//
// The bound is watch, not the gap: the acquirer does not know when the release happened in its own
// clock, and a change older than the gap but younger than watch with no such handed window was
// missed by the previous holder too (its window would still be running, so it would have been
// handed over), e.g. one its informer saw late or whose state a leave could not hand over. A window
// never outlasts the one the change opened, so a window that has ended is not opened again.
func handoverMissed(handed []Window, ready []readyService, now time.Time, watch time.Duration) []Window {
	ends := make(map[ServiceKey]time.Time, len(handed))
	for _, w := range handed {
		ends[w.Key] = later(ends[w.Key], w.Deadline)
	}
	var missed []Window
	for _, s := range ready {
		deadline := s.Since.Add(watch)
		if deadline.After(now) && deadline.After(ends[s.Key]) {
			missed = append(missed, Window{Key: s.Key, Deadline: deadline})
		}
	}
	return missed
}

// clampDeadlines shortens the windows of handed that end after limit to end at it, and returns how
// many it shortened: a handed deadline is the releasing replica's word, and neither a wrong clock
// there nor a forged annotation may keep a pod watch open longer than a window opened here would.
func clampDeadlines(handed []Window, limit time.Time) int {
	clamped := 0
	for i := range handed {
		if handed[i].Deadline.After(limit) {
			handed[i].Deadline = limit
			clamped++
		}
	}
	return clamped
}
