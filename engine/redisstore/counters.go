package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/algo"
)

var errInvalidSpend = errors.New("redisstore: spend outside the algorithm's ranges")

// Spend decides one rate-limit request with one EVALSHA of lua/spend.lua.
func (s *Store) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	code := algCode(sp.Counter.Algorithm)
	if code == "" || sp.Limit < 1 || sp.Limit > algo.MaxLimit || sp.Cost < 0 || sp.Cost > sp.Limit ||
		sp.Counter.WindowMS < 1 || sp.Counter.WindowMS > algo.MaxWindowMS {
		// Outside these ranges the scripts' arithmetic is not exact (engine/algo).
		return engine.Decision{}, errInvalidSpend
	}
	r, err := s.run(ctx, s.sc.spend, []string{s.keys.counter(sp.Counter)},
		s.nowArg(), s.slack, code, sp.Limit, sp.Counter.WindowMS, sp.Cost)
	if err != nil {
		return engine.Decision{}, err
	}
	if len(r) != 4 {
		return engine.Decision{}, errors.New("redisstore: spend: malformed script reply")
	}
	return engine.Decision{Allowed: r[0] == 1, Limit: sp.Limit, Remaining: r[1], ResetMS: r[2], NowMS: r[3]}, nil
}

// Reset clears one counter with one EVALSHA of lua/reset.lua.
func (s *Store) Reset(ctx context.Context, c engine.Counter) (bool, error) {
	if s.closed.Load() {
		return false, errClosed
	}
	code := algCode(c.Algorithm)
	if code == "" || c.WindowMS < 1 || c.WindowMS > algo.MaxWindowMS {
		return false, fmt.Errorf("redisstore: reset: %q with window %d is not a rate counter", c.Algorithm, c.WindowMS)
	}
	ctx, cancel := s.opCtx(ctx)
	defer cancel()
	cmd, err := s.eval(ctx, s.sc.reset, []string{s.keys.counter(c)}, s.nowArg(), s.slack, code, c.WindowMS)
	if err != nil {
		return false, err
	}
	n, err := cmd.Int64()
	return n == 1, err
}
