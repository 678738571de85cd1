package engine

// Per-key overrides (spec §6.7): a rule may give some keys their own limit (and window),
// looked up by key in one map access. A rule's overrides are immutable once built, so every
// copy of a Rule (the stores' caches, the results they hand out) shares them safely.

// MaxOverrides is the most overrides one rule holds (spec §6.7).
const MaxOverrides = 1000

// Override is one key's own limit inside a rule.
type Override struct {
	Key      string
	Limit    int64
	WindowMS int64 // 0: the rule's window
}

// Overrides is a rule's set of per-key overrides; the zero value has none. It is
// immutable: copies share it.
type Overrides struct{ s *overrideSet }

type overrideSet struct {
	list  []Override
	byKey map[string]int32
}

// NewOverrides builds a set from list, keeping its order; a later duplicate key replaces
// an earlier one (PutRule refuses duplicates before they get here). An empty list is the
// zero value.
func NewOverrides(list []Override) Overrides {
	if len(list) == 0 {
		return Overrides{}
	}
	s := &overrideSet{list: make([]Override, 0, len(list)), byKey: make(map[string]int32, len(list))}
	for _, o := range list {
		if i, dup := s.byKey[o.Key]; dup {
			s.list[i] = o
			continue
		}
		s.byKey[o.Key] = int32(len(s.list))
		s.list = append(s.list, o)
	}
	return Overrides{s: s}
}

// Len is the number of overrides.
func (o Overrides) Len() int {
	if o.s == nil {
		return 0
	}
	return len(o.s.list)
}

// KeyBytes is the total length of the overrides' keys.
func (o Overrides) KeyBytes() int {
	if o.s == nil {
		return 0
	}
	n := 0
	for i := range o.s.list {
		n += len(o.s.list[i].Key)
	}
	return n
}

// List returns the overrides in the order they were written; the caller owns the slice.
func (o Overrides) List() []Override {
	if o.s == nil {
		return nil
	}
	return append([]Override(nil), o.s.list...)
}

// Lookup returns key's override, if it has one.
func (o Overrides) Lookup(key string) (Override, bool) {
	if o.s == nil {
		return Override{}, false
	}
	i, ok := o.s.byKey[key]
	if !ok {
		return Override{}, false
	}
	return o.s.list[i], true
}

// For returns the limit and window the rule sets for key: its override's when key has one
// (the override's window, else the rule's), else the rule's own.
func (r *Rule) For(key string) (limit, windowMS int64) {
	limit, windowMS = r.Limit, r.WindowMS
	if o, ok := r.Overrides.Lookup(key); ok {
		limit = o.Limit
		if o.WindowMS != 0 {
			windowMS = o.WindowMS
		}
	}
	return limit, windowMS
}
