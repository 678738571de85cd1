package descriptors

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/internal/yamlline"
)

const (
	maxErrors   = 10      // errors reported by one Load
	nodeBudget  = 1 << 16 // YAML nodes a file may visit beyond two per byte, aliases expanded
	maxDepth    = 64      // nesting of descriptors
	maxMergeDep = 16      // nesting of YAML merge keys
)

// Where a mapping sits, for the keys it allows and for hints about misplaced keys.
type place int

const (
	placeRoot place = iota
	placeDescriptor
	placeRateLimit
	placeRateLimits
	placeReplaces
)

var allowedKeys = [...][]string{
	placeRoot:       {"domain", "descriptors"},
	placeDescriptor: {"key", "value", "rate_limit", "rate_limits", "descriptors", "shadow_mode", "quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata", "overdraft"},
	placeRateLimit:  {"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "unit_multiplier"},
	placeRateLimits: {"unit", "requests_per_unit", "name", "replaces", "algorithm", "unit_multiplier"},
	placeReplaces:   {"name"},
}

// hint explains a key that is valid somewhere else.
func hint(pl place, key string) string {
	inDescriptor := slices.Contains(allowedKeys[placeDescriptor], key)
	inLimit := slices.Contains(allowedKeys[placeRateLimit], key)
	switch {
	case pl == placeRoot && (inDescriptor || inLimit):
		return " (it belongs in an entry of descriptors)"
	case pl == placeDescriptor && inLimit:
		return " (it belongs inside rate_limit)"
	case pl == placeRateLimit && inDescriptor:
		return " (it belongs on the descriptor, beside rate_limit)"
	case pl == placeRateLimits && inDescriptor:
		return " (it belongs on the descriptor, beside rate_limits)"
	case pl == placeRateLimits && key == "unlimited":
		return " (unlimited goes in rate_limit, not in rate_limits)"
	}
	return ""
}

// parser reads one file.
type parser struct {
	file   string
	errs   []error
	budget int
	lines  map[string]int // path → the YAML line it starts at; nil: errors name no line
}

func (p *parser) errorf(path, format string, args ...any) {
	if len(p.errs) < maxErrors {
		p.errs = append(p.errs, &Error{File: p.file, Line: p.lineOf(path), Path: path, Msg: fmt.Sprintf(format, args...)})
	}
}

// mark records the line a path starts at, unless one is known (a key written in a mapping
// wins over one merged into it).
func (p *parser) mark(path string, n *yaml.Node) {
	if p.lines != nil && n != nil && n.Line > 0 {
		if _, ok := p.lines[path]; !ok {
			p.lines[path] = n.Line
		}
	}
}

// lineOf returns the line of path, or of its nearest enclosing path that has one.
func (p *parser) lineOf(path string) int {
	if p.lines == nil {
		return 0
	}
	for {
		if l, ok := p.lines[path]; ok {
			return l
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return p.lines[""]
		}
		path = path[:i]
	}
}

// resolve follows aliases and charges the node budget; nil means absent or over budget.
func (p *parser) resolve(n *yaml.Node) *yaml.Node {
	for n != nil {
		p.budget--
		if p.budget < 0 {
			if p.budget == -1 {
				p.errorf("", "too many YAML nodes with aliases expanded")
			}
			return nil
		}
		if n.Kind != yaml.AliasNode {
			return n
		}
		n = n.Alias
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// present reports whether key is in m with a value other than null.
func (p *parser) present(m map[string]*yaml.Node, key string) bool {
	n := m[key]
	for i := 0; i < 100 && n != nil && n.Kind == yaml.AliasNode; i++ {
		n = n.Alias
	}
	return !isNull(n)
}

// describe names a node's kind for error messages.
func describe(n *yaml.Node) string {
	switch {
	case n == nil:
		return "nothing"
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case isNull(n):
		return "null"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return strconv.Quote(v)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mapping returns the keys of a mapping node, reporting unknown and duplicate keys; nil
// means n is not a mapping (reported).
func (p *parser) mapping(n *yaml.Node, path string, pl place) map[string]*yaml.Node {
	out := make(map[string]*yaml.Node)
	if !p.fields(n, path, pl, out, 0) {
		return nil
	}
	return out
}

func (p *parser) fields(n *yaml.Node, path string, pl place, out map[string]*yaml.Node, depth int) bool {
	n = p.resolve(n)
	if n == nil {
		return false
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(path, "must be a mapping, not %s", describe(n))
		return false
	}
	var merges []*yaml.Node
	own := make(map[string]bool)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := p.resolve(n.Content[i])
		if k == nil {
			return false
		}
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		if k.Kind != yaml.ScalarNode || isNull(k) {
			p.errorf(path, "has a key that is %s, not a name", describe(k))
			continue
		}
		name, kp := k.Value, join(path, k.Value)
		if own[name] {
			delete(p.lines, kp) // a duplicate key: report its own line
		}
		p.mark(kp, k)
		switch {
		case !slices.Contains(allowedKeys[pl], name):
			p.errorf(kp, "unknown key %q%s", name, hint(pl, name))
		case own[name]:
			p.errorf(kp, "duplicate key %q", name)
		default:
			own[name] = true
			out[name] = n.Content[i+1]
		}
	}
	// YAML merge keys ("<<: *anchor"): keys written here win over merged ones, and
	// earlier merged mappings over later ones.
	for _, m := range merges {
		if depth >= maxMergeDep {
			p.errorf(path, "merge keys nested deeper than %d", maxMergeDep)
			return false
		}
		srcs := []*yaml.Node{m}
		if r := p.resolve(m); r != nil && r.Kind == yaml.SequenceNode {
			srcs = r.Content
		}
		for _, src := range srcs {
			merged := make(map[string]*yaml.Node)
			if !p.fields(src, path, pl, merged, depth+1) {
				return false
			}
			for k, v := range merged {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	return true
}

// str returns a scalar as a string; ok is false when absent, null or not a scalar (reported).
func (p *parser) str(n *yaml.Node, path string) (s string, ok bool) {
	n = p.resolve(n)
	if isNull(n) {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		p.errorf(path, "must be a string, not %s", describe(n))
		return "", false
	}
	return n.Value, true
}

// boolean returns a true/false scalar; absent and null are false.
func (p *parser) boolean(n *yaml.Node, path string) bool {
	n = p.resolve(n)
	if isNull(n) {
		return false
	}
	var b bool
	if n.Kind == yaml.ScalarNode && n.Decode(&b) == nil {
		return b
	}
	p.errorf(path, "must be true or false, not %s", describe(n))
	return false
}

// integer returns an integer scalar; ok is false when absent, null or not an integer (reported).
func (p *parser) integer(n *yaml.Node, path string) (v int64, ok bool) {
	n = p.resolve(n)
	if isNull(n) {
		return 0, false
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!float" && strings.Trim(n.Value, "+-0123456789") == "" {
		p.errorf(path, "%s is out of range", n.Value) // digits too many for an int64
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		p.errorf(path, "must be an integer, not %s", describe(n))
		return 0, false
	}
	if err := n.Decode(&v); err != nil {
		p.errorf(path, "%s is out of range", n.Value)
		return 0, false
	}
	return v, true
}

// list returns the items of a sequence; absent and null are empty.
func (p *parser) list(n *yaml.Node, path string) []*yaml.Node {
	n = p.resolve(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(path, "must be a list, not %s", describe(n))
		return nil
	}
	for i, item := range n.Content {
		p.mark(fmt.Sprintf("%s[%d]", path, i), item)
	}
	return n.Content
}

// decodeYAML parses data into at most two documents.
func decodeYAML(data []byte) (docs []*yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil { // the YAML library must not take the process down
			docs, err = nil, fmt.Errorf("invalid YAML: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for len(docs) < 2 {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, &doc)
	}
	return docs, nil
}

// pendingReplace is a replaces entry, checked once the whole domain is known.
type pendingReplace struct{ name, path string }

// builder turns one file into a domain.
type builder struct {
	*parser
	dom      *domain
	names    map[string]bool // rate limit names defined in the domain
	replaces []pendingReplace
}

// parseFile reads one descriptor file; errs holds *Error values, with the YAML line of
// each unless noLines (generated text, whose lines mean nothing to the reader).
func parseFile(name string, data []byte, noLines bool) (*domain, []error) {
	// Without aliases a file has fewer nodes than bytes and each is visited at most
	// twice; the budget stops aliases from expanding much beyond that.
	p := &parser{file: name, budget: nodeBudget + 2*len(data)}
	if !noLines {
		p.lines = map[string]int{}
	}
	docs, err := decodeYAML(data)
	if err != nil {
		var errs []error
		for _, pr := range yamlline.Locate(data, err) { // the line at fault, not the library's
			e := &Error{File: name, Line: pr.Line, Msg: pr.Msg}
			if noLines {
				e.Line = 0
			}
			errs = append(errs, e)
		}
		return nil, errs
	}
	var root *yaml.Node
	if len(docs) > 0 && len(docs[0].Content) > 0 {
		root = docs[0].Content[0]
		p.mark("", root)
	}
	if len(docs) > 1 && len(docs[1].Content) > 0 && !isNull(docs[1].Content[0]) {
		p.errorf("", "holds more than one YAML document; a file defines one domain")
		return nil, p.errs
	}
	m := map[string]*yaml.Node{}
	if !isNull(root) {
		if m = p.mapping(root, "", placeRoot); m == nil {
			return nil, p.errs
		}
	}
	b := &builder{parser: p, dom: &domain{file: name}, names: map[string]bool{}}
	if s, ok := p.str(m["domain"], "domain"); !ok || s == "" {
		if !p.present(m, "domain") || ok {
			p.errorf("domain", "a domain is required")
		}
	} else if !ValidDomain(s) {
		p.errorf("domain", "%q is not a valid domain: use 1 to %d bytes of UTF-8 without control characters", s, MaxDomain)
	} else {
		b.dom.name = s
		b.dom.line = p.lines["domain"]
	}
	b.dom.top = level{}
	b.descriptors(p.list(m["descriptors"], "descriptors"), "descriptors", b.dom.top, nil, 0)
	for _, r := range b.replaces {
		if !b.names[r.name] {
			p.errorf(r.path, "no rate limit named %q in domain %q", r.name, b.dom.name)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	for _, r := range b.dom.rules {
		r.Domain = b.dom.name
	}
	return b.dom, nil
}

// descriptors adds the descriptors of one level to lvl.
func (b *builder) descriptors(items []*yaml.Node, path string, lvl level, parent []Entry, depth int) {
	if len(items) > 0 && depth >= maxDepth {
		b.errorf(path, "descriptors nested deeper than %d levels", maxDepth)
		return
	}
	for i, item := range items {
		dp := fmt.Sprintf("%s[%d]", path, i)
		m := b.mapping(item, dp, placeDescriptor)
		if m == nil {
			continue
		}
		key, ok := b.str(m["key"], dp+".key")
		if key == "" && (ok || !b.present(m, "key")) {
			b.errorf(dp, "key is required")
		}
		value, _ := b.str(m["value"], dp+".value")
		n := &node{value: value, path: dp}
		if strings.Contains(value, "*") {
			n.glob = strings.Split(value, "*")
		}
		n.share = b.boolean(m["share_threshold"], dp+".share_threshold")
		if n.share && n.glob == nil {
			b.errorf(dp+".share_threshold", "needs a wildcard value (one containing '*'), not %q", value)
		}
		desc := append(slices.Clip(parent), Entry{Key: key, Value: value})
		n.rule = b.rule(m, dp, desc)
		if key != "" {
			b.insert(lvl, key, n)
		}
		if kids := b.list(m["descriptors"], dp+".descriptors"); len(kids) > 0 {
			n.next = level{}
			b.descriptors(kids, dp+".descriptors", n.next, desc, depth+1)
		}
	}
}

// insert adds n under key, reporting a duplicate key and value.
func (b *builder) insert(lvl level, key string, n *node) {
	k := lvl[key]
	if k == nil {
		k = &keyNodes{order: len(lvl)}
		lvl[key] = k
	}
	var prev *node
	switch {
	case n.value == "":
		if prev = k.bare; prev == nil {
			k.bare = n
		}
	case n.glob != nil:
		for _, w := range k.wild {
			if w.value == n.value {
				prev = w
			}
		}
		if prev == nil {
			k.wild = append(k.wild, n) // in file order: the first match wins (spec §9.4)
		}
	default:
		if prev = k.exact[n.value]; prev == nil {
			if k.exact == nil {
				k.exact = make(map[string]*node)
			}
			k.exact[n.value] = n
		}
	}
	if prev != nil {
		what := fmt.Sprintf("key %q with no value", key)
		if n.value != "" {
			what = fmt.Sprintf("key %q value %q", key, n.value)
		}
		b.errorf(n.path, "duplicate descriptor: %s is already defined at %s", what, prev.path)
	}
}

// rule builds the rule of a descriptor, or returns nil when it has no limit.
func (b *builder) rule(m map[string]*yaml.Node, dp string, desc []Entry) *Rule {
	r := &Rule{
		File:           b.file,
		Path:           dp,
		Line:           b.lines[dp],
		Descriptor:     desc,
		ShadowMode:     b.boolean(m["shadow_mode"], dp+".shadow_mode"),
		QuotaMode:      b.boolean(m["quota_mode"], dp+".quota_mode"),
		Metadata:       b.metadata(m["metadata"], dp+".metadata"),
		DetailedMetric: b.boolean(m["detailed_metric"], dp+".detailed_metric"),
		ValueToMetric:  b.boolean(m["value_to_metric"], dp+".value_to_metric"),
	}
	if n := m["overdraft"]; n != nil && !isNull(b.resolve(n)) {
		o := b.boolean(n, dp+".overdraft")
		r.Overdraft = &o
	}
	one, many := b.present(m, "rate_limit"), b.present(m, "rate_limits")
	var replaces []pendingReplace
	switch {
	case one && many:
		b.errorf(dp, "has both rate_limit and rate_limits; use one")
		return nil
	case one:
		lp := dp + ".rate_limit"
		lm := b.mapping(m["rate_limit"], lp, placeRateLimit)
		if lm == nil {
			return nil
		}
		if b.boolean(lm["unlimited"], lp+".unlimited") {
			for _, k := range []string{"unit", "requests_per_unit", "algorithm", "unit_multiplier"} {
				if b.present(lm, k) {
					b.errorf(lp+"."+k, "must not be given with unlimited: true")
				}
			}
			r.Unlimited = true
			r.Name, _ = b.str(lm["name"], lp+".name")
		} else {
			r.Limits = []Limit{b.limit(lm, lp)}
		}
		replaces = b.replacesOf(lm["replaces"], lp+".replaces")
	case many:
		lp := dp + ".rate_limits"
		items := b.list(m["rate_limits"], lp)
		if n := b.resolve(m["rate_limits"]); len(items) == 0 && n != nil && n.Kind == yaml.SequenceNode {
			b.errorf(lp, "must list at least one rate limit")
		}
		if len(items) > engine.MaxSpendAll {
			b.errorf(lp, "lists %d rate limits; at most %d apply to one descriptor", len(items), engine.MaxSpendAll)
		}
		for j, item := range items {
			ep := fmt.Sprintf("%s[%d]", lp, j)
			lm := b.mapping(item, ep, placeRateLimits)
			if lm == nil {
				continue
			}
			lim := b.limit(lm, ep)
			for i, prev := range r.Limits {
				if prev.WindowMS != 0 && prev.Algorithm == lim.Algorithm && prev.WindowMS == lim.WindowMS {
					b.errorf(ep, "has the same algorithm and window as %s[%d]", lp, i)
				}
			}
			r.Limits = append(r.Limits, lim)
			replaces = append(replaces, b.replacesOf(lm["replaces"], ep+".replaces")...)
		}
	default:
		return nil
	}
	own := []string{r.Name}
	for _, l := range r.Limits {
		own = append(own, l.Name)
	}
	for _, rp := range replaces {
		if slices.Contains(own, rp.name) {
			b.errorf(rp.path, "%q is this descriptor's own rate limit; it cannot replace itself", rp.name)
			continue
		}
		b.replaces = append(b.replaces, rp)
		if !slices.Contains(r.Replaces, rp.name) {
			r.Replaces = append(r.Replaces, rp.name)
		}
	}
	for _, name := range own {
		if name != "" {
			b.names[name] = true
		}
	}
	r.EngineLimits = EngineLimits(r.Limits)
	r.MetricKey = MetricKey(desc)
	b.dom.rules = append(b.dom.rules, r)
	return r
}

// replacesOf reads a replaces list.
func (b *builder) replacesOf(n *yaml.Node, path string) []pendingReplace {
	var out []pendingReplace
	for i, item := range b.list(n, path) {
		ip := fmt.Sprintf("%s[%d]", path, i)
		m := b.mapping(item, ip, placeReplaces)
		if m == nil {
			continue
		}
		name, ok := b.str(m["name"], ip+".name")
		if name == "" {
			if ok || !b.present(m, "name") {
				b.errorf(ip, "a replaces entry needs a name")
			}
			continue
		}
		out = append(out, pendingReplace{name: name, path: ip + ".name"})
	}
	return out
}

// limit reads one rate limit that is not unlimited.
func (b *builder) limit(lm map[string]*yaml.Node, lp string) Limit {
	lim := Limit{Algorithm: engine.FixedWindow, UnitMultiplier: 1}
	if !b.present(lm, "unit") {
		b.errorf(lp, "unit is required (second, minute, hour, day, week, month or year)")
	} else if s, ok := b.str(lm["unit"], lp+".unit"); ok {
		if u, ok := ParseUnit(s); ok {
			lim.Unit = u
		} else {
			b.errorf(lp+".unit", "unknown unit %q (want second, minute, hour, day, week, month or year)", s)
		}
	}
	// A missing requests_per_unit is 0, which denies every request (the peer's reading).
	if !b.present(lm, "requests_per_unit") {
		lim.RequestsPerUnit = 0
	} else if v, ok := b.integer(lm["requests_per_unit"], lp+".requests_per_unit"); ok {
		if v < 0 || v > engine.MaxLimit {
			b.errorf(lp+".requests_per_unit", "%d is out of range (0 to %d)", v, engine.MaxLimit)
		} else {
			lim.RequestsPerUnit = v
		}
	}
	lim.Name, _ = b.str(lm["name"], lp+".name")
	if s, ok := b.str(lm["algorithm"], lp+".algorithm"); ok {
		switch a, known := engine.ParseAlgorithm(s); {
		case known && a.Kind() == engine.RateRule:
			lim.Algorithm = a
		case known:
			b.errorf(lp+".algorithm", "%s is a lease kind, not a rate algorithm (want fixed_window, sliding_window or token_bucket)", s)
		default:
			b.errorf(lp+".algorithm", "unknown algorithm %q (want fixed_window, sliding_window or token_bucket)", s)
		}
	}
	multPath := lp + ".unit"
	if b.present(lm, "unit_multiplier") {
		multPath = lp + ".unit_multiplier"
		if v, ok := b.integer(lm["unit_multiplier"], multPath); ok {
			if v < 1 {
				b.errorf(multPath, "must be at least 1, not %d", v)
			} else {
				lim.UnitMultiplier = v
			}
		}
	}
	if ms := UnitMS(lim.Unit); ms > 0 {
		if lim.UnitMultiplier > engine.MaxWindowMS/ms {
			b.errorf(multPath, "a window of %d %ss is longer than the maximum of %d days",
				lim.UnitMultiplier, strings.ToLower(lim.Unit.String()), engine.MaxWindowMS/86_400_000)
		} else {
			lim.WindowMS = ms * lim.UnitMultiplier
		}
	}
	return lim
}

// metadata reads a descriptor's metadata: any mapping, kept as a protobuf Struct for the
// replies' dynamic metadata (the peer's format); absent and null are nil.
func (b *builder) metadata(n *yaml.Node, path string) *structpb.Struct {
	n = b.resolve(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		b.errorf(path, "must be a mapping, not %s", describe(n))
		return nil
	}
	var v map[string]any
	if err := n.Decode(&v); err != nil {
		b.errorf(path, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		return nil
	}
	if len(v) == 0 {
		return nil
	}
	st, err := structpb.NewStruct(v)
	if err != nil {
		b.errorf(path, "cannot be dynamic metadata: %v", err)
		return nil
	}
	return st
}

// MetricKey is the key path of descriptor entries for metrics, in the peer's form: each
// level's key, followed by "_" and its value when it has one, joined by ".".
func MetricKey(desc []Entry) string {
	var b strings.Builder
	for i, e := range desc {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.Key)
		if e.Value != "" {
			b.WriteByte('_')
			b.WriteString(e.Value)
		}
	}
	return b.String()
}
