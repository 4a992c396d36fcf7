package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// documentPath is the path of problems with the document as a whole.
func documentPath() *field.Path {
	return field.NewPath("<document>")
}

// decodeStrict decodes the YAML data into obj, a pointer to a config struct:
// YAML is converted to JSON, then decoded finding unknown and duplicate keys,
// and checkYAML adds what the conversion hides. The keys the config does not
// have are returned in unknown, every other problem in errs. decoded reports
// whether obj holds the document, so that defaulting and validation can add
// their problems to errs.
func decodeStrict(data []byte, obj any) (unknown, errs field.ErrorList, decoded bool) {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(documentPath(), field.OmitValueType{}, err.Error())}, false
	}
	if err := checkMapping(j); err != nil {
		return nil, field.ErrorList{err}, false
	}
	checked := checkYAML(data, reflect.TypeOf(obj))
	unknown, errs = checked.unknown, checked.errs
	strictErrs, err := sigsjson.UnmarshalStrict(j, obj)
	if err != nil {
		return unknown, appendDecodeError(errs, decodeError(err)), false
	}
	for _, e := range strictErrs {
		switch e, isUnknown := strictError(e); {
		case checked.unknownKeys[e.Field]:
		case isUnknown:
			unknown = append(unknown, e)
		default:
			errs = append(errs, e)
		}
	}
	return unknown, errs, true
}

// checkMapping requires the JSON document j to be an object.
func checkMapping(j []byte) *field.Error {
	j = bytes.TrimSpace(j)
	switch {
	case len(j) == 0 || string(j) == "null":
		return field.Required(documentPath(), "the document is empty")
	case j[0] == '{':
		return nil
	case j[0] == '[':
		return field.Invalid(documentPath(), field.OmitValueType{}, "must be a mapping, not a list")
	default:
		return field.Invalid(documentPath(), field.OmitValueType{}, "must be a mapping, not a scalar")
	}
}

// strictError turns one error of the strict decoder into a field error at
// the path the decoder gives, written as the decoder writes it, and tells
// whether it is about an unknown key.
func strictError(err error) (e *field.Error, unknown bool) {
	var fieldErr sigsjson.FieldError
	if !errors.As(err, &fieldErr) {
		return field.Invalid(documentPath(), field.OmitValueType{}, err.Error()), false
	}
	p := field.NewPath(fieldErr.FieldPath())
	if strings.HasPrefix(err.Error(), "duplicate field") {
		return field.Duplicate(p, fieldErr.FieldPath()), false
	}
	return field.Invalid(p, field.OmitValueType{}, "unknown field"), true
}

// appendDecodeError appends e to errs unless it names no field and repeats
// the detail of an error in errs: checkYAML has already reported that bad
// duration at its field.
func appendDecodeError(errs field.ErrorList, e *field.Error) field.ErrorList {
	repeated := slices.ContainsFunc(errs, func(x *field.Error) bool { return x.Detail == e.Detail })
	if repeated && e.Field == documentPath().String() {
		return errs
	}
	return append(errs, e)
}

// decodeError turns a decoding failure into one error, at the field it
// names if any. The decoder stops at its first failure.
func decodeError(err error) *field.Error {
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) || typeErr.Field == "" || typeErr.Type == nil {
		return field.Invalid(documentPath(), field.OmitValueType{}, err.Error())
	}
	names := strings.Split(typeErr.Field, ".")
	detail := fmt.Sprintf("must be %s, not %s", describeType(typeErr.Type), typeErr.Value)
	return field.Invalid(field.NewPath(names[0], names[1:]...), field.OmitValueType{}, detail)
}

// describeType names the kind of YAML value that t holds.
func describeType(t reflect.Type) string {
	switch indirect(t).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return t.String()
}
