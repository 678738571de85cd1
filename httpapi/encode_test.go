package httpapi

import (
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/leashd/leash/wire"
)

// The hand-written /v1/limit reply is byte for byte what the library writes.
func TestAppendLimitReplyMatchesLibrary(t *testing.T) {
	vals := []int64{0, 1, 9, 10, 999, 1000000000, 31622400000, math.MaxInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		vals = append(vals, rng.Int64())
	}
	for i, v := range vals {
		d := wire.LimitResult{Allowed: i%2 == 0, Limit: v, Remaining: vals[(i+1)%len(vals)], ResetMS: vals[(i+2)%len(vals)]}
		want, err := json.Marshal(&d, encodeOptions)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendLimitReply(nil, &d); string(got) != string(want) {
			t.Fatalf("appendLimitReply(%+v) = %s, want %s", d, got, want)
		}
	}
}

// BenchmarkLimitReply compares the library's encoding of the /v1/limit reply with the
// hand-written one the route uses (docs/performance.md):
//
//	go test -run='^$' -bench=LimitReply -benchmem ./httpapi/
func BenchmarkLimitReply(b *testing.B) {
	d := &wire.LimitResult{Allowed: true, Limit: 1000000000, Remaining: 999999958, ResetMS: 41234}
	b.Run("library", func(b *testing.B) {
		var x exchange
		b.ReportAllocs()
		for b.Loop() {
			x.out.Reset()
			if err := json.MarshalWrite(&x.out, d, encodeOptions); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hand", func(b *testing.B) {
		var x exchange
		b.ReportAllocs()
		for b.Loop() {
			x.out.Reset()
			x.out.Write(appendLimitReply(x.out.AvailableBuffer(), d))
		}
	})
}

// BenchmarkDecodeLimitBody measures decoding the /v1/limit body with the library and the
// unmarshalers of package wire's member types (docs/performance.md).
func BenchmarkDecodeLimitBody(b *testing.B) {
	body := []byte(`{"namespace":"bench","key":"user-42","algorithm":"fixed_window","limit":1000000000,"window_ms":60000}`)
	var req wire.LimitRequest
	b.ReportAllocs()
	for b.Loop() {
		req = wire.LimitRequest{}
		if err := decodeBody(body, &req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteLimit measures net/http's ServeMux finding POST /v1/limit among the API's
// routes, the routing the API does per request (docs/performance.md).
func BenchmarkRouteLimit(b *testing.B) {
	mux := http.NewServeMux()
	a := &API{}
	for _, rt := range routeTable() {
		a.register(mux, &rt)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/limit", nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, p := mux.Handler(r); p != "POST /v1/limit" {
			b.Fatal(p)
		}
	}
}
