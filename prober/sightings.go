package prober

import (
	"context"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/sharded-dwd/dependency-watchdog/leases"
	"github.com/sharded-dwd/dependency-watchdog/sharding"
)

// SightingsKey is the partition lease annotation in which a releasing replica hands over what its
// probes saw of the node leases of the partition's shoots, so that the next holder goes on observing
// them (and keeps a verdict of expiry while a lease stays unchanged) instead of starting from scratch:
// a meltdown in progress during a rollout is not found 30 s later. Times are ages on the releasing
// replica's clock, as the probe ages of HandoverKey are; the gap between release and acquisition only
// makes them look younger (the safe side). It is an annotation of its own so that a replica of an
// older version, which reads only HandoverKey, is not disturbed.
const SightingsKey = leases.HandoverAnnotationPrefix + "prober-leases"

// maxSightingsBytes bounds the sightings handed over in one partition lease (annotations of an
// object share 256 KiB): a partition whose sightings are larger hands over none.
const maxSightingsBytes = 64 << 10

// handedShoot is what the probe of one shoot saw, as handed over: how long before the release the read
// the sightings come from was sent (so that the next holder's first read can tell which leases were
// renewed since, and bound the kubelets' clock lag from it: the gap of the handover only makes that
// read look later, which makes the lag look larger, the safe side), and the sightings by lease name.
type handedShoot struct {
	SentAgo int64                     `json:"s"`
	Leases  map[string]handedSighting `json:"l"`
}

// handedSighting is one Sighting as handed over: renewTime in Unix milliseconds, the age of Since in
// milliseconds, and the flags.
type handedSighting struct {
	UID     types.UID `json:"u,omitempty"`
	Renew   int64     `json:"r"`
	Ago     int64     `json:"a"`
	Renewed bool      `json:"n,omitempty"`
	Expired bool      `json:"x,omitempty"`
}

// sightingsHandler hands the probes' sightings over with the partitions (see SightingsKey). It is a
// handler of its own beside the Manager, whose state key is HandoverKey; the Manager does the work.
type sightingsHandler struct{ m *Manager }

var _ sharding.AdvisoryStateHandler = sightingsHandler{}

// Acquired does nothing: the Manager reads SightingsKey in its own Acquired.
func (sightingsHandler) Acquired(context.Context, int, sharding.Takeover) {}

// Released does nothing: the Manager keeps the sightings of the probes it stops.
func (sightingsHandler) Released(int) {}

// AdvisoryStateKey implements sharding.AdvisoryStateHandler: the sightings only help.
func (sightingsHandler) AdvisoryStateKey() string { return SightingsKey }

// HandoverState hands the next holder of released partition p the sightings of its shoots.
func (h sightingsHandler) HandoverState(p int) (string, string) {
	h.m.mu.Lock()
	seen := h.m.releasedSeen[p]
	delete(h.m.releasedSeen, p)
	h.m.mu.Unlock()
	if len(seen) == 0 {
		return SightingsKey, ""
	}
	data, err := json.Marshal(seen)
	if err != nil || len(data) > maxSightingsBytes {
		h.m.Log.V(1).Info("Not handing over node lease sightings: too large", "partition", p, "bytes", len(data))
		return SightingsKey, ""
	}
	return SightingsKey, string(data)
}

// keepSightingsLocked records what the stopped probe of ns saw, as ages at now, for HandoverState; m.mu
// must be held, and the probe's run in flight has been waited for.
func (m *Manager) keepSightingsLocked(p int, ns string, probe *shootProbe) {
	if len(probe.st.seen) == 0 {
		return
	}
	now := m.Clock.Now()
	handed := handedShoot{SentAgo: now.Sub(probe.st.lastSent).Milliseconds(), Leases: make(map[string]handedSighting, len(probe.st.seen))}
	for name, s := range probe.st.seen {
		handed.Leases[name] = handedSighting{UID: s.UID, Renew: s.RenewTime.UnixMilli(), Ago: now.Sub(s.Since).Milliseconds(),
			Renewed: s.Renewed, Expired: s.Expired}
	}
	if m.releasedSeen == nil {
		m.releasedSeen = map[int]map[string]handedShoot{}
	}
	if m.releasedSeen[p] == nil {
		m.releasedSeen[p] = map[string]handedShoot{}
	}
	m.releasedSeen[p][ns] = handed
}

// takeSightings records the sightings handed over in state for partition p's shoots, or those this
// replica kept when it stopped the partition itself, as seen at now, for their probes to start from.
// Unreadable state is ignored: those shoots start observing from scratch.
func (m *Manager) takeSightings(p int, state string) {
	var handed map[string]handedShoot
	if state != "" {
		if err := json.Unmarshal([]byte(state), &handed); err != nil {
			m.Log.Error(err, "Ignoring unreadable node lease sightings handed over", "partition", p)
			handed = nil
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if kept := m.releasedSeen[p]; len(handed) == 0 {
		handed = kept
	}
	delete(m.releasedSeen, p)
	now := m.Clock.Now()
	for ns, shoot := range handed {
		if m.Ownership.Partition(ns) != p || shoot.SentAgo < 0 {
			continue
		}
		if m.handedSeen == nil {
			m.handedSeen = map[string]observation{}
		}
		m.handedSeen[ns] = observation{seen: sightingsAt(shoot.Leases, now), sent: now.Add(-time.Duration(shoot.SentAgo) * time.Millisecond)}
	}
}

// sightingsAt turns handed sightings back into Sightings on this replica's clock at now; one that
// claims to have been seen in the future is left out.
func sightingsAt(handed map[string]handedSighting, now time.Time) map[string]Sighting {
	seen := make(map[string]Sighting, len(handed))
	for name, h := range handed {
		if h.Ago < 0 {
			continue
		}
		seen[name] = Sighting{UID: h.UID, RenewTime: time.UnixMilli(h.Renew).UTC(), Since: now.Add(-time.Duration(h.Ago) * time.Millisecond),
			Renewed: h.Renewed, Expired: h.Expired}
	}
	return seen
}
