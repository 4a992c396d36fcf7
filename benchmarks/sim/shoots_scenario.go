package sim

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// ScenarioKind is how a simulated shoot API server behaves.
type ScenarioKind int

const (
	// Healthy answers every request at once; every node lease is renewed "now".
	Healthy ScenarioKind = iota
	// Meltdown answers like Healthy, but a fraction of the node leases has expired: the kubelets
	// cannot reach their API server, which the node-lease probe must detect.
	Meltdown
	// Down closes every connection without an answer, so clients see a transport error.
	Down
	// Slow answers like Healthy after a delay.
	Slow
	// Throttled answers every request with 429 Too Many Requests and Retry-After: 1.
	Throttled
)

// String returns the name of the kind.
func (k ScenarioKind) String() string {
	switch k {
	case Healthy:
		return "Healthy"
	case Meltdown:
		return "Meltdown"
	case Down:
		return "Down"
	case Slow:
		return "Slow"
	case Throttled:
		return "Throttled"
	}
	return "ScenarioKind(" + strconv.Itoa(int(k)) + ")"
}

// Scenario is the behaviour of one simulated shoot API server. The zero value is Healthy.
type Scenario struct {
	Kind ScenarioKind
	// ExpiredFraction (Meltdown only) is the fraction of the shoot's node leases, in [0, 1], whose
	// renewTime is ShootServerOptions.ExpiredAge old. round(fraction × nodes) leases expire, the first
	// ones in the order the nodes were given, so the outcome is deterministic.
	ExpiredFraction float64
	// Delay (Slow only) is added to every request before it is answered.
	Delay time.Duration
}

// validate reports the first thing wrong with the scenario.
func (sc Scenario) validate() error {
	switch {
	case sc.Kind < Healthy || sc.Kind > Throttled:
		return fmt.Errorf("unknown scenario kind %v", sc.Kind)
	case math.IsNaN(sc.ExpiredFraction) || sc.ExpiredFraction < 0 || sc.ExpiredFraction > 1:
		return fmt.Errorf("expiredFraction %v is not in [0, 1]", sc.ExpiredFraction)
	case sc.Delay < 0:
		return fmt.Errorf("delay %v is negative", sc.Delay)
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
