package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/hotpath"
	"github.com/leashd/leash/store/redisstore/lua"
)

// Spend decides one rate-limit request with one EVALSHA of lua/spend.lua, which it may
// share with Spend requests waiting to be written with it (respipe.Merge).
func (s *Store) Spend(ctx context.Context, sp engine.Spend) (engine.Decision, error) {
	if err := sp.Validate(); err != nil {
		return engine.Decision{}, fmt.Errorf("redisstore: spend: %w", err)
	}
	return s.SpendKey(ctx, s.keys.Counter(sp.Counter), sp)
}

// SpendKey is Spend of a valid sp whose counter's key (CounterKey) is already made: the
// hot path's road to Redis for the requests it does not decide, with no second key.
func (s *Store) SpendKey(ctx context.Context, key string, sp engine.Spend) (engine.Decision, error) {
	if sp.Overdraft && sp.Counter.Algorithm != engine.TokenBucket {
		return s.overdraft(ctx, &sp, key)
	}
	code := spendCode(&sp)
	var buf [4]int64 // the reply, without a heap allocation
	keys := []string{key}
	args := [...]arg{strArg(s.nowArg()), intArg(s.slack), strArg(code), intArg(sp.Limit), intArg(sp.Counter.WindowMS), intArg(sp.Cost)}
	lua := s.scripts.Spend
	if s.crossSlot {
		lua = s.scripts.SpendX // merged with any Spend for the same master (hotpath.go)
	}
	r, err := s.runHot(ctx, lua, buf[:0], keys, args[:]...)
	if err == nil && lua == s.scripts.SpendX && len(r) == 4 && r[0] == -1 {
		// That master does not serve the key (a stale slot map): nothing was spent; send
		// it again on its own, routed, redirected and retried by its own key.
		s.undecided.Add(1)
		r, err = s.runHot(ctx, s.scripts.Spend, buf[:0], keys, args[:]...)
	}
	if err != nil {
		return engine.Decision{}, err
	}
	if len(r) != 4 {
		return engine.Decision{}, errors.New("redisstore: spend: malformed script reply")
	}
	return engine.Decision{Allowed: r[0] == 1, Limit: sp.Limit, Remaining: r[1], ResetMS: r[2], NowMS: r[3]}, nil
}

// overdraft decides an overdraft spend of a window counter (spec §4.12) with one
// lua/reserve.lua request, which also tells how many instances hold a grant of the
// counter: when it is denied, and so counted over the limit, while some do, it answers only
// once no slice taken before it can decide anywhere (Fence, spec §4.13), whichever
// instance made it and whether or not its own reservations are on.
func (s *Store) overdraft(ctx context.Context, sp *engine.Spend, key string) (engine.Decision, error) {
	rep, err := s.Reserve(ctx, key, sp, hotpath.Call{From: 1, Share: 1, Part: 1})
	if err != nil {
		return engine.Decision{}, err
	}
	if rep.Verdict < 0 {
		return engine.Decision{}, errors.New("redisstore: overdraft: the call reached Redis after its deadline")
	}
	if rep.Verdict == 0 && rep.Others > 0 {
		if err := s.Fence(ctx, key); err != nil {
			return engine.Decision{}, err
		}
	}
	return engine.Decision{Allowed: rep.Verdict == 1, Limit: sp.Limit, Remaining: rep.Remaining, ResetMS: rep.ResetMS, NowMS: rep.NowMS}, nil
}

// SpendAll decides several counters of one key with one EVALSHA of lua/spend_all.lua: all
// spend or none.
func (s *Store) SpendAll(ctx context.Context, spends []engine.Spend, out []engine.Decision) error {
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
func (s *Store) Reset(ctx context.Context, c engine.Counter) (bool, error) {
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
		if err = s.Fence(ctx, key); err == nil {
			n, err = s.resetOnce(ctx, keys, code, c.WindowMS, "clear")
		}
	}
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// resetOnce runs lua/reset.lua once, in phase ("fence" or "clear").
func (s *Store) resetOnce(ctx context.Context, keys []string, code string, windowMS int64, phase string) (int64, error) {
	cmd, err := s.eval(s.opCtx(ctx), s.scripts.Reset, keys, s.nowArg(), s.slack, code, windowMS, phase)
	if err != nil {
		return 0, err
	}
	return cmd.Int64()
}
