package rules

import (
	"encoding/json"
	"fmt"

	"github.com/leashd/leash/engine"
)

// ruleJSON is a rule as stored in Redis: its overrides (spec §6.7) ride in the same value,
// so they are written, versioned, cached and propagated with the rule.
type ruleJSON struct {
	Algorithm string         `json:"algorithm"`
	Limit     int64          `json:"limit"`
	WindowMS  int64          `json:"window_ms"`
	Name      *string        `json:"name,omitempty"`
	Overrides []overrideJSON `json:"overrides,omitempty"`
}

// overrideJSON is one override as stored; a window of 0 (omitted) is the rule's.
type overrideJSON struct {
	Key      string `json:"key"`
	Limit    int64  `json:"limit"`
	WindowMS int64  `json:"window_ms,omitempty"`
}

// Encode returns r's record as stored in Redis.
func Encode(r engine.Rule) ([]byte, error) {
	j := ruleJSON{Algorithm: r.Algorithm.String(), Limit: r.Limit, WindowMS: r.WindowMS, Name: r.Name}
	if n := r.Overrides.Len(); n > 0 {
		j.Overrides = make([]overrideJSON, 0, n)
		for _, o := range r.Overrides.List() {
			j.Overrides = append(j.Overrides, overrideJSON{Key: o.Key, Limit: o.Limit, WindowMS: o.WindowMS})
		}
	}
	return json.Marshal(j)
}

// Decode reads a stored record (a Redis string reply); a nil reply is no rule (nil).
func Decode(v any) (*engine.Rule, error) {
	str, ok := v.(string)
	if !ok {
		return nil, nil // nil reply: no rule
	}
	var j ruleJSON
	if err := json.Unmarshal([]byte(str), &j); err != nil {
		return nil, fmt.Errorf("redisstore: stored rule is not valid JSON: %w", err)
	}
	alg, ok := engine.ParseAlgorithm(j.Algorithm)
	if !ok {
		return nil, fmt.Errorf("redisstore: stored rule has unknown algorithm %q", j.Algorithm)
	}
	r := &engine.Rule{Algorithm: alg, Limit: j.Limit, WindowMS: j.WindowMS, Name: j.Name}
	if len(j.Overrides) > 0 {
		list := make([]engine.Override, len(j.Overrides))
		for i, o := range j.Overrides {
			list[i] = engine.Override{Key: o.Key, Limit: o.Limit, WindowMS: o.WindowMS}
		}
		r.Overrides = engine.NewOverrides(list)
	}
	return r, nil
}
