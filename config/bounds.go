package config

import "time"

// The ranges that validation holds the durations of a config to. A value
// outside them is rejected, not clamped, so that a typo stops the binary at
// start instead of quietly changing what it protects. The original checks
// none of these; its example and Gardener's configs lie well inside.
var (
	// probeIntervalRange: below 1 s every shoot API server is probed in a
	// near loop; above 10 min a lost control plane goes unnoticed for longer
	// than any grace period lasts, and interval × (1 + jitter factor) stays
	// far from the time.Duration limit.
	probeIntervalRange = durationRange{min: time.Second, max: 10 * time.Minute}
	// probeTimeoutRange: below 1 s a loaded but healthy shoot API server
	// times out, and a failed API server probe means no action at all; above
	// 5 min a hanging shoot holds a probe worker for many intervals. The
	// timeout is not tied to probeInterval: the original defaults it (30 s)
	// above the interval (10 s).
	probeTimeoutRange = durationRange{min: time.Second, max: 5 * time.Minute}
	// delayRange bounds the top-level initialDelay and each scaleUp and
	// scaleDown initialDelay: zero is allowed (no wait), and a wait of more
	// than 10 min before a first probe or a scaling step only delays the
	// protection.
	delayRange = durationRange{min: 0, max: 10 * time.Minute}
	// scaleTimeoutRange bounds each scaleUp and scaleDown timeout: it must
	// leave time for a request, and 10 min is far beyond what scaling one
	// resource takes.
	scaleTimeoutRange = durationRange{min: 0, openMin: true, max: 10 * time.Minute}
	// graceRange bounds kcmNodeMonitorGraceDuration; see ClampGracePeriod.
	graceRange = durationRange{min: minGracePeriod, max: maxGracePeriod}
	// watchDurationRange bounds the weeder's watchDuration: a window holds
	// one of the few weeding slots for its whole length, and after an hour
	// the pods that crash-looped because of the outage have long been
	// restarted by their own back-off.
	watchDurationRange = durationRange{min: 0, openMin: true, max: time.Hour}
)

// minNodeLeaseFailureFraction is the least nodeLeaseFailureFraction that
// validation accepts; the original accepts any value in (0, 1] and Gardener
// ships 0.6. Below one half, a minority of nodes losing their leases (one
// zone of three) scales the whole control plane down, although the nodes
// of the other zones still need machine-controller-manager; and a single
// lease the prober cannot judge yet (one recreated under a new UID) makes
// (expired + unknown) / candidates reach the fraction and blocks the
// scale-up of a small shoot (≤ 5 candidates at 0.2).
const minNodeLeaseFailureFraction = 0.5

// Bounds of a node monitor grace period. A kubelet renews its node lease
// every 10 s, and the prober counts a lease expired 0.75 × grace after its
// last renewal, so a grace below 13.4 s counts healthy nodes as expired and
// scales down every shoot of the seed; 16 s leaves 2 s for a renewal to
// land. Above 10 min, nodes that lost their API server go unnoticed for too
// long for the scale-down to protect them.
const (
	minGracePeriod = 16 * time.Second
	maxGracePeriod = 10 * time.Minute
)

// ClampGracePeriod returns d moved into the range that validation holds
// kcmNodeMonitorGraceDuration to, [16s, 10m], and whether it had to move it.
// It is for a Shoot's own nodeMonitorGracePeriod, which the Shoot's owner
// sets and no config validation sees: a tiny value there would make the
// prober scale down that healthy shoot. A zero or negative d is clamped to
// 16s too; a caller treats an unset value as unset before calling.
func ClampGracePeriod(d time.Duration) (time.Duration, bool) {
	clamped := min(max(d, minGracePeriod), maxGracePeriod)
	return clamped, clamped != d
}
