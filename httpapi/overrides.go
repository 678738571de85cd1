package httpapi

import (
	"bytes"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/leashd/leash/engine"
)

// fOverrides is the rule body's overrides member (spec §6.7), after the parser's own bits.
const fOverrides = fURL << 1

// overrides reads the rule body's optional overrides member: null (absent) or an array of
// objects {key, limit, window_ms?}, each decoded as strictly as a body (spec §3.3), with
// every error naming its field as overrides[i].field. Ranges, duplicates and the count are
// the engine's (spec §6.3).
func (a *API) overrides(p *parser, dst *[]engine.OverrideRequest) error {
	v, err := p.value(fOverrides, "overrides")
	if err != nil {
		return err
	}
	switch v.Kind() {
	case 'n':
		return nil
	case '[':
	default:
		return engine.Invalid("overrides must be an array")
	}
	// v is valid JSON: the body or the member was checked when read.
	var dec jsontext.Decoder
	dec.Reset(bytes.NewReader(v), a.decodeOpts...)
	if _, err := dec.ReadToken(); err != nil {
		return syntaxError(err, " in field \"overrides\"")
	}
	var sub parser
	var buf bytes.Buffer
	list := []engine.OverrideRequest{}
	for i := 0; dec.PeekKind() != ']'; i++ {
		elem, err := dec.ReadValue()
		if err != nil {
			return syntaxError(err, " in field \"overrides\"")
		}
		at := "overrides[" + strconv.Itoa(i) + "]"
		if elem.Kind() != '{' {
			return engine.Invalid(at + " must be an object")
		}
		buf.Reset()
		buf.Write(elem)
		var o engine.OverrideRequest
		if err := a.override(&sub, &buf, at, &o); err != nil {
			return err
		}
		list = append(list, o)
	}
	*dst = list
	return nil
}

// override decodes one entry of overrides, the object in buf.
func (a *API) override(p *parser, buf *bytes.Buffer, at string, o *engine.OverrideRequest) error {
	if err := p.begin(buf, a.decodeOpts); err != nil {
		return err
	}
	for {
		name, done, err := p.next()
		if err != nil {
			return err
		}
		if done {
			return p.finish()
		}
		switch string(name) {
		case "key":
			err = p.optStr(fKey, at+".key", &o.Key, new(string))
		case "limit":
			err = p.integer(fLimit, at+".limit", intRule, &o.Limit, new(int64))
		case "window_ms":
			err = p.integer(fWindow, at+".window_ms", intRule, &o.WindowMS, new(int64))
		default:
			err = unknownIn(at+".", name)
		}
		if err != nil {
			return err
		}
	}
}
