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
