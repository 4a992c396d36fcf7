package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sharded-dwd/dependency-watchdog/benchmarks/sim"
	"github.com/sharded-dwd/dependency-watchdog/internal/dwdproc"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// prometheusServer is a Prometheus process on loopback that scrapes dwd replicas.
type prometheusServer struct {
	url string
}

// scrapeInterval is how often the test's Prometheus scrapes the replicas and evaluates the rules.
const scrapeInterval = time.Second

// startPrometheus starts bin with a config that scrapes every replica as the PodMonitor of
// deploy/prometheus does (job dwd, the member label naming the replica, the replica's own labels
// honoured) and loads rules; it stops it when the test ends.
func startPrometheus(t *testing.T, bin, dir string, replicas []*sim.Replica, rules string) *prometheusServer {
	t.Helper()
	type staticConfig struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	var targets []staticConfig
	for _, r := range replicas {
		targets = append(targets, staticConfig{Targets: []string{r.MetricsAddr()},
			Labels: map[string]string{"member": r.Name, "namespace": "dwd-system"}})
	}
	cfg := map[string]any{
		"global": map[string]any{"scrape_interval": scrapeInterval.String(), "scrape_timeout": scrapeInterval.String(),
			"evaluation_interval": scrapeInterval.String()},
		"rule_files": []string{rules},
		"scrape_configs": []any{map[string]any{
			"job_name": "dwd", "honor_labels": true, "static_configs": targets,
		}},
	}
	data, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	config := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(config, data, 0o644))
	addr, err := dwdproc.FreePort()
	require.NoError(t, err)
	log := filepath.Join(dir, "prometheus.log")
	proc, err := dwdproc.Start(bin, []string{"--config.file=" + config, "--web.listen-address=" + addr,
		"--storage.tsdb.path=" + filepath.Join(dir, "prometheus-data"), "--log.level=warn"}, log)
	require.NoError(t, err)
	t.Cleanup(func() { proc.Terminate(10 * time.Second) })
	p := &prometheusServer{url: "http://" + addr}
	require.Eventually(t, func() bool { return dwdproc.OK(context.Background(), p.url+"/-/ready") },
		30*time.Second, 100*time.Millisecond, "Prometheus ready; its log: %s", log)
	return p
}

// apiResponse is the envelope of Prometheus' HTTP API.
type apiResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

// get calls the API at path with query and decodes its data into into.
func (p *prometheusServer) get(ctx context.Context, path string, query url.Values, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path+"?"+query.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s answered %d: %.200s", path, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return json.Unmarshal(r.Data, into)
}

// sample is one series of an instant query's answer.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query evaluates expr now and returns its series; a scalar or string answer counts as one.
func (p *prometheusServer) query(ctx context.Context, expr string) ([]sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	switch data.ResultType {
	case "vector":
		var series []sample
		err := json.Unmarshal(data.Result, &series)
		return series, err
	case "scalar", "string":
		var v [2]any
		err := json.Unmarshal(data.Result, &v)
		return []sample{{Value: v}}, err
	default:
		return nil, fmt.Errorf("result type %q: the test evaluates instant queries only", data.ResultType)
	}
}

// alert is one alert of /api/v1/alerts.
type alert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"` // pending or firing
}

// String names the alert and the labels that tell its instances apart.
func (a alert) String() string {
	var keys []string
	for _, k := range []string{"group", "member", "namespace", "service"} {
		if v, ok := a.Labels[k]; ok {
			keys = append(keys, k+"="+v)
		}
	}
	return fmt.Sprintf("%s{%s} %s", a.Labels["alertname"], strings.Join(keys, ","), a.State)
}

// alerts returns the pending and firing alerts.
func (p *prometheusServer) alerts(ctx context.Context) ([]alert, error) {
	var data struct {
		Alerts []alert `json:"alerts"`
	}
	err := p.get(ctx, "/api/v1/alerts", nil, &data)
	return data.Alerts, err
}

// ruleFile is the part of a Prometheus rule file the test reads and rewrites.
type ruleFile struct {
	Groups []struct {
		Name  string           `json:"name"`
		Rules []map[string]any `json:"rules"`
	} `json:"groups"`
}

// alertRule is one alert of deploy/prometheus/rules.yaml.
type alertRule struct {
	name, expr string
}

// readRules reads the rule file at path and returns its alerts, and the file with every rule's `for`
// set to forDuration: the test proves the expressions on a real Prometheus in seconds, the promtool
// tests (make test-rules) prove the durations.
func readRules(path string, forDuration time.Duration) ([]alertRule, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var f ruleFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var rules []alertRule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name, _ := r["alert"].(string)
			expr, _ := r["expr"].(string)
			if name == "" || expr == "" {
				return nil, nil, fmt.Errorf("%s: group %s has a rule without alert or expr", path, g.Name)
			}
			rules = append(rules, alertRule{name: name, expr: expr})
			if _, ok := r["for"]; ok {
				r["for"] = forDuration.String()
			}
		}
	}
	if len(rules) == 0 {
		return nil, nil, errors.New(path + " has no alerts")
	}
	short, err := yaml.Marshal(f)
	return rules, short, err
}

// queryWithData runs expr until it returns data or a few scrape intervals have passed, and returns the
// last answer: a scrape that timed out (a replica busy on 2 cores under the race detector) leaves its
// series stale until the next one.
func queryWithData(ctx context.Context, p *prometheusServer, expr string) ([]sample, error) {
	var series []sample
	var err error
	_ = wait.PollUntilContextTimeout(ctx, scrapeInterval/2, 5*scrapeInterval, true, func(ctx context.Context) (bool, error) {
		series, err = p.query(ctx, expr)
		return err != nil || len(series) > 0, nil
	})
	return series, err
}
