package shardcache

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// mask holds the first n of count partitions.
func mask(count, n int) []bool {
	m := make([]bool, count)
	for p := range n {
		m[p] = true
	}
	return m
}

func TestAShareThatFellByAQuarterSaysSo(t *testing.T) {
	calls := 0
	share := NewShare(Options{Partitions: sharding.Partitions{Count: 100}, Group: "shrunk", Shrunk: func() { calls++ }})
	share.Hold(mask(100, 100))
	assert.Zero(t, calls, "the first share grows from nothing")
	share.Hold(mask(100, 90))
	share.Hold(mask(100, 80))
	assert.Zero(t, calls, "20 of 100 gone: less than a quarter")
	share.Hold(mask(100, 75))
	assert.Equal(t, 1, calls, "a quarter below the peak, reached in steps")
	share.Hold(mask(100, 74))
	assert.Equal(t, 1, calls, "counted from the share at the last call")
	share.Hold(mask(100, 100))
	share.Hold(mask(100, 33))
	assert.Equal(t, 2, calls, "a join of two members")
	share.Hold(mask(100, 33))
	assert.Equal(t, 2, calls, "no change")
}
