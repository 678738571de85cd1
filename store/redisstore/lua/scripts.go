// Package lua holds the Redis store's Lua scripts (the .lua files beside this one) and
// the names of the keys they run on (Keys). It decides nothing itself: package redisstore
// sends the scripts, and docs/redis.md describes the layout.
package lua

import (
	_ "embed"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/store/redisstore/respipe"
)

// The Lua scripts. Each is one EVALSHA. When Redis answers NOSCRIPT (e.g. after a restart
// or a failover) a decision's script is loaded and the call sent again (redisstore's
// hotpath.go); the others fall back to EVAL (which also loads it; redisstore's evalWith).
var (
	//go:embed prelude.lua
	luaPrelude string
	//go:embed lease_prelude.lua
	luaLeasePrelude string
	//go:embed decide.lua
	luaDecide string
	//go:embed spend_core.lua
	luaSpendCore string
	//go:embed spend.lua
	luaSpend string
	//go:embed spend_x.lua
	luaSpendX string
	//go:embed fence_add.lua
	luaFenceAdd string
	//go:embed fence_poll.lua
	luaFencePoll string
	//go:embed reserve.lua
	luaReserve string
	//go:embed spend_all.lua
	luaSpendAll string
	//go:embed reset.lua
	luaReset string
	//go:embed acquire.lua
	luaAcquire string
	//go:embed release.lua
	luaRelease string
	//go:embed renew.lua
	luaRenew string
	//go:embed rules_get.lua
	luaRulesGet string
	//go:embed rules_put.lua
	luaRulesPut string
	//go:embed rules_del.lua
	luaRulesDel string
	//go:embed usage_add.lua
	luaUsageAdd string
	//go:embed outbox_enqueue.lua
	luaOutboxEnqueue string
	//go:embed outbox_claim.lua
	luaOutboxClaim string
	//go:embed outbox_ack.lua
	luaOutboxAck string
	//go:embed outbox_retry.lua
	luaOutboxRetry string
	//go:embed demand_report.lua
	luaDemandReport string
	//go:embed demand_drop.lua
	luaDemandDrop string
	//go:embed accounts.lua
	luaAccounts string
	//go:embed rules_namespaces.lua
	luaRulesNamespaces string
	//go:embed leases_held.lua
	luaLeasesHeld string
	//go:embed audit.lua
	luaAudit string
)

// Script is a Lua script with its source (for EVAL when Redis answers NOSCRIPT) and, for a
// script that decides any number of keys at once, how the pipe merges its calls.
type Script struct {
	*redis.Script
	// Src is the script's source.
	Src string
	// Merge, when set, is how respipe merges calls of the script (Spend and reserve).
	Merge *respipe.Merge
}

// NewScript returns the script of src.
func NewScript(src string) *Script { return &Script{Script: redis.NewScript(src), Src: src} }

// Audit is the audit log's one script. A Script only caches its SHA, the same for every
// store, so the stores share it; Redis loads it on first use (EVAL after NOSCRIPT).
var Audit = NewScript(luaPrelude + luaAudit)

// CrossSlotFlag is the first line of spend_x.lua: Redis >= 7.0 lets it touch keys of any
// slot its node serves.
const CrossSlotFlag = "#!lua flags=allow-cross-slot-keys\n"

// MaxMerged is the most Spend requests one call of spend.lua decides: 64 keep one call's
// Redis time (about 4 µs a request) well under a millisecond.
const MaxMerged = 64

// Set holds one store's scripts (a Script caches its SHA, so each store owns its own set
// rather than sharing package state).
type Set struct {
	// SpendX is Spend's form for merging across the slots of a Redis 7 Cluster master
	// (redisstore's crossSlotMerge); not in All(): it is loaded only there.
	SpendX                                                                                                      *Script
	FenceAdd, FencePoll, Reserve, Spend, SpendAll, Reset, Acquire, Release, Renew, RulesGet, RulesPut, RulesDel *Script
	UsageAdd                                                                                                    *Script
	OutboxEnqueue, OutboxClaim, OutboxAck, OutboxRetry                                                          *Script
	DemandReport, DemandDrop                                                                                    *Script
	Accounts, RulesNamespaces, LeasesHeld                                                                       *Script
}

// NewSet returns a store's scripts.
func NewSet() *Set {
	spend := NewScript(luaPrelude + luaDecide + luaSpendCore + luaSpend)
	spend.Merge = &respipe.Merge{Sha: spend.Hash(), Head: 2, Width: 4, Reply: 4, Max: MaxMerged}
	spendX := NewScript(CrossSlotFlag + luaPrelude + luaDecide + luaSpendCore + luaSpendX)
	spendX.Merge = &respipe.Merge{Sha: spendX.Hash(), Head: 2, Width: 4, Reply: 4, Max: MaxMerged, ArgKeys: true}
	reserve := NewScript(luaPrelude + luaDecide + luaReserve)
	reserve.Merge = &respipe.Merge{Sha: reserve.Hash(), Head: 6, Width: 9, Reply: 10, Max: MaxMerged}
	return &Set{
		Reserve:   reserve,
		FenceAdd:  NewScript(luaFenceAdd),
		FencePoll: NewScript(luaFencePoll),
		SpendX:    spendX,
		Spend:     spend,
		SpendAll:  NewScript(luaPrelude + luaDecide + luaSpendAll),
		Reset:     NewScript(luaPrelude + luaReset),
		Acquire:   NewScript(luaPrelude + luaLeasePrelude + luaAcquire),
		Release:   NewScript(luaPrelude + luaLeasePrelude + luaRelease),
		Renew:     NewScript(luaPrelude + luaLeasePrelude + luaRenew),
		RulesGet:  NewScript(luaRulesGet),
		RulesPut:  NewScript(luaRulesPut),
		RulesDel:  NewScript(luaRulesDel),
		UsageAdd:  NewScript(luaPrelude + luaUsageAdd),

		OutboxEnqueue: NewScript(luaPrelude + luaOutboxEnqueue),
		OutboxClaim:   NewScript(luaPrelude + luaOutboxClaim),
		OutboxAck:     NewScript(luaOutboxAck),
		OutboxRetry:   NewScript(luaPrelude + luaOutboxRetry),

		DemandReport: NewScript(luaPrelude + luaDemandReport),
		DemandDrop:   NewScript(luaDemandDrop),

		Accounts:        NewScript(luaPrelude + luaAccounts),
		RulesNamespaces: NewScript(luaRulesNamespaces),
		LeasesHeld:      NewScript(luaPrelude + luaLeasesHeld),
	}
}

// All returns the scripts a store loads when it opens.
func (s *Set) All() []*Script {
	return []*Script{s.FenceAdd, s.FencePoll, s.Reserve, s.Spend, s.SpendAll, s.Reset, s.Acquire, s.Release, s.Renew, s.RulesGet, s.RulesPut, s.RulesDel, s.UsageAdd,
		s.OutboxEnqueue, s.OutboxClaim, s.OutboxAck, s.OutboxRetry, s.DemandReport, s.DemandDrop, s.Accounts, s.RulesNamespaces, s.LeasesHeld}
}
