package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"regexp"
	"unicode/utf8"
)

// refDecode is an independent reading of the body rules of spec §3.3, built
// on encoding/json rather than on the jsontext decoder the API uses, to check the API's
// decoders against. It returns the fields of an accepted body (see decoderSpec), or ok
// false for a body spec §3.3 rejects:
//
//   - the body is one JSON value (encoding/json's grammar), and that value is an object;
//   - every string in it is valid UTF-8, with no lone surrogate escape (a body that is
//     not is always rejected: its bad string is a member name, which must then be
//     unknown, or a field value, or inside a value that is the wrong type);
//   - member names are exactly the spec's field names, each at most once;
//   - null means absent; strings are strings; integers are plain literals, not
//     negative (-0 is 0), within int64 (rule values beyond it are math.MaxInt64);
//   - the spec's required field is present.
func refDecode(body []byte, spec decoderSpec) (map[string]any, bool) {
	if !json.Valid(body) || !utf8.Valid(body) || hasLoneSurrogate(body) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	out := make(map[string]any)
	for _, f := range spec.fields {
		if f.kind == kString {
			out[f.name] = ""
		}
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name := tok.(string)
		f, known := spec.field(name)
		if !known || seen[name] {
			return nil, false
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		if string(raw) == "null" {
			continue
		}
		v, ok := refValue(raw, f.kind)
		if !ok {
			return nil, false
		}
		if f.kind != kIgnored {
			out[name] = v
		}
	}
	if spec.required != "" && out[spec.required] == nil {
		return nil, false
	}
	return out, true
}

var plainInteger = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// refValue reads one field value that is not null.
func refValue(raw []byte, kind fieldKind) (any, bool) {
	switch kind {
	case kOverrides:
		// An array of objects, each read by the same rules with overrideSpec's fields.
		var elems []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &elems) != nil {
			return nil, false
		}
		entries := make([]map[string]any, len(elems))
		for i, e := range elems {
			m, ok := refDecode(e, overrideSpec)
			if !ok {
				return nil, false
			}
			entries[i] = m
		}
		return canonOverrides(entries), true
	case kString, kOptString, kIgnored:
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return nil, false
		}
		return s, true
	}
	if !plainInteger.Match(raw) {
		return nil, false
	}
	n, _ := new(big.Int).SetString(string(raw), 10)
	switch {
	case n.Sign() < 0:
		return nil, false
	case n.IsInt64():
		return n.Int64(), true
	case kind == kRuleInt:
		return int64(math.MaxInt64), true
	}
	return nil, false
}

// hasLoneSurrogate reports whether valid JSON text holds a \u escape of a UTF-16
// surrogate that is not part of a high-low pair. Outside strings valid JSON has no
// backslash, so every backslash starts an escape.
func hasLoneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++
		if b[i] != 'u' {
			continue
		}
		r := hex4(b[i+1 : i+5])
		i += 4
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return true
		case r >= 0xd800 && r <= 0xdbff:
			if i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
				return true
			}
			if lo := hex4(b[i+3 : i+7]); lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 decodes four hex digits (already checked by the JSON grammar).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
