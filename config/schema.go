package config

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// kind is the type a config key holds.
type kind uint8

const (
	kString   kind = iota
	kInt           // a YAML integer (no floats, no quoted numbers)
	kBool          // true or false
	kDuration      // a Go duration string such as "2s" (or the integer 0)
	kFloat         // a YAML number (integer or decimal)
	kStrings       // a list of strings; comma-separated in the environment
	kHardCap       // an integer or null (null: no cap)
	kObject        // a mapping with the fixed keys of fields
	kMap           // a mapping from free names to elem (plans, envoy.domains)
	kList          // a list of elem (accounts)
)

// node describes one key of the config file.
type node struct {
	kind   kind
	def    any // default of a leaf; nil when the zero value
	fields map[string]*node
	elem   *node
	// name checks a key of a kMap; nil accepts any key.
	name func(string) string
}

func leaf(k kind, def any) *node           { return &node{kind: k, def: def} }
func object(fields map[string]*node) *node { return &node{kind: kObject, fields: fields} }
func mapOf(elem *node, name func(string) string) *node {
	return &node{kind: kMap, elem: elem, name: name}
}

// isEnvLeaf reports whether a key of this kind can be set from the environment.
func (n *node) isEnvLeaf() bool {
	switch n.kind {
	case kString, kInt, kBool, kDuration, kStrings, kFloat:
		return true
	}
	return false
}

// leaves calls fn for every key reachable through fixed objects only: the keys the
// environment can set. plans, accounts and envoy.domains are file-only (spec §10.1).
func (n *node) leaves(path string, fn func(path string, n *node)) {
	for _, k := range slices.Sorted(maps.Keys(n.fields)) {
		c := n.fields[k]
		p := join(path, k)
		switch {
		case c.kind == kObject:
			c.leaves(p, fn)
		case c.isEnvLeaf():
			fn(p, c)
		}
	}
}

// envName returns the environment variable of a dotted key path.
func envName(path string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// fileState collects what checking one file learns besides its cleaned content.
type fileState struct {
	errs *errList
	// set records every leaf path given a non-null value (also inside plans and accounts).
	set map[string]bool
	// hardCapNull records, per plan, whether its last hard_cap was an explicit null.
	hardCapNull map[string]bool
	// plans records every plan name given in a file.
	plans map[string]bool
	// domains maps each lower-cased envoy.domains key to its spelling (viper lower-cases keys).
	domains map[string]string
}

func newFileState(errs *errList) *fileState {
	return &fileState{errs: errs, set: map[string]bool{}, hardCapNull: map[string]bool{},
		plans: map[string]bool{}, domains: map[string]string{}}
}

// check validates v against n and returns it cleaned for viper: nulls removed (null means
// absent; hard_cap's null is recorded in hardCapNull), durations parsed, integers int64,
// lists of strings []string. ok is false when the value is absent or invalid.
func (s *fileState) check(path string, v any, n *node) (out any, ok bool) {
	if v == nil {
		return nil, false
	}
	switch n.kind {
	case kString:
		str, isStr := v.(string)
		if !isStr {
			hint := ""
			switch v.(type) {
			case []any, map[string]any, map[any]any:
			default:
				hint = " (quote it)"
			}
			s.errs.add(path, "expected a string, got %s%s", describe(v), hint)
			return nil, false
		}
		s.set[path] = true
		return str, true
	case kInt, kHardCap:
		i, isInt := asInt(v)
		if !isInt {
			s.errs.add(path, "expected an integer, got %s", describe(v))
			return nil, false
		}
		s.set[path] = true
		return i, true
	case kBool:
		b, isBool := v.(bool)
		if !isBool {
			s.errs.add(path, "expected a boolean (true or false), got %s", describe(v))
			return nil, false
		}
		s.set[path] = true
		return b, true
	case kFloat:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		default:
			i, isInt := asInt(v)
			if !isInt {
				s.errs.add(path, "expected a number, got %s", describe(v))
				return nil, false
			}
			f = float64(i)
		}
		s.set[path] = true
		return f, true
	case kDuration:
		d, err := asDuration(v)
		if err != nil {
			s.errs.add(path, "%v", err)
			return nil, false
		}
		s.set[path] = true
		return d, true
	case kStrings:
		list, isList := v.([]any)
		if !isList {
			s.errs.add(path, "expected a list of strings, got %s", describe(v))
			return nil, false
		}
		strs := make([]string, 0, len(list))
		good := true
		for i, e := range list {
			str, isStr := e.(string)
			if !isStr {
				s.errs.add(index(path, i), "expected a string, got %s", describe(e))
				good = false
				continue
			}
			strs = append(strs, str)
		}
		if !good {
			return nil, false
		}
		s.set[path] = true
		return strs, true
	case kObject:
		m, good := s.mapping(path, v)
		if !good {
			return nil, false
		}
		out := make(map[string]any, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			c, known := n.fields[k]
			if !known {
				s.errs.add(join(path, k), "unknown key (%s accepts: %s)", orTop(path),
					strings.Join(slices.Sorted(maps.Keys(n.fields)), ", "))
				continue
			}
			if cv, present := s.check(join(path, k), m[k], c); present {
				out[k] = cv
			}
		}
		return out, true
	case kMap:
		m, good := s.mapping(path, v)
		if !good {
			return nil, false
		}
		out := make(map[string]any, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			p := join(path, k)
			if n.name != nil {
				if msg := n.name(k); msg != "" {
					s.errs.add(p, "%s", msg)
					continue
				}
			}
			if cv, present := s.check(p, m[k], n.elem); present {
				out[k] = cv
			}
		}
		return out, true
	case kList:
		list, isList := v.([]any)
		if !isList {
			s.errs.add(path, "expected a list, got %s", describe(v))
			return nil, false
		}
		out := make([]any, 0, len(list))
		for i, e := range list {
			if e == nil {
				s.errs.add(index(path, i), "expected an object, got null")
				continue
			}
			if cv, present := s.check(index(path, i), e, n.elem); present {
				out = append(out, cv)
			}
		}
		s.set[path] = true
		return out, true
	}
	panic("config: unknown kind")
}

// mapping returns v as a string-keyed map.
func (s *fileState) mapping(path string, v any) (map[string]any, bool) {
	switch m := v.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		good := true
		for k, e := range m {
			ks, isStr := k.(string)
			if !isStr {
				s.errs.add(join(path, fmt.Sprint(k)), "keys must be strings (quote it)")
				good = false
				continue
			}
			out[ks] = e
		}
		return out, good
	}
	s.errs.add(orTop(path), "expected a mapping of keys, got %s", describe(v))
	return nil, false
}

// record notes, from one file's raw content, the plans it names, which of them set
// hard_cap to null, and the spelling of its envoy.domains keys.
func (s *fileState) record(raw map[string]any) {
	if plans, ok := raw["plans"].(map[string]any); ok {
		for name, p := range plans {
			pm, ok := p.(map[string]any)
			if !ok {
				continue
			}
			s.plans[name] = true
			if hc, present := pm["hard_cap"]; present {
				s.hardCapNull[name] = hc == nil
			}
		}
	}
	if envoy, ok := raw["envoy"].(map[string]any); ok {
		if domains, ok := envoy["domains"].(map[string]any); ok {
			for d := range domains {
				if prev, dup := s.domains[strings.ToLower(d)]; dup && prev != d {
					s.errs.add("envoy.domains."+d, "differs from domain %q only in letter case; "+
						"domains that differ only in case cannot both be configured", prev)
					continue
				}
				s.domains[strings.ToLower(d)] = d
			}
		}
	}
}

func orTop(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

// checkPlanName: plan names follow the account id pattern, so they are case-exact.
func checkPlanName(name string) string {
	if !validName(name) {
		return "plan name must match [a-z0-9][a-z0-9_-]{0,63}"
	}
	return ""
}

func checkDomainName(name string) string {
	if name == "" {
		return "domain must not be empty"
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return "domain must not contain control characters"
		}
	}
	return ""
}

// validName reports whether s matches [a-z0-9][a-z0-9_-]{0,63}.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

func asInt(v any) (int64, bool) {
	switch i := v.(type) {
	case int:
		return int64(i), true
	case int64:
		return i, true
	case int32:
		return int64(i), true
	case uint64:
		if i <= math.MaxInt64 {
			return int64(i), true
		}
	case uint:
		if uint64(i) <= math.MaxInt64 {
			return int64(i), true
		}
	}
	return 0, false
}

func asDuration(v any) (time.Duration, error) {
	switch d := v.(type) {
	case string:
		parsed, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return 0, fmt.Errorf("expected a duration such as \"2s\" or \"500ms\", got %q", d)
		}
		return parsed, nil
	case time.Duration:
		return d, nil
	}
	if i, ok := asInt(v); ok && i == 0 {
		return 0, nil
	}
	return 0, fmt.Errorf("expected a duration string such as \"2s\" or \"500ms\", got %s", describe(v))
}

// describe names a YAML value's type for an error message without echoing long values.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		if len(x) > 40 {
			return "a string"
		}
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case int, int64, int32, uint, uint64:
		return fmt.Sprintf("the integer %v", x)
	case float64, float32:
		return fmt.Sprintf("the number %v", x)
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a mapping"
	}
	return fmt.Sprintf("a value of type %T", v)
}

// errList gathers errors, each naming a key path and, through locate, where it was set.
type errList struct {
	// locate says where a key path was set: "file:line", envWhere and a variable, or "".
	locate  func(path string) string
	entries []entry
}

// entry is one problem: its text, and the key path it is about ("" for addRaw's).
type entry struct {
	path, msg string
}

func (e *errList) add(path, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	where := ""
	if e.locate != nil {
		where = e.locate(path)
	}
	msg := path + ": " + text
	switch {
	case strings.HasPrefix(where, envWhere):
		msg = fmt.Sprintf("%s (%s): %s", path, where, text)
	case where != "":
		msg = where + ": " + msg
	}
	e.entries = append(e.entries, entry{path: path, msg: msg})
}

// addAt records msg, a whole line, as a problem of the key path.
func (e *errList) addAt(path, msg string) { e.entries = append(e.entries, entry{path: path, msg: msg}) }

func (e *errList) addRaw(msg string) { e.entries = append(e.entries, entry{msg: msg}) }

// dropFollowing removes the problems from the from-th on whose key is next to one an
// earlier problem is about (same parent key, or one inside the other): with that key left
// at its earlier value (its default, say), they follow from the first problem.
func (e *errList) dropFollowing(from int) {
	var first []string
	for _, en := range e.entries[:from] {
		if en.path != "" {
			first = append(first, section(en.path))
		}
	}
	if len(first) == 0 {
		return
	}
	kept := e.entries[:from]
	for _, en := range e.entries[from:] {
		s := section(en.path)
		if en.path == "" || !slices.ContainsFunc(first, func(f string) bool { return within(s, f) || within(f, s) }) {
			kept = append(kept, en)
		}
	}
	e.entries = kept
}

// section is the key that holds path ("http" for http.addr), or path for a top-level key.
func section(path string) string {
	if p := parentPath(path); p != "" {
		return p
	}
	return path
}

// within reports whether path is prefix or a key inside it.
func within(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+".") || strings.HasPrefix(path, prefix+"[")
}

// err returns nil, or one error listing every message, each on its own line starting
// with "config: " (at most 20, then how many more; Problems holds them all).
func (e *errList) err() error {
	if len(e.entries) == 0 {
		return nil
	}
	const limit = 20
	all := make([]string, len(e.entries))
	for i, en := range e.entries {
		all[i] = en.msg
	}
	msgs := all
	more := 0
	if len(msgs) > limit {
		more = len(msgs) - limit
		msgs = msgs[:limit]
	}
	lines := make([]string, 0, len(msgs)+1)
	for _, m := range msgs {
		lines = append(lines, "config: "+m)
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("config: and %d more problems", more))
	}
	return &Error{msg: strings.Join(lines, "\n"), Problems: all}
}

// Error is a configuration error. Its text has one line per problem, each naming the key
// (or environment variable) at fault.
type Error struct {
	msg string
	// Problems lists every problem, "file:line: key.path: message" (the file and line
	// when known), without the "config: " of the error's lines.
	Problems []string
}

// Error returns every problem, one per line.
func (e *Error) Error() string { return e.msg }
