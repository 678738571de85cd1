package rules

import (
	"strconv"

	"github.com/leashd/leash/engine"
)

// overrideField names field of the i-th override, as messages do: overrides[i].field.
func overrideField(i int, field string) string {
	return "overrides[" + strconv.Itoa(i) + "]." + field
}

// checkOverrideFields is step 1 of a rule write's checks for its overrides (spec §6.3,
// §6.7): every entry has a valid key (spec §3.4) and a limit, and no value is negative.
// The errors are invalid_request naming the field.
func checkOverrideFields(list []OverrideRequest) error {
	for i, o := range list {
		switch {
		case o.Key == nil:
			return engine.Invalid(overrideField(i, "key") + " is required")
		case !engine.ValidKey(*o.Key):
			return engine.Invalid(overrideField(i, "key") + " must be 1-512 bytes of UTF-8 without control characters")
		case o.Limit == nil:
			return engine.Invalid(overrideField(i, "limit") + " is required")
		case *o.Limit < 0:
			return engine.Invalid(engine.RangeMessage(overrideField(i, "limit"), 1, engine.MaxLimit))
		case o.WindowMS != nil && *o.WindowMS < 0:
			return engine.Invalid(engine.RangeMessage(overrideField(i, "window_ms"), 1, engine.MaxWindowMS))
		}
	}
	return nil
}

// checkOverrideRanges is step 2 (spec §6.3, §6.7): at most MaxOverrides entries, limits
// and windows in the rule ranges, no key twice; each error is invalid_rule naming the
// field. It returns the checked set.
func checkOverrideRanges(list []OverrideRequest) (engine.Overrides, error) {
	if len(list) > engine.MaxOverrides {
		return engine.Overrides{}, engine.NewError(engine.CodeInvalidRule, "overrides must hold at most 1000 entries")
	}
	if len(list) == 0 {
		return engine.Overrides{}, nil
	}
	out := make([]engine.Override, len(list))
	seen := make(map[string]int, len(list))
	for i, o := range list {
		if *o.Limit < 1 || *o.Limit > engine.MaxLimit {
			return engine.Overrides{}, engine.NewError(engine.CodeInvalidRule, engine.RangeMessage(overrideField(i, "limit"), 1, engine.MaxLimit))
		}
		if w := o.WindowMS; w != nil && (*w < 1 || *w > engine.MaxWindowMS) {
			return engine.Overrides{}, engine.NewError(engine.CodeInvalidRule, engine.RangeMessage(overrideField(i, "window_ms"), 1, engine.MaxWindowMS))
		}
		if j, dup := seen[*o.Key]; dup {
			return engine.Overrides{}, engine.NewError(engine.CodeInvalidRule, overrideField(i, "key")+" repeats the key of overrides["+strconv.Itoa(j)+"]")
		}
		seen[*o.Key] = i
		out[i] = engine.Override{Key: *o.Key, Limit: *o.Limit}
		if o.WindowMS != nil {
			out[i].WindowMS = *o.WindowMS
		}
	}
	return engine.NewOverrides(out), nil
}
