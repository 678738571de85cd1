package httpapi

import (
	"bytes"
	"errors"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/leashd/leash/engine"
)

// parser decodes a request body, a JSON object with a fixed set of optional members,
// strictly (spec §3.3), member by member so that every error names its field and
// numbers keep their literal text:
//
//   - the body must be exactly one JSON object: empty, not an object, or trailing data
//     is invalid_request;
//   - an unknown member name (one that is not valid UTF-8 included), or a known one given
//     twice, is invalid_request, naming the member;
//   - null for a member means it is absent;
//   - a string member must be a JSON string of valid UTF-8;
//   - an integer member must be a plain integer literal (no fraction or exponent), not
//     negative, and within int64 — except rule limits and windows, where a non-negative
//     integer beyond int64 is passed on as math.MaxInt64 so that the engine answers
//     invalid_rule (spec §6.3).
//
// jsontext checks the JSON grammar. A body that is valid JSON (the usual case) is checked
// in one jsontext.Decoder.ReadValue call and its members are then walked directly in the
// checked bytes, which is three times faster than reading token by token. A body that is
// not valid JSON is read again token by token, so that the errors of the members before
// the syntax error come first, and the syntax error names the field it is in or after.
// Both modes share every field rule: they differ only in how next and value find the
// bytes of a member.
type parser struct {
	dec  jsontext.Decoder
	seen uint32 // members read so far, one bit per field
	last string // the field read last, for syntax errors between members
	tmp  []byte // unquoting scratch

	// Fast mode: the checked object's members (between its braces) and the position of
	// the next unread byte.
	fast     bool
	obj      []byte
	pos      int
	trailing bool // something follows the object

	slow      bytes.Buffer // token mode: a copy of the body, read again
	forceSlow bool         // tests: always use token mode
}

// The members of every body, one bit each, for duplicate detection.
const (
	fNamespace uint32 = 1 << iota
	fKey
	fAlgorithm
	fLimit
	fWindow
	fCost
	fName
	fURL
	fOverdraft
)

// intMode says how an integer beyond int64 is answered.
type intMode uint8

const (
	intStrict intMode = iota // beyond int64: invalid_request
	intRule                  // beyond int64: math.MaxInt64, out of rule range (invalid_rule)
)

const (
	msgBodyRequired = "request body is required: a JSON object"
	msgNotObject    = "request body must be a JSON object"
	msgTrailing     = "request body must hold exactly one JSON object, with nothing after it"
)

// begin starts decoding body, which must hold one JSON object.
func (p *parser) begin(body *bytes.Buffer, opts []jsontext.Options) error {
	p.seen, p.last, p.fast, p.obj, p.pos, p.trailing = 0, "", false, nil, 0, false
	b := body.Bytes()
	if len(bytes.Trim(b, " \t\r\n")) == 0 {
		return engine.Invalid(msgBodyRequired)
	}
	if !p.forceSlow {
		p.dec.Reset(body, opts...)
		v, err := p.dec.ReadValue()
		if err == nil {
			if v.Kind() != '{' {
				return engine.Invalid(msgNotObject)
			}
			p.fast, p.obj = true, v[1:len(v)-1]
			// This read invalidates v[0], the '{' outside p.obj (jsontext marks consumed
			// values so stale reads fail loudly).
			_, err = p.dec.ReadToken()
			p.trailing = err != io.EOF
			return nil
		}
		// Not valid JSON (the first read never alters the buffer): read it again by tokens.
	}
	p.slow.Reset()
	p.slow.Write(b)
	p.dec.Reset(&p.slow, opts...)
	switch p.dec.PeekKind() {
	case '{':
		_, _ = p.dec.ReadToken()
		return nil
	case 0:
		_, err := p.dec.ReadToken()
		return syntaxError(err, "")
	}
	return engine.Invalid(msgNotObject)
}

// next returns the next member name (valid until the next read), or done at the end of
// the object.
func (p *parser) next() (name []byte, done bool, err error) {
	var raw []byte
	if p.fast {
		o := p.obj
		i := skipSpace(o, p.pos)
		if i < len(o) && o[i] == ',' {
			i = skipSpace(o, i+1)
		}
		if i >= len(o) {
			p.pos = i
			return nil, true, nil
		}
		end := stringEnd(o, i)
		raw = o[i:end]
		i = skipSpace(o, end) // at the ':'
		p.pos = skipSpace(o, i+1)
	} else {
		if p.dec.PeekKind() == '}' {
			_, _ = p.dec.ReadToken()
			return nil, true, nil
		}
		if raw, err = p.dec.ReadValue(); err != nil {
			where := ""
			if p.last != "" {
				where = " after field \"" + p.last + "\""
			}
			return nil, false, syntaxError(err, where)
		}
	}
	name, ok := p.unquote(raw)
	if !ok {
		// No field has such a name; the message shows it with its bad bytes escaped.
		return nil, false, unknown(name)
	}
	return name, false, nil
}

// finish checks that nothing follows the object.
func (p *parser) finish() error {
	if p.fast {
		if p.trailing {
			return engine.Invalid(msgTrailing)
		}
		return nil
	}
	if _, err := p.dec.ReadToken(); err != io.EOF {
		return engine.Invalid(msgTrailing)
	}
	return nil
}

// end drops the references to the last body.
func (p *parser) end() {
	p.dec.Reset(eof{})
	p.obj = nil
	if p.slow.Cap() > maxPooledBody {
		p.slow = bytes.Buffer{}
	}
}

type eof struct{}

func (eof) Read([]byte) (int, error) { return 0, io.EOF }

// skipSpace returns the index of the first non-whitespace byte of b at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at b[i] (a '"'), in
// input jsontext has already checked.
func stringEnd(b []byte, i int) int {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// walkValue returns the raw member value at p.pos (fast mode), in checked input.
func (p *parser) walkValue() jsontext.Value {
	o, i := p.obj, p.pos
	start := i
	switch o[i] {
	case '"':
		i = stringEnd(o, i)
	case '{', '[':
		for depth := 0; ; {
			switch o[i] {
			case '"':
				i = stringEnd(o, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			i++
			if depth == 0 {
				break
			}
		}
	default: // a number or a literal
		for i < len(o) && o[i] != ',' && o[i] != ' ' && o[i] != '\t' && o[i] != '\n' && o[i] != '\r' {
			i++
		}
	}
	p.pos = i
	return o[start:i]
}

// unknown is the error for a member name no field has.
func unknown(name []byte) error { return unknownIn("", name) }

// unknownIn is the error for a member name no field has inside the object at path (a
// prefix such as `overrides[2].`); a name over 64 bytes is cut to 61 and "...".
func unknownIn(path string, name []byte) error {
	if len(name) > 64 {
		name = append(name[:61:61], "..."...)
	}
	return engine.Invalid("unknown field " + strconv.Quote(path+string(name)))
}

// value reads the raw value of field, rejecting a second occurrence.
func (p *parser) value(bit uint32, field string) (jsontext.Value, error) {
	if p.seen&bit != 0 {
		return nil, engine.Invalid("duplicate field \"" + field + "\"")
	}
	p.seen |= bit
	p.last = field
	if p.fast {
		return p.walkValue(), nil
	}
	v, err := p.dec.ReadValue()
	if err != nil {
		return nil, syntaxError(err, " in field \""+field+"\"")
	}
	return v, nil
}

// str reads a string member into *dst; present is false for null.
func (p *parser) str(bit uint32, field string, dst *string) (present bool, err error) {
	v, err := p.value(bit, field)
	if err != nil {
		return false, err
	}
	switch v.Kind() {
	case 'n':
		return false, nil
	case '"':
		b, ok := p.unquote(v)
		if !ok {
			return false, engine.Invalid(field + " must be valid UTF-8")
		}
		*dst = string(b)
		return true, nil
	}
	return false, engine.Invalid(field + " must be a string")
}

// boolean reads an optional boolean member into *dst (null leaves it false).
func (p *parser) boolean(bit uint32, field string, dst *bool) error {
	v, err := p.value(bit, field)
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n', 'f':
		*dst = false
	case 't':
		*dst = true
	default:
		return engine.Invalid(field + " must be a boolean")
	}
	return nil
}

// optStr reads an optional string member, pointing *dst at storage when present.
func (p *parser) optStr(bit uint32, field string, dst **string, storage *string) error {
	present, err := p.str(bit, field, storage)
	if present {
		*dst = storage
	}
	return err
}

// algorithm reads the optional algorithm member; known names are interned so the hot
// path allocates nothing for them.
func (p *parser) algorithm(dst **string, storage *string) error {
	v, err := p.value(fAlgorithm, "algorithm")
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		return nil
	case '"':
		b, ok := p.unquote(v)
		if !ok {
			return engine.Invalid("algorithm must be valid UTF-8")
		}
		*storage = internAlgorithm(b)
		*dst = storage
		return nil
	}
	return engine.Invalid("algorithm must be a string")
}

func internAlgorithm(b []byte) string {
	for a := engine.FixedWindow; a <= engine.ConcurrentLimit; a++ {
		if s := a.String(); string(b) == s {
			return s
		}
	}
	return string(b)
}

// integer reads an optional integer member, pointing *dst at storage when present.
func (p *parser) integer(bit uint32, field string, mode intMode, dst **int64, storage *int64) error {
	v, err := p.value(bit, field)
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		return nil
	case '0':
		n, class := parseInt(v)
		switch class {
		case intOK:
		case intNegative:
			return engine.Invalid(field + " must be a non-negative integer")
		case intFraction:
			return engine.Invalid(field + " must be an integer, without fraction or exponent")
		case intTooBig:
			if mode != intRule {
				return engine.Invalid(field + " must be an integer no greater than 9223372036854775807")
			}
			n = math.MaxInt64
		}
		*storage = n
		*dst = storage
		return nil
	}
	return engine.Invalid(field + " must be an integer")
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

// unquote returns the content of a JSON string value, ok false if it is not valid UTF-8
// (raw invalid bytes, or an escaped lone surrogate). The result is valid until the next
// read or unquote.
func (p *parser) unquote(v jsontext.Value) ([]byte, bool) {
	inner := v[1 : len(v)-1]
	ascii := true
	for _, c := range inner {
		if c == '\\' {
			var err error
			p.tmp, err = jsontext.AppendUnquote(p.tmp[:0], v)
			return p.tmp, err == nil
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	return inner, ascii || utf8.Valid(inner)
}

// syntaxError describes a JSON syntax error and where it is: in the value of a field,
// after one, or at the top. The decoder's own text is not echoed, only the byte offset.
func syntaxError(err error, where string) error {
	msg := "request body is not valid JSON" + where
	if serr, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		msg += " at byte " + strconv.FormatInt(serr.ByteOffset, 10)
	} else if err == io.ErrUnexpectedEOF || err == io.EOF {
		msg += ": unexpected end of body"
	}
	return engine.Invalid(msg)
}
