package sharding

import (
	"fmt"
	"testing"
)

// BenchmarkNewRing measures building the ring with the defaults, done on every membership change.
func BenchmarkNewRing(b *testing.B) {
	for _, n := range []int{3, 10, 100} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			members := statefulSetNames(n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewRing(members, DefaultRingConfig()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPartition measures mapping a namespace to its partition.
func BenchmarkPartition(b *testing.B) {
	r, err := NewRing(statefulSetNames(3), DefaultRingConfig())
	if err != nil {
		b.Fatal(err)
	}
	namespaces := shootNamespaces(tableSeed, 50, 20)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Partition(namespaces[i%len(namespaces)])
		i++
	}
}

// BenchmarkOwner measures looking up the owner of a partition.
func BenchmarkOwner(b *testing.B) {
	r, err := NewRing(statefulSetNames(3), DefaultRingConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r.Owner(i % DefaultPartitionCount)
		i++
	}
}
