package descriptors

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/leashd/leash/engine"
)

// Helpers of the fuzz targets: a writer that turns a loaded domain back into YAML, a
// canonical dump to compare loaded domains by, an independent matcher and checks of
// error paths.

// marshalDomain writes a loaded domain as a descriptor file in its plainest form: no
// anchors, aliases or merge keys, one rate_limit where there is one limit, flags only
// when set, defaults left out.
func marshalDomain(d *domain) ([]byte, error) {
	return yaml.Marshal(map[string]any{"domain": d.name, "descriptors": marshalLevel(d.top)})
}

func marshalLevel(lvl level) []any {
	out := []any{}
	for _, key := range slices.Sorted(maps.Keys(lvl)) {
		for _, n := range levelNodes(lvl[key]) {
			m := map[string]any{"key": key}
			if n.value != "" {
				m["value"] = n.value
			}
			if n.share {
				m["share_threshold"] = true
			}
			if r := n.rule; r != nil {
				marshalRule(m, r)
			}
			if n.next != nil {
				m["descriptors"] = marshalLevel(n.next)
			}
			out = append(out, m)
		}
	}
	return out
}

// levelNodes lists the descriptors of one key: exact values sorted, then the wildcards
// in file order, then the bare key.
func levelNodes(k *keyNodes) []*node {
	var out []*node
	for _, v := range slices.Sorted(maps.Keys(k.exact)) {
		out = append(out, k.exact[v])
	}
	out = append(out, k.wild...)
	if k.bare != nil {
		out = append(out, k.bare)
	}
	return out
}

func marshalRule(m map[string]any, r *Rule) {
	for flag, on := range map[string]bool{"shadow_mode": r.ShadowMode, "detailed_metric": r.DetailedMetric, "value_to_metric": r.ValueToMetric} {
		if on {
			m[flag] = true
		}
	}
	var replaces []any
	for _, name := range r.Replaces {
		replaces = append(replaces, map[string]any{"name": name})
	}
	if r.Unlimited {
		rl := map[string]any{"unlimited": true}
		if r.Name != "" {
			rl["name"] = r.Name
		}
		if replaces != nil {
			rl["replaces"] = replaces
		}
		m["rate_limit"] = rl
		return
	}
	var limits []any
	for i, l := range r.Limits {
		lm := map[string]any{"unit": strings.ToLower(l.Unit.String()), "requests_per_unit": l.RequestsPerUnit}
		if l.Name != "" {
			lm["name"] = l.Name
		}
		if l.Algorithm != engine.FixedWindow {
			lm["algorithm"] = l.Algorithm.String()
		}
		if l.UnitMultiplier != 1 {
			lm["unit_multiplier"] = l.UnitMultiplier
		}
		if i == 0 && replaces != nil {
			lm["replaces"] = replaces
		}
		limits = append(limits, lm)
	}
	if len(limits) == 1 {
		m["rate_limit"] = limits[0]
	} else {
		m["rate_limits"] = limits
	}
}

// dumpDomain renders what a domain means, without where it was written: every
// descriptor with its value, share flag, rule and children, in matching order.
func dumpDomain(d *domain) string {
	var b strings.Builder
	fmt.Fprintf(&b, "domain %q\n", d.name)
	dumpLevel(&b, d.top, "  ")
	return b.String()
}

func dumpLevel(b *strings.Builder, lvl level, indent string) {
	for _, key := range slices.Sorted(maps.Keys(lvl)) {
		for _, n := range levelNodes(lvl[key]) {
			fmt.Fprintf(b, "%skey %q value %q share %v\n", indent, key, n.value, n.share)
			if r := n.rule; r != nil {
				fmt.Fprintf(b, "%s  rule %q descriptor %q unlimited %v name %q shadow %v detailed %v v2m %v replaces %q\n",
					indent, r.Domain, r.Descriptor, r.Unlimited, r.Name, r.ShadowMode, r.DetailedMetric, r.ValueToMetric, r.Replaces)
				for _, l := range r.Limits {
					fmt.Fprintf(b, "%s  limit %+v\n", indent, l)
				}
			}
			if n.next != nil {
				dumpLevel(b, n.next, indent+"  ")
			}
		}
	}
}

// globRef reports whether s matches a configured value with '*' wildcards, by a regular
// expression rather than globMatch.
func globRef(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)\A` + strings.Join(parts, ".*") + `\z`).MatchString(s)
}

// refMatch matches as the package documentation says, level by level: the exact value,
// else the first wildcard written that matches, else the bare key; a share_threshold
// wildcard puts its pattern in the counter's entries.
func refMatch(c *Config, domainName string, req []Entry) (*Rule, []Entry) {
	d := c.domains[domainName]
	if d == nil || len(req) == 0 {
		return nil, nil
	}
	out := slices.Clone(req)
	lvl := d.top
	for i, e := range req {
		k := lvl[e.Key]
		if k == nil {
			return nil, nil
		}
		n := k.exact[e.Value]
		for _, w := range k.wild {
			if n == nil && globRef(w.value, e.Value) {
				n = w
				if w.share {
					out[i].Value = w.value
				}
			}
		}
		if n == nil {
			n = k.bare
		}
		if n == nil {
			return nil, nil
		}
		if i == len(req)-1 {
			if n.rule == nil {
				return nil, nil
			}
			return n.rule, out
		}
		lvl = n.next
	}
	return nil, nil
}

// limitPath is where in a rate limit an error can be; descriptorPath where in a
// descriptor, below the descriptors[i](.descriptors[j])* that names it.
const (
	limitPath      = `(unit|requests_per_unit|unlimited|name|algorithm|unit_multiplier|replaces(\[\d+\](\.name)?)?)`
	descriptorPath = `(key|value|share_threshold|shadow_mode|detailed_metric|value_to_metric|descriptors|rate_limit(\.` + limitPath + `)?|rate_limits(\[\d+\](\.` + limitPath + `)?)?)`
)

var errorPath = regexp.MustCompile(`\A(domain|descriptors|descriptors\[\d+\](\.descriptors\[\d+\])*(\.` + descriptorPath + `)?)\z`)

// checkLoadErrors returns why err is not a proper load error of file, or "": every error
// in it is an *Error naming the file, and its path is empty (the whole file) or a place a
// descriptor file has: a key name the error is about ends the path, any other path is
// one of the format's own.
func checkLoadErrors(err error, file string) string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	if len(errs) > maxErrors {
		return fmt.Sprintf("%d errors, more than %d", len(errs), maxErrors)
	}
	for _, e := range errs {
		var le *Error
		if !errors.As(e, &le) || le.File != file || le.Msg == "" {
			return fmt.Sprintf("error %#v does not name file %q", e, file)
		}
		path := le.Path
		for _, prefix := range []string{"unknown key ", "duplicate key "} {
			if rest, ok := strings.CutPrefix(le.Msg, prefix); ok {
				q, err := strconv.QuotedPrefix(rest)
				name, _ := strconv.Unquote(q)
				if err != nil || path != name && !strings.HasSuffix(path, "."+name) {
					return fmt.Sprintf("error %q: the path does not end in the key it names", le)
				}
				path = strings.TrimSuffix(strings.TrimSuffix(path, name), ".")
			}
		}
		if path != "" && !errorPath.MatchString(path) {
			return fmt.Sprintf("error %q: path %q is no place in a descriptor file", le, le.Path)
		}
	}
	return ""
}
