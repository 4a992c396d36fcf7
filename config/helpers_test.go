package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fieldErr is what the tests compare of a field.Error: its type and path.
type fieldErr struct {
	Type  field.ErrorType
	Field string
}

// fieldErrs returns the type and path of each error in errs.
func fieldErrs(errs field.ErrorList) []fieldErr {
	out := make([]fieldErr, 0, len(errs))
	for _, e := range errs {
		out = append(out, fieldErr{Type: e.Type, Field: e.Field})
	}
	return out
}

// Shorthands for the expected errors.
func required(path string) fieldErr     { return fieldErr{field.ErrorTypeRequired, path} }
func invalid(path string) fieldErr      { return fieldErr{field.ErrorTypeInvalid, path} }
func notSupported(path string) fieldErr { return fieldErr{field.ErrorTypeNotSupported, path} }
func duplicate(path string) fieldErr    { return fieldErr{field.ErrorTypeDuplicate, path} }
func forbidden(path string) fieldErr    { return fieldErr{field.ErrorTypeForbidden, path} }

func duration(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func ptr[T any](v T) *T { return &v }

// readTestdata returns the content of testdata/name.
func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return data
}

// addTestdataSeeds adds every testdata file as a seed of f.
func addTestdataSeeds(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	require.NoError(f, err)
	require.NotEmpty(f, files)
	for _, name := range files {
		f.Add(readTestdata(f, filepath.Base(name)))
	}
}
