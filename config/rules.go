package config

import (
	"fmt"
	"net"
	"strings"
	"time"
	"unicode"

	"github.com/leashd/leash/engine"
	"github.com/spf13/viper"
)

// rule checks one key's value on its own and returns the problem, or "" when the value
// is good. A key's rules are part of its description in keys(); rules that relate keys
// to one another stay in validate.go.
type rule func(v any) string

// checkRules runs every key's own rules on the loaded values (files, environment and
// defaults merged in v): check on the value, each on every element of a list.
func checkRules(v *viper.Viper, errs *errList) {
	for _, k := range keys() {
		if k.check == nil && k.each == nil {
			continue
		}
		val := v.Get(viperKey(k.path))
		if k.check != nil {
			if msg := k.check(val); msg != "" {
				errs.add(k.path, "%s", msg)
			}
		}
		if k.each != nil {
			list, _ := val.([]string)
			for i, el := range list {
				if msg := k.each(el); msg != "" {
					errs.add(index(k.path, i), "%s", msg)
				}
			}
		}
	}
}

// oneOf accepts one of names; fold accepts them in any letter case.
func oneOf(fold bool, names ...string) rule {
	return func(v any) string {
		s, _ := v.(string)
		for _, n := range names {
			if s == n || fold && strings.EqualFold(s, n) {
				return ""
			}
		}
		return fmt.Sprintf("must be %s, got %q", orList(names), s)
	}
}

// orList is "a, b or c".
func orList(names []string) string {
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// atLeast accepts an integer of min or more; what, when not empty, says what min means.
func atLeast(min int64, what string) rule {
	return func(v any) string {
		if n, ok := asInt(v); ok && n >= min {
			return ""
		}
		if what != "" {
			return fmt.Sprintf("must be %d (%s) or more", min, what)
		}
		return fmt.Sprintf("must be %d or more", min)
	}
}

// intRange accepts an integer from lo to hi.
func intRange(lo, hi int64) rule {
	return func(v any) string {
		if n, ok := asInt(v); ok && n >= lo && n <= hi {
			return ""
		}
		return fmt.Sprintf("must be %d to %d", lo, hi)
	}
}

// positive accepts a duration of more than 0.
func positive(v any) string {
	if d, err := asDuration(v); err == nil && d > 0 {
		return ""
	}
	return "must be more than 0"
}

// notNegative accepts a duration of 0 or more.
func notNegative(v any) string {
	if d, err := asDuration(v); err == nil && d >= 0 {
		return ""
	}
	return "must be 0 or more"
}

// durationRange accepts a duration from lo to hi, both written as the message says.
func durationRange(lo, hi time.Duration, text string) rule {
	return func(v any) string {
		if d, err := asDuration(v); err == nil && d >= lo && d <= hi {
			return ""
		}
		return "must be " + text
	}
}

// ratio accepts a number in (0, 1], or [0, 1] with zeroOK.
func ratio(zeroOK bool) rule {
	return func(v any) string {
		f, ok := asFloat(v)
		switch {
		case zeroOK && ok && f >= 0 && f <= 1:
			return ""
		case zeroOK:
			return fmt.Sprintf("must be from 0 to 1, got %v", v)
		case ok && f > 0 && f <= 1:
			return ""
		}
		return fmt.Sprintf("must be above 0 and at most 1, got %v", v)
	}
}

// asFloat reads a number of any of the loader's types.
func asFloat(v any) (float64, bool) {
	if f, ok := v.(float64); ok {
		return f, true
	}
	if n, ok := asInt(v); ok {
		return float64(n), true
	}
	return 0, false
}

// nonEmpty accepts a string that is not empty.
func nonEmpty(v any) string {
	if s, _ := v.(string); s != "" {
		return ""
	}
	return "must not be empty"
}

// address accepts host:port or :port; emptyOK also accepts "" (off).
func address(emptyOK bool) rule {
	return func(v any) string {
		s, _ := v.(string)
		if s == "" {
			if emptyOK {
				return ""
			}
			return "must not be empty"
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Sprintf("must be host:port or :port, got %q", s)
		}
		return ""
	}
}

// headerName accepts a non-empty HTTP token of letters, digits and '-'.
func headerName(v any) string {
	if s, _ := v.(string); validHeaderName(s) {
		return ""
	}
	return fmt.Sprintf("must be an HTTP header name (letters, digits and -), got %q", v)
}

// redisPrefix accepts a prefix that keeps every key in its Redis Cluster hash tag.
func redisPrefix(v any) string {
	s, _ := v.(string)
	switch {
	case s == "":
		return "must not be empty"
	case strings.ContainsAny(s, "{}") || strings.IndexFunc(s, unicode.IsSpace) >= 0:
		return "must not contain braces (they would change the Redis Cluster hash tag) or spaces"
	}
	return ""
}

// namespace accepts a namespace of spec §2.1.
func namespace(v any) string {
	if s, _ := v.(string); engine.ValidNamespace(s) {
		return ""
	}
	return fmt.Sprintf("%q is not a namespace", v)
}

// proxy accepts a CIDR or a single address.
func proxy(v any) string {
	if s, _ := v.(string); s != "" {
		if _, ok := parseProxy(s); ok {
			return ""
		}
	}
	return fmt.Sprintf("%q is not a CIDR (e.g. 10.0.0.0/8) or an IP address", v)
}

// notBlank accepts a string with more than spaces.
func notBlank(v any) string {
	if s, _ := v.(string); strings.TrimSpace(s) != "" {
		return ""
	}
	return "must not be empty"
}

// dirPath accepts a directory's path: more than spaces.
func dirPath(v any) string {
	if s, _ := v.(string); strings.TrimSpace(s) != "" {
		return ""
	}
	return "must name a directory"
}
