package dryrun

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// mergePatch applies the JSON merge patch (RFC 7386) patch to the JSON object doc: each key of an
// object in the patch replaces the target's, null removes it, and objects merge key by key.
func mergePatch(doc, patch []byte) ([]byte, error) {
	var target, p any
	if err := json.Unmarshal(doc, &target); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, err
	}
	if _, ok := p.(map[string]any); !ok {
		return nil, errors.New("the patch is not a JSON object")
	}
	return json.Marshal(merge(target, p))
}

// merge returns target with patch merged into it (RFC 7386, MergePatch).
func merge(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
			continue
		}
		t[k] = merge(t[k], v)
	}
	return t
}

// patchOf decodes a merge patch, without the resourceVersion precondition a flow puts in it: the
// overlay holds across versions.
func patchOf(data []byte) (map[string]any, error) {
	var p map[string]any
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, errors.New("the patch is not a JSON object")
	}
	if metadata, ok := p["metadata"].(map[string]any); ok {
		delete(metadata, "resourceVersion")
		if len(metadata) == 0 {
			delete(p, "metadata")
		}
	}
	return p, nil
}

// documentOf is obj as a JSON document.
func documentOf(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	return doc, json.Unmarshal(data, &doc)
}

// documentCopy is a deep copy of doc.
func documentCopy(doc map[string]any) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		if m, ok := v.(map[string]any); ok {
			v = documentCopy(m)
		}
		out[k] = v
	}
	return out
}

// compose returns the merge patch that does what a and then b do: b's keys replace a's, objects
// compose key by key, and a null of b stays (it removes the key from the target).
func compose(a, b map[string]any) map[string]any {
	out := documentCopy(a)
	for k, v := range b {
		bm, bIsObject := v.(map[string]any)
		am, aIsObject := out[k].(map[string]any)
		switch {
		case bIsObject && aIsObject:
			out[k] = compose(am, bm)
		case bIsObject:
			out[k] = documentCopy(bm)
		default:
			out[k] = v
		}
	}
	return out
}

// pathSeparator joins the keys of a path; annotation keys hold slashes, never a NUL.
const pathSeparator = "\x00"

// leaves returns the paths of the values patch p sets or removes (its leaves: anything but an object).
func leaves(p map[string]any, prefix []string) []string {
	var out []string
	for k, v := range p {
		path := append(slices.Clip(prefix), k)
		if m, ok := v.(map[string]any); ok {
			out = append(out, leaves(m, path)...)
			continue
		}
		out = append(out, strings.Join(path, pathSeparator))
	}
	return out
}

// valueAt returns the JSON of the value at path in doc, "" when there is none.
func valueAt(doc map[string]any, path string) string {
	var v any = doc
	for _, k := range strings.Split(path, pathSeparator) {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		if v, ok = m[k]; !ok {
			return ""
		}
	}
	data, err := json.Marshal(v)
	if err != nil || v == nil {
		return ""
	}
	return string(data)
}

// holds tells whether doc has, at every path of base, the value base holds for it.
func holds(base map[string]string, doc map[string]any) bool {
	for path, v := range base {
		if valueAt(doc, path) != v {
			return false
		}
	}
	return true
}
