package httpapi

import (
	"math"
	"testing"
)

func TestParseInt(t *testing.T) {
	tests := []struct {
		in    string
		n     int64
		class intClass
	}{
		{"0", 0, intOK},
		{"-0", 0, intOK},
		{"7", 7, intOK},
		{"9223372036854775807", math.MaxInt64, intOK},
		{"9223372036854775808", 0, intTooBig},
		{"18446744073709551616", 0, intTooBig},
		{"123456789012345678901234567890", 0, intTooBig},
		{"-1", 0, intNegative},
		{"-9223372036854775808", 0, intNegative},
		{"-99999999999999999999", 0, intNegative},
		{"1.0", 0, intFraction},
		{"1e3", 0, intFraction},
		{"1E3", 0, intFraction},
		{"-1.5", 0, intFraction},
		{"0.5", 0, intFraction},
		{"99999999999999999999.5", 0, intFraction},
		{"99999999999999999999e1", 0, intFraction},
	}
	for _, tt := range tests {
		n, class := parseInt([]byte(tt.in))
		if n != tt.n || class != tt.class {
			t.Errorf("parseInt(%s) = %d, %d; want %d, %d", tt.in, n, class, tt.n, tt.class)
		}
	}
}

// decodeSeeds are bodies of every shape: valid, each field error, syntax errors.
var decodeSeeds = []string{
	`{"namespace":"ns","key":"k","algorithm":"fixed_window","limit":10,"window_ms":1000,"cost":1}`,
	` { "namespace" : "ns" , "key" : "k\u00e9\n" , "limit" : null , "cost" : 0 } `,
	`{"namespace":"ns","key":"k","limit":1} {}`,
	`{"namespace":"ns","key":"k","limit":1}x`,
	`{"namespace":"ns","bogus":{"a":[1,{"b":"}"}]},"key":"k"}`,
	`{"namespace":"ns","key":{"a":[1,{"b":"}"}]}}`,
	`{"namespace":"ns","key":["]",2]}`,
	`{"namespace":"ns","key":"a","k\u0065y":"b"}`,
	`{"limit":1.5}`, `{"limit":-1}`, `{"limit":1e400}`, `{"limit":99999999999999999999}`,
	`{"limit":true}`, `{"limit":"1"}`, `{"cost":-0}`, `{"window_ms":[]}`,
	`{"algorithm":"token_bucket"}`, `{"algorithm":"x\"y"}`, `{"algorithm":5}`,
	"{\"key\":\"a\xffb\"}", `{"key":"\ud800"}`, `{"key":"\ud83d\ude00"}`,
	`{"namespace":`, `{"namespace":"ns",}`, `{"namespace" "ns"}`, `{"limit":01}`, `{`, `}`, `[]`, `null`, `"s"`, `12`,
	`{"a\"b":1}`, `{}`, `{} `, "{}\n", `{"namespace":"ns","namespace":"ns"}`,
	`{"limit":1,"bogus":}`, `{"bogus":1,"limit":}`,
}
