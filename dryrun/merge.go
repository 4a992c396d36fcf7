package dryrun

import (
	"encoding/json"
	"errors"
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
