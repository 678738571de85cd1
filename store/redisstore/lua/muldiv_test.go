package lua

import (
	"context"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/testkit/redistest"
)

// TestLuaMulDiv checks prelude.lua's muldiv, floor(a·b/d) and a·b mod d, against exact
// integers where its two roads meet, for 0 ≤ a < 2^31, 0 ≤ b < 2^53, 1 ≤ d < 2^35 and a
// quotient below 2^53:
// products just below, at and above 2^53 (one
// division of the exact double product below, limbs from there on), and at random.
func TestLuaMulDiv(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	lua := redis.NewScript(luaPrelude + `
local out = {}
for i = 1, #ARGV, 3 do
  local q, r = muldiv(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))
  out[#out + 1] = int(q)
  out[#out + 1] = int(r)
end
return out`)
	const two53 = int64(1) << 53
	type tc struct{ a, b, d int64 }
	var cases []tc
	for _, a := range []int64{1, 3, 1_000_000_007, 1<<31 - 1} {
		for _, delta := range []int64{-2, -1, 0, 1, 2} {
			b := two53/a + delta
			if b >= two53 {
				continue // outside muldiv's range (b < 2^53)
			}
			for _, d := range []int64{1, 7, 60_000, 1<<35 - 1} {
				cases = append(cases, tc{a, b, d})
			}
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		cases = append(cases, tc{rng.Int64N(1 << 31), rng.Int64N(two53), 1 + rng.Int64N(1<<35-1)})
	}
	// The quotient must be a double too: below 2^53.
	limit := big.NewInt(two53)
	kept := cases[:0]
	for _, c := range cases {
		if new(big.Int).Quo(new(big.Int).Mul(big.NewInt(c.a), big.NewInt(c.b)), big.NewInt(c.d)).Cmp(limit) < 0 {
			kept = append(kept, c)
		}
	}
	cases = kept
	var args []any
	for _, c := range cases {
		args = append(args, c.a, c.b, c.d)
	}
	got, err := lua.Run(context.Background(), client, nil, args...).StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		q, r := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(c.a), big.NewInt(c.b)), big.NewInt(c.d), new(big.Int))
		if got[2*i] != q.String() || got[2*i+1] != r.String() {
			t.Fatalf("muldiv(%d, %d, %d) = %s, %s; want %s, %s", c.a, c.b, c.d, got[2*i], got[2*i+1], q, r)
		}
	}
	t.Logf("%d cases", len(cases))
}
