package deploytest

import (
	"regexp"
	"slices"
	"strings"
)

var (
	quoted        = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	braces        = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	labelLists    = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	words         = regexp.MustCompile(`[A-Za-z0-9_:.]+`)
	identifier    = regexp.MustCompile(`^[A-Za-z_:][A-Za-z0-9_:]*$`)
	promqlKeyword = []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "group_left", "group_right"}
)

// MetricNames returns the metric names a PromQL expression selects, in order: what remains of its
// identifiers once strings, dashboard variables, label matchers, ranges and label lists are removed, less the functions and
// aggregations (followed by a parenthesis) and the keywords. The tests of the rules and dashboards use
// it to check the names against the metrics dwd defines, and to query each one on a real Prometheus.
func MetricNames(expr string) []string {
	expr = quoted.ReplaceAllString(expr, `""`)
	expr = dashboardVariable.ReplaceAllString(expr, " ") // a dashboard's offset $__interval
	expr = braces.ReplaceAllString(expr, " ")
	expr = labelLists.ReplaceAllString(expr, " ")
	var names []string
	for _, at := range words.FindAllStringIndex(expr, -1) {
		word, call := expr[at[0]:at[1]], strings.HasPrefix(strings.TrimSpace(expr[at[1]:]), "(")
		if !identifier.MatchString(word) || call || slices.Contains(promqlKeyword, strings.ToLower(word)) {
			continue // a number or duration, a function or aggregation, a keyword
		}
		if !slices.Contains(names, word) {
			names = append(names, word)
		}
	}
	return names
}
