package engine

import (
	"unicode/utf8"

	"github.com/leashd/leash/engine/algo"
)

// Bounds of rule and inline values (spec §6.3). The limit and window bounds are the
// algorithms' (engine/algo), within which their integer arithmetic is exact.
const (
	MaxLimit    = algo.MaxLimit
	MaxWindowMS = algo.MaxWindowMS // 366 days
	// MaxOverdraftCost is the largest cost an overdraft spend takes (spec §4.12); a larger
	// one is spent as this much, which counts the same (counters saturate there).
	MaxOverdraftCost = algo.MaxCount
	MaxRuleName      = 256 // bytes
	MaxNamespace     = 128 // characters
	MaxKey           = 512 // bytes
)

// ValidNamespace reports whether ns is 1-128 characters of [A-Za-z0-9._-] starting with a
// letter or digit.
func ValidNamespace(ns string) bool {
	if len(ns) == 0 || len(ns) > MaxNamespace {
		return false
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidKey reports whether key is 1-512 bytes of valid UTF-8 without control characters.
func ValidKey(key string) bool {
	if len(key) == 0 || len(key) > MaxKey {
		return false
	}
	for i := 0; i < len(key); {
		c := key[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(key[i:])
		if r == utf8.RuneError && size == 1 {
			return false
		}
		if r >= 0x80 && r <= 0x9f { // C1 controls
			return false
		}
		i += size
	}
	return true
}

// Messages of the invalid_request errors for a malformed namespace or key.
const (
	msgNamespace = "namespace must be 1-128 characters of [A-Za-z0-9._-] starting with a letter or digit"
	MsgKey       = "key must be 1-512 bytes of UTF-8 without control characters"
)

// CheckNamespace returns the invalid_request error for a malformed namespace, else nil.
func CheckNamespace(ns string) error {
	if !ValidNamespace(ns) {
		return Invalid(msgNamespace)
	}
	return nil
}

// CheckTarget returns the invalid_request error for a malformed namespace or key, else nil.
func CheckTarget(ns, key string) error {
	if err := CheckNamespace(ns); err != nil {
		return err
	}
	if !ValidKey(key) {
		return Invalid(MsgKey)
	}
	return nil
}

// CheckInline validates an optional inline limit or window against the rule ranges; a
// value outside them is invalid_request naming the field.
func CheckInline(field string, v *int64, max int64) error {
	if v == nil {
		return nil
	}
	if *v < 1 || *v > max {
		return Invalid(RangeMessage(field, 1, max))
	}
	return nil
}

// RangeMessage is the message for an integer field outside its range lo to hi, the same
// words whatever side of the range the value is on (and whatever its code).
func RangeMessage(field string, lo, hi int64) string {
	return field + " must be an integer from " + itoa(lo) + " to " + itoa(hi)
}

func itoa(v int64) string {
	var b [20]byte
	i := len(b)
	neg := v < 0
	if neg {
		v = -v
	}
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
