// Package testkit holds the helpers Leash's tests share.
package testkit

import (
	"context"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
)

// Check is a POST /v1/limit check as the HTTP edge hands it to the engine; nil fields are
// absent.
type Check struct {
	Namespace string
	Key       string
	Algorithm *string
	Limit     *int64
	WindowMS  *int64
	Cost      *int64
}

// Do decides the check through the engine's one decision path, as httpapi does.
func (c Check) Do(ctx context.Context, e *wiring.Engine, a *engine.Account) (engine.Decision, error) {
	alg := engine.AlgorithmUnknown
	if c.Algorithm != nil {
		alg = engine.AlgorithmOf(*c.Algorithm)
	}
	it := engine.CheckItem(c.Key, engine.Inline{Algorithm: alg, Limit: c.Limit, WindowMS: c.WindowMS}, c.Cost)
	var r [1]engine.ItemResult
	out, err := e.Limits.Decide(ctx, a, &engine.Query{Edge: engine.EdgeLimit, Namespace: c.Namespace, Items: []engine.Item{it}, StrictCost: true}, r[:])
	if err != nil {
		return engine.Decision{}, err
	}
	return engine.Decision{Allowed: r[0].Allowed, Limit: r[0].Limit.Limit, Remaining: r[0].Remaining,
		ResetMS: r[0].ResetMS, NowMS: out.NowMS}, nil
}

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }
