package demo

import (
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The watch shows a change a little after a read shows its result: the order is judged on the changes
// once every dependent was seen at its target, not on those seen at the moment the reads agreed.
func TestOrderSeenWaitsForTheWatch(t *testing.T) {
	t.Parallel()
	all := []scaling{
		{"a", "kube-controller-manager", 1}, {"a", "machine-controller-manager", 1}, {"a", "cluster-autoscaler", 1},
	}
	var calls atomic.Int32
	order := func() []scaling { // the last change arrives on the third look
		if calls.Add(1) < 3 {
			return slices.Clone(all[:2])
		}
		return slices.Clone(all)
	}
	assert.Error(t, checkOrder(all[:2], []string{"a"}, upLevels, 1), "judged before the watch delivered the last change")
	assert.NoError(t, (&Demo{}).orderSeen(t.Context(), order, []string{"a"}, upLevels, 1))

	wrong := []scaling{all[1], all[0], all[2]}
	assert.Error(t, (&Demo{}).orderSeen(t.Context(), func() []scaling { return wrong }, []string{"a"}, upLevels, 1),
		"a wrong order still fails")
}
