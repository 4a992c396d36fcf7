package dashview

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sharded-dwd/dependency-watchdog/deploy/deploytest"
)

// fakePrometheus answers every query as mode says: one series of value 1 (data), no series (empty), or
// an error.
func fakePrometheus(t *testing.T, mode string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		now := time.Now().Unix()
		switch {
		case mode == "error":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"status":"error","errorType":"bad_data","error":"parse error"}`)
		case mode == "empty" && strings.HasSuffix(r.URL.Path, "/query_range"):
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
		case mode == "empty":
			_, _ = io.WriteString(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
		case strings.HasSuffix(r.URL.Path, "/query_range"):
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix",
				"result": []any{map[string]any{"metric": map[string]string{"member": "dwd-0"}, "values": [][]any{{now - 60, "1"}, {now, "1"}}}}}})
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector",
				"result": []any{map[string]any{"metric": map[string]string{"member": "dwd-0"}, "value": []any{now, "1"}}}}})
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestServerServesThePageTheDashboardsAndPrometheus(t *testing.T) {
	s, err := Start(fakePrometheus(t, "data").URL)
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Close()) }()
	code, body := get(t, s.URL+"/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `<script src="dashview.js">`)
	code, _ = get(t, s.URL+"/dashview.js")
	assert.Equal(t, http.StatusOK, code)
	files, err := deploytest.Dashboards()
	require.NoError(t, err)
	for name, data := range files {
		code, body = get(t, s.URL+"/dashboards/"+name)
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, string(data), body, name)
	}
	code, _ = get(t, s.URL+"/dashboards/nope.json")
	assert.Equal(t, http.StatusNotFound, code)
	code, body = get(t, s.URL+"/api/v1/query?query=up")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"dwd-0"`, "proxied to Prometheus")

	_, err = Start("127.0.0.1:9090")
	assert.Error(t, err, "an address without a scheme")
}

func TestProblems(t *testing.T) {
	results := []Result{{Page: Page{Dashboard: "a.json"}, Errors: []string{"TypeError: x"}, Panels: []Panel{
		{Kind: "panel", Title: "fine", State: "data"},
		{Kind: "panel", Title: "broken", State: "error", Error: "parse error"},
		{Kind: "panel", Title: "blank", State: "empty"},
		{Kind: "annotation", Title: "Fences", State: "empty"},
	}}, {Page: Page{Dashboard: "b.json"}}}
	allowed := func(dashboard, title string) bool { return dashboard == "a.json" && title == "Fences" }
	assert.Equal(t, []string{
		"a.json: the page logged: TypeError: x",
		`a.json: panel "broken" errs: parse error`,
		`a.json: panel "blank" shows nothing`,
		"b.json: the page drew no panel",
	}, Problems(results, allowed))
}

// renderer returns the Renderer of make test-dashboards, or skips the test without a browser.
func renderer(t *testing.T) Renderer {
	chromium, modules := os.Getenv("DWD_CHROMIUM"), os.Getenv("DWD_DASHVIEW_NODE_MODULES")
	if chromium == "" || modules == "" {
		t.Skip("make test-dashboards runs it with Debian's Chromium and playwright-core: set DWD_CHROMIUM and DWD_DASHVIEW_NODE_MODULES")
	}
	return Renderer{Chromium: chromium, NodeModules: modules, Scrape: time.Second}
}

// TestRenderReportsWhatThePanelsShow draws every dashboard against a Prometheus that answers one
// series, none, or an error, and checks that each panel reports it: the check of TestDashboards fails
// on a panel that shows nothing or errs.
func TestRenderReportsWhatThePanelsShow(t *testing.T) {
	r := renderer(t)
	files, err := deploytest.Dashboards()
	require.NoError(t, err)
	vars := map[string]string{"shard": "dwd-0", "group": ".*", "shoot": "shoot--a"}
	for _, mode := range []string{"data", "empty", "error"} {
		t.Run(mode, func(t *testing.T) {
			s, err := Start(fakePrometheus(t, mode).URL)
			require.NoError(t, err)
			defer func() { assert.NoError(t, s.Close()) }()
			var pages []Page
			for name := range files {
				pages = append(pages, Page{Dashboard: name, Vars: vars, From: time.Now().Add(-5 * time.Minute), To: time.Now(),
					PNG: filepath.Join(t.TempDir(), mode+"-"+name+".png")})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			results, err := r.Render(ctx, s, pages)
			require.NoError(t, err)
			for _, res := range results {
				assert.FileExists(t, res.Page.PNG)
				assert.Empty(t, res.Errors, res.Page.Dashboard)
				require.NotEmpty(t, res.Panels, res.Page.Dashboard)
				for _, p := range res.Panels {
					assert.Equal(t, mode, p.State, "%s %s %q: %s", res.Page.Dashboard, p.Kind, p.Title, p.Error)
				}
			}
			never := func(string, string) bool { return false }
			if mode == "data" {
				assert.Empty(t, Problems(results, never))
			} else {
				assert.NotEmpty(t, Problems(results, never))
			}
		})
	}
}
