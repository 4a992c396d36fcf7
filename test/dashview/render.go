package dashview

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

//go:embed shoot.cjs
var shootScript []byte

// Page is one dashboard to draw.
type Page struct {
	// Dashboard is the file of deploy/grafana, e.g. dwd-overview.json.
	Dashboard string
	// Vars are the dashboard's variables (shard, group, shoot); the datasource variable needs none.
	Vars map[string]string
	// From and To are the time range.
	From, To time.Time
	// PNG is where the picture goes.
	PNG string
}

// Panel is what the page reports of one panel or annotation.
type Panel struct {
	Kind  string `json:"kind"` // panel, annotation, or page when the page itself failed
	ID    int    `json:"id"`
	Title string `json:"title"`
	Type  string `json:"type"`
	// State is data (a finite value drawn, a mark set), empty or error.
	State  string `json:"state"`
	Error  string `json:"error"`
	Series int    `json:"series"` // series with a finite value
	Marks  int    `json:"marks"`  // an annotation's marks
}

// Result is what one page showed.
type Result struct {
	Page   Page     `json:"-"`
	Panels []Panel  `json:"report"`
	Errors []string `json:"errors"` // what the page logged as errors or threw
}

// Renderer draws pages in a browser.
type Renderer struct {
	// Chromium is the browser binary, e.g. /usr/bin/chromium.
	Chromium string
	// NodeModules is a node_modules folder that holds playwright-core.
	NodeModules string
	// Scrape is the scrape interval of the Prometheus: the least $__interval, and $__rate_interval's
	// base, as a Grafana data source's scrape interval setting. Defaults to 15s when zero.
	Scrape time.Duration
}

// Render draws each page served by server in one browser, writes their PNGs and returns what each
// showed, in order.
func (r Renderer) Render(ctx context.Context, server *Server, pages []Page) ([]Result, error) {
	dir, err := os.MkdirTemp("", "dashview-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "shoot.cjs")
	if err := os.WriteFile(script, shootScript, 0o644); err != nil {
		return nil, err
	}
	job := struct {
		Chromium string              `json:"chromium"`
		Pages    []map[string]string `json:"pages"`
	}{Chromium: r.Chromium}
	for _, p := range pages {
		if err := os.MkdirAll(filepath.Dir(p.PNG), 0o755); err != nil {
			return nil, err
		}
		job.Pages = append(job.Pages, map[string]string{"url": server.URL + "/?" + r.query(p).Encode(), "png": p.PNG})
	}
	out, err := r.run(ctx, script, job)
	if err != nil {
		return nil, err
	}
	var results []Result
	if err := json.Unmarshal(out, &results); err != nil || len(results) != len(pages) {
		return nil, fmt.Errorf("shoot.cjs answered %d results for %d pages (%v): %.300s", len(results), len(pages), err, out)
	}
	for i := range results {
		results[i].Page = pages[i]
	}
	return results, nil
}

// query is the page's URL query for p.
func (r Renderer) query(p Page) url.Values {
	scrape := r.Scrape
	if scrape == 0 {
		scrape = 15 * time.Second
	}
	q := url.Values{"dashboard": {p.Dashboard}, "from": {strconv.FormatInt(p.From.Unix(), 10)},
		"to": {strconv.FormatInt(p.To.Unix(), 10)}, "scrape": {strconv.Itoa(max(int(scrape.Seconds()), 1))}}
	for k, v := range p.Vars {
		q.Set("var-"+k, v)
	}
	return q
}

// run runs the script with Node.js, the job on its standard input, and returns its standard output.
func (r Renderer) run(ctx context.Context, script string, job any) ([]byte, error) {
	in, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+r.NodeModules, "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1")
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("node shoot.cjs: %w: %s", err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// Problems lists the panels and annotations of results that erred, and those that showed nothing
// unless mayBeEmpty says they may (dashboard file, panel title or annotation name); and what the pages
// logged as errors.
func Problems(results []Result, mayBeEmpty func(dashboard, title string) bool) []string {
	var problems []string
	for _, res := range results {
		if len(res.Panels) == 0 {
			problems = append(problems, res.Page.Dashboard+": the page drew no panel")
		}
		for _, e := range res.Errors {
			problems = append(problems, fmt.Sprintf("%s: the page logged: %s", res.Page.Dashboard, e))
		}
		for _, p := range res.Panels {
			where := fmt.Sprintf("%s: %s %q", res.Page.Dashboard, p.Kind, p.Title)
			switch {
			case p.State == "error":
				problems = append(problems, fmt.Sprintf("%s errs: %s", where, p.Error))
			case p.State != "data" && !mayBeEmpty(res.Page.Dashboard, p.Title):
				problems = append(problems, fmt.Sprintf("%s shows nothing", where))
			}
		}
	}
	return problems
}
