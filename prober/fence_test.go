package prober

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
	"github.com/sharded-dwd/dependency-watchdog/scaler"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// A process pause (docs/prober.md, "Scaler"): the probe decides a scale-down, then the process stalls
// past its renew deadline. When it resumes, the flow's step runs before the member loop has fenced
// the replica (Fence is never called here): the write must not reach the seed.
func TestNoScaleWriteAfterTheRenewDeadline(t *testing.T) {
	f := newCycleFixture(t, 5)
	writes := f.recordWrites()
	member, coordinator := f.holdEveryPartition(t)
	renewedCycles := func(n int) {
		for range n {
			require.NoError(t, member.Renew(context.Background(), f.clk.Now()))
			f.cycles(t, 1, 10*time.Second)
		}
	}
	renewedCycles(3)
	f.shoot.set(func(s *lyingShoot) { s.meltedAt = s.clk.Now() })
	renewedCycles(5)
	dir, started := f.flowStarted()
	require.True(t, started)
	require.Equal(t, scaler.Down, dir)

	f.clk.Step(member.FenceAt().Sub(f.clk.Now()) + time.Millisecond)
	require.True(t, member.Fenced(f.clk.Now()), "past the renew deadline")
	require.Len(t, coordinator.Held(), 7, "the fence has not run: the partitions are still held")

	f.m.flowMu.Lock()
	flow := f.m.flows[cycleNS]
	f.m.flowMu.Unlock()
	assert.Equal(t, Done, f.m.flowJob(cycleNS, flow)(context.Background()), "the flow ends")
	assert.Empty(t, writes(), "no mutating request reached the seed")
	for _, name := range cycleDependents {
		d := &appsv1.Deployment{}
		require.NoError(t, f.m.Scaler.Client.Get(context.Background(), client.ObjectKey{Namespace: cycleNS, Name: name}, d))
		assert.Equal(t, int32(1), *d.Spec.Replicas, name)
		assert.Empty(t, d.Annotations, name)
	}
	assert.Empty(t, f.recorder.Events, "a refused write records no Event")
	_, started = f.flowStarted()
	assert.False(t, started)
}

// holdEveryPartition makes the fixture's replica the only member of a group, with a real member
// lease and Coordinator on the fixture's clock, holding every partition; it wires them as Setup does.
func (f *cycleFixture) holdEveryPartition(t *testing.T) (*leases.Member, *sharding.Coordinator) {
	store := leasestest.NewStore()
	member := &leases.Member{Store: store, Group: "g", Name: "m", Incarnation: "i", LeaseDuration: 20 * time.Second,
		RenewDeadline: 15 * time.Second, RetryPeriod: 2 * time.Second, Clock: f.clk}
	require.NoError(t, member.Renew(context.Background(), f.clk.Now()))
	coordinator := sharding.NewCoordinator(sharding.Config{Group: "g", Member: "m", Incarnation: "i",
		Ring:          sharding.RingConfig{PartitionCount: 7, ReplicationFactor: 10, LoadBound: 1.25},
		LeaseDuration: 20 * time.Second, RetryPeriod: 2 * time.Second, WriteConcurrency: 1,
		Store: store, Lister: store, Liveness: member, Clock: f.clk, Log: logr.Discard()})
	_, err := coordinator.Reconcile(context.Background())
	require.NoError(t, err)
	require.Len(t, coordinator.Held(), 7)
	f.m.Ownership, f.m.Scaler.Guard = coordinator, coordinator.Guard
	return member, coordinator
}

// recordWrites makes the Scaler's client record every mutating request it sends to the seed, and
// returns what it recorded so far.
func (f *cycleFixture) recordWrites() func() []string {
	var mu sync.Mutex
	var writes []string
	record := func(verb string, obj client.Object) {
		mu.Lock()
		defer mu.Unlock()
		writes = append(writes, verb+" "+client.ObjectKeyFromObject(obj).String())
	}
	c := f.m.Scaler.Client.(client.WithWatch)
	f.m.Scaler.Client = interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			record("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			record("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			record("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			record("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			record("deletecollection", obj)
			return c.DeleteAllOf(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			record("update "+sub, obj)
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			record("patch "+sub, obj)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), writes...)
	}
}
