package mutants

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Mutant is one entry of a list.
type Mutant struct {
	// Name names the mutant in the check's output, unique in its list.
	Name string `json:"name"`
	// Why says which safety rule the mutant switches off.
	Why string `json:"why"`
	// File is the file to mutate, relative to the list's package.
	File string `json:"file"`
	// Original is the snippet of File that the mutant replaces; it must occur exactly once.
	Original string `json:"original"`
	// Mutant is the text put in its place.
	Mutant string `json:"mutant"`
	// Tests are the names of the package's tests that must fail on the mutant (one is enough).
	Tests []string `json:"tests"`
	// ControlPlane runs the tests without -short, against the real control plane.
	ControlPlane bool `json:"controlPlane,omitempty"`
}

// List is the list of mutants of one package, whose tests kill them.
type List struct {
	// Path is the list's file.
	Path string
	// Dir is the package's directory: the parent of the testdata directory holding the list.
	Dir     string
	Mutants []Mutant
}

// testName is a top-level test's name.
var testName = regexp.MustCompile(`^Test[A-Za-z0-9_]*$`)

// Load reads a list, <package>/testdata/<name>.yaml, decoded strictly (unknown and duplicate keys are
// errors), and validates every entry.
func Load(path string) (*List, error) {
	if filepath.Base(filepath.Dir(path)) != "testdata" {
		return nil, fmt.Errorf("mutant list %s: must be in the testdata directory of the package whose tests kill its mutants", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the mutant list: %w", err)
	}
	var mutants []Mutant
	if err := yaml.UnmarshalStrict(data, &mutants); err != nil {
		return nil, fmt.Errorf("mutant list %s: %w", path, err)
	}
	if len(mutants) == 0 {
		return nil, fmt.Errorf("mutant list %s: no mutants", path)
	}
	var errs []error
	names := map[string]bool{}
	for i, m := range mutants {
		if names[m.Name] {
			errs = append(errs, fmt.Errorf("[%d]: the name %q is used twice", i, m.Name))
		}
		names[m.Name] = true
		errs = append(errs, m.validate(i)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("mutant list %s:\n%w", path, err)
	}
	return &List{Path: path, Dir: filepath.Dir(filepath.Dir(path)), Mutants: mutants}, nil
}

// validate returns the problems of entry i.
func (m Mutant) validate(i int) []error {
	at := fmt.Sprintf("[%d] %s", i, m.Name)
	var errs []error
	for _, f := range []struct{ name, value string }{{"name", m.Name}, {"why", m.Why}, {"file", m.File}, {"original", m.Original}} {
		if strings.TrimSpace(f.value) == "" {
			errs = append(errs, fmt.Errorf("%s: %s is required", at, f.name))
		}
	}
	if m.Original == m.Mutant {
		errs = append(errs, fmt.Errorf("%s: the mutant is the original", at))
	}
	if filepath.IsAbs(m.File) {
		errs = append(errs, fmt.Errorf("%s: file %s must be relative to the package", at, m.File))
	}
	if len(m.Tests) == 0 {
		errs = append(errs, fmt.Errorf("%s: tests is required: the tests that kill the mutant", at))
	}
	for _, t := range m.Tests {
		if !testName.MatchString(t) {
			errs = append(errs, fmt.Errorf("%s: %q is not the name of a top-level test", at, t))
		}
	}
	return errs
}

// testFunc is the declaration of a top-level test in a test file.
var testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(\w+ \*testing\.T\)`)

// DeclaredTests returns the top-level tests that the test files of the package in dir declare.
func DeclaredTests(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	declared := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			declared[string(m[1])] = true
		}
	}
	return declared, nil
}

// Undeclared returns the tests m names that are not in declared.
func (m Mutant) Undeclared(declared map[string]bool) []string {
	var missing []string
	for _, t := range m.Tests {
		if !declared[t] {
			missing = append(missing, t)
		}
	}
	return missing
}

// ErrStale is returned by Apply when the original is not in the file exactly once.
var ErrStale = errors.New("the list is out of date")

// Apply returns src with m's original replaced by its mutant.
func (m Mutant) Apply(src []byte) ([]byte, error) {
	if n := strings.Count(string(src), m.Original); n != 1 {
		return nil, fmt.Errorf("%w: its original occurs %d times in %s, not once", ErrStale, n, m.File)
	}
	return []byte(strings.Replace(string(src), m.Original, m.Mutant, 1)), nil
}

// In tells whether the list's package is one of dirs (package folders such as ./sharding, relative
// to the same folder as the list's path).
func (l *List) In(dirs []string) bool {
	return slices.ContainsFunc(dirs, func(dir string) bool { return filepath.Clean(dir) == filepath.Clean(l.Dir) })
}
