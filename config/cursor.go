package config

import (
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fieldCursor is a position in a config document, found by walking the
// document alongside the Go type it is decoded into.
type fieldCursor struct {
	// path is the field path of the position, as validation writes it:
	// struct fields as ".name", map keys as "[key]", list items as "[i]".
	path *field.Path
	// decoderPath is the same position as the strict JSON decoder writes it
	// in its errors: map keys like struct fields, as ".key".
	decoderPath string
	// typ is the Go type of the value there, or nil when unknown.
	typ reflect.Type
}

// key moves the cursor to the value under mapping key k.
func (c fieldCursor) key(k string) fieldCursor {
	next := fieldCursor{path: c.path.Child(k), decoderPath: k}
	if c.decoderPath != "" {
		next.decoderPath = c.decoderPath + "." + k
	}
	switch t := indirect(c.typ); {
	case t != nil && t.Kind() == reflect.Map:
		next.path, next.typ = c.path.Key(k), t.Elem()
	case t != nil && t.Kind() == reflect.Struct:
		next.typ = jsonFieldType(t, k)
	}
	return next
}

// index moves the cursor to item i of a list.
func (c fieldCursor) index(i int) fieldCursor {
	next := fieldCursor{path: c.path.Index(i), decoderPath: c.decoderPath + "[" + strconv.Itoa(i) + "]"}
	if t := indirect(c.typ); t != nil && t.Kind() == reflect.Slice {
		next.typ = t.Elem()
	}
	return next
}

// indirect returns the type that t points to, or t.
func indirect(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonFieldNames returns the JSON keys of struct t in field order.
func jsonFieldNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if name := jsonName(f); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// jsonFieldType returns the type of the field of struct t with JSON key
// name, or nil when there is none. Keys match case-sensitively, as in the
// strict decoder.
func jsonFieldType(t reflect.Type, name string) reflect.Type {
	for f := range t.Fields() {
		if jsonName(f) == name {
			return f.Type
		}
	}
	return nil
}

// jsonName returns the JSON key of f, or "" when f is not decoded.
func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}
