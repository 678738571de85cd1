package descriptors

import (
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Choices of genFile: keys, values (with the fuzzer's strings), units and algorithms,
// each list with a few that are errors.
var (
	genKeys  = []string{"a", "b", "c", "<<", "k*", ""}
	genUnits = []string{"second", "Minute", "hour", "day", "week", "month", "year", "fortnight"}
	genAlgs  = []string{"", "fixed_window", "sliding_window", "token_bucket", "concurrent_limit", "leaky"}
)

// genFile writes a descriptor file of domain "d" from fuzz bytes: each descriptor takes
// its key, value, flags and limits from the next bytes, so that mutations of the bytes
// move through valid files with nested, wildcard, shared, unlimited, replacing and
// multi-limit descriptors, and some invalid ones.
func genFile(b []byte, s1, s2 string) []byte {
	g := &gen{b: b, values: []string{"", "x", "x*", "*", "*y", "x*y", "xy", s1, s2, s1 + "*", "*" + s2}}
	out, err := yaml.Marshal(map[string]any{"domain": "d", "descriptors": g.descriptors(0)})
	if err != nil {
		return nil
	}
	return out
}

type gen struct {
	b      []byte
	values []string
}

// next returns the next byte, 0 once they are used up.
func (g *gen) next() int {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return int(c)
}

func pick[T any](g *gen, from []T) T { return from[g.next()%len(from)] }

// descriptors writes one level: up to 4 descriptors, nested up to 3 deep.
func (g *gen) descriptors(depth int) []any {
	var out []any
	for n := g.next() % 5; n > 0 && len(g.b) > 0; n-- {
		m := map[string]any{"key": pick(g, genKeys)}
		if v := pick(g, g.values); v != "" {
			m["value"] = v
		}
		flags := g.next()
		if flags&1 != 0 {
			m["share_threshold"] = true
		}
		if flags&2 != 0 {
			m["shadow_mode"] = true
		}
		switch {
		case flags&0x0c == 0x04:
			m["rate_limit"] = g.limit(flags&0x40 != 0)
		case flags&0x0c == 0x08:
			m["rate_limit"] = g.unlimited(flags&0x40 != 0)
		case flags&0x0c == 0x0c:
			var ls []any
			for k := 1 + g.next()%3; k > 0; k-- {
				ls = append(ls, g.limit(flags&0x40 != 0))
			}
			m["rate_limits"] = ls
		}
		if flags&0x20 != 0 && depth < 3 {
			m["descriptors"] = g.descriptors(depth + 1)
		}
		out = append(out, m)
	}
	return out
}

// limit writes one rate limit, perhaps named n0..n3 and replacing one of those.
func (g *gen) limit(replaces bool) map[string]any {
	l := map[string]any{"unit": pick(g, genUnits), "requests_per_unit": g.next() % 4}
	if a := pick(g, genAlgs); a != "" {
		l["algorithm"] = a
	}
	if m := g.next() % 3; m > 0 {
		l["unit_multiplier"] = m
	}
	g.names(l, replaces)
	return l
}

func (g *gen) unlimited(replaces bool) map[string]any {
	l := map[string]any{"unlimited": true}
	g.names(l, replaces)
	return l
}

func (g *gen) names(l map[string]any, replaces bool) {
	if c := g.next(); c%2 == 1 {
		l["name"] = "n" + strconv.Itoa(c/2%4)
	}
	if replaces {
		l["replaces"] = []any{map[string]any{"name": "n" + strconv.Itoa(g.next()%4)}}
	}
}
