package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/test"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/demo"
	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/deploy/deploytest"
	"github.com/sharded-dwd/dependency-watchdog/test/dashview"
)

// rulesPath is deploy/prometheus's rule file, from this package's folder.
const rulesPath = "../../deploy/prometheus/rules.yaml"

// TestDashboards is the real check of the dashboards and alerts (make test-dashboards): a Prometheus on
// loopback scrapes three `dwd run` replicas against the simulated seed, as the PodMonitor would, while
// three shoots melt down (and stay scaled down), three crash-looping pods are weeded and one shoot's
// API server goes down. Every expression of every panel of deploy/grafana and every alert of
// deploy/prometheus must parse, and return data; every metric an alert reads must have series; no
// alert may fire. Then one replica is killed: DwdMemberDown fires for it, `dwd shards` shows it
// expired and its partitions held by the others, and when it comes back the alert resolves. During the
// meltdown and after the kill, headless Chromium draws the three dashboards (package dashview): no
// panel may err or show nothing where the story has data.
func TestDashboards(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a seed, three dwd processes and Prometheus")
	}
	bin := os.Getenv("DWD_PROMETHEUS")
	if bin == "" {
		t.Skip("make test-dashboards runs it with Debian's prometheus binary: set DWD_PROMETHEUS to a prometheus binary")
	}
	quietLogs()
	// The replicas keep a Go memory limit, as in a pod, where dwd sets it from the cgroup's: the
	// dashboards draw memory against it.
	t.Setenv("GOMEMLIMIT", "1GiB")
	dir := t.TempDir()
	dwd := test.BuildDwd(t)
	rules, short, err := readRules(rulesPath, 2*scrapeInterval)
	require.NoError(t, err)
	rulesFile := filepath.Join(dir, "rules.yaml")
	require.NoError(t, os.WriteFile(rulesFile, short, 0o644))
	queries, err := deploytest.DashboardQueries()
	require.NoError(t, err)
	require.NotEmpty(t, queries)

	d, buf := setUpDemo(t, demo.Options{Dwd: dwd, Dir: dir}, overlayGrants(t))
	ctx := context.Background()
	_, err = d.StartReplicas(ctx)
	require.NoError(t, err, buf.String())
	started := time.Now()
	prom := startPrometheus(t, bin, dir, d.Replicas, rulesFile)

	// The seed's story before the check: a meltdown whose shoots stay scaled down, and a weeding.
	melted := []string{sim.ShootName(1), sim.ShootName(2), sim.ShootName(3)}
	_, err = d.Meltdown(ctx, melted)
	require.NoError(t, err)
	weeded := []string{sim.ShootName(4), sim.ShootName(5), sim.ShootName(6)}
	_, err = d.Weed(ctx, weeded)
	require.NoError(t, err)
	waitForQuery(t, prom, `sum(dwd_shoot_scaled_down) >= 3 and sum(dwd_weeder_pods_deleted_total) >= 3 and sum(up{job="dwd"}) == 3`,
		"Prometheus has scraped the scale-downs and the deletions of all three replicas")
	// A rate needs two samples in its window, the scale-down and deletion counters included.
	waitForQuery(t, prom, `sum(rate(dwd_scale_operations_total[1m])) > 0 and sum(rate(dwd_weeder_pods_deleted_total[1m])) > 0`,
		"rates over the counters have two samples")

	// The per-shoot series keep the shoot's namespace through the scrape (honor_labels, as the
	// PodMonitor's honorLabels): exactly the melted shoots are scaled down.
	down, err := prom.query(ctx, `dwd_shoot_scaled_down == 1`)
	require.NoError(t, err)
	var downShoots []string
	for _, s := range down {
		downShoots = append(downShoots, s.Metric["namespace"])
	}
	assert.ElementsMatch(t, melted, downShoots, "dwd_shoot_scaled_down names the melted shoots")

	// One shoot of the shard dashboard's shard fails to probe: its API server goes down. The per-shoot
	// dashboard shows a melted shoot of another replica, the one the story kills, so that it is handed
	// over (when the shard holds every melted shoot, the last replica dies and no shoot is handed over).
	shard, victim, shoot := d.Replicas[0].Name, d.Replicas[len(d.Replicas)-1], melted[0]
	for _, r := range d.Replicas[1:] {
		if ns := heldShoot(t, prom, r.Name, true, nil); ns != "" {
			victim, shoot = r, ns
			break
		}
	}
	failing := heldShoot(t, prom, shard, false, append(melted, weeded...))
	require.NotEmpty(t, failing, "%s holds a shoot that is neither melted nor weeded", shard)
	require.NoError(t, d.Seed.Shoots.SetScenario(failing, sim.Scenario{Kind: sim.Down}))
	waitForQuery(t, prom, fmt.Sprintf(`time() - dwd_shoot_last_successful_probe_timestamp_seconds{namespace=%q} > %g`,
		failing, 3*demo.ProbeInterval.Seconds()), "the shoot whose API server is down has not been probed for three intervals")
	t.Logf("shard dashboard: %s, whose %s fails to probe; shoot dashboard: %s; the kill -9 stops %s", shard, failing, shoot, victim.Name)

	t.Run("every panel's expression returns data", func(t *testing.T) {
		for _, q := range queries {
			if q.Annotation {
				continue // it marks events over the time range: the pictures check it
			}
			vars := map[string]string{"shard": ".*", "group": ".*", "datasource": "prometheus", "shoot": shoot,
				"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}
			if strings.Contains(q.Dashboard, "shard") {
				vars["shard"] = shard
			}
			expr := deploytest.ExpandQuery(q.Expr, vars)
			name := fmt.Sprintf("%s panel %d %q %s", q.Dashboard, q.PanelID, q.Panel, q.RefID)
			exprs := []string{expr, withoutFallback(expr)}
			if showsNothingAllowed("meltdown")(q.Dashboard, q.Panel) {
				exprs = exprs[:1]
			}
			// A fallback (or on() vector(0)) returns data whatever the rest does: the rest must too.
			for _, e := range exprs {
				series, err := queryWithData(ctx, prom, e)
				if assert.NoError(t, err, "%s: %s", name, e) {
					assert.NotEmpty(t, series, "%s returns no data: %s", name, e)
				}
			}
		}
		t.Logf("%d panel expressions of %d dashboards evaluated", len(queries), countDashboards(queries))
	})

	t.Run("every alert's expression parses and each of its selectors returns data", func(t *testing.T) {
		for _, r := range rules {
			_, err := prom.query(ctx, r.expr)
			assert.NoError(t, err, "%s: %s", r.name, r.expr)
			sels := selectors(r.expr)
			assert.NotEmpty(t, sels, r.name)
			for _, sel := range sels {
				series, err := queryWithData(ctx, prom, sel)
				if assert.NoError(t, err, sel) {
					assert.NotEmpty(t, series, "%s reads %s, which selects no series", r.name, sel)
				}
			}
		}
	})

	t.Run("nothing fires in a healthy seed with 3 of 30 shoots scaled down, but DwdShootScaledDownLong for them", func(t *testing.T) {
		// The rules' for is shortened: the scaled-down shoots are down "long" as soon as it is evaluated.
		var long []string
		var others []alert
		require.Eventually(t, func() bool {
			alerts, err := prom.alerts(ctx)
			require.NoError(t, err)
			long, others = nil, nil
			for _, a := range alerts {
				if a.Labels["alertname"] == "DwdShootScaledDownLong" {
					long = append(long, a.Labels["namespace"])
				} else {
					others = append(others, a)
				}
			}
			return len(long) >= len(melted)
		}, 30*time.Second, 250*time.Millisecond, "DwdShootScaledDownLong is evaluated for the scaled-down shoots")
		assert.ElementsMatch(t, melted, long)
		assert.Empty(t, others)
		t.Logf("other alerts pending or firing after the meltdown and the weeding: %v", others)
	})

	t.Run("the dashboards drawn during the meltdown show data", func(t *testing.T) {
		drawDashboards(t, prom, "meltdown", func(dir string) []dashview.Page {
			return dashboardPages(dir, "meltdown", started, shard, shoot)
		})
	})

	t.Run("a killed replica fires DwdMemberDown; dwd shards shows it", func(t *testing.T) {
		killed := time.Now()
		victim.Kill()
		// dwd shards names the killed member expired once its lease has been unchanged for a duration,
		// until the others delete the lease as an orphan, two durations after its last renewal: asked
		// after the alert and the takeover, under load, it found the lease gone.
		expired := regexp.MustCompile(`(?m)^` + victim.Name + `\s+expired\s`)
		var out string
		require.Eventually(t, func() bool {
			got, err := shardsOutput(dwd, d)
			if err == nil {
				out = got
			}
			return err == nil && expired.MatchString(got)
		}, 2*demo.LeaseDuration, 250*time.Millisecond, "dwd shards says %s expired", victim.Name)
		t.Logf("dwd shards %s after the kill -9 of %s:\n%s", time.Since(killed).Round(100*time.Millisecond), victim.Name, out)
		seen := map[string]time.Duration{} // alert and state -> first seen after the kill
		require.Eventually(t, func() bool {
			alerts, err := prom.alerts(ctx)
			if err != nil {
				return false
			}
			for _, a := range alerts {
				if _, ok := seen[a.String()]; !ok {
					seen[a.String()] = time.Since(killed)
				}
			}
			return slices.ContainsFunc(alerts, func(a alert) bool {
				return a.Labels["alertname"] == "DwdMemberDown" && a.Labels["member"] == victim.Name && a.State == "firing"
			})
		}, 60*time.Second, 250*time.Millisecond, "DwdMemberDown fires for %s", victim.Name)
		// The takeover: every partition held again, every shoot probed by the two others.
		require.NoError(t, d.Until(ctx, demo.LeaseDuration+15*time.Second, func(ctx context.Context) bool {
			held, probing := d.Totals(ctx)
			return held == sim.Partitions && probing == float64(d.Options.Shoots)
		}))
		t.Logf("alerts seen after the kill -9 of %s (first seen, after the kill): %s", victim.Name, describeSeen(seen))

		out = dwdShards(t, dwd, d)
		t.Logf("dwd shards after the kill -9 of %s and the takeover:\n%s", victim.Name, out)
		for _, r := range d.Replicas {
			if r != victim {
				assert.Regexp(t, `(?m)^`+r.Name+`\s+live\s`, out, "%s is live", r.Name)
			}
		}
		assert.Contains(t, out, "Partitions without a live holder: none")
	})

	t.Run("the dashboards drawn after the kill -9 show data", func(t *testing.T) {
		drawDashboards(t, prom, "kill", func(dir string) []dashview.Page {
			return dashboardPages(dir, "kill", started, shard, shoot)
		})
	})

	t.Run("the replica returns: DwdMemberDown resolves", func(t *testing.T) {
		require.NoError(t, victim.Restart())
		require.Eventually(t, func() bool {
			alerts, err := prom.alerts(ctx)
			return err == nil && !slices.ContainsFunc(alerts, func(a alert) bool { return a.Labels["alertname"] == "DwdMemberDown" })
		}, 60*time.Second, 250*time.Millisecond, "DwdMemberDown resolves once %s is scraped again", victim.Name)
	})
}

// heldShoot returns a shoot member holds (it exports the shoot's dwd_shoot_scaled_down), scaled down or
// not as down says and not in others, or "" when it holds none.
func heldShoot(t *testing.T, prom *prometheusServer, member string, down bool, others []string) string {
	t.Helper()
	value := 0
	if down {
		value = 1
	}
	series, err := prom.query(context.Background(), fmt.Sprintf(`dwd_shoot_scaled_down{member=%q} == %d`, member, value))
	require.NoError(t, err)
	for _, s := range series {
		if ns := s.Metric["namespace"]; !slices.Contains(others, ns) {
			return ns
		}
	}
	return ""
}

// waitForQuery waits until expr returns data.
func waitForQuery(t *testing.T, prom *prometheusServer, expr, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		series, err := prom.query(context.Background(), expr)
		return err == nil && len(series) > 0
	}, 60*time.Second, 250*time.Millisecond, "%s: %s", what, expr)
}

// countDashboards counts the dashboards queries come from.
func countDashboards(queries []deploytest.DashboardQuery) int {
	seen := map[string]bool{}
	for _, q := range queries {
		seen[q.Dashboard] = true
	}
	return len(seen)
}

// describeSeen lists the alerts of seen by the time they were first seen.
func describeSeen(seen map[string]time.Duration) string {
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return int(seen[a] - seen[b]) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+" at "+strconv.FormatFloat(seen[k].Seconds(), 'f', 1, 64)+"s")
	}
	return strings.Join(parts, "; ")
}

// dwdShards runs `dwd shards` against the demo's seed with the seed's own kubeconfig and returns its
// table.
func dwdShards(t *testing.T, dwd string, d *demo.Demo) string {
	t.Helper()
	out, err := shardsOutput(dwd, d)
	require.NoError(t, err, out)
	return out
}

// shardsOutput runs dwd shards against the demo's seed and returns what it printed.
func shardsOutput(dwd string, d *demo.Demo) (string, error) {
	out, err := exec.Command(dwd, "shards", "--kubeconfig="+d.Seed.KubeconfigPath(), "--shard-namespace="+d.Namespace).CombinedOutput()
	return string(out), err
}

// fallback is the tail of a dashboard expression that makes it return data when the rest returns none.
var fallback = regexp.MustCompile(`\s+or\s+on\s*\(\s*\)\s+(?:label_replace\(\s*)?vector\(`)

// withoutFallback returns expr without its fallback tail, or expr when it has none.
func withoutFallback(expr string) string {
	at := fallback.FindAllStringIndex(expr, -1)
	if len(at) == 0 {
		return expr
	}
	return expr[:at[len(at)-1][0]]
}

// selectors returns the series selectors of expr: each metric it names with the label matchers written
// after it (every distinct one), so that a matcher on a label the metric lacks is caught.
func selectors(expr string) []string {
	var sels []string
	for _, name := range deploytest.MetricNames(expr) {
		re := regexp.MustCompile(`(?:^|[^A-Za-z0-9_:])(` + regexp.QuoteMeta(name) + `(?:\s*\{[^}]*\})?)`)
		for _, m := range re.FindAllStringSubmatch(expr, -1) {
			if !slices.Contains(sels, m[1]) {
				sels = append(sels, m[1])
			}
		}
	}
	return sels
}

func TestSelectorsAndFallbacks(t *testing.T) {
	assert.Equal(t, []string{`up{job="dwd"}`}, selectors(`up{job="dwd"} == 0`))
	assert.Equal(t, []string{`dwd_a{x="1"}`, `dwd_a`, `dwd_b`},
		selectors(`sum by (member) (rate(dwd_a{x="1"}[5m])) or 0 * max by (member) (dwd_a) and on (member) dwd_b > 0`))
	assert.Equal(t, `topk(10, dwd_a)`, withoutFallback(`topk(10, dwd_a) or on() label_replace(vector(0), "namespace", "(none)", "", "")`))
	assert.Equal(t, `sum(rate(dwd_a[1m]))`, withoutFallback(`sum(rate(dwd_a[1m])) or on() vector(0)`))
	assert.Equal(t, `dwd_a or dwd_b`, withoutFallback(`dwd_a or dwd_b`))
}
