package httpapi

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/wire"
)

// Request bodies are decoded by go-json-experiment/json into each route's request type
// of package wire, strictly (spec §3.3):
//
//   - the body must be exactly one JSON object: empty, not an object, or trailing data
//     is invalid_request;
//   - an unknown member name (one that is not valid UTF-8 included) is rejected by
//     json.RejectUnknownMembers, a known one given twice by jsontext's duplicate check;
//   - null for a member means it is absent;
//   - a string member must be a JSON string of valid UTF-8;
//   - an integer member must be a plain integer literal (no fraction or exponent), not
//     negative, and within int64 — except in a rule (wire.RuleRequest), where a
//     non-negative integer beyond int64 is passed on as math.MaxInt64 so that the engine
//     answers invalid_rule (spec §6.3);
//   - a boolean member must be true or false.
//
// The library reads the object; the unmarshalers below hold the spec's scalar rules for
// the member types wire uses (string, bool and their Optional forms, Optional[int64]),
// which differ from the library's defaults (it takes -1 for an int64 and replaces invalid
// UTF-8 rather than naming the field). decodeError maps the library's errors to messages
// naming the field.

// decodeOptions are the options of every body decode but a rule's, ruleOptions of a
// rule's. Invalid UTF-8 is allowed by the tokenizer so that a bad member name is reported
// as an unknown field and a bad string value by readString, naming its field.
var (
	decodeOptions = bodyOptions(false)
	ruleOptions   = bodyOptions(true)
)

func bodyOptions(rule bool) json.Options {
	return json.JoinOptions(
		json.RejectUnknownMembers(true),
		jsontext.AllowInvalidUTF8(true),
		json.WithUnmarshalers(json.JoinUnmarshalers(
			json.UnmarshalFromFunc(readText),
			json.UnmarshalFromFunc(readOptionalText),
			json.UnmarshalFromFunc(readFlag),
			json.UnmarshalFromFunc(readOptionalBool),
			json.UnmarshalFromFunc(func(dec *jsontext.Decoder, c *wire.Optional[int64]) error {
				return readInt(dec, c, rule)
			}),
		)),
	)
}

const (
	msgBodyRequired = "request body is required: a JSON object"
	msgNotObject    = "request body must be a JSON object"
	msgTrailing     = "request body must hold exactly one JSON object, with nothing after it"
	msgNotJSON      = "request body is not valid JSON"
)

// decodeBody decodes body, which must hold one JSON object, into v (a pointer to a
// fresh request value of package wire).
func decodeBody(body []byte, v any) error {
	i := skipSpace(body, 0)
	if i == len(body) {
		return engine.Invalid(msgBodyRequired)
	}
	if c := body[i]; c != '{' && (c == '[' || c == '"' || c == '-' || c == 't' || c == 'f' || c == 'n' || c >= '0' && c <= '9') {
		return engine.Invalid(msgNotObject)
	}
	opts := decodeOptions
	if _, ok := v.(*wire.RuleRequest); ok {
		opts = ruleOptions
	}
	if err := json.Unmarshal(body, v, opts); err != nil {
		return decodeError(body, err)
	}
	return nil
}

// emptyBody reports whether body is empty or white space only.
func emptyBody(body []byte) bool { return skipSpace(body, 0) == len(body) }

// skipSpace returns the index of the first non-whitespace byte of b at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueError is a member value that breaks a rule of spec §3.3; the unmarshalers above
// return it and decodeError names the field.
type valueError uint8

const (
	errNotString  valueError = iota // not a JSON string
	errBadUTF8                      // a string that is not valid UTF-8
	errNotInteger                   // not a JSON number
	errFraction                     // a number with a fraction or an exponent
	errNegative                     // a negative integer
	errTooBig                       // a non-negative integer beyond int64
	errNotBoolean                   // not true or false
)

func (e valueError) Error() string { return "invalid value " + strconv.Itoa(int(e)) }

// readText reads a string member: null leaves it as it was.
func readText(dec *jsontext.Decoder, t *string) error {
	b, ok, err := readString(dec)
	if err != nil || !ok {
		return err
	}
	*t = string(b)
	return nil
}

// readOptionalText reads an optional string member; the algorithm names are interned so
// the hot path allocates nothing for them.
func readOptionalText(dec *jsontext.Decoder, o *wire.Optional[string]) error {
	b, ok, err := readString(dec)
	if err != nil || !ok {
		return err
	}
	*o = wire.Some(internAlgorithm(b))
	return nil
}

// readFlag reads a boolean member: true, false, or null (left as it was).
func readFlag(dec *jsontext.Decoder, f *bool) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	switch tok.Kind() {
	case 'n':
	case 't', 'f':
		*f = tok.Bool()
	default:
		return errNotBoolean
	}
	return nil
}

// readOptionalBool reads an optional boolean member: true, false or null (unset).
func readOptionalBool(dec *jsontext.Decoder, o *wire.Optional[bool]) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		return nil
	case 't', 'f':
		*o = wire.Some(v.Kind() == 't')
		return nil
	}
	return errNotBoolean
}

func internAlgorithm(b []byte) string {
	for a := engine.FixedWindow; a <= engine.ConcurrentLimit; a++ {
		if s := a.String(); string(b) == s {
			return s
		}
	}
	return string(b)
}

// readString reads a string member: ok false for null. The bytes are valid until the
// decoder's next read.
func readString(dec *jsontext.Decoder) (b []byte, ok bool, err error) {
	v, err := dec.ReadValue()
	if err != nil {
		return nil, false, err
	}
	switch v.Kind() {
	case 'n':
		return nil, false, nil
	case '"':
		b, valid := unquote(v)
		if !valid {
			return nil, false, errBadUTF8
		}
		return b, true, nil
	}
	return nil, false, errNotString
}

// unquote returns the content of a JSON string value, ok false if it is not valid UTF-8
// (raw invalid bytes, or an escaped lone surrogate). Without escapes the content is v's
// own bytes.
func unquote(v jsontext.Value) ([]byte, bool) {
	inner := v[1 : len(v)-1]
	ascii := true
	for _, c := range inner {
		if c == '\\' {
			b, err := jsontext.AppendUnquote(nil, v)
			return b, err == nil
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	return inner, ascii || utf8.Valid(inner)
}

// readInt reads an integer member: a plain non-negative integer literal within int64, or
// null (unset). In a rule, a non-negative integer beyond int64 reads as math.MaxInt64,
// out of the rule range.
func readInt(dec *jsontext.Decoder, c *wire.Optional[int64], rule bool) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		return nil
	case '0':
	default:
		return errNotInteger
	}
	n, class := parseInt(v)
	switch class {
	case intNegative:
		return errNegative
	case intFraction:
		return errFraction
	case intTooBig:
		if !rule {
			return errTooBig
		}
		n = math.MaxInt64
	}
	*c = wire.Some(n)
	return nil
}

// intClass classifies a JSON number literal.
type intClass uint8

const (
	intOK       intClass = iota
	intNegative          // a negative integer (-0 is 0)
	intFraction          // has a fraction or an exponent, whatever its value
	intTooBig            // a non-negative integer beyond int64
)

// parseInt classifies a JSON number (already valid by the JSON grammar) and returns its
// value when it is a non-negative int64.
func parseInt(v []byte) (int64, intClass) {
	neg := v[0] == '-'
	if neg {
		v = v[1:]
	}
	var n uint64
	big := false
	for _, c := range v {
		if c < '0' || c > '9' { // '.', 'e', 'E': a fraction or an exponent
			return 0, intFraction
		}
		d := uint64(c - '0')
		if big || n > (math.MaxInt64-d)/10 {
			big = true // keep scanning: a later '.' or 'e' makes it a fraction
			continue
		}
		n = n*10 + d
	}
	switch {
	case neg && (big || n != 0):
		return 0, intNegative
	case big:
		return 0, intTooBig
	}
	return int64(n), intOK
}

// rangeMessage states the real range of an integer field for a value outside int64's
// non-negative half, the same words the engine uses for a value outside the range.
func rangeMessage(field, name string, class valueError) string {
	switch name {
	case "limit":
		return engine.RangeMessage(field, 1, engine.MaxLimit)
	case "window_ms":
		return engine.RangeMessage(field, 1, engine.MaxWindowMS)
	case "cost":
		if class == errTooBig {
			return "cost must not exceed limit"
		}
		return "cost must be a non-negative integer"
	}
	return field + " must be a non-negative integer" // no such field today
}

// decodeError maps an error of json.Unmarshal on body to invalid_request naming the
// field (or the body). The library's own text is never echoed.
func decodeError(body []byte, err error) error {
	if se, ok := errors.AsType[*json.SemanticError](err); ok {
		field, name := fieldPath(se.JSONPointer)
		if errors.Is(se.Err, json.ErrUnknownName) {
			parent, _ := fieldPath(se.JSONPointer[:max(0, strings.LastIndexByte(string(se.JSONPointer), '/'))])
			if parent != "" {
				parent += "."
			}
			return unknownIn(parent, rawName(body, se.ByteOffset))
		}
		if ve, ok := errors.AsType[valueError](se.Err); ok {
			switch ve {
			case errNotString:
				return engine.Invalid(field + " must be a string")
			case errBadUTF8:
				return engine.Invalid(field + " must be valid UTF-8")
			case errNotInteger:
				return engine.Invalid(field + " must be an integer")
			case errFraction:
				return engine.Invalid(field + " must be an integer, without fraction or exponent")
			case errNotBoolean:
				return engine.Invalid(field + " must be a boolean")
			}
			return engine.Invalid(rangeMessage(field, name, ve))
		}
		if field == "" {
			return engine.Invalid(msgNotObject)
		}
		if se.GoType != nil && se.GoType.Kind().String() == "slice" {
			return engine.Invalid(field + " must be an array")
		}
		return engine.Invalid(field + " must be an object")
	}
	if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		if errors.Is(se.Err, jsontext.ErrDuplicateName) {
			// The decoder can meet a repeated name before a syntax error later in the
			// body (`{{"a":0,"a"`); a body that is not JSON is reported as such.
			var v any
			if err := json.Unmarshal(body, &v, jsontext.AllowDuplicateNames(true)); err != nil {
				if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
					return syntaxError(body, se)
				}
			}
			field, _ := fieldPath(se.JSONPointer)
			return engine.Invalid("duplicate field \"" + field + "\"")
		}
		return syntaxError(body, se)
	}
	return engine.Invalid(msgNotJSON)
}

// syntaxError describes a JSON syntax error and where it is: in the value of a
// top-level field, after one, or at the top; trailing data after the object has its own
// message. The decoder's own text is not echoed, only the byte offset.
func syntaxError(body []byte, se *jsontext.SyntacticError) error {
	where := ""
	if top, _, _ := strings.Cut(strings.TrimPrefix(string(se.JSONPointer), "/"), "/"); top != "" {
		where = " in field \"" + unescapePointer(top) + "\""
	} else {
		last, complete := scanTop(body)
		if complete {
			return engine.Invalid(msgTrailing)
		}
		if last != "" {
			where = " after field \"" + last + "\""
		}
	}
	if se.Err == io.ErrUnexpectedEOF {
		return engine.Invalid(msgNotJSON + where + ": unexpected end of body")
	}
	return engine.Invalid(msgNotJSON + where + " at byte " + strconv.FormatInt(se.ByteOffset, 10))
}

// scanTop reads body token by token up to its first syntax error and returns the last
// member name read in the top-level object, and whether the object itself was complete
// (so that the error is in what follows it).
func scanTop(body []byte) (last string, complete bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(body), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return last, false
		}
		depth := dec.StackDepth()
		if depth == 0 {
			return last, true
		}
		if _, n := dec.StackIndex(1); depth == 1 && tok.Kind() == '"' && n%2 == 1 {
			last = tok.String()
		}
	}
}

// fieldPath renders a JSON pointer into the body as the field it names, array indexes in
// brackets (/overrides/2/limit is overrides[2].limit), and returns the last name too.
func fieldPath(p jsontext.Pointer) (path, name string) {
	var b strings.Builder
	for tok := range p.Tokens() {
		if tok != "" && strings.Trim(tok, "0123456789") == "" && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
		name = tok
	}
	return b.String(), name
}

func unescapePointer(s string) string {
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
}

// rawName returns the member name whose JSON string starts at body[off], with its bytes
// as sent when they hold no escape (so an invalid byte is shown as such).
func rawName(body []byte, off int64) []byte {
	if off < 0 || off >= int64(len(body)) || body[off] != '"' {
		return nil
	}
	v := body[off:]
	end := 1
	for ; end < len(v); end++ {
		if v[end] == '\\' {
			end++
		} else if v[end] == '"' {
			break
		}
	}
	if end >= len(v) {
		return nil
	}
	name, _ := unquote(v[:end+1])
	return name
}

// unknownIn is the error for a member name no field has inside the object at path (a
// prefix such as `overrides[2].`); a name over 64 bytes is cut to 61 and "...".
func unknownIn(path string, name []byte) error {
	if len(name) > 64 {
		name = append(name[:61:61], "..."...)
	}
	return engine.Invalid("unknown field " + strconv.Quote(path+string(name)))
}
