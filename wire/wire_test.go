package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/wire"
)

// TestStdlibOnly: the client imports this package, and the client compiles no engine,
// store, grpc, viper, prometheus or k8s package, nor anything outside the standard library.
func TestStdlibOnly(t *testing.T) {
	testkit.StdlibOnly(t, "github.com/leashd/leash/wire")
}

// TestOptionalEncoding: with encoding/json, the client's encoder, an unset member is left
// out, a set one is written even when zero, and decoding gives back what was encoded.
func TestOptionalEncoding(t *testing.T) {
	for _, c := range []struct {
		req  wire.LimitRequest
		want string
	}{
		{wire.LimitRequest{Namespace: "api", Key: "k"}, `{"namespace":"api","key":"k"}`},
		{wire.LimitRequest{Namespace: "api", Key: "k", Algorithm: wire.Some(""), Cost: wire.Some[int64](0), Overdraft: true},
			`{"namespace":"api","key":"k","algorithm":"","cost":0,"overdraft":true}`},
		{wire.LimitRequest{Namespace: "api", Key: "k", Limit: wire.SomePtr(new(int64(7))), WindowMS: wire.SomePtr[int64](nil)},
			`{"namespace":"api","key":"k","limit":7}`},
	} {
		b, err := json.Marshal(c.req)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%+v encodes %s, want %s", c.req, b, c.want)
		}
		var back wire.LimitRequest
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != c.req {
			t.Errorf("%s decodes to %+v, want %+v", b, back, c.req)
		}
	}
	var r wire.RenewRequest
	if err := json.Unmarshal([]byte(`{"window_ms":null}`), &r); err != nil || r.WindowMS.Set || r.WindowMS.Ptr() != nil {
		t.Fatalf("null decodes to %+v (%v), want unset", r, err)
	}
	if err := json.Unmarshal([]byte(`{"window_ms":5}`), &r); err != nil || *r.WindowMS.Ptr() != 5 {
		t.Fatalf("5 decodes to %+v (%v)", r, err)
	}
}
