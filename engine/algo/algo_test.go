package algo

import (
	"math"
	"math/rand/v2"
	"testing"
)

// base is a Unix-ms instant that is a multiple of 1000 (and of 60000).
const base int64 = 1_800_000_000_000

// big window/limit corner.
const (
	bigL = MaxLimit
	bigW = MaxWindowMS
)

func TestFixedWindowTable(t *testing.T) {
	w0 := base / 1000
	tests := []struct {
		name      string
		s         FixedState
		now, L, W int64
		c         int64
		allowed   bool
		remaining int64
		reset     int64
		write     bool
		expires   int64
		count     int64
	}{
		{"fresh spend", FixedState{}, base + 250, 3, 1000, 1, true, 2, 750, true, base + 1000, 1},
		{"at limit denied", FixedState{w0, 3}, base + 250, 3, 1000, 1, false, 0, 750, false, base + 1000, 3},
		{"cost 0 at limit", FixedState{w0, 3}, base + 250, 3, 1000, 0, true, 0, 750, false, base + 1000, 3},
		{"cost 0 fresh", FixedState{}, base + 250, 3, 1000, 0, true, 3, 0, false, base + 1000, 0},
		{"cost 0 over lowered limit", FixedState{w0, 5}, base + 250, 3, 1000, 0, false, 0, 750, false, base + 1000, 5},
		{"previous window is forgotten", FixedState{w0 - 1, 3}, base + 250, 3, 1000, 1, true, 2, 750, true, base + 1000, 1},
		{"cost above remaining", FixedState{w0, 7}, base + 250, 10, 1000, 4, false, 3, 750, false, base + 1000, 7},
		{"cost equal remaining", FixedState{w0, 7}, base + 250, 10, 1000, 3, true, 0, 750, true, base + 1000, 10},
		{"last ms of window", FixedState{w0, 3}, base + 999, 3, 1000, 1, false, 0, 1, false, base + 1000, 3},
		{"next window", FixedState{w0, 3}, base + 1000, 3, 1000, 1, true, 2, 1000, true, base + 2000, 1},
		// 1_800_000_001_000 = 257142857·7000 + 2000.
		{"epoch alignment W=7000", FixedState{}, 1_800_000_001_000, 2, 7000, 2, true, 0, 5000, true, 1_800_000_006_000, 2},
		// w = 56, window [1_770_854_400_000, 1_802_476_800_000).
		{"big full spend", FixedState{}, base, bigL, bigW, bigL, true, 0, 2_476_800_000, true, 1_802_476_800_000, bigL},
		{"big denied", FixedState{56, bigL}, base, bigL, bigW, 1, false, 0, 2_476_800_000, false, 1_802_476_800_000, bigL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, r := FixedWindow(tt.s, tt.now, tt.L, tt.W, tt.c)
			if r.Allowed != tt.allowed || r.Remaining != tt.remaining || r.ResetMS != tt.reset || r.Write != tt.write {
				t.Fatalf("got allowed=%v remaining=%d reset=%d write=%v, want %v %d %d %v",
					r.Allowed, r.Remaining, r.ResetMS, r.Write, tt.allowed, tt.remaining, tt.reset, tt.write)
			}
			if r.ExpiresMS != tt.expires || s.Count != tt.count {
				t.Fatalf("got expires=%d count=%d, want %d %d", r.ExpiresMS, s.Count, tt.expires, tt.count)
			}
		})
	}
}

func TestSlidingWindowTable(t *testing.T) {
	w0 := base / 1000
	tests := []struct {
		name      string
		s         SlidingState
		now, L, W int64
		c         int64
		allowed   bool
		remaining int64
		reset     int64
		write     bool
		want      SlidingState
	}{
		{"fresh spend", SlidingState{}, base + 100, 10, 1000, 4, true, 6, 1900, true, SlidingState{w0, 4, 0}},
		// t=250: P = ceil(4·750/1000) = 3.
		{"rollover t=250", SlidingState{w0, 4, 0}, base + 1250, 10, 1000, 0, true, 7, 750, false, SlidingState{w0 + 1, 0, 4}},
		// t=300: ceil(2.8) = 3; t=500: ceil(2) = 2; t=501: ceil(1.996) = 2; t=750: 1; t=999: ceil(0.004) = 1.
		{"ceil t=300", SlidingState{w0, 4, 0}, base + 1300, 10, 1000, 0, true, 7, 700, false, SlidingState{w0 + 1, 0, 4}},
		{"exact t=500", SlidingState{w0, 4, 0}, base + 1500, 10, 1000, 0, true, 8, 500, false, SlidingState{w0 + 1, 0, 4}},
		{"ceil t=501", SlidingState{w0, 4, 0}, base + 1501, 10, 1000, 0, true, 8, 499, false, SlidingState{w0 + 1, 0, 4}},
		{"exact t=750", SlidingState{w0, 4, 0}, base + 1750, 10, 1000, 0, true, 9, 250, false, SlidingState{w0 + 1, 0, 4}},
		{"ceil t=999", SlidingState{w0, 4, 0}, base + 1999, 10, 1000, 0, true, 9, 1, false, SlidingState{w0 + 1, 0, 4}},
		{"two windows later", SlidingState{w0, 4, 0}, base + 2000, 10, 1000, 0, true, 10, 0, false, SlidingState{w0 + 2, 0, 0}},
		// P = ceil(10·800/1000) = 8; R = 7, floor(7000/10) = 700, d = 800-700 = 100.
		{"denied phase 1", SlidingState{w0 + 1, 2, 10}, base + 1200, 10, 1000, 1, false, 0, 100, false, SlidingState{w0 + 1, 2, 10}},
		{"at limit allowed", SlidingState{w0 + 1, 2, 10}, base + 1200, 10, 1000, 0, true, 0, 1800, false, SlidingState{w0 + 1, 2, 10}},
		// P = ceil(3·900/1000) = 3; R = 5-1-2 = 2; floor(2000/3) = 666; d = 900-666 = 234.
		{"denied phase 1 ceiling", SlidingState{w0, 1, 3}, base + 100, 5, 1000, 2, false, 1, 234, false, SlidingState{w0, 1, 3}},
		// R = -1: phase 2: d0 = 500; floor(5·1000/6) = 833; d' = 167.
		{"denied phase 2", SlidingState{w0, 6, 0}, base + 500, 10, 1000, 5, false, 4, 667, false, SlidingState{w0, 6, 0}},
		// P = ceil(2.4) = 3; R = 0 gives d = 600 = W-t: phase 2 with d' = 0.
		{"denied phase 1 fails", SlidingState{w0 + 1, 6, 4}, base + 1400, 10, 1000, 4, false, 1, 600, false, SlidingState{w0 + 1, 6, 4}},
		// w = 56, t = 29_145_600_000, W-t = 2_476_800_000; P = ceil(1e9·43/549) = 78_324_226.
		{"big estimate", SlidingState{55, bigL, 0}, base, bigL, bigW, 0, true, 921_675_774, 2_476_800_000, false, SlidingState{56, 0, bigL}},
		{"big spend", SlidingState{55, bigL, 0}, base, bigL, bigW, 921_675_774, true, 0, 2_476_800_000 + bigW, true, SlidingState{56, 921_675_774, bigL}},
		// R = 78_324_225; floor(R·W/1e9) = 2_476_799_972; d = 28.
		{"big denied", SlidingState{56, 921_675_774, bigL}, base, bigL, bigW, 1, false, 0, 28, false, SlidingState{56, 921_675_774, bigL}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, r := SlidingWindow(tt.s, tt.now, tt.L, tt.W, tt.c)
			if r.Allowed != tt.allowed || r.Remaining != tt.remaining || r.ResetMS != tt.reset || r.Write != tt.write {
				t.Fatalf("got allowed=%v remaining=%d reset=%d write=%v, want %v %d %d %v",
					r.Allowed, r.Remaining, r.ResetMS, r.Write, tt.allowed, tt.remaining, tt.reset, tt.write)
			}
			if s != tt.want {
				t.Fatalf("got state %+v, want %+v", s, tt.want)
			}
			if want := (s.Window + 2) * tt.W; r.ExpiresMS != want {
				t.Fatalf("expires %d, want %d", r.ExpiresMS, want)
			}
		})
	}
}

func TestTokenBucketTable(t *testing.T) {
	full := BucketState{}
	tests := []struct {
		name      string
		s         BucketState
		now, L, W int64
		c         int64
		allowed   bool
		remaining int64
		reset     int64
		write     bool
		want      BucketState
		expires   int64
	}{
		{"fresh 1", full, base, 10, 1000, 1, true, 9, 100, true, BucketState{base + 100, 0, 10}, base + 100},
		{"fresh all", full, base, 10, 1000, 10, true, 0, 1000, true, BucketState{base + 1000, 0, 10}, base + 1000},
		{"empty denied", BucketState{base + 1000, 0, 10}, base, 10, 1000, 1, false, 0, 100, false, BucketState{base + 1000, 0, 10}, base + 1000},
		{"half a token", BucketState{base + 1000, 0, 10}, base + 50, 10, 1000, 1, false, 0, 50, false, BucketState{base + 1000, 0, 10}, base + 1000},
		{"one token back", BucketState{base + 1000, 0, 10}, base + 100, 10, 1000, 1, true, 0, 1000, true, BucketState{base + 1100, 0, 10}, base + 1100},
		{"partial refill", BucketState{base + 1000, 0, 10}, base + 250, 10, 1000, 0, true, 2, 750, false, BucketState{base + 1000, 0, 10}, base + 1000},
		{"full again", BucketState{base + 1000, 0, 10}, base + 1000, 10, 1000, 0, true, 10, 0, false, BucketState{base + 1000, 0, 10}, base + 1000},
		{"cost above remaining", BucketState{base + 1000, 0, 10}, base + 250, 10, 1000, 3, false, 2, 50, false, BucketState{base + 1000, 0, 10}, base + 1000},
		// L=3, W=1000: one unit is 333⅓ ms.
		{"thirds 1", full, base, 3, 1000, 1, true, 2, 334, true, BucketState{base + 333, 1, 3}, base + 334},
		{"thirds 2", BucketState{base + 333, 1, 3}, base, 3, 1000, 1, true, 1, 667, true, BucketState{base + 666, 2, 3}, base + 667},
		{"thirds 3", BucketState{base + 666, 2, 3}, base, 3, 1000, 1, true, 0, 1000, true, BucketState{base + 1000, 0, 3}, base + 1000},
		{"thirds denied", BucketState{base + 1000, 0, 3}, base, 3, 1000, 1, false, 0, 334, false, BucketState{base + 1000, 0, 3}, base + 1000},
		{"thirds almost", BucketState{base + 1000, 0, 3}, base + 333, 3, 1000, 1, false, 0, 1, false, BucketState{base + 1000, 0, 3}, base + 1000},
		{"thirds refilled", BucketState{base + 1000, 0, 3}, base + 334, 3, 1000, 1, true, 0, 1000, true, BucketState{base + 1333, 1, 3}, base + 1334},
		{"thirds cost 2", full, base, 3, 1000, 2, true, 1, 667, true, BucketState{base + 666, 2, 3}, base + 667},
		// Debt 500 ms at L=10 is 5 units; at L=20 it is 250 ms.
		{"limit raised", BucketState{base + 1000, 0, 10}, base + 500, 20, 1000, 0, true, 15, 250, true, BucketState{base + 750, 0, 20}, base + 750},
		// 250·20/4 = 1250 > W: the bucket is empty.
		{"limit lowered below spent", BucketState{base + 750, 0, 20}, base + 500, 4, 1000, 0, true, 0, 1000, true, BucketState{base + 1500, 0, 4}, base + 1500},
		{"limit lowered denied", BucketState{base + 750, 0, 20}, base + 500, 4, 1000, 1, false, 0, 250, true, BucketState{base + 1500, 0, 4}, base + 1500},
		// 500·10/30 = 166⅔ ms; 5 of 30 units spent.
		{"limit to thirds", BucketState{base + 1000, 0, 10}, base + 500, 30, 1000, 0, true, 25, 167, true, BucketState{base + 666, 20, 30}, base + 667},
		{"limit changed on full bucket", BucketState{base + 400, 0, 10}, base + 500, 30, 1000, 0, true, 30, 0, false, BucketState{base + 500, 0, 30}, base + 500},
		// One unit is 31.6224 ms = 31 + 622_400_000/1e9.
		{"big 1", full, base, bigL, bigW, 1, true, bigL - 1, 32, true, BucketState{base + 31, 622_400_000, bigL}, base + 32},
		{"big all", full, base, bigL, bigW, bigL, true, 0, bigW, true, BucketState{base + bigW, 0, bigL}, base + bigW},
		{"big denied", BucketState{base + bigW, 0, bigL}, base, bigL, bigW, 1, false, 0, 32, false, BucketState{base + bigW, 0, bigL}, base + bigW},
		{"big lowered to 1", BucketState{base + bigW, 0, bigL}, base, 1, bigW, 0, true, 0, bigW, true, BucketState{base + bigW, 0, 1}, base + bigW},
		{"big raised from 1", BucketState{base + bigW, 0, 1}, base, bigL, bigW, 0, true, bigL - 1, 32, true, BucketState{base + 31, 622_400_000, bigL}, base + 32},
		// The debt of 1500 ms is kept (up to MaxDebtWindows windows): a look is denied until
		// it is back to W.
		{"clock stepped back", BucketState{base + 1000, 0, 10}, base - 500, 10, 1000, 0, false, 0, 500, false, BucketState{base + 1000, 0, 10}, base + 1000},
		{"clock stepped back past the cap", BucketState{base + 2_000_000, 0, 10}, base - 500, 10, 1000, 1, false, 0, 1_000_100 - 1000, false, BucketState{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, r := TokenBucket(tt.s, tt.now, tt.L, tt.W, tt.c)
			if r.Allowed != tt.allowed || r.Remaining != tt.remaining || r.ResetMS != tt.reset || r.Write != tt.write {
				t.Fatalf("got allowed=%v remaining=%d reset=%d write=%v, want %v %d %d %v",
					r.Allowed, r.Remaining, r.ResetMS, r.Write, tt.allowed, tt.remaining, tt.reset, tt.write)
			}
			if tt.write || tt.allowed && tt.c == 0 && s.TatMS > tt.now {
				if s != tt.want || r.ExpiresMS != tt.expires {
					t.Fatalf("got state %+v expires %d, want %+v %d", s, r.ExpiresMS, tt.want, tt.expires)
				}
			}
		})
	}
}

func TestMulDiv(t *testing.T) {
	tests := []struct{ a, b, d, q, r int64 }{
		{0, 5, 3, 0, 0},
		{7, 5, 3, 11, 2},
		{bigL, bigW, bigW, bigL, 0},
		{bigL, bigW, 1 << 34, 1_840_665_936, 8_075_083_776},
		{1 << 40, 1 << 40, 1 << 30, 1 << 50, 0},
		{bigL, bigW, 1, math.MaxInt64, 0}, // 3.16e19 does not fit: saturates
	}
	for _, tt := range tests {
		q, r := MulDiv(tt.a, tt.b, tt.d)
		if q != tt.q || r != tt.r {
			t.Errorf("MulDiv(%d, %d, %d) = %d, %d; want %d, %d", tt.a, tt.b, tt.d, q, r, tt.q, tt.r)
		}
	}
}

// TestMulDivLimbs checks the Lua arithmetic against the 128-bit one over its whole domain.
func TestMulDivLimbs(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	edges := func(max int64) int64 {
		switch rng.IntN(6) {
		case 0:
			return max - 1
		case 1:
			return 0
		case 2:
			return rng.Int64N(1 << 17)
		default:
			return rng.Int64N(max)
		}
	}
	for i := 0; i < 200_000; i++ {
		bmax := int64(1 << 36)
		if i%2 == 1 {
			bmax = 1 << 53
		}
		a, b, d := edges(1<<31), edges(bmax), 1+edges(1<<35-1)
		want, wr := MulDiv(a, b, d)
		if want >= 1<<53 {
			continue
		}
		q, r := MulDivLimbs(a, b, d)
		if q != want || r != wr {
			t.Fatalf("MulDivLimbs(%d, %d, %d) = %d, %d; want %d, %d", a, b, d, q, r, want, wr)
		}
	}
}

func TestFloorDiv(t *testing.T) {
	for _, tt := range []struct{ a, b, q int64 }{{7, 2, 3}, {-7, 2, -4}, {-8, 2, -4}, {0, 5, 0}, {-1, 1000, -1}} {
		if q := floorDiv(tt.a, tt.b); q != tt.q {
			t.Errorf("floorDiv(%d, %d) = %d, want %d", tt.a, tt.b, q, tt.q)
		}
	}
}

func BenchmarkAlgorithms(b *testing.B) {
	b.Run("fixed", func(b *testing.B) {
		s := FixedState{}
		for i := 0; b.Loop(); i++ {
			s, _ = FixedWindow(s, base+int64(i), 1_000_000_000, 60_000, 1)
		}
	})
	b.Run("sliding", func(b *testing.B) {
		s := SlidingState{}
		for i := 0; b.Loop(); i++ {
			s, _ = SlidingWindow(s, base+int64(i), 1_000_000_000, 60_000, 1)
		}
	})
	b.Run("bucket", func(b *testing.B) {
		s := BucketState{}
		for i := 0; b.Loop(); i++ {
			s, _ = TokenBucket(s, base+int64(i), 1_000_000_000, 60_000, 1)
		}
	})
}
