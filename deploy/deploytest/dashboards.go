package deploytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
)

// deployDir returns the deploy tree in the source: the parent of this package's folder, as the
// compiler recorded it (not under -trimpath).
func deployDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("the source folder of package deploytest is unknown (built with -trimpath?)")
	}
	return filepath.Dir(filepath.Dir(file)), nil
}

// DashboardQuery is one target of one panel, or the query of one annotation.
type DashboardQuery struct {
	Dashboard string // the file name, e.g. "dwd-overview.json"
	PanelID   int    // 0 for an annotation
	Panel     string // the panel title, or the annotation's name
	RefID     string // empty for an annotation
	Expr      string // as written, with $variables
	Instant   bool
	// Annotation marks the query of an annotation: Grafana evaluates it over the time range at its
	// step and marks each time it returns a series, so it returns nothing while nothing happens.
	Annotation bool
}

// Dashboards returns the dashboard files of deploy/grafana (name -> raw JSON).
func Dashboards() (map[string][]byte, error) {
	dir, err := deployDir()
	if err != nil {
		return nil, err
	}
	grafana := filepath.Join(dir, "grafana")
	names, err := filepath.Glob(filepath.Join(grafana, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("listing the dashboards: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no dashboard in %s", grafana)
	}
	files := make(map[string][]byte, len(names))
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading dashboard %s: %w", name, err)
		}
		files[filepath.Base(name)] = data
	}
	return files, nil
}

// DashboardQueries returns every target of every panel (rows' nested panels included), in file and
// panel order, each file's annotation queries after its panels'.
func DashboardQueries() ([]DashboardQuery, error) {
	files, err := Dashboards()
	if err != nil {
		return nil, err
	}
	return dashboardQueries(files)
}

// dashboardPanel is what DashboardQueries reads of a panel; a row's panels are those it holds while
// collapsed.
type dashboardPanel struct {
	ID      int              `json:"id"`
	Title   string           `json:"title"`
	Panels  []dashboardPanel `json:"panels"`
	Targets []struct {
		RefID   string `json:"refId"`
		Expr    string `json:"expr"`
		Instant bool   `json:"instant"`
	} `json:"targets"`
}

// dashboardQueries returns the targets of files (name -> JSON), in the order of their names.
func dashboardQueries(files map[string][]byte) ([]DashboardQuery, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var queries []DashboardQuery
	for _, name := range names {
		var d struct {
			Panels      []dashboardPanel `json:"panels"`
			Annotations struct {
				List []struct {
					Name string `json:"name"`
					Expr string `json:"expr"`
				} `json:"list"`
			} `json:"annotations"`
		}
		if err := json.Unmarshal(files[name], &d); err != nil {
			return nil, fmt.Errorf("dashboard %s: not a dashboard's JSON: %w", name, err)
		}
		queries = appendQueries(queries, name, d.Panels)
		for _, a := range d.Annotations.List {
			if a.Expr != "" { // Grafana's built-in annotations have no query
				queries = append(queries, DashboardQuery{Dashboard: name, Panel: a.Name, Expr: a.Expr, Annotation: true})
			}
		}
	}
	return queries, nil
}

// appendQueries appends the targets of panels, each panel's before those of the panels it holds.
func appendQueries(queries []DashboardQuery, dashboard string, panels []dashboardPanel) []DashboardQuery {
	for _, p := range panels {
		for _, t := range p.Targets {
			queries = append(queries, DashboardQuery{Dashboard: dashboard, PanelID: p.ID, Panel: p.Title,
				RefID: t.RefID, Expr: t.Expr, Instant: t.Instant})
		}
		queries = appendQueries(queries, dashboard, p.Panels)
	}
	return queries
}

// dashboardVariable matches a variable reference as Grafana writes them: ${name}, [[name]] or $name.
var dashboardVariable = regexp.MustCompile(`\$\{(\w+)\}|\[\[(\w+)\]\]|\$(\w+)`)

// ExpandQuery replaces $name, ${name} and [[name]] of vars, and Grafana's $__rate_interval, $__interval,
// $__range built-ins (given in vars too, e.g. vars["__rate_interval"]="1m").
//
// A name runs as far as letters, digits and underscores go, as in Grafana, so $__range_s is not
// $__range; a reference to a name vars does not have stays as written.
func ExpandQuery(expr string, vars map[string]string) string {
	return dashboardVariable.ReplaceAllStringFunc(expr, func(ref string) string {
		m := dashboardVariable.FindStringSubmatch(ref)
		if value, ok := vars[m[1]+m[2]+m[3]]; ok {
			return value
		}
		return ref
	})
}

// Variables returns the names of the variables s refers to, in order, once each time it does.
func Variables(s string) []string {
	var names []string
	for _, m := range dashboardVariable.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1]+m[2]+m[3])
	}
	return names
}
