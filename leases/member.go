package leases

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Member is this replica's member lease: taken and renewed every RetryPeriod, released on graceful
// shutdown. The replica is fenced, and must not act on any partition, whenever no renewal has
// succeeded within RenewDeadline: counted from the moment the last successful write was sent, on this
// process's clock, so that it always ends before another member, which waits LeaseDuration from the
// moment it observed that write, may take over.
//
// Member is safe for concurrent use.
type Member struct {
	Store         Store
	Group         string
	Name          string
	Incarnation   string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	Clock         clock.Clock

	mu        sync.Mutex
	lease     *coordinationv1.Lease // as last written by this process
	renewedAt time.Time             // when the last successful write was sent; zero: never or released
}

// LeaseName is the name of the member lease.
func (m *Member) LeaseName() string {
	return MemberLeaseName(m.Group, m.Name)
}

// Renew takes or renews the member lease; now is read before the call. A conflict (the lease changed
// since this process wrote it) is retried once on a fresh read.
func (m *Member) Renew(ctx context.Context, now time.Time) error {
	m.mu.Lock()
	cached := m.lease
	m.mu.Unlock()
	lease, err := m.write(ctx, cached, now)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) {
		lease, err = m.write(ctx, nil, now)
	}
	if err != nil {
		if errors.Is(err, ErrIdentityTaken) {
			m.mu.Lock()
			m.renewedAt = time.Time{}
			m.mu.Unlock()
		}
		return fmt.Errorf("renewing member lease %s: %w", m.LeaseName(), err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lease = lease
	if now.After(m.renewedAt) {
		m.renewedAt = now
	}
	return nil
}

// write updates cached, or the stored lease read afresh when cached is nil, to hold this member.
func (m *Member) write(ctx context.Context, cached *coordinationv1.Lease, now time.Time) (*coordinationv1.Lease, error) {
	if cached == nil {
		stored, err := m.Store.Get(ctx, m.LeaseName())
		switch {
		case apierrors.IsNotFound(err):
			return m.Store.Create(ctx, m.newLease(now))
		case err != nil:
			return nil, err
		case m.taken(stored):
			return nil, fmt.Errorf("%w: incarnation %s holds it", ErrIdentityTaken, Incarnation(stored))
		}
		cached = stored
	}
	lease := cached.DeepCopy()
	setHolder(lease, m.Name, m.Incarnation, now)
	lease.Labels = labels(m.Group, KindMember)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(m.LeaseDuration.Round(time.Second) / time.Second))
	return m.Store.Update(ctx, lease)
}

// ErrIdentityTaken says that another process renews this member's lease under the same name: a
// newer incarnation (a replacement pod, or a second replica given the same name). This process stays
// fenced for good rather than fight over the lease.
var ErrIdentityTaken = errors.New("another process holds this member's lease")

// taken reports whether stored names this member with another incarnation after this process has
// held it: someone else runs under this name now. A process that never held the lease takes it
// over from its predecessor (the normal restart).
func (m *Member) taken(stored *coordinationv1.Lease) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lease != nil && Holder(stored) == m.Name && Incarnation(stored) != m.Incarnation
}

func (m *Member) newLease(now time.Time) *coordinationv1.Lease {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: m.LeaseName(), Labels: labels(m.Group, KindMember)}}
	setHolder(lease, m.Name, m.Incarnation, now)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(m.LeaseDuration.Round(time.Second) / time.Second))
	return lease
}

// FenceAt returns the moment this member is fenced unless a renewal succeeds before; the zero time
// when it is fenced already because it never renewed or has released.
func (m *Member) FenceAt() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.renewedAt.IsZero() {
		return time.Time{}
	}
	return m.renewedAt.Add(m.RenewDeadline)
}

// Fenced reports whether the member must not act at now.
func (m *Member) Fenced(now time.Time) bool {
	at := m.FenceAt()
	return at.IsZero() || !now.Before(at)
}

// Release clears the holder of the member lease so that the other members see this one gone at once.
// The member is fenced from then on. Call it only after every partition has been released.
func (m *Member) Release(ctx context.Context, now time.Time) error {
	m.mu.Lock()
	cached := m.lease
	m.renewedAt = time.Time{}
	m.mu.Unlock()
	if cached == nil {
		return nil
	}
	lease := cached.DeepCopy()
	lease.Spec.HolderIdentity = nil
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now))
	if _, err := m.Store.Update(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing member lease %s: %w", m.LeaseName(), err)
	}
	return nil
}

// Run renews the member lease every RetryPeriod until ctx ends. It calls onFence, which must stop all
// of the replica's work before it returns, as soon as the renew deadline passes without a successful
// renewal; each attempt is cut off at that deadline so that a hanging request cannot delay the fence.
// After a fence, renewals go on, and the replica may act again once one succeeds.
func (m *Member) Run(ctx context.Context, onFence func(), onRenewFailure func(error)) {
	fenced := true // until the first renewal succeeds
	for {
		start := m.Clock.Now()
		if m.Fenced(start) && !fenced {
			fenced = true
			onFence()
		}
		if err := m.renewBefore(ctx, start); err != nil && ctx.Err() == nil {
			onRenewFailure(err)
		}
		now := m.Clock.Now()
		if m.Fenced(now) && !fenced {
			fenced = true
			onFence()
		}
		fenced = m.Fenced(now)
		next := start.Add(m.RetryPeriod)
		if at := m.FenceAt(); !fenced && at.Before(next) {
			next = at
		}
		select {
		case <-ctx.Done():
			return
		case <-m.Clock.After(next.Sub(now)):
		}
	}
}

// renewBefore renews with a deadline at the fence moment, or one retry period when fenced already.
func (m *Member) renewBefore(ctx context.Context, now time.Time) error {
	deadline := m.FenceAt()
	if m.Fenced(now) {
		deadline = now.Add(m.RetryPeriod)
	}
	ctx, cancel := context.WithTimeout(ctx, deadline.Sub(now))
	defer cancel()
	return m.Renew(ctx, now)
}
