package redisstore

import (
	"context"
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts. Each is one EVALSHA; go-redis' Script falls back to EVAL (which also
// loads it) when Redis answers NOSCRIPT, e.g. after a restart or a failover.
var (
	//go:embed lua/prelude.lua
	luaPrelude string
	//go:embed lua/lease_prelude.lua
	luaLeasePrelude string
	//go:embed lua/decide.lua
	luaDecide string
	//go:embed lua/spend.lua
	luaSpend string
	//go:embed lua/spend_all.lua
	luaSpendAll string
	//go:embed lua/reset.lua
	luaReset string
	//go:embed lua/acquire.lua
	luaAcquire string
	//go:embed lua/release.lua
	luaRelease string
	//go:embed lua/renew.lua
	luaRenew string
	//go:embed lua/rules_get.lua
	luaRulesGet string
	//go:embed lua/rules_put.lua
	luaRulesPut string
	//go:embed lua/rules_del.lua
	luaRulesDel string
	//go:embed lua/usage_add.lua
	luaUsageAdd string
	//go:embed lua/outbox_enqueue.lua
	luaOutboxEnqueue string
	//go:embed lua/outbox_claim.lua
	luaOutboxClaim string
	//go:embed lua/outbox_ack.lua
	luaOutboxAck string
	//go:embed lua/outbox_retry.lua
	luaOutboxRetry string
)

// script is a Lua script with its source (for EVAL when Redis answers NOSCRIPT).
type script struct {
	*redis.Script
	src string
}

func newScript(src string) *script { return &script{redis.NewScript(src), src} }

// scripts holds one Store's scripts (a Script caches its SHA, so each Store owns its own
// set rather than sharing package state).
type scripts struct {
	spend, spendAll, reset, acquire, release, renew, rulesGet, rulesPut, rulesDel, usageAdd *script
	outboxEnqueue, outboxClaim, outboxAck, outboxRetry                                      *script
}

func newScripts() *scripts {
	return &scripts{
		spend:    newScript(luaPrelude + luaDecide + luaSpend),
		spendAll: newScript(luaPrelude + luaDecide + luaSpendAll),
		reset:    newScript(luaPrelude + luaReset),
		acquire:  newScript(luaPrelude + luaLeasePrelude + luaAcquire),
		release:  newScript(luaPrelude + luaLeasePrelude + luaRelease),
		renew:    newScript(luaPrelude + luaLeasePrelude + luaRenew),
		rulesGet: newScript(luaRulesGet),
		rulesPut: newScript(luaRulesPut),
		rulesDel: newScript(luaRulesDel),
		usageAdd: newScript(luaPrelude + luaUsageAdd),

		outboxEnqueue: newScript(luaPrelude + luaOutboxEnqueue),
		outboxClaim:   newScript(luaPrelude + luaOutboxClaim),
		outboxAck:     newScript(luaOutboxAck),
		outboxRetry:   newScript(luaPrelude + luaOutboxRetry),
	}
}

func (s *scripts) all() []*script {
	return []*script{s.spend, s.spendAll, s.reset, s.acquire, s.release, s.renew, s.rulesGet, s.rulesPut, s.rulesDel, s.usageAdd,
		s.outboxEnqueue, s.outboxClaim, s.outboxAck, s.outboxRetry}
}

// isNoScript reports Redis's answer to an EVALSHA of a script it does not have.
func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// evalCmd builds EVALSHA (or EVAL) as go-redis' own Eval does, so a cluster client routes
// it by its first key.
func evalCmd(ctx context.Context, name, payload string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, payload, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// eval runs sc once: EVALSHA, and EVAL if Redis has not got the script. Pipelined (see
// pipelineMode), the command joins the autopipeliner's next batch and the wait for it is
// bounded by ctx.
func (s *Store) eval(ctx context.Context, sc *script, keys []string, args ...any) (*redis.Cmd, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if s.mode == pipelineAdaptive {
		n := s.flying.Add(1)
		defer s.flying.Add(-1)
		if n <= adaptiveInFlight {
			cmd := sc.Run(ctx, s.client, keys, args...)
			return cmd, cmd.Err()
		}
	}
	if s.ap == nil {
		cmd := sc.Run(ctx, s.client, keys, args...)
		return cmd, cmd.Err()
	}
	cmd := evalCmd(ctx, "evalsha", sc.Hash(), keys, args)
	err := s.ap.Submit(ctx, cmd).WaitContext(ctx)
	if isNoScript(err) {
		cmd = evalCmd(ctx, "eval", sc.src, keys, args)
		err = s.ap.Submit(ctx, cmd).WaitContext(ctx)
	}
	if err != nil {
		return nil, err
	}
	return cmd, nil
}
