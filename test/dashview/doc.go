// Package dashview looks at the dashboards of deploy/grafana as a person would, where no Grafana or
// Plutono can run: a small static page (page/index.html, page/dashview.js) draws every panel of a
// dashboard in the dashboard's grid from Prometheus' HTTP API, and Debian's Chromium, driven by
// playwright-core (shoot.cjs, run by Node.js), takes a PNG of it and reads back what each panel showed:
// data, nothing, or an error.
//
// A Server on loopback serves the page, the dashboard files and, under /api/v1/, proxies the
// Prometheus the dashboards read, so that the page needs no CORS. Render opens each Page in one
// browser and returns what it showed; Problems lists the panels that erred or showed nothing where
// the caller expects data. test/e2e's TestDashboards (make test-dashboards) draws the three
// dashboards during its meltdown and after its kill -9.
//
// The page checks what the panels show (their queries with Grafana's variables and intervals, units,
// tables, stacking, the annotations' marks), not how Plutono itself renders them; the dashboards keep
// to the panel types of Grafana 7.5 (graph, stat, table, heatmap, row), which it draws.
//
// Nothing here downloads a browser: Render needs the path of an installed Chromium and a node_modules
// folder holding playwright-core (make test-dashboards installs both).
package dashview
