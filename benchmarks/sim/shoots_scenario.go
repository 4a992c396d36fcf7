package sim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ScenarioKind is how a simulated shoot API server behaves.
type ScenarioKind int

const (
	// Healthy answers every request at once; every node lease was renewed by its kubelet within the
	// last renew interval (ShootServerOptions.RenewInterval), except that a kubelet resuming after a
	// Meltdown renews first at its next renew instant.
	Healthy ScenarioKind = iota
	// Meltdown answers like Healthy, but a fraction of the node leases has expired: the kubelets
	// cannot reach their API server, which the node-lease probe must detect.
	Meltdown
	// Down closes every connection without an answer, so clients see a transport error.
	Down
	// Slow waits Delay, then answers like Healthy as of the end of the wait.
	Slow
	// Throttled answers every request with 429 Too Many Requests and Retry-After.
	Throttled
	// StaleCache answers lists asked with a resourceVersion (resourceVersion=0 is the cheap read from
	// the API server's watch cache) from a cache frozen CacheLag before the scenario was set: its
	// renewTimes age from then on. Lists asked without one (a consistent read) are answered fresh, as
	// Healthy. It is the HA shoot API server whose watch cache lags etcd.
	StaleCache
	// SlowBody fixes the lease list at the moment it is asked, sends the headers, and delivers the body
	// Delay later: the renewTimes a client reads are Delay older than they were when served. Other
	// requests are answered as Healthy.
	SlowBody
)

// kindNames are the names of the kinds, in order.
var kindNames = []string{"Healthy", "Meltdown", "Down", "Slow", "Throttled", "StaleCache", "SlowBody"}

// String returns the name of the kind.
func (k ScenarioKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "ScenarioKind(" + strconv.Itoa(int(k)) + ")"
}

// ParseScenarioKind returns the kind with the name, case-insensitively.
func ParseScenarioKind(name string) (ScenarioKind, error) {
	for i, n := range kindNames {
		if strings.EqualFold(n, name) {
			return ScenarioKind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown scenario kind %q (%s)", name, strings.Join(kindNames, ", "))
}

// Bounds of the Scenario fields that are not bounded by their meaning.
const (
	// maxExtraObjects bounds ExtraLeases and ExtraNodes.
	maxExtraObjects = 10_000_000
	// maxClockOffset bounds NodeClockOffset and ServerClockOffset.
	maxClockOffset = 24 * time.Hour
)

// Scenario is the behaviour of one simulated shoot API server. The zero value is Healthy. The fields
// below Kind's own ones lie in any kind that answers (not Down), and combine with it.
type Scenario struct {
	Kind ScenarioKind
	// ExpiredFraction (Meltdown only) is the fraction of the shoot's node leases, in [0, 1], whose
	// kubelets stop renewing when the scenario is set (those a Meltdown before stopped stay stopped
	// since then): each renewTime stays at its last renewal, and the leases expire as they age (see
	// ShootServer.ExpiredSince and Melted). round(fraction × nodes) leases expire, the first ones in
	// the order the nodes were given, so the outcome is deterministic. A kubelet the next scenario
	// leaves running resumes at its next renew instant: no read shows a renewal while it was stopped.
	ExpiredFraction float64
	// Delay (Slow and SlowBody only) is how long an answer is held back.
	Delay time.Duration
	// RetryAfter (Throttled only) is what the answers ask clients to wait, in whole seconds; 1s when
	// zero.
	RetryAfter time.Duration
	// CacheLag (StaleCache only) is how far the watch cache was behind when the scenario was set: its
	// renewTimes are those of CacheLag before then.
	CacheLag time.Duration
	// NodeClockOffset is added to every renewTime the kubelets write: -90s is node clocks 90 s behind.
	NodeClockOffset time.Duration
	// ServerClockOffset is added to the Date header of every answer: the shoot API server's clock.
	ServerClockOffset time.Duration
	// ExtraLeases Leases that belong to no node (a tenant filling kube-node-lease) follow the node
	// leases in the lease list, freshly renewed; ExtraNodes Nodes without a Machine follow the nodes.
	ExtraLeases int
	ExtraNodes  int
}

// Validate reports everything wrong with the scenario; SetScenario refuses a scenario it rejects.
func (sc Scenario) Validate() error {
	var errs []error
	only := func(set bool, field string, kinds ...ScenarioKind) {
		for _, k := range kinds {
			if sc.Kind == k {
				return
			}
		}
		if set {
			errs = append(errs, fmt.Errorf("%s is only for %v, not %v", field, kinds, sc.Kind))
		}
	}
	if sc.Kind < Healthy || sc.Kind > SlowBody {
		errs = append(errs, fmt.Errorf("unknown scenario kind %v", sc.Kind))
	}
	if math.IsNaN(sc.ExpiredFraction) || sc.ExpiredFraction < 0 || sc.ExpiredFraction > 1 {
		errs = append(errs, fmt.Errorf("expiredFraction %v is not in [0, 1]", sc.ExpiredFraction))
	}
	only(sc.ExpiredFraction != 0, "expiredFraction", Meltdown)
	errs = append(errs, nonNegative("delay", sc.Delay), nonNegative("retryAfter", sc.RetryAfter), nonNegative("cacheLag", sc.CacheLag))
	only(sc.Delay != 0, "delay", Slow, SlowBody)
	only(sc.RetryAfter != 0, "retryAfter", Throttled)
	only(sc.CacheLag != 0, "cacheLag", StaleCache)
	if sc.RetryAfter%time.Second != 0 {
		errs = append(errs, fmt.Errorf("retryAfter %v is not whole seconds", sc.RetryAfter))
	}
	for _, offset := range []struct {
		field string
		d     time.Duration
	}{{"nodeClockOffset", sc.NodeClockOffset}, {"serverClockOffset", sc.ServerClockOffset}} {
		if offset.d < -maxClockOffset || offset.d > maxClockOffset {
			errs = append(errs, fmt.Errorf("%s %v is beyond ±%v", offset.field, offset.d, maxClockOffset))
		}
	}
	for _, extra := range []struct {
		field string
		n     int
	}{{"extraLeases", sc.ExtraLeases}, {"extraNodes", sc.ExtraNodes}} {
		if extra.n < 0 || extra.n > maxExtraObjects {
			errs = append(errs, fmt.Errorf("%s %d is not in [0, %d]", extra.field, extra.n, maxExtraObjects))
		}
	}
	return errors.Join(errs...)
}

// nonNegative reports a negative duration, else nil.
func nonNegative(field string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s %v is negative", field, d)
	}
	return nil
}

// expiredLeases returns how many of n node leases have expired under the scenario.
func (sc Scenario) expiredLeases(n int) int {
	if sc.Kind != Meltdown {
		return 0
	}
	return int(math.Round(sc.ExpiredFraction * float64(n)))
}

// retryAfterSeconds is the Retry-After of a Throttled answer.
func (sc Scenario) retryAfterSeconds() int {
	if sc.RetryAfter == 0 {
		return 1
	}
	return int(sc.RetryAfter / time.Second)
}
