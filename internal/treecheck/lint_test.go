package treecheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The lint of the tree (docs/development.md, "Layering", "Rules the lint checks besides the floors"):
// the import floors of the module's packages, the calls nothing may make, and the length of a
// function. It parses the sources, so it needs no build and runs in make verify in a second; each
// rule has a planted violation below.

// sleepCall names the call the lint forbids, written in parts so that this file holds none itself.
const sleepCall = "time." + "Sleep"

// maxFuncLines is the most lines a function of non-test code may span, from func to its closing brace.
const maxFuncLines = 60

// layerRule limits what one package of the module may import, directly or through others: only the
// packages in only (when only is not nil), and none of never.
type layerRule struct {
	pkg   string
	only  []string
	never []string
}

// layering is the floors of docs/development.md, "Layering": config and leases import nothing of
// the module; sharding only those; the sharded caches only sharding below them; the audit log and the dry run's record nothing (the audit's checker is above sharding); scaler
// never sharding; the two roles never each other; only the commands import the replica that
// assembles them; the report of dwd explain reads the prober's rules, never a replica's parts.
var layering = []layerRule{
	{pkg: "config", only: []string{}},
	{pkg: "leases", only: []string{}},
	{pkg: "internal/apimetrics", only: []string{}},
	{pkg: "internal/memlimit", only: []string{}},
	{pkg: "internal/clocktimer", only: []string{}},
	{pkg: "audit", only: []string{}},
	{pkg: "access", only: []string{}},
	{pkg: "dryrun", only: []string{}},
	{pkg: "sharding", only: []string{"config", "leases"}},
	{pkg: "shardcache", only: []string{"config", "leases", "sharding"}},
	{pkg: "scaler", never: []string{"sharding", "replica"}},
	{pkg: "prober", never: []string{"weeder", "replica", "shardcache"}},
	{pkg: "weeder", never: []string{"prober", "replica", "shardcache"}},
	{pkg: "explain", never: []string{"replica", "weeder", "shardcache"}},
}

// runtime are the packages a dwd process is built from (and their sub-packages but test helpers):
// they never import a test helper or the simulation.
var runtime = []string{"access", "audit", "config", "dryrun", "explain", "leases", "sharding", "shardcache", "scaler", "prober", "weeder",
	"internal/apimetrics", "internal/memlimit", "internal/clocktimer", "replica", "cmd/dwd"}

// testHelper tells whether the package at dir (slash-separated, from the module root) exists for tests
// or the simulation: anything under test/ or benchmarks/, a package whose name ends in "test", and
// the internal helpers of tests, fuzzing and the mutation check.
func testHelper(dir string) bool {
	switch {
	case dir == "test" || strings.HasPrefix(dir, "test/"), dir == "benchmarks" || strings.HasPrefix(dir, "benchmarks/"):
		return true
	case strings.HasSuffix(filepath.Base(dir), "test"):
		return true
	}
	return slices.Contains([]string{"internal/fuzzinput", "internal/mutants", "internal/mutants/run", "internal/dwdproc"}, dir)
}

// isRuntime tells whether dir is one of the runtime packages or below one (test helpers excepted).
func isRuntime(dir string) bool {
	for _, r := range runtime {
		if (dir == r || strings.HasPrefix(dir, r+"/")) && !testHelper(dir) {
			return true
		}
	}
	return false
}

// tree is what the lint reads of a module: each package's module imports from its non-test files,
// and the problems found while parsing (calls, lengths).
type tree struct {
	module   string
	imports  map[string][]string // package dir → module package dirs imported by its non-test files
	problems []string
}

// readTree parses every Go file under root (but bin/, vendor/, testdata and hidden folders).
func readTree(root string) (*tree, error) {
	module, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	t := &tree{module: module, imports: map[string][]string{}}
	skip := func(_, name string) bool {
		return name == "testdata" || name == "bin" || name == "vendor" || strings.HasPrefix(name, ".")
	}
	err = walk(root, skip, func(path, rel string) error {
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		return t.readFile(path, rel)
	})
	return t, err
}

// modulePath reads the module path from root's go.mod.
func modulePath(root string) (string, error) {
	content, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(content), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", fmt.Errorf("%s/go.mod names no module", root)
}

// readFile records the module imports of one file and the problems of its calls and functions.
func (t *tree) readFile(path, rel string) error {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	dir, isTest := filepath.ToSlash(filepath.Dir(rel)), strings.HasSuffix(rel, "_test.go")
	if _, ok := t.imports[dir]; !ok && !isTest {
		t.imports[dir] = nil
	}
	for _, spec := range file.Imports {
		path, _ := strconv.Unquote(spec.Path.Value)
		target, ok := strings.CutPrefix(path, t.module+"/")
		if !ok {
			continue
		}
		if strings.HasPrefix(target, "cmd/") {
			t.problems = append(t.problems, fmt.Sprintf("%s: imports %s: nothing imports a command", rel, target))
		}
		if !isTest {
			t.imports[dir] = append(t.imports[dir], target)
		}
	}
	t.problems = append(t.problems, callProblems(fset, file, rel, isTest)...)
	if !isTest {
		t.problems = append(t.problems, lengthProblems(fset, file, rel)...)
	}
	return nil
}

// callProblems returns a problem for every call of time's Sleep (tests poll for a condition or step a fake
// clock; code waits on a clock it was given) and, in non-test code, for every clock.RealClock{}
// outside nil-defaulting, that is, outside the block of an `if x == nil` (a test may hand a real
// clock to what it builds: that is injection).
func callProblems(fset *token.FileSet, file *ast.File, rel string, isTest bool) []string {
	var problems []string
	var defaulting []ast.Node
	timeName, clockName := localName(file, "time"), localName(file, "k8s.io/utils/clock")
	ast.Inspect(file, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt:
			if isNilCheck(n.Cond) {
				defaulting = append(defaulting, n.Body)
			}
		case *ast.SelectorExpr:
			if isPackageSelector(n, timeName, "Sleep") {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: poll for the condition or step a clock", rel, fset.Position(n.Pos()).Line, sleepCall))
			}
		case *ast.CompositeLit:
			if sel, ok := n.Type.(*ast.SelectorExpr); ok && isPackageSelector(sel, clockName, "RealClock") && !isTest && !inside(n, defaulting) {
				problems = append(problems, fmt.Sprintf("%s:%d: clock.RealClock{} outside nil-defaulting: take the clock as a dependency", rel, fset.Position(n.Pos()).Line))
			}
		}
		return true
	})
	return problems
}

// localName is the name under which file refers to the package at path: its import's alias, else the
// last element of the path; "" when file does not import it.
func localName(file *ast.File, path string) string {
	for _, spec := range file.Imports {
		if p, _ := strconv.Unquote(spec.Path.Value); p == path {
			if spec.Name != nil {
				return spec.Name.Name
			}
			return path[strings.LastIndex(path, "/")+1:]
		}
	}
	return ""
}

// isNilCheck tells whether cond is `x == nil`.
func isNilCheck(cond ast.Expr) bool {
	b, ok := cond.(*ast.BinaryExpr)
	if !ok || b.Op != token.EQL {
		return false
	}
	id, ok := b.Y.(*ast.Ident)
	return ok && id.Name == "nil"
}

// isPackageSelector tells whether sel is pkg.name.
func isPackageSelector(sel *ast.SelectorExpr, pkg, name string) bool {
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg && sel.Sel.Name == name
}

// inside tells whether n lies within one of blocks.
func inside(n ast.Node, blocks []ast.Node) bool {
	for _, b := range blocks {
		if b.Pos() <= n.Pos() && n.End() <= b.End() {
			return true
		}
	}
	return false
}

// lengthProblems returns a problem for every function of file longer than maxFuncLines.
func lengthProblems(fset *token.FileSet, file *ast.File, rel string) []string {
	var problems []string
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		start, end := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if lines := end - start + 1; lines > maxFuncLines {
			problems = append(problems, fmt.Sprintf("%s:%d: %s spans %d lines (at most %d)", rel, start, fn.Name.Name, lines, maxFuncLines))
		}
	}
	return problems
}

// closure returns every module package dir imported by dir, directly or through others.
func (t *tree) closure(dir string) map[string]bool {
	seen := map[string]bool{}
	var visit func(string)
	visit = func(d string) {
		for _, imp := range t.imports[d] {
			if !seen[imp] {
				seen[imp] = true
				visit(imp)
			}
		}
	}
	visit(dir)
	return seen
}

// layerProblems returns a problem for every import, direct or through others, that breaks a floor
// of layering or brings a test helper into a runtime package.
func (t *tree) layerProblems() []string {
	var problems []string
	for _, r := range layering {
		if _, ok := t.imports[r.pkg]; !ok {
			problems = append(problems, fmt.Sprintf("%s: the layering names it, but the tree has no such package", r.pkg))
			continue
		}
		for _, imp := range sortedKeys(t.closure(r.pkg)) {
			if (r.only != nil && !slices.Contains(r.only, imp)) || slices.Contains(r.never, imp) {
				problems = append(problems, fmt.Sprintf("%s: imports %s%s, which its floor forbids", r.pkg, imp, t.via(r.pkg, imp)))
			}
		}
	}
	for _, dir := range sortedKeys(t.imports) {
		if !isRuntime(dir) {
			continue
		}
		for _, imp := range sortedKeys(t.closure(dir)) {
			if testHelper(imp) {
				problems = append(problems, fmt.Sprintf("%s: imports the test helper %s%s", dir, imp, t.via(dir, imp)))
			}
		}
	}
	return problems
}

// via names the path from dir to imp when imp is not a direct import of dir.
func (t *tree) via(dir, imp string) string {
	if slices.Contains(t.imports[dir], imp) {
		return ""
	}
	for _, next := range t.imports[dir] {
		if t.closure(next)[imp] {
			return " (through " + next + ")"
		}
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lint returns every problem of the tree at root.
func lint(root string) ([]string, error) {
	t, err := readTree(root)
	if err != nil {
		return nil, err
	}
	return append(t.problems, t.layerProblems()...), nil
}

// TestTheTreeKeepsItsLayeringAndRules is the lint of make verify: the import floors, no sleep of package time,
// no clock.RealClock{} outside nil-defaulting, no function of non-test code over 60 lines.
func TestTheTreeKeepsItsLayeringAndRules(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	problems, err := lint(root)
	require.NoError(t, err)
	for _, p := range problems {
		t.Error(p)
	}
	tr, err := readTree(root)
	require.NoError(t, err)
	assert.Greater(t, len(tr.imports), 20, "the walk reached the tree's packages")
}

// TestTheLintFindsAPlantedViolationOfEachRule plants one violation of each rule in a copy of a small
// module and checks that the lint names it, and that the clean copy has none. The planted calls are
// written in parts, so that this file makes none itself.
func TestTheLintFindsAPlantedViolationOfEachRule(t *testing.T) {
	t.Parallel()
	clean := map[string]string{
		"go.mod":                   "module example.com/m\n\ngo 1.26\n",
		"config/config.go":         "package config\n",
		"leases/leases.go":         "package leases\n",
		"internal/apimetrics/m.go": "package apimetrics\n",
		"internal/memlimit/m.go":   "package memlimit\n",
		"internal/clocktimer/c.go": "package clocktimer\n",
		"audit/log.go":             "package audit\n",
		"access/a.go":              "package access\n",
		"dryrun/d.go":              "package dryrun\n",
		"explain/e.go":             "package explain\n",
		"sharding/s.go":            "package sharding\n\nimport _ \"example.com/m/leases\"\n",
		"scaler/s.go":              "package scaler\n\nimport _ \"example.com/m/audit\"\n",
		"prober/p.go":              "package prober\n\nimport _ \"example.com/m/scaler\"\n",
		"prober/p_test.go":         "package prober\n\nimport _ \"example.com/m/leases/leasestest\"\n",
		"weeder/w.go": "package weeder\n\nimport \"k8s.io/utils/clock\"\n\nfunc c(x clock.Clock) clock.Clock {\n" +
			"\tif x == nil {\n\t\tx = clock.RealClock{}\n\t}\n\treturn x\n}\n",
		"weeder/w_test.go":             "package weeder\n\nimport \"k8s.io/utils/clock\"\n\nvar _ = clock.RealClock{}\n",
		"leases/leasestest/l.go":       "package leasestest\n",
		"cmd/dwd/main.go":              "package main\n\nimport _ \"example.com/m/prober\"\n",
		"benchmarks/sim/testdata/x.go": "package x\n\nimport \"time\"\n\nvar _ = time." + "Sleep\n",
		"benchmarks/sim/sim.go":        "package sim\n\nimport _ \"example.com/m/leases/leasestest\"\n",
		"internal/treecheck/x_test.go": "package treecheck\n",
		"replica/r.go":                 "package replica\n\nimport _ \"example.com/m/prober\"\n",
		"shardcache/c.go":              "package shardcache\n\nimport _ \"example.com/m/sharding\"\n",
	}
	planted := map[string]struct {
		files map[string]string
		want  string
	}{
		"a floor's only": {map[string]string{"sharding/s.go": "package sharding\n\nimport _ \"example.com/m/scaler\"\n"},
			"sharding: imports scaler, which its floor forbids"},
		"a floor's never": {map[string]string{"scaler/s.go": "package scaler\n\nimport _ \"example.com/m/sharding\"\n"},
			"scaler: imports sharding, which its floor forbids"},
		"through another package": {map[string]string{"scaler/s.go": "package scaler\n\nimport _ \"example.com/m/access\"\n",
			"access/a.go": "package access\n\nimport _ \"example.com/m/sharding\"\n"},
			"scaler: imports sharding (through access)"},
		"the sharded caches under a role": {map[string]string{"prober/s.go": "package prober\n\nimport _ \"example.com/m/shardcache\"\n"},
			"prober: imports shardcache, which its floor forbids"},
		"the replica under a role": {map[string]string{"weeder/w.go": "package weeder\n\nimport _ \"example.com/m/replica\"\n"},
			"weeder: imports replica, which its floor forbids"},
		"a role beside the other": {map[string]string{"prober/p.go": "package prober\n\nimport _ \"example.com/m/weeder\"\n"},
			"prober: imports weeder"},
		"a command imported": {map[string]string{"weeder/x_test.go": "package weeder\n\nimport _ \"example.com/m/cmd/dwd\"\n"},
			"weeder/x_test.go: imports cmd/dwd: nothing imports a command"},
		"a test helper in a runtime package": {map[string]string{"prober/h.go": "package prober\n\nimport _ \"example.com/m/leases/leasestest\"\n"},
			"prober: imports the test helper leases/leasestest"},
		"a sleep, in a test too": {map[string]string{"weeder/s_test.go": "package weeder\n\nimport \"time\"\n\nfunc f() { time." + "Sleep" + "(time.Second) }\n"},
			"weeder/s_test.go:5: " + sleepCall},
		"a real clock not defaulted": {map[string]string{"prober/c.go": "package prober\n\nimport \"k8s.io/utils/clock\"\n\nvar c clock.Clock = clock.RealClock{}\n"},
			"prober/c.go:5: clock.RealClock{} outside nil-defaulting"},
		"a real clock under another name": {map[string]string{"prober/c.go": "package prober\n\nimport uc \"k8s.io/utils/clock\"\n\nvar c uc.Clock = uc.RealClock{}\n"},
			"prober/c.go:5: clock.RealClock{} outside nil-defaulting"},
		"a sleep under another name": {map[string]string{"weeder/s.go": "package weeder\n\nimport t \"time\"\n\nfunc f() { t." + "Sleep" + "(t.Second) }\n"},
			"weeder/s.go:5: " + sleepCall},
		"a long function": {map[string]string{"config/long.go": "package config\n\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", 59) + "}\n"},
			"config/long.go:3: long spans 61 lines (at most 60)"},
		"a floor gone": {map[string]string{"leases/leases.go": ""},
			"leases: the layering names it, but the tree has no such package"},
	}
	write := func(root string, files map[string]string) {
		for name, content := range files {
			if content == "" {
				continue
			}
			require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(content), 0o644))
		}
	}
	root := t.TempDir()
	write(root, clean)
	problems, err := lint(root)
	require.NoError(t, err)
	require.Empty(t, problems, "the clean module")
	for name, p := range planted {
		want := p.want
		t.Run(name, func(t *testing.T) {
			files := maps.Clone(clean)
			maps.Copy(files, p.files)
			root := t.TempDir()
			write(root, files)
			problems, err := lint(root)
			require.NoError(t, err)
			assert.True(t, slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, want) }),
				"%q among %q", want, problems)
		})
	}
}
