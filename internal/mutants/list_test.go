package mutants

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeList writes a list into dir/testdata and returns its path.
func writeList(t *testing.T, dir, yaml string) string {
	t.Helper()
	path := filepath.Join(dir, "testdata", ListName)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o644))
	return path
}

const oneMutant = `
- name: greater-or-equal
  why: the comparison admits equality
  file: max.go
  original: a > b
  mutant: a >= b
  tests: [TestMax]
`

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	list, err := Load(writeList(t, dir, oneMutant))
	require.NoError(t, err)
	assert.Equal(t, dir, list.Dir)
	assert.Equal(t, []Mutant{{Name: "greater-or-equal", Why: "the comparison admits equality", File: "max.go",
		Original: "a > b", Mutant: "a >= b", Tests: []string{"TestMax"}}}, list.Mutants)

	for _, tt := range []struct{ name, yaml, want string }{
		{"an unknown key", oneMutant + "  package: x\n", `unknown field "package"`},
		{"no tests", "- {name: a, why: w, file: f.go, original: x, mutant: y}", "tests is required"},
		{"not a test's name", "- {name: a, why: w, file: f.go, original: x, mutant: y, tests: [TestA/sub]}", "not the name of a top-level test"},
		{"no original", "- {name: a, why: w, file: f.go, mutant: y, tests: [TestA]}", "original is required"},
		{"the mutant is the original", "- {name: a, why: w, file: f.go, original: x, mutant: x, tests: [TestA]}", "the mutant is the original"},
		{"a name used twice", oneMutant + oneMutant, `the name "greater-or-equal" is used twice`},
		{"no mutants", "[]", "no mutants"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeList(t, t.TempDir(), tt.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	path := filepath.Join(t.TempDir(), ListName)
	require.NoError(t, os.WriteFile(path, []byte(oneMutant), 0o644))
	_, err = Load(path)
	assert.ErrorContains(t, err, "must be in the testdata directory")
}

func TestApply(t *testing.T) {
	m := Mutant{File: "f.go", Original: "a > b", Mutant: "a >= b"}
	got, err := m.Apply([]byte("if a > b {"))
	require.NoError(t, err)
	assert.Equal(t, "if a >= b {", string(got))
	for _, src := range []string{"if b < a {", "a > b && a > b"} {
		_, err := m.Apply([]byte(src))
		assert.ErrorIs(t, err, ErrStale, src)
	}
}

func TestFind(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"a", "b/c", ".git/d", "bin", "a/testdata/e", "f"} {
		writeList(t, filepath.Join(root, dir), oneMutant)
	}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "g", "testdata"), 0o755)) // no list
	lists, err := Find(root)
	require.NoError(t, err)
	assert.Equal(t, []string{
		filepath.Join(root, "a", "testdata", ListName),
		filepath.Join(root, "b", "c", "testdata", ListName),
		filepath.Join(root, "f", "testdata", ListName),
	}, lists)
}

// The repository's lists follow the code: a snippet edited away, or a named test renamed, is found by
// the unit tests, minutes before make mutants would report the mutant stale or broken.
func TestTheRepositorysListsAreCurrent(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	paths, err := Find(root)
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, path := range paths {
		list, err := Load(path)
		require.NoError(t, err)
		declared, err := DeclaredTests(list.Dir)
		require.NoError(t, err)
		for _, m := range list.Mutants {
			assert.Empty(t, m.Undeclared(declared), "%s: %s names tests its package does not declare", path, m.Name)
			src, err := os.ReadFile(filepath.Join(list.Dir, m.File))
			require.NoError(t, err, "%s: %s", path, m.Name)
			_, err = m.Apply(src)
			assert.NoError(t, err, "%s: %s", path, m.Name)
		}
	}
}

func TestAListIsInThePackageFoldersNamed(t *testing.T) {
	list := &List{Path: filepath.Join("sharding", "testdata", "mutants.yaml"), Dir: "sharding"}
	assert.True(t, list.In([]string{"./prober", "./sharding"}))
	assert.True(t, list.In([]string{"sharding/"}))
	assert.False(t, list.In([]string{"./sharding/sub", "./prober"}))
	assert.False(t, list.In(nil))
}
