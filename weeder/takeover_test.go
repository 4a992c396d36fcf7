package weeder

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestMissedWindows(t *testing.T) {
	const watch = 5 * time.Minute
	stoppedAt := registryAt(time.Hour)
	now := stoppedAt.Add(2 * time.Minute)
	kept := []Window{win(winEtcdA, time.Hour+time.Minute)}
	tests := []struct {
		name   string
		since  time.Duration // after stoppedAt; negative: before
		key    ServiceKey
		missed bool
	}{
		{"kept window, ready before the stop", -time.Minute, winEtcdA, false},
		{"kept window, turned ready again while stopped", time.Minute, winEtcdA, true},
		{"ready long before the stop: its window ended before it", -2 * watch, winEtcdB, false},
		{"ready exactly watch before the stop: its window ended at it", -watch, winEtcdB, false},
		{"turned ready while stopped", time.Minute, winEtcdB, true},
		{"turned ready at the stop", 0, winEtcdB, true},
		{"ready shortly before the stop without a kept window: refused between fence and stop", -time.Second, winEtcdB, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ready := []readyService{{Key: tt.key, Since: stoppedAt.Add(tt.since)}}
			got := missedWindows(kept, ready, stoppedAt, now, watch)
			if !tt.missed {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, []Window{{Key: tt.key, Deadline: now.Add(watch)}}, got, "a real window of watch from now")
		})
	}
}

func TestHandoverMissed(t *testing.T) {
	const watch = 5 * time.Minute
	now := registryAt(time.Hour)
	handed := []Window{{Key: winEtcdA, Deadline: now.Add(time.Minute)}, {Key: winEtcdA, Deadline: now.Add(2 * time.Minute)}}
	tests := []struct {
		name     string
		readyAgo time.Duration
		key      ServiceKey
		missed   bool
	}{
		{"turned ready in the gap", time.Second, winEtcdB, true},
		{"turned ready in the gap, after its handed window was opened", time.Second, winEtcdA, true},
		{"its handed window runs as long as the change's", watch - 2*time.Minute, winEtcdA, false},
		{"its handed window runs longer", time.Hour - 3*time.Minute + watch, winEtcdA, false},
		{"no handed window, its window would still run", time.Minute, winEtcdB, true},
		{"no handed window, its window would end now", watch, winEtcdB, false},
		{"ready long before", 2 * watch, winEtcdB, false},
		{"ready since before this process saw it (zero time)", now.Sub(time.Time{}), winEtcdB, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			since := now.Add(-tt.readyAgo)
			got := handoverMissed(handed, []readyService{{Key: tt.key, Since: since}}, now, watch)
			if !tt.missed {
				assert.Empty(t, got)
				return
			}
			assert.Equal(t, []Window{{Key: tt.key, Deadline: since.Add(watch)}}, got, "the window the change opened")
		})
	}
}

func TestClampDeadlines(t *testing.T) {
	limit := registryAt(5 * time.Minute)
	windows := []Window{win(winEtcdA, time.Hour), win(winEtcdB, time.Minute), synth(winEtcdC, 5*time.Minute)}
	assert.Equal(t, 1, clampDeadlines(windows, limit))
	assert.Equal(t, []Window{win(winEtcdA, 5*time.Minute), win(winEtcdB, time.Minute), synth(winEtcdC, 5*time.Minute)}, windows)
}
