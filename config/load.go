package config

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DecodeProberConfig decodes the YAML data strictly, defaults and validates
// it. It returns either the config or every problem found, never both.
func DecodeProberConfig(data []byte) (*ProberConfig, field.ErrorList) {
	return decode(data, SetProberDefaults, ValidateProberConfig)
}

// DecodeWeederConfig decodes the YAML data strictly, defaults and validates
// it. It returns either the config or every problem found, never both.
func DecodeWeederConfig(data []byte) (*WeederConfig, field.ErrorList) {
	return decode(data, SetWeederDefaults, ValidateWeederConfig)
}

// LoadProberConfig reads the file at path and decodes it with
// DecodeProberConfig. The error names the file and lists every problem.
func LoadProberConfig(path string) (*ProberConfig, error) {
	return load(path, "prober", DecodeProberConfig)
}

// LoadWeederConfig reads the file at path and decodes it with
// DecodeWeederConfig. The error names the file and lists every problem.
func LoadWeederConfig(path string) (*WeederConfig, error) {
	return load(path, "weeder", DecodeWeederConfig)
}

// decode runs the three loading steps on a new T. Strict-decoding errors
// that leave the document readable (unknown or duplicate keys) do not stop
// defaulting and validation, so that all problems are reported together.
func decode[T any](data []byte, setDefaults func(*T), validate func(*T) field.ErrorList) (*T, field.ErrorList) {
	c := new(T)
	errs, decoded := decodeStrict(data, c)
	if !decoded {
		return nil, errs
	}
	setDefaults(c)
	if errs = append(errs, validate(c)...); len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// load reads the file at path and decodes it; what names the config in errors.
func load[T any](path, what string, decode func([]byte) (*T, field.ErrorList)) (*T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s config: %w", what, err)
	}
	c, errs := decode(data)
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid %s config %q: %w", what, path, errs.ToAggregate())
	}
	return c, nil
}
