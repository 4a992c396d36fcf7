package sharding

// Action is what a member does with one partition in a reconcile step.
type Action int

const (
	// Keep leaves the partition as it is.
	Keep Action = iota
	// Release stops the partition's work, if any runs here, and then clears the lease's holder.
	Release
	// Acquire writes this member into the lease and starts the work after the write succeeded.
	Acquire
)

// PartitionState is what a member knows of one partition when it plans.
type PartitionState struct {
	// Holder is the holder the member's cache shows ("" for none or no lease yet).
	Holder string
	// Active is true while this member runs the partition's work.
	Active bool
	// Desired is the partition's owner on the ring of the live members.
	Desired string
	// ReservedFor names the member a free partition was released for while that member restarts.
	ReservedFor string
}

// Plan decides one partition for member me; holderLive tells whether another member's lease is live,
// returning whether a member stopped to restart and is still within its grace. It is the protocol of
// docs/sharding.md:
//   - work runs here but the ring wants another owner → Release (stop first, then write);
//   - the lease names me but no work runs here (after a restart or a fence) and the ring wants another
//     owner → Release, so that the desired owner need not wait for my lease to expire;
//   - the partition is reserved for another member that is restarting → Keep: it comes back for it;
//   - the ring wants me, no work runs here, and the lease is free, names me, or names a member whose
//     lease has expired → Acquire (a lease naming me proves nothing until my own write succeeds);
//   - anything else → Keep: wait for the holder to release.
func Plan(me string, s PartitionState, holderLive, returning func(string) bool) Action {
	switch {
	case s.Active && s.Desired != me:
		return Release
	case s.Active:
		return Keep
	case s.Holder == me && s.Desired != me:
		return Release
	case s.ReservedFor != "" && s.ReservedFor != me && returning(s.ReservedFor):
		return Keep
	case s.Desired == me && (s.Holder == "" || s.Holder == me || !holderLive(s.Holder)):
		return Acquire
	}
	return Keep
}
