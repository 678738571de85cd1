package redisstore

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/engine"
)

// Usage retention (spec §7.7): a day's counts are kept 35 days after the day ends, a
// month's total 400 days (more than 13 months) after the month ends.
const (
	msPerDay       = int64(24 * time.Hour / time.Millisecond)
	dayRetainMS    = 35 * msPerDay
	monthRetainMS  = 400 * msPerDay
	maxReportDays  = 10 * 366
	usageEntryArgs = 5
)

// AddUsage applies a batch once: one usage_add script per account (each account's keys
// share a hash tag), all in one pipeline. Every script records the batch id, so a batch
// that is sent again after a failure, even one that failed half way, is applied exactly
// once per account.
func (s *UsageStore) AddUsage(ctx context.Context, b engine.UsageBatch) error {
	if s.closed.Load() {
		return errClosed
	}
	if len(b.Counts) == 0 {
		return nil
	}
	type call struct {
		keys []string
		args []any
	}
	byAccount := make(map[string][]engine.UsageKey)
	for k := range b.Counts {
		byAccount[k.Account] = append(byAccount[k.Account], k)
	}
	calls := make([]call, 0, len(byAccount))
	now := s.nowArg()
	for account, uks := range byAccount {
		keys := []string{s.keys.UsageSeen(account, b.ID)}
		index := make(map[string]int)
		var expiries []any
		idx := func(key string, expires int64) int {
			i, ok := index[key]
			if !ok {
				keys = append(keys, key)
				i = len(keys) // Lua's 1-based KEYS index
				index[key] = i
				expiries = append(expiries, expires)
			}
			return i
		}
		args := make([]any, 0, 4+len(uks)*usageEntryArgs)
		args = append(args, now, s.slack, b.ID, len(uks))
		for _, k := range uks {
			c := b.Counts[k]
			m := k.Day.Month()
			di := idx(s.keys.UsageDay(account, k.Day), (int64(k.Day)+1)*msPerDay+dayRetainMS)
			mi := idx(s.keys.UsageMonth(account, m), m.End().UnixMilli()+monthRetainMS)
			args = append(args, di, mi, k.Namespace, c.Total, c.Blocked)
		}
		args = append(args, expiries...)
		calls = append(calls, call{keys, args})
	}
	ctx, cancel := context.WithTimeout(ctx, 2*s.opTimeout)
	defer cancel()
	for try := 0; ; try++ {
		pipe := s.client.Pipeline()
		cmds := make([]*redis.Cmd, len(calls))
		for i, c := range calls {
			cmds[i] = pipe.EvalSha(ctx, s.scripts.UsageAdd.Hash(), c.keys, c.args...)
		}
		_, _ = pipe.Exec(ctx)
		var firstErr error
		noScript := false
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				if isNoScript(err) {
					noScript = true
				} else if firstErr == nil {
					firstErr = err
				}
			}
		}
		if firstErr != nil {
			return firstErr
		}
		if !noScript {
			return nil
		}
		if try > 0 {
			return errors.New("redisstore: usage script could not be loaded")
		}
		// Load it (on every master) and send the batch again: accounts already applied
		// skip it by its id.
		if err := s.scripts.UsageAdd.Load(ctx, s.client).Err(); err != nil {
			return err
		}
	}
}

// ReadUsage reads a namespace's days and its account's month total in one pipeline.
func (s *UsageStore) ReadUsage(ctx context.Context, q engine.UsageQuery) (engine.UsageReport, error) {
	if s.closed.Load() {
		return engine.UsageReport{}, errClosed
	}
	n := int(max(int64(q.LastDay-q.FirstDay)+1, 0))
	if n > maxReportDays {
		return engine.UsageReport{}, errors.New("redisstore: usage query spans too many days")
	}
	ctx = s.opCtx(ctx)
	pipe := s.client.Pipeline()
	days := make([]*redis.SliceCmd, n)
	ft, fb := "t:"+q.Namespace, "b:"+q.Namespace
	for i := range n {
		days[i] = pipe.HMGet(ctx, s.keys.UsageDay(q.Account, q.FirstDay+engine.Day(i)), ft, fb)
	}
	month := pipe.Get(ctx, s.keys.UsageMonth(q.Account, q.Month))
	_, _ = pipe.Exec(ctx)
	rep := engine.UsageReport{Days: make([]engine.UsageCount, n)}
	for i, d := range days {
		vals, err := d.Result()
		if err != nil {
			return engine.UsageReport{}, err
		}
		t, err := intOrZero(vals[0])
		if err != nil {
			return engine.UsageReport{}, err
		}
		b, err := intOrZero(vals[1])
		if err != nil {
			return engine.UsageReport{}, err
		}
		rep.Days[i] = engine.UsageCount{Total: t, Blocked: b}
	}
	total, err := month.Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return engine.UsageReport{}, err
	}
	rep.MonthTotal = total
	return rep, nil
}

// MonthTotals reads each account's month total in one pipeline.
func (s *UsageStore) MonthTotals(ctx context.Context, month engine.Month, accounts []string) ([]int64, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	out := make([]int64, len(accounts))
	if len(accounts) == 0 {
		return out, nil
	}
	ctx = s.opCtx(ctx)
	pipe := s.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(accounts))
	for i, a := range accounts {
		cmds[i] = pipe.Get(ctx, s.keys.UsageMonth(a, month))
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range cmds {
		v, err := c.Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// intOrZero reads an HMGET value: nil (absent) is 0.
func intOrZero(v any) (int64, error) {
	switch x := v.(type) {
	case nil:
		return 0, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	case int64:
		return x, nil
	}
	return 0, errors.New("redisstore: unexpected usage value")
}
