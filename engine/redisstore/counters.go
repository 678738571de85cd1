package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/algo"
)

var (
	errInvalidSpend = errors.New("redisstore: spend outside the algorithm's ranges")
	errInvalidSet   = errors.New("redisstore: SpendAll takes 1 to engine.MaxSpendAll distinct counters of one key")
)

// Spend decides one rate-limit request with one EVALSHA of lua/spend.lua.
func (s *Store) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	code := algCode(sp.Counter.Algorithm)
	if code == "" || sp.Limit < 1 || sp.Limit > algo.MaxLimit || sp.Cost < 0 || sp.Cost > sp.Limit ||
		sp.Counter.WindowMS < 1 || sp.Counter.WindowMS > algo.MaxWindowMS {
		// Outside these ranges the scripts' arithmetic is not exact (engine/algo).
		return engine.Decision{}, errInvalidSpend
	}
	var buf [4]int64 // the reply, without a heap allocation
	r, err := s.runHot(ctx, s.sc.spend, buf[:0], []string{s.keys.counter(sp.Counter)},
		sarg(s.nowArg()), narg(s.slack), sarg(code), narg(sp.Limit), narg(sp.Counter.WindowMS), narg(sp.Cost))
	if err != nil {
		return engine.Decision{}, err
	}
	if len(r) != 4 {
		return engine.Decision{}, errors.New("redisstore: spend: malformed script reply")
	}
	return engine.Decision{Allowed: r[0] == 1, Limit: sp.Limit, Remaining: r[1], ResetMS: r[2], NowMS: r[3]}, nil
}

// SpendAll decides several counters of one key with one EVALSHA of lua/spend_all.lua: all
// spend or none.
func (s *Store) SpendAll(ctx context.Context, spends []engine.Spend, out []engine.Decision) error {
	n := len(spends)
	if n == 0 || n > engine.MaxSpendAll || len(out) < n {
		return errInvalidSet
	}
	keys := make([]string, n)
	args := make([]arg, 0, 2+4*n)
	args = append(args, sarg(s.nowArg()), narg(s.slack))
	c0 := &spends[0].Counter
	for i := range spends {
		sp := &spends[i]
		code := algCode(sp.Counter.Algorithm)
		if code == "" || sp.Limit < 1 || sp.Limit > algo.MaxLimit || sp.Cost < 0 || sp.Cost > sp.Limit ||
			sp.Counter.WindowMS < 1 || sp.Counter.WindowMS > algo.MaxWindowMS {
			return errInvalidSpend
		}
		if sp.Counter.Account != c0.Account || sp.Counter.Namespace != c0.Namespace || sp.Counter.Key != c0.Key {
			return errInvalidSet
		}
		keys[i] = s.keys.counter(sp.Counter)
		if slices.Contains(keys[:i], keys[i]) {
			return errInvalidSet
		}
		args = append(args, sarg(code), narg(sp.Limit), narg(sp.Counter.WindowMS), narg(sp.Cost))
	}
	r, err := s.runHot(ctx, s.sc.spendAll, nil, keys, args...)
	if err != nil {
		return err
	}
	if len(r) != 3*n+1 {
		return errors.New("redisstore: spend_all: malformed script reply")
	}
	now := r[3*n]
	for i := range n {
		out[i] = engine.Decision{Allowed: r[3*i] == 1, Limit: spends[i].Limit, Remaining: r[3*i+1], ResetMS: r[3*i+2], NowMS: now}
	}
	return nil
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
	ctx = s.opCtx(ctx)
	cmd, err := s.eval(ctx, s.sc.reset, []string{s.keys.counter(c)}, s.nowArg(), s.slack, code, c.WindowMS)
	if err != nil {
		return false, err
	}
	n, err := cmd.Int64()
	return n == 1, err
}
