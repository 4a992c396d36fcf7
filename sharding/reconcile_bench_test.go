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
	g := settledBenchGroup(b, 1)
	if held := len(g.coord.Held()); held != 887 {
		b.Fatalf("the member holds %d partitions, want 887", held)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.coord.Reconcile(g.ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSteadyReconcileOfThirty is one reconcile of a member of a settled group of 30 after
// another member renewed its lease: what every replica of such a group pays 15 times a second (each
// renewal reaches every replica; docs/sharding.md, "Reconciles per group are bounded"). The renewal's
// write is in the time too.
func BenchmarkSteadyReconcileOfThirty(b *testing.B) {
	g := settledBenchGroup(b, 30)
	if held := len(g.coord.Held()); held < 20 || held > 40 {
		b.Fatalf("the member holds %d partitions, want about 887/30", held)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := g.others[i%len(g.others)].Renew(g.ctx, g.clk.Now()); err != nil {
			b.Fatal(err)
		}
		i++
		g.view.catchUp(g.clk.Now())
		if _, err := g.coord.Reconcile(g.ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// benchGroup is a coordinator m-0 over 887 partitions, and the member leases of the others of its
// group, which only renew (no process acts for them).
type benchGroup struct {
	ctx    context.Context
	clk    *clocktesting.FakeClock
	view   *cacheView
	coord  *Coordinator
	others []*leases.Member
}

// settledBenchGroup sets up a group of size members and lets m-0 settle for ten retry periods.
func settledBenchGroup(b *testing.B, size int) benchGroup {
	g := benchGroup{ctx: context.Background(), clk: clocktesting.NewFakeClock(safetyT0)}
	store := leasestest.NewStore()
	store.Now = g.clk.Now
	g.view = newCacheView(store)
	ring := safetyRing(887)
	settings := Settings(ring, nil)
	newMember := func(name string) *leases.Member {
		return &leases.Member{Store: store, Group: "bench", Name: name, Incarnation: name + "/1",
			LeaseDuration: safetyLease, RenewDeadline: safetyRenew, RetryPeriod: safetyRetry, Clock: g.clk, Settings: settings}
	}
	member := newMember("m-0")
	for i := 1; i < size; i++ {
		g.others = append(g.others, newMember(fmt.Sprintf("m-%d", i)))
	}
	g.coord = NewCoordinator(Config{Group: "bench", Member: "m-0", Incarnation: "m-0/1", Ring: ring,
		LeaseDuration: safetyLease, RetryPeriod: safetyRetry, WriteConcurrency: 4, Settings: settings,
		WorkContext: g.ctx, Store: store, Lister: g.view, Liveness: member, Clock: g.clk, Log: logr.Discard()})
	member.MayJoin = g.coord.MayJoin
	hooks := leases.Hooks{OnFence: g.coord.Fence, OnRenewFailure: func(error) {}}
	for range 10 {
		member.Step(g.ctx, hooks)
		for _, o := range g.others {
			if err := o.Renew(g.ctx, g.clk.Now()); err != nil {
				b.Fatal(err)
			}
		}
		g.view.catchUp(g.clk.Now())
		if _, err := g.coord.Reconcile(g.ctx); err != nil {
			b.Fatal(err)
		}
		g.view.catchUp(g.clk.Now())
		g.clk.Step(safetyRetry)
	}
	member.Step(g.ctx, hooks)
	g.view.catchUp(g.clk.Now())
	return g
}
