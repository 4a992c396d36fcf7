package shardcache_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	serversharding "k8s.io/apiserver/pkg/sharding"

	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// randomShare holds each of count partitions with probability 1/n, as a member of n does.
func randomShare(r *rand.Rand, count, n int) []bool {
	held := make([]bool, count)
	for p := range held {
		held[p] = r.IntN(n) == 0
	}
	return held
}

// shootNames are n namespaces named as Gardener names them, shoot--<project>--<shoot>.
func shootNames(r *rand.Rand, n int) []string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	word := func(min, max int) string {
		b := make([]byte, min+r.IntN(max-min+1))
		for i := range b {
			b[i] = letters[r.IntN(len(letters))]
		}
		return string(b)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("shoot--%s--%s", word(3, 10), word(3, 11))
	}
	return names
}

// The API server's parser accepts every selector a share writes, and its evaluator selects exactly
// the namespaces of the share's partitions: dwd's partition function and the server's hash agree.
func TestTheServerSelectsExactlyTheShareAsPartitionsMapIt(t *testing.T) {
	r := rand.New(rand.NewPCG(5866, 1))
	names := shootNames(r, 2000)
	for _, tc := range []struct{ count, members int }{{1, 1}, {7, 2}, {271, 3}, {sharding.DefaultPartitionCount, 3}, {sharding.DefaultPartitionCount, 10}, {sharding.DefaultPartitionCount, 1}} {
		t.Run(fmt.Sprintf("P=%d,N=%d", tc.count, tc.members), func(t *testing.T) {
			p := sharding.Partitions{Function: sharding.PartitionFNVRange, Count: tc.count}
			held := randomShare(r, tc.count, tc.members)
			selector := sharding.ShardSelector(p.Ranges(held))
			if selector == "" {
				t.Skip("an empty share has no selector")
			}
			parsed, err := serversharding.Parse(selector)
			require.NoError(t, err, "the server must accept %d characters", len(selector))
			for _, ns := range names {
				obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
				match, err := parsed.Matches(obj)
				require.NoError(t, err)
				require.Equal(t, held[p.Of(ns)], match, ns)
			}
		})
	}
}

func TestFNVIsTheServersHash(t *testing.T) {
	for _, ns := range []string{"", "garden", "shoot--a--b", "shoot--projectname--shootname"} {
		assert.Equal(t, apisharding.HashField(ns), fmt.Sprintf("%016x", sharding.FNV(ns)), ns)
	}
}

// The largest share a selector may have to name at the default partition count, every other
// partition, is within the server's limit on a selector's size (100,000 characters).
func TestTheLargestSelectorOfTheDefaultCountIsAccepted(t *testing.T) {
	p := sharding.Partitions{Count: sharding.DefaultPartitionCount}
	held := make([]bool, p.Count)
	for i := range held {
		held[i] = i%2 == 0
	}
	selector := sharding.ShardSelector(p.Ranges(held))
	_, err := serversharding.Parse(selector)
	require.NoError(t, err, "%d characters", len(selector))
	t.Logf("%d ranges, %d characters", len(p.Ranges(held)), len(selector))
}
