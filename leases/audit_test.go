package leases_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/leases/leasestest"
)

// failingStore fails every Update while failing is set.
type failingStore struct {
	leases.Store
	failing bool
}

func (s *failingStore) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if s.failing {
		return nil, errors.New("the API server is away")
	}
	return s.Store.Update(ctx, l)
}

// renewTrail records the fences of the renewals, and whether the member was fenced when each came.
type renewTrail struct {
	m         *leases.Member
	fences    []time.Time
	fencedYet []bool
}

func (a *renewTrail) Renewed(fence time.Time) {
	a.fences = append(a.fences, fence)
	a.fencedYet = append(a.fencedYet, a.m.FenceAt().Equal(fence))
}

func TestMemberAuditsRenewalsBeforeActingOnThem(t *testing.T) {
	ctx := context.Background()
	store := &failingStore{Store: leasestest.NewStore()}
	m := newMember(store, clocktesting.NewFakeClock(t0))
	trail := &renewTrail{m: m}
	m.Audit = trail

	require.NoError(t, m.Renew(ctx, t0))
	require.NoError(t, m.Renew(ctx, t0.Add(2*time.Second)))
	store.failing = true
	require.Error(t, m.Renew(ctx, t0.Add(4*time.Second)))

	assert.Equal(t, []time.Time{t0.Add(10 * time.Second), t0.Add(12 * time.Second)}, trail.fences, "the successful renewals, send time + renew deadline")
	assert.Equal(t, []bool{false, false}, trail.fencedYet, "recorded before the member acts on the new fence")
}
