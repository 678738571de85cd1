package httpapi

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/wire"
)

// fieldKind is how a body field is read.
type fieldKind uint8

const (
	kString    fieldKind = iota // a string; null or absent is ""
	kOptString                  // an optional string; null is absent
	kInt                        // an optional non-negative int64
	kRuleInt                    // an optional non-negative integer; beyond int64 it is math.MaxInt64
	kIgnored                    // a string (or null) that is accepted and ignored
	kOverrides                  // an optional array of override objects (overrideSpec)
)

// overridesValue is a decoded overrides array in a canonical JSON text (each entry an
// object of its present fields, names sorted): comparable, and encoded back as itself.
type overridesValue string

// MarshalJSON returns the canonical text.
func (v overridesValue) MarshalJSON() ([]byte, error) { return []byte(v), nil }

// canonOverrides renders decoded entries as an overridesValue.
func canonOverrides(entries []map[string]any) overridesValue {
	b, err := json.Marshal(entries)
	if err != nil {
		panic(err)
	}
	return overridesValue(b)
}

// overrideSpec is the shape of one entry of a rule's overrides (spec §6.7).
var overrideSpec = decoderSpec{name: "override", fields: []field{{"key", kOptString}, {"limit", kRuleInt}, {"window_ms", kRuleInt}}}

type field struct {
	name string
	kind fieldKind
}

// decoderSpec describes one request body decoder: its fields and how to run it. decode
// returns the decoded request as a map from field name to its string or int64 value;
// absent optional fields are missing from the map.
type decoderSpec struct {
	name     string
	fields   []field
	required string // a field that must be present and not null
	decode   func(body []byte) (map[string]any, error)
	full     string // a body setting every field, decoded before the body under test
}

func (s decoderSpec) field(name string) (field, bool) {
	for _, f := range s.fields {
		if f.name == name {
			return f, true
		}
	}
	return field{}, false
}

// putStr and putInt add an optional field to a decoded request when it is present.
func putStr(m map[string]any, name string, v *string) {
	if v != nil {
		m[name] = *v
	}
}

func putInt(m map[string]any, name string, v *int64) {
	if v != nil {
		m[name] = *v
	}
}

var (
	checkSpec = decoderSpec{
		name: "check",
		fields: []field{{"namespace", kString}, {"key", kString}, {"algorithm", kOptString},
			{"limit", kInt}, {"window_ms", kInt}, {"cost", kInt}},
		decode: func(body []byte) (map[string]any, error) {
			var r wire.LimitRequest
			err := decodeBody(body, &r)
			m := map[string]any{"namespace": r.Namespace, "key": r.Key}
			putStr(m, "algorithm", r.Algorithm.Ptr())
			putInt(m, "limit", r.Limit.Ptr())
			putInt(m, "window_ms", r.WindowMS.Ptr())
			putInt(m, "cost", r.Cost.Ptr())
			return m, err
		},
		full: `{"namespace":"full","key":"k","algorithm":"token_bucket","limit":5,"window_ms":6,"cost":7}`,
	}
	acquireSpec = decoderSpec{
		name:   "acquire",
		fields: []field{{"namespace", kString}, {"key", kString}, {"limit", kInt}, {"window_ms", kInt}},
		decode: func(body []byte) (map[string]any, error) {
			var r wire.LeaseRequest
			err := decodeBody(body, &r)
			m := map[string]any{"namespace": r.Namespace, "key": r.Key}
			putInt(m, "limit", r.Limit.Ptr())
			putInt(m, "window_ms", r.WindowMS.Ptr())
			return m, err
		},
		full: `{"namespace":"full","key":"k","limit":5,"window_ms":6}`,
	}
	renewSpec = decoderSpec{
		name:   "renew",
		fields: []field{{"window_ms", kInt}},
		decode: func(body []byte) (map[string]any, error) {
			var r wire.RenewRequest
			err := decodeBody(body, &r)
			m := map[string]any{}
			putInt(m, "window_ms", r.WindowMS.Ptr())
			return m, err
		},
		full: `{"window_ms":6}`,
	}
	ruleSpec = decoderSpec{
		name: "rule",
		fields: []field{{"algorithm", kOptString}, {"limit", kRuleInt}, {"window_ms", kRuleInt},
			{"name", kOptString}, {"namespace", kIgnored}, {"overrides", kOverrides}},
		decode: func(body []byte) (map[string]any, error) {
			var b wire.RuleRequest
			err := decodeBody(body, &b)
			if err != nil {
				return nil, err
			}
			r, err := ruleRequestOf(&b)
			m := map[string]any{}
			putStr(m, "algorithm", r.Algorithm)
			putInt(m, "limit", r.Limit)
			putInt(m, "window_ms", r.WindowMS)
			putStr(m, "name", r.Name)
			if r.Overrides != nil {
				entries := make([]map[string]any, len(r.Overrides))
				for i, o := range r.Overrides {
					entries[i] = map[string]any{}
					putStr(entries[i], "key", o.Key)
					putInt(entries[i], "limit", o.Limit)
					putInt(entries[i], "window_ms", o.WindowMS)
				}
				m["overrides"] = canonOverrides(entries)
			}
			return m, err
		},
		full: `{"algorithm":"fixed_window","limit":5,"window_ms":6,"name":"n","namespace":"x","overrides":[{"key":"k","limit":1,"window_ms":2}]}`,
	}
	webhookSpec = decoderSpec{
		name:     "webhook",
		fields:   []field{{"url", kOptString}},
		required: "url",
		decode: func(body []byte) (map[string]any, error) {
			var r wire.WebhookRequest
			err := decodeBody(body, &r)
			m := map[string]any{}
			if err == nil && !r.URL.Set {
				err = engine.Invalid("url is required")
			}
			if err == nil {
				m["url"] = r.URL.Value
			}
			return m, err
		},
		full: `{"url":"https://full.example/"}`,
	}
	allSpecs = []decoderSpec{checkSpec, acquireSpec, renewSpec, ruleSpec, webhookSpec}
)

// runDecoder decodes body with spec into a fresh request value.
func runDecoder(spec decoderSpec, body []byte) (map[string]any, error) {
	return spec.decode(body)
}

// checkDecoder checks the properties of spec's decoder on body:
//
//  1. it accepts exactly the bodies refDecode accepts, with the same field values;
//  2. a rejection is an *engine.Error with code invalid_request whose message names a
//     field of the body or the body itself;
//  3. a decoded request, re-encoded with encoding/json, decodes to the same request;
//  4. decoding another body first changes nothing (decoders keep no state between bodies).
func checkDecoder(t *testing.T, spec decoderSpec, body []byte) {
	got, err := runDecoder(spec, body)
	want, ok := refDecode(body, spec)
	if (err == nil) != ok {
		t.Fatalf("%s decoder on %q: error %v, but the reference decoding accepts it: %v", spec.name, body, err, ok)
	}
	if err != nil {
		checkDecodeError(t, spec, body, err)
	} else if !maps.Equal(got, want) {
		t.Fatalf("%s decoder on %q:\n got  %v\n want %v", spec.name, body, got, want)
	}

	if _, err := runDecoder(spec, []byte(spec.full)); err != nil {
		t.Fatalf("%s decoder on its full body: %v", spec.name, err)
	}
	again, err2 := runDecoder(spec, body)
	if errText(err) != errText(err2) || err == nil && !maps.Equal(got, again) {
		t.Fatalf("%s decoder on %q: first %v, %v; after another body %v, %v", spec.name, body, got, err, again, err2)
	}

	if err != nil {
		return
	}
	enc, err := json.Marshal(got)
	if err != nil {
		t.Fatalf("re-encoding %v: %v", got, err)
	}
	round, err := runDecoder(spec, enc)
	if err != nil || !maps.Equal(got, round) {
		t.Fatalf("%s decoder: %q decodes to %v, re-encoded as %s, which decodes to %v, %v", spec.name, body, got, enc, round, err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkDecodeError checks that a decoding error is invalid_request naming a field or the
// body (spec §3.3: the message names the field).
func checkDecodeError(t *testing.T, spec decoderSpec, body []byte, err error) {
	var e *engine.Error
	if !errors.As(err, &e) || e.Code != engine.CodeInvalidRequest || e.Unwrap() != nil {
		t.Fatalf("%s decoder on %q: error %#v is not a plain invalid_request *engine.Error", spec.name, body, err)
	}
	if !messageNamesFieldOrBody(e.Message, spec) {
		t.Fatalf("%s decoder on %q: message %q names neither a field nor the body", spec.name, body, e.Message)
	}
}

func messageNamesFieldOrBody(msg string, spec decoderSpec) bool {
	if strings.HasPrefix(msg, "request body ") || strings.HasPrefix(msg, `unknown field "`) {
		return true
	}
	for _, f := range spec.fields {
		if strings.HasPrefix(msg, f.name+" ") || strings.HasPrefix(msg, `duplicate field "`+f.name+`"`) {
			return true
		}
		// A field inside an array member: overrides[2].limit.
		if f.kind == kOverrides && (strings.HasPrefix(msg, f.name+"[") || strings.HasPrefix(msg, `duplicate field "`+f.name+`[`)) {
			return true
		}
	}
	return false
}

// specSeeds are bodies aimed at one decoder's own fields, besides decodeSeeds.
var specSeeds = map[string][]string{
	"check": {
		`{"namespace":"api","key":"user-42","algorithm":"sliding_window","limit":100,"window_ms":60000,"cost":0}`,
		`{"namespace":"api","key":"\u00e9\u2028\ud83d\ude00","limit":9223372036854775807}`,
		`{"namespace":null,"key":null,"algorithm":null,"limit":null,"window_ms":null,"cost":null}`,
		`{"cost":9223372036854775808}`, `{"Namespace":"api"}`, `{"namespace":"api","name":"x"}`,
	},
	"acquire": {
		`{"namespace":"jobs","key":"worker","limit":2,"window_ms":30000}`,
		`{"namespace":"jobs","key":"w","cost":1}`, `{"namespace":"jobs","algorithm":"concurrent_limit"}`,
	},
	"renew": {
		`{"window_ms":30000}`, `{"window_ms":null}`, `{}`, ` `, `{"window_ms":1,"window_ms":2}`, `{"limit":1}`,
	},
	"rule": {
		`{"algorithm":"token_bucket","limit":100,"window_ms":1000,"name":"default"}`,
		`{"algorithm":"concurrent_limit","limit":2,"window_ms":30000,"name":null,"namespace":"ignored"}`,
		`{"limit":99999999999999999999,"window_ms":18446744073709551616}`, `{"limit":-99999999999999999999}`,
		`{"namespace":5}`, `{"namespace":null}`, `{"name":""}`, `{"name":"\ud800"}`, `{"limit":1e2}`,
		`{"algorithm":"fixed_window","limit":1,"window_ms":1,"overrides":[{"key":"gold","limit":10},{"key":"k\u00e9","limit":2,"window_ms":60000}]}`,
		`{"overrides":null}`, `{"overrides":[]}`, `{"overrides":{}}`, `{"overrides":[null]}`, `{"overrides":[1,{}]}`,
		`{"overrides":[{"key":null,"limit":null,"window_ms":null}]}`, `{"overrides":[{"key":"a","key":"b"}]}`,
		`{"overrides":[{"key":"a","bogus":1}]}`, `{"overrides":[{"limit":-1}]}`, `{"overrides":[{"limit":1.5}]}`,
		`{"overrides":[{"limit":99999999999999999999}]}`, `{"overrides":[{"key":5}]}`, `{"overrides":[{"key":"\ud800"}]}`,
		"{\"overrides\":[{\"k\xffy\":1}]}", `{"overrides":[{"key":"a"}],"overrides":[]}`, `{"overrides":[{"key":"a"},]}`,
		`{"overrides":[{"key":"a"}] x}`, `{"overrides":[[]]}`, `{"Overrides":[]}`,
	},
	"webhook": {
		`{"url":"https://hooks.example.com/leash"}`, `{"url":null}`, `{}`, `{"url":""}`, `{"url":5}`,
		`{"url":"https://a.example/","url":"https://b.example/"}`, `{"URL":"https://a.example/"}`,
		`{"url":"https://a.example/","secret":"s"}`, "{\"url\":\"https://a.example/\xff\"}",
	},
}

// fuzzDecoder is the fuzz target of one decoder.
func fuzzDecoder(f *testing.F, spec decoderSpec) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	for _, s := range specSeeds[spec.name] {
		f.Add([]byte(s))
	}
	f.Add([]byte(spec.full))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecoder(t, spec, body)
	})
}

// FuzzDecodeCheck checks the POST /v1/limit and /v1/limit/reset body decoder.
func FuzzDecodeCheck(f *testing.F) { fuzzDecoder(f, checkSpec) }

// FuzzDecodeAcquire checks the POST /v1/leases body decoder.
func FuzzDecodeAcquire(f *testing.F) { fuzzDecoder(f, acquireSpec) }

// FuzzDecodeRenew checks the POST /v1/leases/{id}/renew body decoder.
func FuzzDecodeRenew(f *testing.F) { fuzzDecoder(f, renewSpec) }

// FuzzDecodeRule checks the POST /v1/namespaces/{ns}/rules body decoder.
func FuzzDecodeRule(f *testing.F) { fuzzDecoder(f, ruleSpec) }

// FuzzDecodeWebhook checks the PUT /v1/webhook body decoder.
func FuzzDecodeWebhook(f *testing.F) { fuzzDecoder(f, webhookSpec) }
