package rlqs

import (
	"math"
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

func TestShare(t *testing.T) {
	cases := []struct {
		name   string
		budget float64
		wants  []float64
		want   []float64
	}{
		{"10/100/1000 against 60/s", 60, []float64{11, 110, 1100}, []float64{11, 24.5, 24.5}},
		{"all quiet: the floor, then proportion", 60, []float64{0, 0, 0}, []float64{20, 20, 20}},
		{"a new stream gets at least the floor", 60, []float64{0, 1000, 1000}, []float64{2, 29, 29}},
		{"wants under the budget: the rest in proportion", 100, []float64{10, 30}, []float64{25, 75}},
		{"alone", 60, []float64{1000}, []float64{60}},
		{"no budget", 0, []float64{5, 5}, []float64{0, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sum := 0.0
			for i := range tc.wants {
				got := Share(tc.budget, tc.wants, i)
				sum += got
				if math.Abs(got-tc.want[i]) > 1e-9 {
					t.Errorf("share %d = %v, want %v", i, got, tc.want[i])
				}
			}
			if math.Abs(sum-tc.budget) > 1e-9 {
				t.Errorf("shares add up to %v, want %v", sum, tc.budget)
			}
		})
	}
	if Share(60, []float64{1}, 1) != 0 || Share(60, nil, 0) != 0 {
		t.Error("an index out of range has a share")
	}
}

func TestTokenBucket(t *testing.T) {
	for _, rate := range []float64{0.001, 0.5, 1, 24.5, 1000, 1500, 1e6} {
		s := TokenBucket(rate, 100*time.Millisecond)
		if got := RateOf(s); math.Abs(got-rate)/rate > 1e-6 {
			t.Errorf("rate %v: sent %v (%v)", rate, got, s)
		}
		tb := s.GetTokenBucket()
		if tb.GetMaxTokens() < tb.GetTokensPerFill().GetValue() || tb.GetFillInterval().AsDuration() < time.Millisecond {
			t.Errorf("rate %v: %v", rate, tb)
		}
		if err := s.ValidateAll(); err != nil {
			t.Errorf("rate %v: %v", rate, err)
		}
	}
	if s := TokenBucket(1.0/7200, time.Second); s.GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL || s.GetTokenBucket() != nil {
		t.Errorf("a rate below one per hour: %v", s)
	}
	if !changed(nil, TokenBucket(1, 0)) || changed(TokenBucket(10, 0), TokenBucket(10.5, 0)) || !changed(TokenBucket(10, 0), TokenBucket(12, 0)) ||
		!changed(TokenBucket(10, 0), Blanket(typev3.RateLimitStrategy_DENY_ALL)) || changed(Blanket(typev3.RateLimitStrategy_ALLOW_ALL), Blanket(typev3.RateLimitStrategy_ALLOW_ALL)) {
		t.Error("changed")
	}
}

func TestSmooth(t *testing.T) {
	iv := 100 * time.Millisecond
	if got := smooth(-1, 7, iv, iv); got != 7 {
		t.Errorf("first measure: %v", got)
	}
	if got := smooth(10, 20, iv, iv); got != 15 {
		t.Errorf("a higher measure: %v", got)
	}
	// A lower one decays: one interval moves it 1-e^-1/5 ≈ 18 % of the way.
	if got := smooth(10, 0, iv, iv); math.Abs(got-10*math.Exp(-0.2)) > 1e-9 {
		t.Errorf("a lower measure: %v", got)
	}
	est := 10.0
	for range 50 { // 50 empty intervals: nearly gone
		est = smooth(est, 0, iv, iv)
	}
	if est > 0.001 {
		t.Errorf("after 50 empty intervals: %v", est)
	}
}
