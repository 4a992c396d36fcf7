package leases

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
// A new process takes the lease over from a predecessor under the same name at once only with proof
// that the predecessor stopped (its clean-leave marker, or the same Pod); otherwise it waits until the
// lease has been unchanged for the advertised duration on its own clock, as any other member would.
// A process whose lease is changed or deleted by someone else fences before it takes the lease back.
//
// Member is safe for concurrent use; Run (or Step) belongs to one goroutine.
type Member struct {
	Store         Store
	Group         string
	Name          string
	Incarnation   string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	Clock         clock.Clock
	// Settings are advertised in the lease for the others to compare with theirs (SettingsAnnotation).
	Settings string
	// PodUID, when set, is recorded in the lease: a later process in the same Pod may take it at once.
	PodUID string
	// MayJoin, when set, is asked before the lease is taken (not before a renewal of a lease held): an
	// error keeps the member out of the group, fenced, and Renew fails with ErrNotJoining. The group's
	// incumbents win a disagreement on the settings this way: a newcomer with other settings never
	// appears in their view, so they go on, and take its predecessor's share when it expires.
	MayJoin func(now time.Time) error
	// Audit, when set, records every successful write of the lease with its fence, before the member
	// may act on it (the ownership audit; *audit.Log implements it).
	Audit Audit

	mu          sync.Mutex
	lease       *coordinationv1.Lease // as last written by this process; nil before a take
	held        bool                  // this process has held the lease since it started
	takenAt     time.Time             // when this process first took the lease
	crashes     int                   // the crashes counted from the predecessor's lease read last
	renewedAt   time.Time             // when the last successful write was sent; zero: never, lost or released
	unfencedAt  time.Time             // when a renewal last succeeded after failures had fenced the member
	outageFrom  time.Time             // when the last successful renewal before those failures was sent
	unreachable bool                  // the renewals have failed since the last success
	// continuousSince is when the answer came to the take of the lease, or to the last renewal
	// answered a continuity window or more after the successful write before it (see ContinuousSince).
	continuousSince time.Time
	nameLost        bool            // another incarnation took this member's name: fenced for good
	waiting         observedVersion // the predecessor's lease being waited out
	// unprovenUntil is, after a take without proof that a predecessor under this name stopped (the
	// lease was absent before this process saw any version of it, or cleared without the clean-leave
	// marker), when such a predecessor is fenced at the latest: its last renewal came before the lease
	// was deleted or cleared, so before the take. Zero after a take with proof.
	unprovenUntil time.Time
	writes        []sentWrite // the latest successful writes, oldest first
	// renewing counts the Renew calls waiting for the answer of their write; lastShown is the last
	// version of writes that ViewStale found in a cache.
	renewing  int
	lastShown string
	// leaving is set by AnnounceLeave; announced once a write carrying LeavingAnnotation succeeded.
	leaving, announced bool
	poke               chan struct{} // wakes Run for a renewal now; made by pokeChan

	loop loopState // Step's state
}

// Audit records the renewals of a lease that lets this process act, for the ownership audit (package
// audit, whose *Log implements it and which imports the sharding packages, so the dependency cannot
// run the other way).
type Audit interface {
	// Renewed is called after each successful renewal, before the process acts on it: the process may
	// act until fence (the renewal's send time plus the renew deadline).
	Renewed(fence time.Time)
}

// observedVersion is a resourceVersion and when this process first saw it.
type observedVersion struct {
	version string
	since   time.Time
}

// sentWrite is a successful write of the member lease: its resourceVersion and when it was sent.
type sentWrite struct {
	version string
	sentAt  time.Time
}

// keptWrites bounds the writes kept for ViewStale.
const keptWrites = 16

// Errors of Renew.
var (
	// ErrIdentityTaken says that another process renews this member's lease under the same name: a
	// newer incarnation (a replacement pod, or a second replica given the same name). This process stays
	// fenced for good rather than fight over the lease.
	ErrIdentityTaken = errors.New("another process holds this member's lease")
	// ErrForeignWrite says that someone else changed or deleted the member lease since this process
	// wrote it. The member is fenced; the next renewal takes the lease back.
	ErrForeignWrite = errors.New("the member lease was changed or deleted by someone else")
	// ErrWaitingForPredecessor says that the lease names an earlier process under this name that left
	// no proof of having stopped: this process waits until the lease has been unchanged for the lease
	// duration before it takes it.
	ErrWaitingForPredecessor = errors.New("waiting out the lease of an earlier process under this name")
	// ErrNotJoining says that MayJoin kept the member from taking its lease.
	ErrNotJoining = errors.New("not joining the group")
)

// A crash loop: a member whose processes keep ending without a leave, each soon after it took the
// lease, moves its share to the others at every crash (a lease duration unheld) and back at every
// restart. From the CrashLoopAfter-th such end in a row, the next process waits before it joins, a
// lease duration doubled at each further crash, up to MaxCrashBackoff, so that the others keep the
// share meanwhile (docs/sharding.md, "Crash loops"). A process that holds the lease for
// CrashResetDurations lease durations ends the count.
const (
	CrashLoopAfter      = 3
	CrashResetDurations = 10
	MaxCrashBackoff     = 5 * time.Minute
)

// crashBackoff is how long a process waits before it takes a member lease after crashes ends of
// its predecessors in a row.
func crashBackoff(crashes int, duration time.Duration) time.Duration {
	if crashes < CrashLoopAfter {
		return 0
	}
	backoff := duration << min(crashes-CrashLoopAfter, 16)
	return min(backoff, MaxCrashBackoff)
}

// LeaseName is the name of the member lease.
func (m *Member) LeaseName() string {
	return MemberLeaseName(m.Group, m.Name)
}

// Renew takes or renews the member lease; now is read before the call.
func (m *Member) Renew(ctx context.Context, now time.Time) error {
	m.mu.Lock()
	cached := m.lease
	m.renewing++
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.renewing--
		m.mu.Unlock()
	}()
	var lease *coordinationv1.Lease
	var err error
	if cached == nil && m.MayJoin != nil {
		if why := m.MayJoin(now); why != nil {
			return fmt.Errorf("%w: %w", ErrNotJoining, why)
		}
	}
	if cached == nil {
		lease, err = m.take(ctx, now)
	} else if lease, err = m.Store.Update(ctx, m.renewed(cached, now)); isLostRace(err) {
		lease, err = m.afterLostRace(ctx, now)
	}
	if err != nil {
		switch {
		case errors.Is(err, ErrIdentityTaken) || errors.Is(err, ErrForeignWrite):
			m.lose(err)
		case !errors.Is(err, ErrWaitingForPredecessor):
			m.failed()
		}
		return fmt.Errorf("renewing member lease %s: %w", m.LeaseName(), err)
	}
	if m.Audit != nil {
		m.Audit.Renewed(now.Add(m.RenewDeadline))
	}
	m.wrote(lease, now, m.Clock.Now(), cached == nil)
	return nil
}

// ContinuousSince returns since when this process's lease has been renewed so that no other member
// can have judged it expired: from the answer to the last successful write that was either a take or
// answered ContinuityWindow or more after the send of the successful write before it. Another member
// counts the lease expired only once it has seen one version unchanged for a lease duration on its own
// clock, from a first sight that comes after that version was written, so after it was sent; a
// renewal answered within the window was written before then. Work this process started after that
// moment, under a lease it wrote itself and that nobody has written since, is still its own after a
// fence, and resumes without a write.
func (m *Member) ContinuousSince() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.continuousSince
}

// ContinuityWindow is how soon after the send of the last successful write the answer to the next one
// must come for the lease to count as held continuously: the lease duration less a quarter of the
// margin between the renew deadline and the duration, which leaves room for the clocks of two
// processes to run at different rates (at least 5 % of the duration by the margin's rule).
func (m *Member) ContinuityWindow() time.Duration {
	return m.LeaseDuration - (m.LeaseDuration-m.RenewDeadline)/4
}

// failed records a renewal that did not reach the store or was not answered.
func (m *Member) failed() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unreachable = true
}

// afterLostRace reads the lease afresh after a renewal found it changed: a change this process made
// itself (a write whose answer was lost) is renewed; anyone else's is reported.
func (m *Member) afterLostRace(ctx context.Context, now time.Time) (*coordinationv1.Lease, error) {
	stored, err := m.Store.Get(ctx, m.LeaseName())
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("%w: deleted", ErrForeignWrite)
	case err != nil:
		return nil, err
	case Holder(stored) == m.Name && Incarnation(stored) == m.Incarnation:
		return m.Store.Update(ctx, m.renewed(stored, now))
	case Holder(stored) == m.Name:
		return nil, fmt.Errorf("%w: incarnation %s holds it", ErrIdentityTaken, Incarnation(stored))
	}
	return nil, fmt.Errorf("%w: it names holder %q", ErrForeignWrite, Holder(stored))
}

// take writes the lease when this process does not hold it: at once when the lease is new, is this
// process's own, or proves that its last holder stopped; else once it has been unchanged for the
// lease duration on this process's clock, by a compare-and-swap on the fresh read.
func (m *Member) take(ctx context.Context, now time.Time) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	held, nameLost := m.held, m.nameLost
	m.mu.Unlock()
	if nameLost {
		return nil, fmt.Errorf("%w: this process lost its name earlier", ErrIdentityTaken)
	}
	stored, err := m.Store.Get(ctx, m.LeaseName())
	if apierrors.IsNotFound(err) {
		return m.create(ctx, now, held)
	}
	if err != nil {
		return nil, err
	}
	mine := Incarnation(stored) == m.Incarnation
	cleared := !held && !mine && Holder(stored) == "" && Incarnation(stored) == "" && !m.predecessorStopped(stored)
	switch {
	case held && Holder(stored) == m.Name && !mine:
		return nil, fmt.Errorf("%w: incarnation %s holds it", ErrIdentityTaken, Incarnation(stored))
	case held || mine || m.predecessorStopped(stored) || cleared:
	case !m.waitedOut(stored, now):
		return nil, fmt.Errorf("%w: incarnation %s", ErrWaitingForPredecessor, Incarnation(stored))
	}
	taken := m.renewed(stored, now)
	if !held && !mine {
		crashes := predecessorCrashes(m.Name, stored)
		m.sawCrashes(crashes)
		if err := m.backingOff(stored, now, crashes, max(m.LeaseDuration, AdvertOf(m.Name, stored).Duration)); err != nil {
			return nil, err
		}
		setCrashes(taken, crashes)
	}
	updated, err := m.Store.Update(ctx, taken)
	if err == nil && cleared {
		m.unproven(now, max(m.LeaseDuration, AdvertOf(m.Name, stored).Duration))
	}
	return updated, err
}

// create writes the member lease this process found absent. A lease it saw, held by a predecessor,
// and deleted by someone is waited out as if it were there: the predecessor may still run until its
// next renewal finds it gone. A crash loop's back-off goes on, and its count with it, when the others
// delete the lease as an orphan meanwhile (unchanged for OrphanedAfter durations, named by no
// partition).
func (m *Member) create(ctx context.Context, now time.Time, held bool) (*coordinationv1.Lease, error) {
	m.mu.Lock()
	unseen := m.waiting.version == ""
	m.mu.Unlock()
	if !held && !m.waitedOut(absentLease, now) {
		return nil, fmt.Errorf("%w: its lease was deleted", ErrWaitingForPredecessor)
	}
	crashes := m.crashesSeen()
	if !held {
		if err := m.backingOff(absentLease, now, crashes, m.LeaseDuration); err != nil {
			return nil, err
		}
	}
	fresh := m.renewed(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: m.LeaseName()}}, now)
	if !held {
		setCrashes(fresh, crashes)
	}
	created, err := m.Store.Create(ctx, fresh)
	if err == nil && !held && unseen {
		m.unproven(now, m.LeaseDuration)
	}
	return created, err
}

// backingOff returns ErrWaitingForPredecessor while stored (absentLease for a deleted one) has not been
// seen unchanged for the crash loop back-off of crashes ends in a row, at duration.
func (m *Member) backingOff(stored *coordinationv1.Lease, now time.Time, crashes int, duration time.Duration) error {
	if backoff := crashBackoff(crashes, duration); !m.waitedFor(stored, now, backoff) {
		return fmt.Errorf("%w: %d processes under this name in a row ended without a leave soon after they joined, backing off %s",
			ErrWaitingForPredecessor, crashes, backoff)
	}
	return nil
}

// sawCrashes records the crashes counted from the predecessor's lease, for a take after its deletion.
func (m *Member) sawCrashes(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashes = n
}

// crashesSeen returns the crashes counted from the predecessor's lease this process read last.
func (m *Member) crashesSeen() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashes
}

// predecessorCrashes counts the ends without a leave in a row of the processes under name, the
// holder of stored among them when it did not leave.
func predecessorCrashes(name string, stored *coordinationv1.Lease) int {
	if Holder(stored) != name || AdvertOf(name, stored).Left {
		return 0
	}
	n, _ := strconv.Atoi(stored.Annotations[CrashesAnnotation])
	return max(n, 0) + 1
}

func setCrashes(lease *coordinationv1.Lease, crashes int) {
	if crashes > 0 {
		setAnnotation(lease, CrashesAnnotation, strconv.Itoa(crashes))
	} else {
		delete(lease.Annotations, CrashesAnnotation)
	}
}

// unproven records a take at now without proof that a predecessor stopped, one that may renew for
// up to duration after its last renewal.
func (m *Member) unproven(now time.Time, duration time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.unprovenUntil = now.Add(duration)
}

// PredecessorFencedBy is when a predecessor under this member's name is fenced at the latest: the
// zero time when this process took its lease with proof that the predecessor stopped (its lease
// waited out, its clean-leave marker, the same Pod), or found none. A lease deleted or cleared by
// someone else, which this process took at once, is no such proof: work that the predecessor's
// incarnation still holds (its partition leases) may be resumed only from then on.
func (m *Member) PredecessorFencedBy() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unprovenUntil
}

// predecessorStopped reports whether stored proves that the process that wrote it has stopped.
func (m *Member) predecessorStopped(stored *coordinationv1.Lease) bool {
	return AdvertOf(m.Name, stored).Left ||
		(m.PodUID != "" && stored.Annotations[PodUIDAnnotation] == m.PodUID)
}

// absentLease stands for a member lease found deleted in waitedOut.
var absentLease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "absent"}}

// waitedOut reports whether stored has been seen unchanged for the longer of this member's and the
// advertised lease duration, counted from when this process first saw its version. Before this
// process saw any version, a deleted lease needs no waiting: nobody ran under the name. A deletion
// after that goes on counting from the version seen last: it is someone else's write, not a renewal
// of the predecessor, whose last renewal came before that version was first seen: it fences on
// finding its lease deleted, and a lease it creates again later is a new version, which starts the
// count anew. So the deletion of an orphaned lease (Observer.Orphaned) during the wait does not make
// it start over.
func (m *Member) waitedOut(stored *coordinationv1.Lease, now time.Time) bool {
	return m.waitedFor(stored, now, max(m.LeaseDuration, AdvertOf(m.Name, stored).Duration))
}

// waitedFor reports whether stored has been seen unchanged for d, counted as waitedOut counts.
func (m *Member) waitedFor(stored *coordinationv1.Lease, now time.Time, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if stored == absentLease && m.waiting.version == "" {
		return true
	}
	if m.waiting.version != stored.ResourceVersion {
		since := now
		if stored == absentLease {
			since = m.waiting.since
		}
		m.waiting = observedVersion{version: stored.ResourceVersion, since: since}
	}
	return now.Sub(m.waiting.since) >= d
}

// renewed returns a copy of lease held by this process at now, advertising its settings.
func (m *Member) renewed(lease *coordinationv1.Lease, now time.Time) *coordinationv1.Lease {
	lease = lease.DeepCopy()
	setHolder(lease, m.Name, m.Incarnation, now)
	lease.Labels = labels(m.Group, KindMember)
	lease.Spec.LeaseDurationSeconds = ptr.To(leaseSeconds(m.LeaseDuration))
	for _, key := range []string{LeftAnnotation, ReturningAnnotation, StateLostAnnotation, PodUIDAnnotation} {
		delete(lease.Annotations, key)
	}
	setAnnotation(lease, SettingsAnnotation, m.Settings)
	if n := m.recentFences(now); n > 0 {
		setAnnotation(lease, RecentFencesAnnotation, strconv.Itoa(n))
	} else {
		delete(lease.Annotations, RecentFencesAnnotation)
	}
	if m.PodUID != "" {
		setAnnotation(lease, PodUIDAnnotation, m.PodUID)
	}
	if m.isLeaving() {
		setAnnotation(lease, LeavingAnnotation, m.Incarnation)
	} else {
		delete(lease.Annotations, LeavingAnnotation)
	}
	if m.heldLongerThan(CrashResetDurations*m.LeaseDuration, now) {
		delete(lease.Annotations, CrashesAnnotation)
	}
	return lease
}

// heldLongerThan reports whether this process took its lease more than d before now.
func (m *Member) heldLongerThan(d time.Duration, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.takenAt.IsZero() && now.Sub(m.takenAt) >= d
}

// wrote records a successful write sent at now and answered at answered; took says that it took the
// lease rather than renewed this process's own write.
func (m *Member) wrote(lease *coordinationv1.Lease, now, answered time.Time, took bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if last := m.lastSent(); took || last.IsZero() || answered.Sub(last) >= m.ContinuityWindow() {
		m.continuousSince = answered
	}
	if m.unreachable && (m.renewedAt.IsZero() || !now.Before(m.renewedAt.Add(m.RenewDeadline))) {
		m.unfencedAt, m.outageFrom = now, m.lastSent()
	}
	if !m.held {
		m.takenAt = now
	}
	m.lease, m.held, m.waiting, m.unreachable = lease, true, observedVersion{}, false
	if lease.Annotations[LeavingAnnotation] == m.Incarnation {
		m.announced = true
	}
	if now.After(m.renewedAt) {
		m.renewedAt = now
	}
	m.writes = append(m.writes, sentWrite{version: lease.ResourceVersion, sentAt: now})
	if len(m.writes) > keptWrites {
		m.writes = m.writes[len(m.writes)-keptWrites:]
	}
}

// lastSent returns when the last successful write was sent; m.mu must be held.
func (m *Member) lastSent() time.Time {
	if len(m.writes) == 0 {
		return time.Time{}
	}
	return m.writes[len(m.writes)-1].sentAt
}

// lose forgets the lease after someone else wrote it: the member is fenced at once, and for good when
// another incarnation took its name.
func (m *Member) lose(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lease, m.renewedAt = nil, time.Time{}
	if errors.Is(err, ErrIdentityTaken) {
		m.nameLost = true
	}
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

// Outage returns the last outage that fenced the member: from when its last successful renewal
// before the failures was sent until the renewal that ended them. In between this process could not
// observe the others either.
func (m *Member) Outage() (from, to time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.outageFrom, m.unfencedAt
}

// ViewStale reports whether a cache that shows this member's lease at cachedVersion is stale: it
// has not shown a write this process sent more than lag before now. While a renewal waits for its
// answer, a version this process has not recorded may be that renewal's (a watch event can come
// before the answer): the cache is then judged by the last of this process's writes it was seen
// to show, at now, as if it still showed that one.
func (m *Member) ViewStale(cachedVersion string, now time.Time, lag time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	shown := m.indexOfWrite(cachedVersion)
	switch {
	case shown >= 0:
		m.lastShown = cachedVersion
	case cachedVersion != "" && m.renewing > 0:
		shown = m.indexOfWrite(m.lastShown)
	}
	for _, w := range m.writes[shown+1:] {
		if now.Sub(w.sentAt) > lag {
			return true
		}
	}
	return false
}

// indexOfWrite returns the index of the kept write that produced version; -1 for none. m.mu must be
// held.
func (m *Member) indexOfWrite(version string) int {
	if version == "" {
		return -1
	}
	for i := len(m.writes) - 1; i >= 0; i-- {
		if m.writes[i].version == version {
			return i
		}
	}
	return -1
}

// SentAt returns when this process sent the write that produced version of its lease, if it is one
// of its latest writes.
func (m *Member) SentAt(version string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.writes {
		if w.version == version {
			return w.sentAt, true
		}
	}
	return time.Time{}, false
}

// Leave says how a member leaves the group in Release.
type Leave struct {
	// Returning, when above zero, says the member stops to restart: the others keep its partitions
	// reserved until its lease has been unchanged for this long.
	Returning time.Duration
	// StateLost says that some partitions still naming this member lost the state of their work.
	StateLost bool
}

// Release writes the clean-leave marker into the member lease: every partition's work has stopped.
// A departing member's lease names no holder any more, so the others take its partitions at once; a
// returning one keeps its holder. The member is fenced from then on. Call it only after the work of
// every partition has stopped and Run has returned.
func (m *Member) Release(ctx context.Context, now time.Time, leave Leave) error {
	m.mu.Lock()
	cached := m.lease
	m.renewedAt = time.Time{}
	m.mu.Unlock()
	if cached == nil {
		return nil
	}
	lease := cached.DeepCopy()
	if leave.Returning <= 0 {
		lease.Spec.HolderIdentity = nil
	}
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(now))
	setAnnotation(lease, LeftAnnotation, m.Incarnation)
	if leave.Returning > 0 {
		setAnnotation(lease, ReturningAnnotation, leave.Returning.String())
	}
	if leave.StateLost {
		setAnnotation(lease, StateLostAnnotation, "true")
	}
	released, err := m.Store.Update(ctx, lease)
	if apierrors.IsConflict(err) {
		// A renewal whose answer was lost (cut off by the stop) may have landed after all: if the
		// stored lease is still this process's own, the leave is written over it.
		released, err = m.releaseOverOwnWrite(ctx, lease)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("releasing member lease %s: %w", m.LeaseName(), err)
	}
	m.mu.Lock()
	m.lease = released
	m.mu.Unlock()
	return nil
}

// releaseOverOwnWrite writes the leave in lease over the stored member lease if that is still this
// process's own (its name and incarnation); anyone else's it leaves alone, with a Conflict.
func (m *Member) releaseOverOwnWrite(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	stored, err := m.Store.Get(ctx, m.LeaseName())
	if err != nil {
		return nil, err
	}
	if Holder(stored) != m.Name || Incarnation(stored) != m.Incarnation {
		return nil, apierrors.NewConflict(coordinationv1.Resource("leases"), m.LeaseName(),
			fmt.Errorf("changed by incarnation %q since this process last wrote it", Incarnation(stored)))
	}
	lease.ResourceVersion = stored.ResourceVersion
	return m.Store.Update(ctx, lease)
}

func isLostRace(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
}

// ForgoReturn turns the returning leave recorded in the member lease of member in group into a
// leave for good: the member's next process runs without the group's role (a rolling update that
// drops it), so it will not be back, and the others need not keep its share for the return grace.
// It writes only over a lease whose last incarnation left returning (it has stopped all its work),
// under the precondition of the version read; any other lease, or none, is left alone. It reports
// whether it wrote.
func ForgoReturn(ctx context.Context, store Store, group, member string) (bool, error) {
	name := MemberLeaseName(group, member)
	l, err := store.Get(ctx, name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading member lease %s: %w", name, err)
	}
	if a := AdvertOf(member, l); !a.Left || a.Returning <= 0 {
		return false, nil
	}
	forgone := l.DeepCopy()
	forgone.Spec.HolderIdentity = nil
	delete(forgone.Annotations, ReturningAnnotation)
	if _, err := store.Update(ctx, forgone); err != nil {
		return false, fmt.Errorf("ending the returning leave in member lease %s: %w", name, err)
	}
	return true, nil
}

// AnnounceLeave makes the renewals from now on say that this process is about to hand its share over
// (LeavingAnnotation), and asks Run for a renewal at once. The others then list the partitions they
// will take from it, while its work goes on (docs/sharding.md, "Graceful stops"). Announced reports
// when a renewal carried it.
func (m *Member) AnnounceLeave() {
	m.mu.Lock()
	m.leaving = true
	m.mu.Unlock()
	select {
	case m.pokeChan() <- struct{}{}:
	default:
	}
}

func (m *Member) isLeaving() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leaving
}

// Announced reports whether a renewal that announced the leave succeeded.
func (m *Member) Announced() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.announced
}

// pokeChan returns the channel that wakes Run early.
func (m *Member) pokeChan() chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.poke == nil {
		m.poke = make(chan struct{}, 1)
	}
	return m.poke
}
