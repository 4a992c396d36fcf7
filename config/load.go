package config

import (
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DecodeProberConfigLenient decodes the YAML data, defaults and validates it.
// A key the config does not have is no error: it is returned in unknown, with
// its field path, for the caller to warn about (or to refuse, as `dwd config
// validate` does). The original ignores such keys, so a config written for
// another version of it loads; everything else (a wrong type, a repeated key,
// an invalid value) is an error in errs. It returns either the config or errs,
// never both; unknown may come with either.
func DecodeProberConfigLenient(data []byte) (c *ProberConfig, unknown, errs field.ErrorList) {
	return decode(data, SetProberDefaults, ValidateProberConfig)
}

// DecodeWeederConfigLenient is DecodeProberConfigLenient for the weeder.
func DecodeWeederConfigLenient(data []byte) (c *WeederConfig, unknown, errs field.ErrorList) {
	return decode(data, SetWeederDefaults, ValidateWeederConfig)
}

// ReadProberConfig reads the file at path and decodes it with DecodeProberConfigLenient. A file that
// cannot be read is one error in errs.
func ReadProberConfig(path string) (c *ProberConfig, unknown, errs field.ErrorList) {
	return read(path, DecodeProberConfigLenient)
}

// ReadWeederConfig is ReadProberConfig for the weeder.
func ReadWeederConfig(path string) (c *WeederConfig, unknown, errs field.ErrorList) {
	return read(path, DecodeWeederConfigLenient)
}

// decode runs the three loading steps on a new T. Strict-decoding errors
// that leave the document readable (unknown or duplicate keys) do not stop
// defaulting and validation, so that all problems are reported together.
func decode[T any](data []byte, setDefaults func(*T), validate func(*T) field.ErrorList) (*T, field.ErrorList, field.ErrorList) {
	c := new(T)
	unknown, errs, decoded := decodeStrict(data, c)
	if !decoded {
		return nil, unknown, errs
	}
	setDefaults(c)
	if errs = append(errs, validate(c)...); len(errs) > 0 {
		return nil, unknown, errs
	}
	return c, unknown, nil
}

// read reads the file at path and decodes it with decode.
func read[T any](path string, decode func([]byte) (*T, field.ErrorList, field.ErrorList)) (*T, field.ErrorList, field.ErrorList) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("reading the file: %w", err))}
	}
	return decode(data)
}
