package rlqs

import (
	"math"
	"slices"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Dividing a bucket's budget among the streams that report it (spec §14.4).
const (
	// Headroom multiplies a stream's measured demand into what it asks for, so a stream
	// whose demand grows is not held at its last rate.
	Headroom = 1.1
	// FloorShare is the part of the budget reserved, in equal floors, for every stream:
	// a new or quiet stream gets at least FloorShare × budget / streams.
	FloorShare = 0.1
	// ClampRatio is how far below the steady pace a fixed window's remaining pace must
	// fall before it lowers the budget.
	ClampRatio = 0.75
	// DemandDecay is the time constant, in reporting intervals, with which a stream's
	// demand estimate falls to a lower measure.
	DemandDecay = 5
	// ChangeRatio is the relative change of a stream's rate that is pushed at once; a
	// smaller change waits for the assignment's refresh.
	ChangeRatio = 0.1
)

// Share returns stream own's share (requests per second) of budget among the wants of
// every stream (own among them, at index own): a max-min fair division (water-filling)
// in which every want is at least the floor FloorShare × budget / len(wants). A stream
// asking less than its fair part gets its want; the rest is split evenly among the
// others, again up to their wants; what no stream wants is then given out in
// proportion to the wants, so the shares always add up to budget.
func Share(budget float64, wants []float64, own int) float64 {
	n := len(wants)
	if n == 0 || budget <= 0 || own < 0 || own >= n {
		return 0
	}
	floor := FloorShare * budget / float64(n)
	w := make([]float64, n)
	for i, x := range wants {
		if math.IsNaN(x) || x < floor {
			x = floor
		}
		w[i] = x
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case w[a] < w[b]:
			return -1
		case w[a] > w[b]:
			return 1
		}
		return a - b
	})
	left := budget
	level := math.Inf(1) // the water level: every want above it gets it
	for k, i := range order {
		fair := left / float64(n-k)
		if w[i] > fair {
			level = fair
			break
		}
		left -= w[i]
	}
	if !math.IsInf(level, 1) {
		return min(w[own], level)
	}
	// Every want is met: give out the rest in proportion to the wants.
	total := 0.0
	for _, x := range w {
		total += x
	}
	return w[own] + left*w[own]/total
}

// Token buckets as assignments (spec §14.5).
const (
	// MaxFill is the longest fill interval sent; a smaller rate is sent as DENY_ALL.
	MaxFill = time.Hour
	// minFill is the shortest fill interval sent: above 1000 requests/s several tokens
	// come per fill.
	minFill = time.Millisecond
)

// TokenBucket returns the token_bucket strategy of rate requests per second with a
// burst of about burst seconds' worth (at least one fill), or DENY_ALL for a rate of
// no request per MaxFill. tokens_per_fill / fill_interval is rate to the nanosecond.
func TokenBucket(rate float64, burst time.Duration) *typev3.RateLimitStrategy {
	if !(rate*MaxFill.Seconds() >= 1) {
		return Blanket(typev3.RateLimitStrategy_DENY_ALL)
	}
	per := max(1, math.Ceil(rate*minFill.Seconds()))
	per = min(per, math.MaxUint32)
	fill := time.Duration(per / rate * float64(time.Second))
	maxTokens := min(max(per, math.Ceil(rate*burst.Seconds())), math.MaxUint32)
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
		MaxTokens:     uint32(maxTokens),
		TokensPerFill: wrapperspb.UInt32(uint32(per)),
		FillInterval:  durationpb.New(fill),
	}}}
}

// Blanket returns ALLOW_ALL or DENY_ALL.
func Blanket(r typev3.RateLimitStrategy_BlanketRule) *typev3.RateLimitStrategy {
	return &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: r}}
}

// RateOf returns the rate of a token_bucket strategy in requests per second, 0 for
// anything else.
func RateOf(s *typev3.RateLimitStrategy) float64 {
	tb := s.GetTokenBucket()
	if tb == nil {
		return 0
	}
	fill := tb.GetFillInterval().AsDuration()
	if fill <= 0 {
		return 0
	}
	per := uint32(1)
	if v := tb.GetTokensPerFill(); v != nil {
		per = v.GetValue()
	}
	return float64(per) / fill.Seconds()
}

// changed reports whether next differs materially from sent (spec §14.5): another kind
// of strategy, or a rate more than ChangeRatio away.
func changed(sent, next *typev3.RateLimitStrategy) bool {
	if sent == nil {
		return true
	}
	if sent.GetTokenBucket() == nil || next.GetTokenBucket() == nil {
		return sent.GetTokenBucket() != nil || next.GetTokenBucket() != nil || sent.GetBlanketRule() != next.GetBlanketRule()
	}
	a, b := RateOf(sent), RateOf(next)
	return math.Abs(b-a) > ChangeRatio*a
}
