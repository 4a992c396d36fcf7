package config

import (
	"bytes"
	"fmt"
	"reflect"
	"time"

	yamlv3 "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// yamlChecker walks the YAML nodes of a config alongside its Go type, to find
// at their exact field paths the problems that converting YAML to JSON hides
// or that the JSON decoder reports without a usable path:
//   - a key repeated in one mapping (the conversion keeps the last one);
//   - a key the config does not have (the decoder writes map keys and struct
//     fields alike, and reports none of them after a type error);
//   - a string that does not parse as a duration (the decoder names no field);
//   - a second, non-empty YAML document (the conversion ignores it).
//
// Aliases are not followed: the node they name is checked where defined.
type yamlChecker struct {
	errs field.ErrorList
	// unknown holds the keys the config does not have, apart from errs: a
	// lenient decode only warns about them.
	unknown field.ErrorList
	// unknownKeys holds the decoder paths of the unknown keys found, so that
	// the strict decoder's reports of the same keys can be dropped.
	unknownKeys map[string]bool
}

var durationType = reflect.TypeFor[metav1.Duration]()

// checkYAML walks data, a document decoded into a value of type root. The
// YAML to JSON conversion has the last word on syntax, so a document this
// parser rejects is left unchecked.
func checkYAML(data []byte, root reflect.Type) *yamlChecker {
	y := &yamlChecker{unknownKeys: map[string]bool{}}
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var doc yamlv3.Node
		if dec.Decode(&doc) != nil {
			return y
		}
		if i == 0 {
			y.node(&doc, fieldCursor{typ: root})
		} else if !isEmptyDocument(&doc) {
			y.errs = append(y.errs, field.Forbidden(documentPath(), fmt.Sprintf(
				"only one YAML document is allowed; the one at line %d would be ignored", doc.Line)))
			return y
		}
	}
}

// isEmptyDocument reports whether doc holds nothing or null.
func isEmptyDocument(doc *yamlv3.Node) bool {
	for _, n := range doc.Content {
		if n.Kind != yamlv3.ScalarNode || n.ShortTag() != "!!null" {
			return false
		}
	}
	return true
}

// node checks n, found at c, and everything below it.
func (y *yamlChecker) node(n *yamlv3.Node, c fieldCursor) {
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, child := range n.Content {
			y.node(child, c)
		}
	case yamlv3.SequenceNode:
		for i, item := range n.Content {
			y.node(item, c.index(i))
		}
	case yamlv3.MappingNode:
		y.mapping(n, c)
	case yamlv3.ScalarNode:
		y.scalar(n, c)
	}
}

// mapping checks the keys of mapping n, found at c, and the values below them.
func (y *yamlChecker) mapping(n *yamlv3.Node, c fieldCursor) {
	seen := make(map[string]*yamlv3.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yamlv3.ScalarNode || k.ShortTag() == "!!merge" {
			continue
		}
		kc := c.key(k.Value)
		if first, ok := seen[k.Value]; ok {
			err := field.Duplicate(kc.path, k.Value)
			err.Detail = fmt.Sprintf("repeated at line %d:%d, first at line %d:%d", k.Line, k.Column, first.Line, first.Column)
			y.errs = append(y.errs, err)
		} else {
			seen[k.Value] = k
		}
		y.unknownKey(c, kc, k.Value)
		y.node(n.Content[i+1], kc)
	}
}

// unknownKey reports key, found at kc in a struct at c, when the struct has
// no such field.
func (y *yamlChecker) unknownKey(c, kc fieldCursor, key string) {
	t := indirect(c.typ)
	if t == nil || t.Kind() != reflect.Struct || kc.typ != nil || y.unknownKeys[kc.decoderPath] {
		return
	}
	y.unknownKeys[kc.decoderPath] = true
	y.unknown = append(y.unknown, field.NotSupported(kc.path, key, jsonFieldNames(t)))
}

// scalar reports a string at a duration field that does not parse. Values
// of other YAML types fail decoding with their field named.
func (y *yamlChecker) scalar(n *yamlv3.Node, c fieldCursor) {
	if indirect(c.typ) != durationType || n.ShortTag() != "!!str" {
		return
	}
	if _, err := time.ParseDuration(n.Value); err != nil {
		y.errs = append(y.errs, field.Invalid(c.path, n.Value, err.Error()))
	}
}
