package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/sharded-dwd/dependency-watchdog/deploy/deploytest"
)

const (
	rulesFile          = "prometheus/rules.yaml"
	prometheusRuleFile = "prometheus/prometheusrule.yaml"
	podMonitorFile     = "prometheus/podmonitor.yaml"
	rulesTestFile      = "prometheus/rules_test.yaml"
	monitoringDoc      = "../docs/monitoring.md"
	runbookBase        = "https://github.com/sharded-dwd/dependency-watchdog/blob/main/docs/monitoring.md#"
)

// metricPackages are the folders whose Go files define dwd's metrics.
var metricPackages = []string{"../prober", "../sharding", "../scaler", "../weeder", "../access", "../internal/apimetrics", "../cmd/dwd"}

type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, into), path)
}

func alertRules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	readYAML(t, rulesFile, &f)
	require.Len(t, f.Groups, 1)
	require.Equal(t, "dwd", f.Groups[0].Name)
	require.NotEmpty(t, f.Groups[0].Rules)
	return f.Groups[0].Rules
}

func TestPrometheusRuleHoldsTheRulesOfTheRuleFile(t *testing.T) {
	var f ruleFile
	readYAML(t, rulesFile, &f)
	var pr struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec ruleFile `json:"spec"`
	}
	readYAML(t, prometheusRuleFile, &pr)

	assert.Equal(t, "monitoring.coreos.com/v1", pr.APIVersion)
	assert.Equal(t, "PrometheusRule", pr.Kind)
	assert.Equal(t, "garden", pr.Metadata.Namespace)
	assert.Equal(t, "seed", pr.Metadata.Labels["prometheus"], "Gardener's seed Prometheus selects prometheus: seed")
	assert.Equal(t, f, pr.Spec)
}

func TestPrometheusAlertsHaveSeverityAnnotationsAndARunbook(t *testing.T) {
	doc, err := os.ReadFile(monitoringDoc)
	require.NoError(t, err)
	headings := regexp.MustCompile(`(?m)^#+ +(\S+)\s*$`).FindAllStringSubmatch(string(doc), -1)
	var sections []string
	for _, h := range headings {
		sections = append(sections, strings.ToLower(h[1]))
	}
	for _, r := range alertRules(t) {
		t.Run(r.Alert, func(t *testing.T) {
			assert.Regexp(t, `^Dwd[A-Z][A-Za-z]+$`, r.Alert)
			assert.Contains(t, []string{"blocker", "critical", "warning"}, r.Labels["severity"])
			assert.Equal(t, map[string]string{"service": "dependency-watchdog", "type": "seed", "visibility": "operator"},
				map[string]string{"service": r.Labels["service"], "type": r.Labels["type"], "visibility": r.Labels["visibility"]},
				"Gardener's labels of a seed component's alert")
			assert.NotEmpty(t, r.Annotations["summary"])
			assert.NotEmpty(t, r.Annotations["description"])
			anchor := strings.ToLower(r.Alert)
			assert.Equal(t, runbookBase+anchor, r.Annotations["runbook_url"])
			assert.Contains(t, sections, anchor, "docs/monitoring.md has no section %s", r.Alert)
		})
	}
}

// TestPrometheusRulesNameOnlyMetricsDwdExports fails when an expression names a metric that no
// prometheus.*Opts in dwd's source defines (a typo, or a metric renamed or removed).
func TestPrometheusRulesNameOnlyMetricsDwdExports(t *testing.T) {
	exported := dwdMetricNames(t)
	require.Contains(t, exported, "dwd_probes_total")
	require.Contains(t, exported, "dwd_probe_lag_seconds_bucket")
	exported = append(exported, "up") // the scrape's own series of each target
	for _, r := range alertRules(t) {
		names := deploytest.MetricNames(r.Expr)
		assert.NotEmpty(t, names, r.Alert)
		for _, name := range names {
			assert.Contains(t, exported, name, "%s names a metric dwd does not export", r.Alert)
		}
	}
}

// dwdMetricNames are the series names of every metric dwd's source defines: the Name of each
// prometheus.*Opts literal, with _bucket, _sum and _count for histograms.
func dwdMetricNames(t *testing.T) []string {
	t.Helper()
	var names []string
	fset := token.NewFileSet()
	for _, dir := range metricPackages {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, file, nil, 0)
			require.NoError(t, err)
			ast.Inspect(f, func(n ast.Node) bool {
				if kind, name, ok := metricOpts(n); ok {
					names = append(names, name)
					if kind == "HistogramOpts" {
						names = append(names, name+"_bucket", name+"_sum", name+"_count")
					}
				}
				return true
			})
		}
	}
	return names
}

// metricOpts reports the kind and name of a prometheus.*Opts literal with a constant Name.
func metricOpts(n ast.Node) (kind, name string, ok bool) {
	lit, isLit := n.(*ast.CompositeLit)
	if !isLit {
		return "", "", false
	}
	sel, isSel := lit.Type.(*ast.SelectorExpr)
	if !isSel || !strings.HasSuffix(sel.Sel.Name, "Opts") {
		return "", "", false
	}
	if pkg, isIdent := sel.X.(*ast.Ident); !isIdent || pkg.Name != "prometheus" {
		return "", "", false
	}
	for _, elt := range lit.Elts {
		kv, isKV := elt.(*ast.KeyValueExpr)
		if key, isIdent := kv.Key.(*ast.Ident); !isKV || !isIdent || key.Name != "Name" {
			continue
		}
		if value, isBasic := kv.Value.(*ast.BasicLit); isBasic && value.Kind == token.STRING {
			name, err := strconv.Unquote(value.Value)
			return sel.Sel.Name, name, err == nil
		}
	}
	return "", "", false
}

// TestPrometheusRuleTestsCoverEveryAlert asks rules_test.yaml for a case where each alert fires and one
// where it must not.
func TestPrometheusRuleTestsCoverEveryAlert(t *testing.T) {
	var tests struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	data, err := os.ReadFile(rulesTestFile)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &tests))
	assert.Equal(t, []string{"rules.yaml"}, tests.RuleFiles)
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, at := range tc.AlertRuleTest {
			if len(at.ExpAlerts) > 0 {
				firing[at.Alertname] = true
			} else {
				quiet[at.Alertname] = true
			}
		}
	}
	for _, r := range alertRules(t) {
		assert.True(t, firing[r.Alert], "no promtool test where %s fires", r.Alert)
		assert.True(t, quiet[r.Alert], "no promtool test where %s does not fire", r.Alert)
	}
}

func TestPrometheusPodMonitorScrapesTheStatefulSetsMetricsPort(t *testing.T) {
	pms := podMonitors(t, mustBuild(t, "prometheus"))
	require.Len(t, pms, 1)
	pm := pms[0]
	assert.Equal(t, "seed", pm.Labels["prometheus"])

	var sts appsv1.StatefulSet
	data, err := tree.ReadFile("base/statefulset.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, &sts))
	for k, v := range pm.Spec.Selector.MatchLabels {
		assert.Equal(t, v, sts.Spec.Template.Labels[k], "the PodMonitor selects %s=%s", k, v)
	}
	require.Len(t, pm.Spec.PodMetricsEndpoints, 1)
	var ports []string
	for _, c := range sts.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports = append(ports, p.Name)
		}
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	require.NotNil(t, ep.Port)
	assert.Contains(t, ports, *ep.Port)

	// The label convention the rules and dashboards rely on: every series of a target names its
	// member (the pod's name) and job dwd; the per-shoot series keep their namespace.
	assert.True(t, ep.HonorLabels, "honorLabels: the per-shoot series keep the shoot's namespace")
	relabeled := map[string]string{}
	for _, r := range ep.RelabelConfigs {
		switch {
		case r.Replacement != nil && len(r.SourceLabels) == 0:
			relabeled[r.TargetLabel] = *r.Replacement
		case len(r.SourceLabels) == 1 && r.Replacement == nil:
			relabeled[r.TargetLabel] = "from " + string(r.SourceLabels[0])
		}
	}
	assert.Equal(t, "from __meta_kubernetes_pod_name", relabeled["member"])
	assert.Equal(t, "dwd", relabeled["job"])
	for _, r := range alertRules(t) {
		assert.NotRegexp(t, `\bpod\b|\binstance\b`, r.Expr, "%s: a shard is its member label", r.Alert)
	}
}
