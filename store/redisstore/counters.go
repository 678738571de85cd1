package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/redisstore/lua"
)

// Spend decides one rate-limit request with one EVALSHA of lua/spend.lua, which it may
// share with Spend requests waiting to be written with it (respipe.Merge).
func (s *Decider) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	if err := sp.Validate(); err != nil {
		return engine.Decision{}, fmt.Errorf("redisstore: spend: %w", err)
	}
	return s.hot.SpendKey(ctx, s.keys.Counter(sp.Counter), sp)
}

// SpendAll decides several counters of one key with one EVALSHA of lua/spend_all.lua: all
// spend or none.
func (s *Decider) SpendAll(ctx context.Context, spends []engine.Spend, out []engine.Decision) error {
	if err := engine.ValidateSpendAll(spends, out); err != nil {
		return fmt.Errorf("redisstore: spend all: %w", err)
	}
	n := len(spends)
	keys := make([]string, n)
	args := make([]arg, 0, 2+4*n)
	args = append(args, strArg(s.nowArg()), intArg(s.slack))
	for i := range spends {
		sp := &spends[i]
		keys[i] = s.keys.Counter(sp.Counter)
		args = append(args, strArg(spendCode(sp)), intArg(sp.Limit), intArg(sp.Counter.WindowMS), intArg(sp.Cost))
	}
	r, err := s.runHot(ctx, s.scripts.SpendAll, nil, keys, args...)
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

// spendCode is the scripts' algorithm argument of a spend: the algorithm's letter, in
// upper case for an overdraft spend (spec §4.12).
func spendCode(sp *engine.Spend) string {
	code := lua.AlgCode(sp.Counter.Algorithm)
	if sp.Overdraft {
		code = strings.ToUpper(code)
	}
	return code
}

// Reset clears one counter with one EVALSHA of lua/reset.lua.
func (s *Decider) Reset(ctx context.Context, c engine.Counter) (bool, error) {
	if s.closed.Load() {
		return false, errClosed
	}
	if err := c.Validate(); err != nil {
		return false, fmt.Errorf("redisstore: reset: %w", err)
	}
	code := lua.AlgCode(c.Algorithm)
	key := s.keys.Counter(c)
	keys := []string{key, key + ":h", key + ":f"} // its grants and fence (reserve.go)
	n, err := s.resetOnce(ctx, keys, code, c.WindowMS, "fence")
	if err == nil && n == 2 {
		// An instance has a grant of the counter (the hot path settles this instance's
		// first): no new slice is granted now, and once no slice taken before the reset can
		// decide, it is cleared (spec §4.13).
		if err = s.hot.Fence(ctx, key); err == nil {
			n, err = s.resetOnce(ctx, keys, code, c.WindowMS, "clear")
		}
	}
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// resetOnce runs lua/reset.lua once, in phase ("fence" or "clear").
func (s *Decider) resetOnce(ctx context.Context, keys []string, code string, windowMS int64, phase string) (int64, error) {
	cmd, err := s.eval(s.opCtx(ctx), s.scripts.Reset, keys, s.nowArg(), s.slack, code, windowMS, phase)
	if err != nil {
		return 0, err
	}
	return cmd.Int64()
}
