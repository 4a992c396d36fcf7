package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/test/dashview"
)

// mayShowNothing are the panels and annotations (dashboard file/title, * for every dashboard) that show
// nothing in TestDashboards' story, and why. Every other one must show data in both pictures.
var mayShowNothing = map[string]string{
	"dwd-overview.json/Unprotected shoots and config errors": "no shoot's Cluster or kubeconfig Secret is broken",
	"*/Fences":                 "no member fences itself: the kill -9 stops one at once",
	"dwd-shoot.json/Scaled up": "the melted shoots stay scaled down",
	"dwd-shard.json/Membership changes@meltdown": "the shard saw the live set complete when it joined, before Prometheus' first scrape",
	"*/Handover duration@meltdown":               "no handover since Prometheus' first scrape, until the kill",
}

// showsNothingAllowed tells whether the panel or annotation title of dashboard may show nothing in phase.
func showsNothingAllowed(phase string) func(dashboard, title string) bool {
	return func(dashboard, title string) bool {
		for _, key := range []string{dashboard + "/" + title, "*/" + title, dashboard + "/" + title + "@" + phase, "*/" + title + "@" + phase} {
			if _, ok := mayShowNothing[key]; ok {
				return true
			}
		}
		return false
	}
}

// dashboardPages are the pictures of one phase of the story: each dashboard with the variables an
// operator would pick (every shard; the shard holding the failing shoot; the shoot handed over).
func dashboardPages(dir, phase string, from time.Time, shard, shoot string) []dashview.Page {
	to := time.Now()
	page := func(file string, vars map[string]string) dashview.Page {
		png := filepath.Join(dir, phase+"-"+strings.TrimSuffix(file, ".json")+".png")
		return dashview.Page{Dashboard: file, Vars: vars, From: from, To: to, PNG: png}
	}
	return []dashview.Page{
		page("dwd-overview.json", map[string]string{"shard": ".*", "group": ".*"}),
		page("dwd-shard.json", map[string]string{"shard": shard, "group": ".*"}),
		page("dwd-shoot.json", map[string]string{"shoot": shoot}),
	}
}

// drawDashboards draws the dashboards of pages in Debian's Chromium from prom (make test-dashboards
// installs both; the test skips without them), into DWD_DASHBOARD_PNGS (bin/dashboards with make
// test-dashboards) or a temporary folder, and fails on a panel or annotation that errs or shows nothing
// unless mayShowNothing allows it in phase.
func drawDashboards(t *testing.T, prom *prometheusServer, phase string, pages func(dir string) []dashview.Page) {
	t.Helper()
	chromium, modules := os.Getenv("DWD_CHROMIUM"), os.Getenv("DWD_DASHVIEW_NODE_MODULES")
	if chromium == "" || modules == "" {
		t.Skip("make test-dashboards draws the dashboards with Debian's Chromium and playwright-core: set DWD_CHROMIUM and DWD_DASHVIEW_NODE_MODULES")
	}
	dir := os.Getenv("DWD_DASHBOARD_PNGS")
	if dir == "" {
		dir = t.TempDir()
	}
	server, err := dashview.Start(prom.url)
	require.NoError(t, err)
	defer func() { assert.NoError(t, server.Close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := dashview.Renderer{Chromium: chromium, NodeModules: modules, Scrape: scrapeInterval}
	results, err := r.Render(ctx, server, pages(dir))
	require.NoError(t, err)
	for _, res := range results {
		drawn, empty := 0, 0
		for _, p := range res.Panels {
			if p.State == "data" {
				drawn++
			} else {
				empty++
			}
		}
		t.Logf("%s: %d panels and annotations show data, %d nothing: %s", res.Page.Dashboard, drawn, empty, res.Page.PNG)
	}
	assert.Empty(t, dashview.Problems(results, showsNothingAllowed(phase)))
}
