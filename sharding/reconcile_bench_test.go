package sharding

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// BenchmarkSteadyReconcile is one reconcile of a member alone in its group, holding all 887
// partitions, while no Lease changes: what a steady replica pays on every renewal of its lease.
func BenchmarkSteadyReconcile(b *testing.B) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(safetyT0)
	store := leasestest.NewStore()
	store.Now = clk.Now
	view := newCacheView(store)
	ring := safetyRing(887)
	settings := Settings(ring, nil)
	member := &leases.Member{Store: store, Group: "bench", Name: "m-0", Incarnation: "i-0",
		LeaseDuration: safetyLease, RenewDeadline: safetyRenew, RetryPeriod: safetyRetry, Clock: clk, Settings: settings}
	coord := NewCoordinator(ctx, Config{Group: "bench", Member: "m-0", Incarnation: "i-0", Ring: ring,
		LeaseDuration: safetyLease, RetryPeriod: safetyRetry, WriteConcurrency: 4, Settings: settings},
		store, view, member, clk, logr.Discard())
	member.MayJoin = coord.MayJoin
	hooks := leases.Hooks{OnFence: coord.Fence, OnRenewFailure: func(error) {}}
	for range 10 {
		member.Step(ctx, hooks)
		view.catchUp(clk.Now())
		if _, err := coord.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		view.catchUp(clk.Now())
		clk.Step(safetyRetry)
	}
	member.Step(ctx, hooks)
	view.catchUp(clk.Now())
	if held := len(coord.Held()); held != ring.PartitionCount {
		b.Fatalf("the member holds %d partitions, want %d", held, ring.PartitionCount)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := coord.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSteadyReconcileOfThirty is one reconcile of a member of a settled group of 30 after
// another member renewed its lease: what every replica of such a group pays 15 times a second (each
// renewal reaches every replica; review sharding.md §3.3). The renewal's write is in the time too.
func BenchmarkSteadyReconcileOfThirty(b *testing.B) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(safetyT0)
	store := leasestest.NewStore()
	store.Now = clk.Now
	view := newCacheView(store)
	ring := safetyRing(887)
	settings := Settings(ring, nil)
	newMember := func(name string) *leases.Member {
		return &leases.Member{Store: store, Group: "bench", Name: name, Incarnation: name + "/1",
			LeaseDuration: safetyLease, RenewDeadline: safetyRenew, RetryPeriod: safetyRetry, Clock: clk, Settings: settings}
	}
	member := newMember("m-0")
	others := make([]*leases.Member, 29)
	for i := range others {
		others[i] = newMember(fmt.Sprintf("m-%d", i+1))
	}
	coord := NewCoordinator(ctx, Config{Group: "bench", Member: "m-0", Incarnation: "m-0/1", Ring: ring,
		LeaseDuration: safetyLease, RetryPeriod: safetyRetry, WriteConcurrency: 4, Settings: settings},
		store, view, member, clk, logr.Discard())
	member.MayJoin = coord.MayJoin
	hooks := leases.Hooks{OnFence: coord.Fence, OnRenewFailure: func(error) {}}
	for range 10 {
		member.Step(ctx, hooks)
		for _, o := range others {
			if err := o.Renew(ctx, clk.Now()); err != nil {
				b.Fatal(err)
			}
		}
		view.catchUp(clk.Now())
		if _, err := coord.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		view.catchUp(clk.Now())
		clk.Step(safetyRetry)
	}
	member.Step(ctx, hooks)
	view.catchUp(clk.Now())
	if held := len(coord.Held()); held < 20 || held > 40 {
		b.Fatalf("the member holds %d partitions, want about 887/30", held)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if err := others[i%len(others)].Renew(ctx, clk.Now()); err != nil {
			b.Fatal(err)
		}
		i++
		view.catchUp(clk.Now())
		if _, err := coord.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
