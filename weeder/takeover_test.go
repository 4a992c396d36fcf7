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
