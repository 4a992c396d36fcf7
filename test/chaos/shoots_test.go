package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
)

// shootScenarios are the scenarios of shoots that lie or fail and of broken objects in the seed.
var shootScenarios = []scenario{
	{name: "lying and failing shoots", run: lyingShoots},
	{name: "broken seed objects", run: brokenObjects},
}

// change is one thing done to one shoot, and how to undo it.
type change struct {
	name        string
	apply, undo func(ctx context.Context, c *cluster, ns string) error
}

// scenarioChange sets a sim.Scenario and undoes it with Healthy.
func scenarioChange(name string, sc sim.Scenario) change {
	return change{name: name,
		apply: func(_ context.Context, c *cluster, ns string) error { return c.seed.Shoots.SetScenario(ns, sc) },
		undo: func(_ context.Context, c *cluster, ns string) error {
			return c.seed.Shoots.SetScenario(ns, sim.Scenario{})
		}}
}

// faultChange sets a sim.Fault and undoes it.
func faultChange(name string, f sim.Fault) change {
	return change{name: name,
		apply: func(_ context.Context, c *cluster, ns string) error { c.faults.SetFault(ns, f); return nil },
		undo:  func(_ context.Context, c *cluster, ns string) error { c.faults.SetFault(ns, sim.NoFault); return nil }}
}

// secretChange replaces a shoot's kubeconfig Secret's data; undo points it at the fault server again.
func secretChange(name string, data func(c *cluster, ns string) (map[string][]byte, error)) change {
	return change{name: name,
		apply: func(ctx context.Context, c *cluster, ns string) error {
			d, err := data(c, ns)
			if err != nil {
				return err
			}
			return c.setKubeconfig(ctx, ns, d)
		},
		undo: func(ctx context.Context, c *cluster, ns string) error { return c.routeThroughFaults(ctx, ns) }}
}

// hugeShoot names the lie of the huge lease list, whose replica's memory the soak reports.
const hugeShoot = "huge lease list"

// lies are what the shoots tell, one shoot each, all at once.
func lies(sz sizes) []change {
	return []change{
		scenarioChange("stale watch cache, leases 1m old", sim.Scenario{Kind: sim.StaleCache, CacheLag: time.Minute}),
		scenarioChange("lease list body 6s late", sim.Scenario{Kind: sim.SlowBody, Delay: 6 * time.Second}),
		scenarioChange("node clocks 90s behind", sim.Scenario{NodeClockOffset: -90 * time.Second}),
		scenarioChange("server clock 60s ahead", sim.Scenario{ServerClockOffset: time.Minute}),
		scenarioChange(hugeShoot, sim.Scenario{ExtraLeases: sz.hugeLeases}),
		scenarioChange("answers after the probe timeout", sim.Scenario{Kind: sim.Slow, Delay: 15 * time.Second}),
		scenarioChange("429 Too Many Requests", sim.Scenario{Kind: sim.Throttled, RetryAfter: 2 * time.Second}),
		faultChange("500 Internal Server Error", sim.ServerError),
		faultChange("malformed JSON lists", sim.MalformedJSON),
		faultChange("leases without renewTime", sim.LeaseWithoutRenewTime),
		secretChange("a CA that did not sign the server", func(c *cluster, ns string) (map[string][]byte, error) {
			kubeconfig, err := c.seed.Shoots.KubeconfigWithOtherCA(ns)
			return map[string][]byte{"kubeconfig": kubeconfig}, err
		}),
	}
}

// lieHold is how long the shoots lie: past the moment a meltdown would have been decided.
const lieHold = expiredAge + 5*time.Second

// lyingShoots has one shoot tell each lie for lieHold: no dependent may be scaled down (the round
// checks), and the faults must show in the metrics.
func lyingShoots(ctx context.Context, c *cluster, rng *rand.Rand, sz sizes) ([]string, error) {
	changes := lies(sz)
	shoots := c.randomShoots(rng, len(changes))
	before := c.faultMetrics(ctx)
	errs := []error{c.applyAll(ctx, changes, shoots)}
	errs = append(errs, hold(ctx, lieHold))
	huge := shoots[indexOf(changes, hugeShoot)]
	if owner := c.ownerOf(huge); owner != nil {
		if peak, err := owner.Memory("VmHWM"); err == nil {
			c.stats.peakRSS = max(c.stats.peakRSS, peak)
			c.logf("peak RSS of %s, which probes the shoot with %d extra leases: %d MiB", owner.Name, sz.hugeLeases, peak>>20)
		}
	}
	after := c.faultMetrics(ctx)
	errs = append(errs, c.undoAll(ctx, changes, shoots))
	delta := after.minus(before)
	c.logf("fault metrics over the lies: %v", delta)
	for _, want := range []string{"throttled api=shoot", "inconclusive too_large", "probes apiserver_failed", "probes leases_failed"} {
		if delta[want] <= 0 {
			errs = append(errs, fmt.Errorf("the lies did not show in %s (%v)", want, delta))
		}
	}
	return nil, errors.Join(errs...)
}

func indexOf(changes []change, name string) int {
	for i, ch := range changes {
		if ch.name == name {
			return i
		}
	}
	panic("no change " + name)
}

// applyAll applies change i to shoot i.
func (c *cluster) applyAll(ctx context.Context, changes []change, shoots []string) error {
	var errs []error
	for i, ch := range changes {
		if err := ch.apply(ctx, c, shoots[i]); err != nil {
			errs = append(errs, fmt.Errorf("%s on %s: %w", ch.name, shoots[i], err))
		}
	}
	return errors.Join(errs...)
}

// undoAll undoes change i on shoot i.
func (c *cluster) undoAll(ctx context.Context, changes []change, shoots []string) error {
	var errs []error
	for i, ch := range changes {
		if err := ch.undo(ctx, c, shoots[i]); err != nil {
			errs = append(errs, fmt.Errorf("undoing %s on %s: %w", ch.name, shoots[i], err))
		}
	}
	return errors.Join(errs...)
}

// ownerOf is the replica that probed the shoot last, by the User-Agent it sends.
func (c *cluster) ownerOf(ns string) *sim.Replica {
	agent := c.seed.Shoots.Callers()[ns].Agent
	for _, r := range c.replicas {
		if strings.Contains(agent, "("+r.Name+")") {
			return r
		}
	}
	return nil
}

// faultCounts are the metrics that show faults, summed over the replicas, by "metric label".
type faultCounts map[string]float64

func (c *cluster) faultMetrics(ctx context.Context) faultCounts {
	counts := faultCounts{}
	for _, r := range c.replicas {
		m := r.Metrics(ctx, "dwd_probes_total", "dwd_probe_inconclusive_total", "dwd_shoot_config_errors_total",
			"dwd_api_throttled_requests_total")
		for _, f := range []struct{ key, metric, label string }{
			{"probes ", "dwd_probes_total", "result"},
			{"inconclusive ", "dwd_probe_inconclusive_total", "reason"},
			{"config errors ", "dwd_shoot_config_errors_total", "kind"},
		} {
			for _, s := range m[f.metric].GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() == f.label {
						counts[f.key+l.GetValue()] += s.GetCounter().GetValue()
					}
				}
			}
		}
		counts["throttled api=shoot"] += dwdproc.Sum(m, "dwd_api_throttled_requests_total", "api=shoot")
	}
	return counts
}

// minus is the increase of each count since before.
func (f faultCounts) minus(before faultCounts) faultCounts {
	d := faultCounts{}
	for k, v := range f {
		if v-before[k] != 0 {
			d[k] = v - before[k]
		}
	}
	return d
}

// brokenObjects puts broken objects into the seed, one shoot each: each must be reported for its shoot
// (dwd_shoot_config_errors_total, a log line), every other shoot must still be probed, nothing may
// run the kubeconfig's command, and no replica may panic (the round checks).
func brokenObjects(ctx context.Context, c *cluster, rng *rand.Rand, _ sizes) ([]string, error) {
	marker := filepath.Join(c.dir, "exec-plugin-ran")
	changes := broken(marker)
	shoots := c.randomShoots(rng, len(changes))
	before := c.faultMetrics(ctx)
	reported := c.countLogLines("Cannot probe shoot")
	applied := time.Now()
	errs := []error{c.applyAll(ctx, changes, shoots)}
	healthy := set(c.shoots)
	for _, ns := range shoots {
		delete(healthy, ns)
	}
	err := until(ctx, 3*probeInterval+5*time.Second, func(ctx context.Context) bool {
		d := c.faultMetrics(ctx).minus(before)
		return d["config errors cluster"] >= 1 && d["config errors kubeconfig"] >= 4 && len(c.unprobedSinceAmong(applied, healthy)) == 0
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("broken objects not reported, or other shoots not probed (config errors %v, unprobed %v): %w",
			c.faultMetrics(ctx).minus(before), c.unprobedSinceAmong(applied, healthy), err))
	}
	if n := c.countLogLines("Cannot probe shoot") - reported; n < len(changes) {
		errs = append(errs, fmt.Errorf("%d log lines say a shoot cannot be probed, want %d", n, len(changes)))
	}
	if _, err := os.Stat(marker); err == nil {
		errs = append(errs, errors.New("a replica ran the exec plugin of a shoot's kubeconfig"))
	}
	errs = append(errs, c.undoAll(ctx, changes, shoots))
	return nil, errors.Join(errs...)
}

// broken are the broken objects, one shoot each; the exec plugin would create marker.
func broken(marker string) []change {
	kubeconfig := func(user string) func(*cluster, string) (map[string][]byte, error) {
		return func(c *cluster, ns string) (map[string][]byte, error) {
			good, err := c.faults.Kubeconfig(ns)
			if err != nil {
				return nil, err
			}
			return map[string][]byte{"kubeconfig": withUser(good, user)}, nil
		}
	}
	return []change{
		{name: "Cluster with an invalid Shoot", apply: setHibernation(`"yes"`), undo: setHibernation("false")},
		secretChange("Secret without the kubeconfig key", func(c *cluster, ns string) (map[string][]byte, error) {
			good, err := c.faults.Kubeconfig(ns)
			return map[string][]byte{"config": good}, err
		}),
		secretChange("garbage kubeconfig", func(*cluster, string) (map[string][]byte, error) {
			return map[string][]byte{"kubeconfig": []byte("\x00\x01{{ not: [a kubeconfig")}, nil
		}),
		secretChange("kubeconfig with an exec plugin", kubeconfig(
			`{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ["-c", "touch `+marker+`"], interactiveMode: Never}}`)),
		secretChange("kubeconfig that reads a file", kubeconfig(`{tokenFile: /etc/hostname}`)),
	}
}

// withUser replaces the user of a kubeconfig written by the sim (one user, named after the shoot)
// with user, a YAML flow mapping.
func withUser(kubeconfig []byte, user string) []byte {
	lines := strings.Split(string(kubeconfig), "\n")
	for i, line := range lines {
		if strings.HasPrefix(line, "  user:") {
			lines[i] = "  user: " + user
			// the token follows on the next line
			if i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "token:") {
				lines = append(lines[:i+1], lines[i+2:]...)
			}
			break
		}
	}
	return []byte(strings.Join(lines, "\n"))
}

var clusterGVK = schema.GroupVersionKind{Group: "extensions.gardener.cloud", Version: "v1alpha1", Kind: "Cluster"}

// setHibernation sets spec.shoot.spec.hibernation.enabled of a shoot's Cluster to a JSON value: a
// string makes the Shoot undecodable.
func setHibernation(value string) func(ctx context.Context, c *cluster, ns string) error {
	return func(ctx context.Context, c *cluster, ns string) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(clusterGVK)
		u.SetName(ns)
		patch := `{"spec":{"shoot":{"spec":{"hibernation":{"enabled":` + value + `}}}}}`
		return c.seed.Env.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(patch)))
	}
}

// unprobedSinceAmong returns the shoots of among whose last probe was before t.
func (c *cluster) unprobedSinceAmong(t time.Time, among map[string]bool) []string {
	var out []string
	for _, ns := range c.unprobedSince(t) {
		if among[ns] {
			out = append(out, ns)
		}
	}
	return out
}

// countLogLines counts the lines of the replicas' logs that contain s.
func (c *cluster) countLogLines(s string) int {
	logs, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	n := 0
	for _, log := range logs {
		data, err := os.ReadFile(log)
		if err == nil {
			n += strings.Count(string(data), s)
		}
	}
	return n
}
