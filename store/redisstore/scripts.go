package redisstore

import (
	"context"
	_ "embed"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/store/redisstore/respipe"
)

// The Lua scripts. Each is one EVALSHA. When Redis answers NOSCRIPT (e.g. after a restart
// or a failover) a decision's script is loaded and the call sent again (hotpath.go); the
// others fall back to EVAL (which also loads it; evalWith).
var (
	//go:embed lua/prelude.lua
	luaPrelude string
	//go:embed lua/lease_prelude.lua
	luaLeasePrelude string
	//go:embed lua/decide.lua
	luaDecide string
	//go:embed lua/spend_core.lua
	luaSpendCore string
	//go:embed lua/spend.lua
	luaSpend string
	//go:embed lua/spend_x.lua
	luaSpendX string
	//go:embed lua/fence_add.lua
	luaFenceAdd string
	//go:embed lua/fence_poll.lua
	luaFencePoll string
	//go:embed lua/reserve.lua
	luaReserve string
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
	//go:embed lua/demand_report.lua
	luaDemandReport string
	//go:embed lua/demand_drop.lua
	luaDemandDrop string
	//go:embed lua/accounts.lua
	luaAccounts string
	//go:embed lua/rules_namespaces.lua
	luaRulesNamespaces string
	//go:embed lua/leases_held.lua
	luaLeasesHeld string
)

// script is a Lua script with its source (for EVAL when Redis answers NOSCRIPT) and, for a
// script that decides any number of keys at once, how the pipe merges its calls.
type script struct {
	*redis.Script
	src   string
	merge *respipe.Merge
}

func newScript(src string) *script { return &script{Script: redis.NewScript(src), src: src} }

// maxMerged is the most Spend requests one call of spend.lua decides: 64 keep one call's
// Redis time (about 4 µs a request) well under a millisecond.
const maxMerged = 64

// scriptSet holds one Store's scripts (a Script caches its SHA, so each Store owns its own
// set rather than sharing package state).
type scriptSet struct {
	// spendX is spend's form for merging across the slots of a Redis 7 Cluster master
	// (hotpath.go: crossSlotMerge); not in all(): it is loaded only there.
	spendX                                                                                                      *script
	fenceAdd, fencePoll, reserve, spend, spendAll, reset, acquire, release, renew, rulesGet, rulesPut, rulesDel *script
	usageAdd                                                                                                    *script
	outboxEnqueue, outboxClaim, outboxAck, outboxRetry                                                          *script
	demandReport, demandDrop                                                                                    *script
	accounts, rulesNamespaces, leasesHeld                                                                       *script
}

func newScriptSet() *scriptSet {
	spend := newScript(luaPrelude + luaDecide + luaSpendCore + luaSpend)
	spend.merge = &respipe.Merge{Sha: spend.Hash(), Head: 2, Width: 4, Reply: 4, Max: maxMerged}
	spendX := newScript(crossSlotFlag + luaPrelude + luaDecide + luaSpendCore + luaSpendX)
	spendX.merge = &respipe.Merge{Sha: spendX.Hash(), Head: 2, Width: 4, Reply: 4, Max: maxMerged, ArgKeys: true}
	reserve := newScript(luaPrelude + luaDecide + luaReserve)
	reserve.merge = &respipe.Merge{Sha: reserve.Hash(), Head: 6, Width: 9, Reply: 10, Max: maxMerged}
	return &scriptSet{
		reserve:   reserve,
		fenceAdd:  newScript(luaFenceAdd),
		fencePoll: newScript(luaFencePoll),
		spendX:    spendX,
		spend:     spend,
		spendAll:  newScript(luaPrelude + luaDecide + luaSpendAll),
		reset:     newScript(luaPrelude + luaReset),
		acquire:   newScript(luaPrelude + luaLeasePrelude + luaAcquire),
		release:   newScript(luaPrelude + luaLeasePrelude + luaRelease),
		renew:     newScript(luaPrelude + luaLeasePrelude + luaRenew),
		rulesGet:  newScript(luaRulesGet),
		rulesPut:  newScript(luaRulesPut),
		rulesDel:  newScript(luaRulesDel),
		usageAdd:  newScript(luaPrelude + luaUsageAdd),

		outboxEnqueue: newScript(luaPrelude + luaOutboxEnqueue),
		outboxClaim:   newScript(luaPrelude + luaOutboxClaim),
		outboxAck:     newScript(luaOutboxAck),
		outboxRetry:   newScript(luaPrelude + luaOutboxRetry),

		demandReport: newScript(luaPrelude + luaDemandReport),
		demandDrop:   newScript(luaDemandDrop),

		accounts:        newScript(luaPrelude + luaAccounts),
		rulesNamespaces: newScript(luaRulesNamespaces),
		leasesHeld:      newScript(luaPrelude + luaLeasesHeld),
	}
}

func (s *scriptSet) all() []*script {
	return []*script{s.fenceAdd, s.fencePoll, s.reserve, s.spend, s.spendAll, s.reset, s.acquire, s.release, s.renew, s.rulesGet, s.rulesPut, s.rulesDel, s.usageAdd,
		s.outboxEnqueue, s.outboxClaim, s.outboxAck, s.outboxRetry, s.demandReport, s.demandDrop, s.accounts, s.rulesNamespaces, s.leasesHeld}
}

// isNoScript reports Redis's answer to an EVALSHA of a script it does not have.
func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// newEvalCmd builds EVALSHA (or EVAL) of payload with newCmd (redis.NewCmd, or a typed
// reply such as redis.NewIntSliceCmd that reads integers without boxing them), routed as
// go-redis' own Eval is: by its first key.
func newEvalCmd[C redis.Cmder](ctx context.Context, newCmd func(context.Context, ...any) C, name, payload string, keys []string, args []any) C {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, payload, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	cmd := newCmd(ctx, append(a, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}

// eval runs lua once: EVALSHA, and EVAL if Redis has not got the script.
func (s *Store) eval(ctx context.Context, lua *script, keys []string, args ...any) (*redis.Cmd, error) {
	return evalWith(ctx, s, redis.NewCmd, lua, keys, args)
}

// evalInts is eval for a script whose reply is an array of integers.
func (s *Store) evalInts(ctx context.Context, lua *script, keys []string, args ...any) ([]int64, error) {
	cmd, err := evalWith(ctx, s, redis.NewIntSliceCmd, lua, keys, args)
	if err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

func evalWith[C redis.Cmder](ctx context.Context, s *Store, newCmd func(context.Context, ...any) C, lua *script, keys []string, args []any) (C, error) {
	var zero C
	if s.closed.Load() {
		return zero, errClosed
	}
	cmd := newEvalCmd(ctx, newCmd, "evalsha", lua.Hash(), keys, args)
	err := s.client.Process(ctx, cmd)
	if isNoScript(err) {
		cmd = newEvalCmd(ctx, newCmd, "eval", lua.src, keys, args)
		err = s.client.Process(ctx, cmd)
	}
	if err != nil {
		return zero, err
	}
	return cmd, nil
}
