package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/deploy/deploytest"
)

const (
	// dashboardsDir holds the dashboards and the kustomization of their ConfigMap.
	dashboardsDir = "grafana"
	overviewFile  = "dwd-overview.json"
	shardFile     = "dwd-shard.json"
	shootFile     = "dwd-shoot.json"
	// dashboardDatasource is the datasource of every panel and target: the datasource variable, in the
	// string form Grafana 7.5 (Plutono) reads and current Grafana migrates.
	dashboardDatasource = "${datasource}"
	// shardFilter is how an expression selects the shards of the shard variable.
	shardFilter = `member=~"$shard"`
	// shootFilter is how an expression of the per-shoot dashboard selects its shoot.
	shootFilter = `namespace="$shoot"`
	// seedDatasource is the data source Gardener's seed Plutono names the Prometheus that scrapes dwd
	// (gardener/gardener pkg/component/observability/plutono); its default data source is another.
	seedDatasource = "prometheus-seed"
	// alertsMetric is Prometheus' own series of the pending and firing alerts.
	alertsMetric = "ALERTS"
)

// dashboardFilter is the selector every expression of a dashboard carries: the shards of the shard
// variable, or on the per-shoot dashboard the shoot.
var dashboardFilter = map[string]string{overviewFile: shardFilter, shardFile: shardFilter, shootFile: shootFilter}

// dashboardIdentity is the title and uid each dashboard file must have.
var dashboardIdentity = map[string]struct{ title, uid string }{
	overviewFile: {"dwd / overview", "dwd-overview"},
	shardFile:    {"dwd / shard", "dwd-shard"},
	shootFile:    {"dwd / shoot", "dwd-shoot"},
}

// dashboardPanelTypes are the panel types both Plutono (Grafana 7.5) and current Grafana render.
var dashboardPanelTypes = []string{"graph", "stat", "table", "text", "row", "gauge", "bargauge", "heatmap"}

// dashboardBuiltins are Grafana's built-in variables an expression may use.
var dashboardBuiltins = []string{"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms"}

// testDashboard is what the structure checks read of a dashboard.
type testDashboard struct {
	Title         string      `json:"title"`
	UID           string      `json:"uid"`
	SchemaVersion int         `json:"schemaVersion"`
	Panels        []testPanel `json:"panels"`
	Templating    struct {
		List []testVariable `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []testAnnotation `json:"list"`
	} `json:"annotations"`
}

// testAnnotation is an annotation of a dashboard: Grafana's built-in one, or a Prometheus query.
type testAnnotation struct {
	BuiltIn     int    `json:"builtIn"`
	Name        string `json:"name"`
	Datasource  any    `json:"datasource"`
	Expr        string `json:"expr"`
	Step        string `json:"step"`
	TitleFormat string `json:"titleFormat"`
	Enable      bool   `json:"enable"`
}

type testPanel struct {
	ID         *int         `json:"id"`
	Type       string       `json:"type"`
	Title      string       `json:"title"`
	GridPos    *testGridPos `json:"gridPos"`
	Datasource any          `json:"datasource"`
	Targets    []testTarget `json:"targets"`
	Panels     []testPanel  `json:"panels"`
}

type testGridPos struct {
	H, W, X, Y int
}

type testTarget struct {
	Expr       string `json:"expr"`
	RefID      string `json:"refId"`
	Datasource any    `json:"datasource"`
	Instant    bool   `json:"instant"`
}

type testVariable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Datasource any    `json:"datasource"`
	Query      any    `json:"query"`
	Multi      bool   `json:"multi"`
	Current    struct {
		Value any `json:"value"`
	} `json:"current"`
	IncludeAll bool   `json:"includeAll"`
	AllValue   string `json:"allValue"`
}

// flatPanels returns the panels of d, each followed by those it holds.
func flatPanels(panels []testPanel) []testPanel {
	var out []testPanel
	for _, p := range panels {
		out = append(out, p)
		out = append(out, flatPanels(p.Panels)...)
	}
	return out
}

// dashboardProblems lists what is wrong with the dashboard file name holding data; exported are the
// metric names dwd defines.
func dashboardProblems(name string, data []byte, exported []string) []string {
	var d testDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return []string{fmt.Sprintf("%s: invalid JSON: %v", name, err)}
	}
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, name+": "+fmt.Sprintf(format, args...)) }
	want := dashboardIdentity[name]
	if d.Title != want.title {
		add("title %q, want %q", d.Title, want.title)
	}
	if d.UID != want.uid {
		add("uid %q, want %q", d.UID, want.uid)
	}
	if d.SchemaVersion != 27 {
		add("schemaVersion %d, want 27 (Grafana 7.5)", d.SchemaVersion)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	for _, v := range d.Templating.List {
		if ds, ok := v.Datasource.(string); ok {
			problems = append(problems, unknownVariables(name, "variable "+v.Name, ds, vars)...)
		}
		if q, ok := v.Query.(string); ok {
			problems = append(problems, unknownVariables(name, "variable "+v.Name, q, vars)...)
		}
	}
	ids := map[int]bool{}
	for _, p := range flatPanels(d.Panels) {
		where := fmt.Sprintf("panel %q", p.Title)
		switch {
		case p.ID == nil:
			add("%s has no id", where)
		case ids[*p.ID]:
			add("%s: duplicate panel id %d", where, *p.ID)
		default:
			ids[*p.ID] = true
		}
		problems = append(problems, panelProblems(name, where, p, vars, exported)...)
	}
	for _, a := range d.Annotations.List {
		problems = append(problems, annotationProblems(name, a, vars, exported)...)
	}
	return problems
}

// annotationProblems lists what is wrong with one annotation: a query annotation reads the datasource
// variable at a step, titles its marks, and keeps to the expression conventions of the panels.
func annotationProblems(name string, a testAnnotation, vars map[string]bool, exported []string) []string {
	if a.BuiltIn == 1 {
		return nil
	}
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: annotation %q: ", name, a.Name)+fmt.Sprintf(format, args...))
	}
	if a.Datasource != dashboardDatasource {
		add("datasource %v, want %q", a.Datasource, dashboardDatasource)
	}
	if strings.TrimSpace(a.Expr) == "" || a.Step == "" || a.TitleFormat == "" || !a.Enable {
		add("needs an expr, a step and a titleFormat, and to be enabled")
	}
	for _, problem := range exprProblems(a.Expr, exported, dashboardFilter[name]) {
		add("%s", problem)
	}
	return append(problems, unknownVariables(name, "annotation "+a.Name, a.Expr, vars)...)
}

// panelProblems lists what is wrong with one panel.
func panelProblems(name, where string, p testPanel, vars map[string]bool, exported []string) []string {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, name+": "+where+": "+fmt.Sprintf(format, args...))
	}
	if !slices.Contains(dashboardPanelTypes, p.Type) {
		add("type %q, want one of %v", p.Type, dashboardPanelTypes)
	}
	if p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
		add("no gridPos inside the 24 columns")
	}
	if p.Type == "row" || p.Type == "text" {
		return problems
	}
	if p.Datasource != dashboardDatasource {
		add("datasource %v, want %q", p.Datasource, dashboardDatasource)
	}
	if ds, ok := p.Datasource.(string); ok {
		problems = append(problems, unknownVariables(name, where+" datasource", ds, vars)...)
	}
	if len(p.Targets) == 0 {
		add("no target")
	}
	refIDs := map[string]bool{}
	for _, t := range p.Targets {
		if t.RefID == "" || refIDs[t.RefID] {
			add("refId %q empty or not unique", t.RefID)
		}
		refIDs[t.RefID] = true
		if t.Datasource != dashboardDatasource {
			add("target %s: datasource %v, want %q", t.RefID, t.Datasource, dashboardDatasource)
		}
		if p.Type == "table" && !t.Instant {
			add("target %s: a table's target is instant", t.RefID)
		}
		if strings.TrimSpace(t.Expr) == "" {
			add("target %s: empty expr", t.RefID)
			continue
		}
		for _, problem := range exprProblems(t.Expr, exported, dashboardFilter[name]) {
			add("target %s: %s", t.RefID, problem)
		}
		problems = append(problems, unknownVariables(name, where+" target "+t.RefID, t.Expr, vars)...)
	}
	return problems
}

var (
	// forbiddenLabel finds the labels that must not tell the shards apart.
	forbiddenLabel = regexp.MustCompile(`\b(pod|instance)\b`)
	// literalWindow finds a range written as a constant, where $__rate_interval or $__range belongs.
	literalWindow = regexp.MustCompile(`\[\s*[0-9]+[a-z]+\s*\]`)
)

// exprProblems lists what is wrong with an expression: metrics dwd does not define, shards told apart
// by another label than member, the dashboard's filter (the shards, or the shoot) missing or written
// otherwise, constant rate windows. An expression of Prometheus' ALERTS alone selects dwd's alerts by
// name instead: some of them have no member label.
func exprProblems(expr string, exported []string, filter string) []string {
	var problems []string
	metrics := deploytest.MetricNames(expr)
	for _, m := range metrics {
		if !slices.Contains(exported, m) && m != "up" && m != alertsMetric && !strings.HasPrefix(m, "process_") && !strings.HasPrefix(m, "go_") {
			problems = append(problems, fmt.Sprintf("metric %s is none dwd defines", m))
		}
	}
	if l := forbiddenLabel.FindString(expr); l != "" {
		problems = append(problems, fmt.Sprintf("uses the label %s: the shard is the member label", l))
	}
	switch {
	case slices.Equal(metrics, []string{alertsMetric}):
		if !strings.Contains(expr, `alertname=~"Dwd.*"`) {
			problems = append(problems, `selects ALERTS without alertname=~"Dwd.*"`)
		}
	case !strings.Contains(expr, filter):
		problems = append(problems, fmt.Sprintf("does not select with %s", filter))
	}
	for _, v := range []string{shardFilter, shootFilter} {
		name := v[strings.Index(v, "$"):strings.LastIndex(v, `"`)]
		if strings.Contains(strings.ReplaceAll(expr, v, ""), name) {
			problems = append(problems, fmt.Sprintf("filters by %s otherwise than with %s", name, v))
		}
	}
	if w := literalWindow.FindString(expr); w != "" {
		problems = append(problems, fmt.Sprintf("constant window %s: use $__rate_interval or $__range", w))
	}
	return problems
}

// unknownVariables lists the variables s uses that are neither in vars nor built in.
func unknownVariables(name, where, s string, vars map[string]bool) []string {
	var problems []string
	for _, v := range deploytest.Variables(s) {
		if !vars[v] && !slices.Contains(dashboardBuiltins, v) {
			problems = append(problems, fmt.Sprintf("%s: %s uses the variable %s, which the dashboard does not define", name, where, v))
		}
	}
	return problems
}

func dashboardFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := deploytest.Dashboards()
	require.NoError(t, err)
	require.Len(t, files, len(dashboardIdentity), "the dashboards are %v", dashboardIdentity)
	return files
}

func TestGrafanaDashboardsAreWellFormed(t *testing.T) {
	exported := dwdMetricNames(t)
	for name, data := range dashboardFiles(t) {
		t.Run(name, func(t *testing.T) {
			assert.Empty(t, dashboardProblems(name, data, exported))
		})
	}
}

// TestGrafanaStructureChecksFail breaks a copy of the overview in each way the checks look for.
func TestGrafanaStructureChecksFail(t *testing.T) {
	exported := dwdMetricNames(t)
	original := dashboardFiles(t)[overviewFile]
	for _, tc := range []struct {
		name   string
		mutate func(d map[string]any)
		want   string
	}{
		{"title", func(d map[string]any) { d["title"] = "dwd" }, `title "dwd"`},
		{"uid", func(d map[string]any) { d["uid"] = "x" }, `uid "x"`},
		{"schema version", func(d map[string]any) { d["schemaVersion"] = 39 }, "schemaVersion 39"},
		{"duplicate id", func(d map[string]any) { panelOf(d, "graph")["id"] = panelOf(d, "stat")["id"] }, "duplicate panel id"},
		{"no id", func(d map[string]any) { delete(panelOf(d, "graph"), "id") }, "has no id"},
		{"timeseries", func(d map[string]any) { panelOf(d, "graph")["type"] = "timeseries" }, `type "timeseries"`},
		{"no gridPos", func(d map[string]any) { delete(panelOf(d, "stat"), "gridPos") }, "no gridPos"},
		{"no datasource", func(d map[string]any) { delete(panelOf(d, "graph"), "datasource") }, "datasource <nil>"},
		{"target datasource", func(d map[string]any) { targetOf(d, "graph")["datasource"] = "Prometheus" }, "target A: datasource Prometheus"},
		{"no target", func(d map[string]any) { panelOf(d, "graph")["targets"] = []any{} }, "no target"},
		{"empty expr", func(d map[string]any) { targetOf(d, "graph")["expr"] = " " }, "empty expr"},
		{"duplicate refId", func(d map[string]any) {
			p := panelOf(d, "graph")
			p["targets"] = append(p["targets"].([]any), p["targets"].([]any)[0])
		}, `refId "A" empty or not unique`},
		{"table not instant", func(d map[string]any) { targetOf(d, "table")["instant"] = false }, "a table's target is instant"},
		{"unknown variable", func(d map[string]any) { targetOf(d, "graph")["expr"] = `up{member=~"$shard", zone="$zone"}` }, "variable zone"},
		{"unknown variable in a datasource", func(d map[string]any) { panelOf(d, "graph")["datasource"] = "${ds}" }, "variable ds"},
		{"unknown metric", func(d map[string]any) { targetOf(d, "graph")["expr"] = `dwd_nope{member=~"$shard"}` }, "metric dwd_nope"},
		{"pod label", func(d map[string]any) { targetOf(d, "graph")["expr"] = `sum by (pod) (up{member=~"$shard"})` }, "label pod"},
		{"instance label", func(d map[string]any) { targetOf(d, "graph")["expr"] = `up{instance=~".+", member=~"$shard"}` }, "label instance"},
		{"no shard filter", func(d map[string]any) { targetOf(d, "graph")["expr"] = `up{job="dwd"}` }, `does not select with member=~"$shard"`},
		{"shard by another label", func(d map[string]any) {
			targetOf(d, "graph")["expr"] = `up{member=~"$shard"} or up{kubernetes_pod_name=~"$shard"}`
		}, "filters by $shard otherwise"},
		{"shoot filter written otherwise", func(d map[string]any) {
			targetOf(d, "graph")["expr"] = `up{member=~"$shard"} or dwd_shoot_scaled_down{namespace=~"$shoot"}`
		}, "filters by $shoot otherwise"},
		{"alerts of every job", func(d map[string]any) {
			panelTitled(d, "table", "Firing alerts")["targets"].([]any)[0].(map[string]any)["expr"] = `ALERTS{alertstate="firing"}`
		}, `selects ALERTS without alertname=~"Dwd.*"`},
		{"annotation datasource", func(d map[string]any) { queryAnnotation(d)["datasource"] = "Prometheus" }, "datasource Prometheus"},
		{"annotation without step", func(d map[string]any) { delete(queryAnnotation(d), "step") }, "needs an expr, a step"},
		{"annotation metric", func(d map[string]any) { queryAnnotation(d)["expr"] = `dwd_nope{member=~"$shard"} > 0` }, "metric dwd_nope"},
		{"annotation without the shard filter", func(d map[string]any) {
			queryAnnotation(d)["expr"] = `increase(dwd_sharding_self_fencing_total[$__interval]) > 0`
		}, `annotation "Scale actions": does not select with member`},
		{"constant window", func(d map[string]any) {
			targetOf(d, "graph")["expr"] = `rate(dwd_probes_total{member=~"$shard"}[5m])`
		}, "constant window [5m]"},
		{"nested panel of a collapsed row", func(d map[string]any) {
			row := panelOf(d, "row")
			nested := deepCopy(panelOf(d, "graph"))
			nested["id"] = 9999
			nested["targets"].([]any)[0].(map[string]any)["expr"] = `dwd_nope{member=~"$shard"}`
			row["collapsed"], row["panels"] = true, []any{nested}
		}, "metric dwd_nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d map[string]any
			require.NoError(t, json.Unmarshal(original, &d))
			tc.mutate(d)
			broken, err := json.Marshal(d)
			require.NoError(t, err)
			assert.Contains(t, strings.Join(dashboardProblems(overviewFile, broken, exported), "\n"), tc.want)
		})
	}
	t.Run("not JSON", func(t *testing.T) {
		assert.Equal(t, []string{overviewFile + ": invalid JSON: unexpected end of JSON input"},
			dashboardProblems(overviewFile, original[:len(original)/2], exported))
	})
}

// panelOf returns the first panel of type typ in d.
func panelOf(d map[string]any, typ string) map[string]any {
	for _, p := range d["panels"].([]any) {
		if p := p.(map[string]any); p["type"] == typ {
			return p
		}
	}
	panic("the overview has no " + typ + " panel")
}

// panelTitled returns the panel of d of type typ with the title.
func panelTitled(d map[string]any, typ, title string) map[string]any {
	for _, p := range d["panels"].([]any) {
		if p := p.(map[string]any); p["type"] == typ && p["title"] == title {
			return p
		}
	}
	panic("the overview has no " + typ + " " + title)
}

// queryAnnotation returns the first annotation of d that has a query.
func queryAnnotation(d map[string]any) map[string]any {
	for _, a := range d["annotations"].(map[string]any)["list"].([]any) {
		if a := a.(map[string]any); a["expr"] != nil {
			return a
		}
	}
	panic("the overview has no query annotation")
}

// targetOf returns the first target of the first panel of type typ in d.
func targetOf(d map[string]any, typ string) map[string]any {
	return panelOf(d, typ)["targets"].([]any)[0].(map[string]any)
}

func deepCopy(m map[string]any) map[string]any {
	data, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return out
}

func TestGrafanaVariables(t *testing.T) {
	for name, data := range dashboardFiles(t) {
		t.Run(name, func(t *testing.T) {
			var d testDashboard
			require.NoError(t, json.Unmarshal(data, &d))
			vars := map[string]testVariable{}
			for _, v := range d.Templating.List {
				vars[v.Name] = v
			}
			ds := vars["datasource"]
			assert.Equal(t, "datasource", ds.Type)
			assert.Equal(t, "prometheus", ds.Query)
			assert.Equal(t, seedDatasource, ds.Current.Value, "the seed Plutono's data source of the Prometheus that scrapes dwd")
			if name == shootFile {
				shoot := vars["shoot"]
				assert.Equal(t, "query", shoot.Type)
				assert.Equal(t, dashboardDatasource, shoot.Datasource)
				assert.Equal(t, "label_values(dwd_shoot_scaled_down, namespace)", shoot.Query, "every shoot with a dependent, probed or not")
				assert.False(t, shoot.Multi || shoot.IncludeAll, "one shoot")
				assert.Len(t, vars, 2)
				return
			}
			shard := vars["shard"]
			assert.Equal(t, "query", shard.Type)
			assert.Equal(t, dashboardDatasource, shard.Datasource)
			assert.Equal(t, "label_values(dwd_sharding_partitions_held, member)", shard.Query)
			multi := name == overviewFile
			assert.Equal(t, multi, shard.Multi, "the overview shows many shards, the shard dashboard one")
			assert.Equal(t, multi, shard.IncludeAll)
			if multi {
				assert.Equal(t, ".*", shard.AllValue)
			}
			group := vars["group"]
			assert.Equal(t, "label_values(dwd_sharding_partitions, group)", group.Query)
			assert.Equal(t, dashboardDatasource, group.Datasource)
		})
	}
}

// dashboardTopics are the metric families the issue asks each dashboard to show.
var dashboardTopics = map[string][]string{
	overviewFile: {"up", "dwd_sharding_live_members", "dwd_sharding_partitions_held", "dwd_sharding_partitions",
		"dwd_sharding_partitions_unheld", "dwd_sharding_shoots_owned", "dwd_sharding_rebalances_total",
		"dwd_sharding_handover_duration_seconds_bucket", "dwd_probes_total", "dwd_probe_lag_seconds_bucket",
		"dwd_probe_missed_cycles_total", "dwd_shoots_scaled_down", "dwd_scale_operations_total",
		"dwd_weeder_windows_open", "dwd_weeder_windows_opened_total", "dwd_weeder_pods_deleted_total",
		"dwd_weeder_pod_delete_failures_total", "dwd_api_requests_total", "dwd_api_throttled_requests_total",
		"process_cpu_seconds_total", "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes",
		"dwd_sharding_settings_mismatch", "dwd_build_info", alertsMetric, "dwd_shoot_scaled_down",
		"dwd_shoot_last_successful_probe_timestamp_seconds", "dwd_shoots_unprotected", "dwd_shoot_config_errors_total",
		"dwd_shoot_expired_lease_ratio", "go_gc_gomemlimit_bytes", "process_start_time_seconds"},
	shardFile: {"dwd_sharding_partitions_held", "dwd_sharding_shoots_owned", "dwd_sharding_live_members",
		"dwd_sharding_member_lease_last_renew_timestamp_seconds", "dwd_sharding_lease_renew_failures_total",
		"dwd_sharding_self_fencing_total", "dwd_sharding_write_refusals_total", "dwd_probes_total",
		"dwd_probe_duration_seconds_bucket", "dwd_probe_lag_seconds_bucket", "dwd_probe_inconclusive_total",
		"dwd_api_requests_total", "dwd_api_throttled_requests_total", "dwd_shoots_scaled_down",
		"dwd_shoot_scaled_down", "dwd_weeder_windows_open", "dwd_weeder_pods_deleted_total",
		"process_cpu_seconds_total", "process_resident_memory_bytes", "dwd_shoot_expired_lease_ratio",
		"dwd_shoot_last_successful_probe_timestamp_seconds", "go_gc_gomemlimit_bytes", "process_start_time_seconds"},
	shootFile: {"dwd_shoot_scaled_down", "dwd_shoot_last_successful_probe_timestamp_seconds", "dwd_shoot_expired_lease_ratio",
		"dwd_shoot_clock_offset_seconds", "dwd_prober_probe_interval_seconds", "dwd_probe_lag_seconds_bucket", "dwd_probes_total",
		alertsMetric},
}

// missingTopics returns the metrics of topics that no query of queries selects.
func missingTopics(queries []deploytest.DashboardQuery, topics []string) []string {
	shown := map[string]bool{}
	for _, q := range queries {
		for _, m := range deploytest.MetricNames(q.Expr) {
			shown[m] = true
		}
	}
	var missing []string
	for _, topic := range topics {
		if !shown[topic] {
			missing = append(missing, topic)
		}
	}
	return missing
}

func TestGrafanaDashboardsCoverTheTopicsOfTheIssue(t *testing.T) {
	queries, err := deploytest.DashboardQueries()
	require.NoError(t, err)
	for name, topics := range dashboardTopics {
		t.Run(name, func(t *testing.T) {
			var own []deploytest.DashboardQuery
			for _, q := range queries {
				if q.Dashboard == name {
					own = append(own, q)
				}
			}
			assert.Empty(t, missingTopics(own, topics))
		})
	}
	t.Run("a dashboard without its lag panel misses it", func(t *testing.T) {
		var without []deploytest.DashboardQuery
		for _, q := range queries {
			if q.Dashboard == overviewFile && !strings.Contains(q.Expr, "dwd_probe_lag_seconds_bucket") {
				without = append(without, q)
			}
		}
		assert.Equal(t, []string{"dwd_probe_lag_seconds_bucket"}, missingTopics(without, dashboardTopics[overviewFile]))
	})
}

func TestGrafanaShardDashboardHasTheShootTables(t *testing.T) {
	var d testDashboard
	require.NoError(t, json.Unmarshal(dashboardFiles(t)[shardFile], &d))
	tables := map[string]bool{}
	for _, p := range flatPanels(d.Panels) {
		if p.Type != "table" {
			continue
		}
		for _, target := range p.Targets {
			tables[target.Expr] = true
		}
	}
	for _, want := range []*regexp.Regexp{
		// Only shoots in trouble: some lease expired, no success for three probe intervals.
		regexp.MustCompile(`^topk\(\d+, max by \(namespace\) \(dwd_shoot_expired_lease_ratio\{[^}]*\}\) > 0\) or on\(\) `),
		regexp.MustCompile(`^topk\(\d+, \(time\(\) - max by \(namespace\) \(dwd_shoot_last_successful_probe_timestamp_seconds\{[^}]*\}\)\) ` +
			`> 3 \* scalar\(max\(dwd_prober_probe_interval_seconds\{[^}]*\}\)\)\) or on\(\) `),
		regexp.MustCompile(`dwd_shoot_scaled_down\{[^}]*\} == 1\) or on\(\) `),
	} {
		found := false
		for expr := range tables {
			found = found || want.MatchString(expr)
		}
		assert.True(t, found, "the shard dashboard has a table panel whose query matches %s", want)
	}
}

func TestGrafanaConfigMapHoldsTheDashboards(t *testing.T) {
	objs := mustBuild(t, dashboardsDir)
	require.Len(t, objs, 1)
	cms := configMaps(t, objs)
	require.Len(t, cms, 1)
	cm := cms[0]
	assert.Equal(t, "dwd-dashboards", cm.Name)
	assert.Equal(t, "garden", cm.Namespace)
	assert.Equal(t, "true", cm.Labels["dashboard.monitoring.gardener.cloud/seed"], "Gardener's seed Plutono loads ConfigMaps with this label")
	want := map[string]string{}
	for name := range dashboardIdentity {
		data, err := os.ReadFile(dashboardsDir + "/" + name)
		require.NoError(t, err)
		want[name] = string(data)
	}
	assert.Equal(t, want, cm.Data, "the ConfigMap holds exactly the dashboard files, unchanged")
	assert.Empty(t, cm.BinaryData)
	data, err := objs[0].MarshalJSON()
	require.NoError(t, err)
	assert.Less(t, len(data), 256*1024-4096,
		"`kubectl apply -k` (client-side) copies the ConfigMap into an annotation, and annotations hold 256 KiB at most")
}

func TestGrafanaConfigMapAppliesToTheAPIServer(t *testing.T) {
	env.Require(t)
	objs := mustBuild(t, dashboardsDir)
	createNamespaces(t, objs)
	c, warned := warningClient(t)
	warned.take()
	for _, o := range objs {
		assert.NoError(t, dryRunApply(context.Background(), c, o), "%s %s", o.GetKind(), o.GetName())
	}
	assert.Empty(t, warned.take(), "the API server warns")
}

func TestGrafanaDashboardQueriesOfTheTree(t *testing.T) {
	queries, err := deploytest.DashboardQueries()
	require.NoError(t, err)
	require.NotEmpty(t, queries)
	assert.Equal(t, overviewFile, queries[0].Dashboard, "files in name order")
	assert.Equal(t, shootFile, queries[len(queries)-1].Dashboard)
	perFile := map[string]int{}
	for _, q := range queries {
		perFile[q.Dashboard]++
	}
	for name, data := range dashboardFiles(t) {
		var d testDashboard
		require.NoError(t, json.Unmarshal(data, &d))
		n := 0
		for _, p := range flatPanels(d.Panels) {
			n += len(p.Targets)
		}
		for _, a := range d.Annotations.List {
			if a.Expr != "" {
				n++
			}
		}
		assert.Equal(t, n, perFile[name], "every target and annotation query of %s", name)
	}
}

// rareCounters are the counters of rare events: a dashboard counts them (increase over $__interval or
// $__range), as an operator reads them, rather than draw rates like 0.003/s.
var rareCounters = []string{"dwd_sharding_rebalances_total", "dwd_scale_operations_total", "dwd_weeder_pods_deleted_total",
	"dwd_weeder_pod_delete_failures_total", "dwd_weeder_pod_delete_conflicts_total", "dwd_weeder_windows_opened_total",
	"dwd_sharding_self_fencing_total", "dwd_sharding_fence_overruns_total", "dwd_sharding_step_downs_total",
	"dwd_sharding_foreign_writes_total", "dwd_sharding_lease_renew_failures_total", "dwd_sharding_write_refusals_total"}

var (
	// rebalancesCounted is how a change of the live member set is counted once, every member seeing it:
	// the most any member counted, over the range or per interval.
	rebalancesCounted = regexp.MustCompile(`^max by \(group\) \((?:increase|clamp_min)\(dwd_sharding_rebalances_total\{`)
	// renewalRead is the member's last renewal, read without a standby's 0.
	renewalRead = regexp.MustCompile(`dwd_sharding_member_lease_last_renew_timestamp_seconds\{[^}]*\} > 0\b`)
	// perInterval is an increase over [$__interval]: it misses the events between the last sample of one
	// interval and the first of the next, which with a sample or two per interval is most of them, and
	// shows nothing with one. A count per interval is the counter's growth since an interval earlier.
	perInterval = regexp.MustCompile(`increase\([a-z_]+(?:\{[^}]*\})?\[\$__interval\]`)
)

// conventionProblems lists how expr breaks the reading rules of the review (its Q1, Q3 and Q4): rare
// events drawn as rates, rebalances summed over the members that each saw them, a standby's zero
// renewal read as a timestamp.
func conventionProblems(expr string) []string {
	var problems []string
	for _, c := range rareCounters {
		if regexp.MustCompile(`\b(?:i?rate)\(\s*` + c + `\b`).MatchString(expr) {
			problems = append(problems, "a rate of the rare events of "+c+": count them with increase")
		}
	}
	if strings.Contains(expr, "dwd_sharding_rebalances_total") && (!rebalancesCounted.MatchString(expr) || strings.Contains(expr, "sum")) {
		problems = append(problems, "dwd_sharding_rebalances_total not counted as the most any member counted (max by (group)): each member counts every change")
	}
	if perInterval.MatchString(expr) {
		problems = append(problems, "an increase over [$__interval]: it misses the events between two intervals; take the growth since an interval earlier")
	}
	if n := strings.Count(expr, "dwd_sharding_member_lease_last_renew_timestamp_seconds"); n != len(renewalRead.FindAllString(expr, -1)) {
		problems = append(problems, "the last renewal read without > 0: a standby exports 0")
	}
	return problems
}

func TestGrafanaQueryConventions(t *testing.T) {
	queries, err := deploytest.DashboardQueries()
	require.NoError(t, err)
	for _, q := range queries {
		assert.Empty(t, conventionProblems(q.Expr), "%s %q %s: %s", q.Dashboard, q.Panel, q.RefID, q.Expr)
	}
	// Each rule fails on the expression it forbids, made from one of the dashboards' own.
	for _, tc := range []struct{ contains, old, new string }{
		{"dwd_scale_operations_total", "clamp_min(dwd_scale_operations_total", "rate(dwd_scale_operations_total"},
		{"dwd_weeder_pods_deleted_total", "clamp_min(dwd_weeder_pods_deleted_total", "irate(dwd_weeder_pods_deleted_total"},
		{"dwd_sharding_rebalances_total", "max by (group) (increase(", "sum(increase("},
		{"dwd_sharding_rebalances_total", "max by (group) (clamp_min(", "sum by (group) (clamp_min("},
		{"dwd_weeder_windows_opened_total", "clamp_min(dwd_weeder_windows_opened_total{member=~\"$shard\"} - " +
			"(dwd_weeder_windows_opened_total{member=~\"$shard\"} offset $__interval or dwd_weeder_windows_opened_total{member=~\"$shard\"} * 0), 0)",
			"increase(dwd_weeder_windows_opened_total{member=~\"$shard\"}[$__interval])"},
		{"dwd_sharding_member_lease_last_renew_timestamp_seconds", "} > 0)", "})"},
	} {
		t.Run(tc.new, func(t *testing.T) {
			i := slices.IndexFunc(queries, func(q deploytest.DashboardQuery) bool {
				return strings.Contains(q.Expr, tc.contains) && strings.Contains(q.Expr, tc.old)
			})
			require.GreaterOrEqual(t, i, 0, "a query of %s with %s", tc.contains, tc.old)
			assert.NotEmpty(t, conventionProblems(strings.Replace(queries[i].Expr, tc.old, tc.new, 1)))
		})
	}
}

func TestGrafanaOverviewHasTheIncidentTables(t *testing.T) {
	var d testDashboard
	require.NoError(t, json.Unmarshal(dashboardFiles(t)[overviewFile], &d))
	tables := map[string]string{}
	for _, p := range flatPanels(d.Panels) {
		if p.Type == "table" {
			tables[p.Title] = p.Targets[0].Expr
		}
	}
	for title, want := range map[string]*regexp.Regexp{
		"Firing alerts":                        regexp.MustCompile(`ALERTS\{alertname=~"Dwd\.\*", alertstate="firing"\}`),
		"Scaled down now":                      regexp.MustCompile(`^max by \(namespace, member\) \(dwd_shoot_scaled_down\{[^}]*\} == 1\) or on\(\) `),
		"Failing to probe":                     regexp.MustCompile(`\) > 3 \* scalar\(max\(dwd_prober_probe_interval_seconds\{`),
		"Unprotected shoots and config errors": regexp.MustCompile(`dwd_shoots_unprotected\{.*dwd_shoot_config_errors_total\{`),
	} {
		assert.Regexp(t, want, tables[title], "the overview's table %q, across the selected shards", title)
	}
}
