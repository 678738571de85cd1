package envoycheck

import (
	"fmt"
	"strings"
)

// Clone deep-copies a generic YAML value (maps, lists and scalars).
func Clone(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = Clone(e)
		}
		return out
	case map[any]any:
		out := make(map[any]any, len(t))
		for k, e := range t {
			out[k] = Clone(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = Clone(e)
		}
		return out
	}
	return v
}

// Get follows path (string keys into maps, int indexes into lists) from v.
func Get(v any, path ...any) (any, error) {
	cur := v
	for i, step := range path {
		switch s := step.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: not a mapping", showPath(path[:i]))
			}
			if cur, ok = m[s]; !ok {
				return nil, fmt.Errorf("%s: no key %q", showPath(path[:i]), s)
			}
		case int:
			l, ok := cur.([]any)
			if !ok || s < 0 || s >= len(l) {
				return nil, fmt.Errorf("%s: no element %d", showPath(path[:i]), s)
			}
			cur = l[s]
		default:
			return nil, fmt.Errorf("bad path step %v", step)
		}
	}
	return cur, nil
}

// Set replaces (or adds) the value at path; everything above it must exist.
func Set(v any, value any, path ...any) error {
	return edit(v, path, func(m map[string]any, k string) { m[k] = value },
		func(l []any, i int) { l[i] = value })
}

// Delete removes the mapping key at path.
func Delete(v any, path ...any) error {
	return edit(v, path, func(m map[string]any, k string) { delete(m, k) }, nil)
}

func edit(v any, path []any, inMap func(map[string]any, string), inList func([]any, int)) error {
	if len(path) == 0 {
		return fmt.Errorf("empty path")
	}
	parent, err := Get(v, path[:len(path)-1]...)
	if err != nil {
		return err
	}
	switch s := path[len(path)-1].(type) {
	case string:
		m, ok := parent.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: not a mapping", showPath(path[:len(path)-1]))
		}
		inMap(m, s)
		return nil
	case int:
		l, ok := parent.([]any)
		if !ok || inList == nil || s < 0 || s >= len(l) {
			return fmt.Errorf("%s: cannot edit element %d", showPath(path[:len(path)-1]), s)
		}
		inList(l, s)
		return nil
	}
	return fmt.Errorf("bad path step %v", path[len(path)-1])
}

func showPath(path []any) string {
	var b strings.Builder
	b.WriteString("$")
	for _, p := range path {
		switch s := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		default:
			fmt.Fprintf(&b, ".%v", s)
		}
	}
	return b.String()
}
