package redisstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/redisstore/lua"
	"github.com/leashd/leash/testkit/redistest"
)

// hashTag returns what Redis Cluster hashes: the part between the first '{' and the next
// '}', when non-empty.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

func TestKeyLayout(t *testing.T) {
	k := lua.NewKeys("leash")
	c := engine.Counter{Account: "acme", Namespace: "api", Key: "user:42", Algorithm: engine.SlidingWindow, WindowMS: 60000}
	if got, want := k.Counter(c), "{leash:k:acme:api:user:42}:s:60000"; got != want {
		t.Fatalf("counter key %q, want %q", got, want)
	}
	ls := k.Leases(engine.LeaseSet{Account: "acme", Namespace: "api", Key: "user:42"})
	if ls[0] != "{leash:k:acme:api:user:42}:lz" || ls[1] != "{leash:k:acme:api:user:42}:lt" {
		t.Fatalf("lease keys %q", ls)
	}
	if got := k.UsageDay("acme", 20000); got != "{leash:u:acme}:d:20000" {
		t.Fatalf("usage day key %q", got)
	}
	if got := k.UsageSeen("acme", "0123abcd-17"); got != "{leash:u:acme}:seen:0123abcd" {
		t.Fatalf("usage seen key %q", got)
	}
	if got := k.Rules("acme", "api"); got != "{leash:r}:acme:api" {
		t.Fatalf("rules key %q", got)
	}

	// Braces, '%' and ':' in keys can neither break the hash tag nor make two counters
	// share a key; every key of one (account, namespace, key) shares one tag.
	seen := map[string]engine.Counter{}
	for _, key := range []string{"a", "a}", "{a", "a}b{c", "%7D", "%", "a:b", "a%3Ab", "}", "{}", "x}:f:1", "{leash:k:x"} {
		for _, ns := range []string{"ns", "ns.b"} {
			for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
				c := engine.Counter{Account: "acme", Namespace: ns, Key: key, Algorithm: alg, WindowMS: 1000}
				name := k.Counter(c)
				if prev, dup := seen[name]; dup {
					t.Fatalf("%+v and %+v share key %q", prev, c, name)
				}
				seen[name] = c
				tag := hashTag(name)
				if want := k.Tag(c.Account, c.Namespace, c.Key); "{"+tag+"}" != want {
					t.Fatalf("key %q hashes on %q, want its tag %q", name, tag, want)
				}
				lz := k.Leases(engine.LeaseSet{Account: "acme", Namespace: ns, Key: key})
				if hashTag(lz[0]) != tag || hashTag(lz[1]) != tag {
					t.Fatalf("lease keys %q do not share the counter's tag %q", lz, tag)
				}
			}
		}
	}
}

// TestTTLs: every key Leash writes expires (rules excepted, spec §7.7), with a TTL
// that covers its state: counters until their state stops mattering, leases until the
// last one expires, daily usage at least 35 days, monthly usage 400 days after the month ends.
func TestTTLs(t *testing.T) {
	t.Parallel()
	s := singleStore(t, nil) // production mode: Redis TIME
	ctx := context.Background()
	acct := "acme"
	const w = 3_600_000 // an hour: the test cannot straddle a window boundary
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
		c := engine.Counter{Account: acct, Namespace: "ns", Key: "k", Algorithm: alg, WindowMS: w}
		if _, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: 10, Cost: 3}); err != nil {
			t.Fatal(err)
		}
	}
	set := engine.LeaseSet{Account: acct, Namespace: "ns", Key: "k"}
	if _, err := s.Acquire(ctx, set, "t1", 5, 30_000); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, set, "t2", 5, 90_000); err != nil {
		t.Fatal(err)
	}
	now, err := s.NowMS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	today := engine.DayOf(now)
	err = s.AddUsage(ctx, engine.UsageBatch{ID: "inst-1", Counts: map[engine.UsageKey]engine.UsageCount{
		{Account: acct, Namespace: "ns", Day: today}: {Total: 3, Blocked: 1},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutRule(ctx, acct, "ns", engine.Rule{Algorithm: engine.FixedWindow, Limit: 1, WindowMS: 1}); err != nil {
		t.Fatal(err)
	}

	rc := s.client
	var keys []string
	iter := rc.Scan(ctx, 0, "*"+s.keys.Prefix()+":*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	day := time.Duration(msPerDay) * time.Millisecond
	nextDay := time.Duration((int64(today)+1)*msPerDay-now) * time.Millisecond
	nextWindow := time.Duration(w-now%w) * time.Millisecond
	// A month's total is kept 400 days after the month ends (spec §7.7), whatever today is.
	monthKept := time.Duration(today.Month().End().UnixMilli()+400*msPerDay-now) * time.Millisecond
	type span struct {
		min, max time.Duration
		persist  bool
	}
	counter := func(alg engine.Algorithm) string {
		return s.keys.Counter(engine.Counter{Account: acct, Namespace: "ns", Key: "k", Algorithm: alg, WindowMS: w})
	}
	want := map[string]span{ // the TTL each key must have (each includes 1 s of slack)
		counter(engine.FixedWindow):            {nextWindow, nextWindow + 1100*time.Millisecond, false},
		counter(engine.SlidingWindow):          {nextWindow + time.Hour, nextWindow + time.Hour + 1100*time.Millisecond, false},
		counter(engine.TokenBucket):            {1080 * time.Second, 1081100 * time.Millisecond, false}, // 3 of 10 per hour: 18 min of debt
		s.keys.Leases(set)[0]:                  {89 * time.Second, 92 * time.Second, false},
		s.keys.Leases(set)[1]:                  {89 * time.Second, 92 * time.Second, false},
		s.keys.UsageDay(acct, today):           {35*day + nextDay - time.Minute, 35*day + nextDay + time.Minute, false},
		s.keys.UsageMonth(acct, today.Month()): {monthKept - time.Minute, monthKept + time.Minute, false},
		s.keys.UsageSeen(acct, "inst-1"):       {2 * day, 4 * day, false},
		s.keys.Rules(acct, "ns"):               {persist: true},
		s.keys.RulesVersion():                  {persist: true},
		s.keys.RuleIndex(acct):                 {persist: true}, // as the rules it lists
	}
	if len(keys) != len(want) {
		t.Fatalf("keys written: %q, want %d keys", keys, len(want))
	}
	for _, key := range keys {
		sp, ok := want[key]
		if !ok {
			t.Fatalf("unexpected key %q", key)
		}
		ttl, err := rc.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if sp.persist {
			if ttl >= 0 {
				t.Fatalf("%q expires in %v; rules persist", key, ttl)
			}
			continue
		}
		// PTTL was read a few ms after the state was written.
		if ttl < sp.min-200*time.Millisecond || ttl > sp.max {
			t.Fatalf("%q: TTL %v, want within [%v, %v]", key, ttl, sp.min, sp.max)
		}
	}
}

// TestUsageIdempotent: a batch sent twice (also after failing half way, simulated by
// applying it to one account first) is counted once; days and months are read back.
func TestUsageIdempotent(t *testing.T) {
	t.Parallel()
	clock := testkit.NewFakeClock(time.Date(2026, 12, 1, 0, 30, 0, 0, time.UTC))
	s := singleStore(t, clock)
	ctx := context.Background()
	dec := engine.DayOf(clock.NowMS()) - 1 // 2026-11-30
	counts := map[engine.UsageKey]engine.UsageCount{
		{Account: "a1", Namespace: "api", Day: dec}:     {Total: 5, Blocked: 2},
		{Account: "a1", Namespace: "api", Day: dec + 1}: {Total: 7, Blocked: 0},
		{Account: "a1", Namespace: "web", Day: dec + 1}: {Total: 1, Blocked: 1},
		{Account: "a2", Namespace: "api", Day: dec + 1}: {Total: 4, Blocked: 4},
	}
	// "Half applied": only a1's part got through before a failure.
	half := map[engine.UsageKey]engine.UsageCount{}
	for k, c := range counts {
		if k.Account == "a1" {
			half[k] = c
		}
	}
	if err := s.AddUsage(ctx, engine.UsageBatch{ID: "i1-1", Counts: half}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.AddUsage(ctx, engine.UsageBatch{ID: "i1-1", Counts: counts}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddUsage(ctx, engine.UsageBatch{ID: "i2-1", Counts: map[engine.UsageKey]engine.UsageCount{
		{Account: "a1", Namespace: "api", Day: dec + 1}: {Total: 10, Blocked: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.ReadUsage(ctx, engine.UsageQuery{Account: "a1", Namespace: "api", FirstDay: dec - 1, LastDay: dec + 1, Month: (dec + 1).Month()})
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.UsageCount{{}, {Total: 5, Blocked: 2}, {Total: 17, Blocked: 1}}
	if fmt.Sprint(rep.Days) != fmt.Sprint(want) || rep.MonthTotal != 18 {
		t.Fatalf("a1/api: days %v month %d, want %v and 18", rep.Days, rep.MonthTotal, want)
	}
	totals, err := s.MonthTotals(ctx, dec.Month(), []string{"a1", "a2", "none"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(totals) != "[5 0 0]" {
		t.Fatalf("November totals %v, want [5 0 0]", totals)
	}
	totals, err = s.MonthTotals(ctx, (dec + 1).Month(), []string{"a1", "a2"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(totals) != "[18 4]" {
		t.Fatalf("December totals %v, want [18 4]", totals)
	}
}

// TestMemoryPerCounter measures, with MEMORY USAGE, the bytes one counter of each
// algorithm takes (docs/redis.md quotes it), for a typical key: account "acme",
// namespace "api", key "user:<6 digits>", a one-minute window.
func TestMemoryPerCounter(t *testing.T) {
	t.Parallel()
	// Its own server: the default prefix "leash", as deployed, gives the real key lengths.
	s := openStore(t, Options{URL: redistest.StartServer(t, false).URL(), Prefix: "leash"})
	ctx := context.Background()
	const n = 200
	usage := func(key string) int64 {
		v, err := s.client.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var report []string
	for _, alg := range []engine.Algorithm{engine.FixedWindow, engine.SlidingWindow, engine.TokenBucket} {
		var sum int64
		for i := range n {
			c := engine.Counter{Account: "acme", Namespace: "api", Key: fmt.Sprintf("user:%06d", 100000+i), Algorithm: alg, WindowMS: 60_000}
			if _, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: 1000, Cost: 7}); err != nil {
				t.Fatal(err)
			}
			sum += usage(s.keys.Counter(c))
		}
		report = append(report, fmt.Sprintf("%s: %d bytes", alg, sum/n))
		if sum/n > 200 {
			t.Fatalf("%s counter takes %d bytes", alg, sum/n)
		}
	}
	// A lease set holding 1 and 10 leases.
	for _, held := range []int{1, 10} {
		set := engine.LeaseSet{Account: "acme", Namespace: "api", Key: fmt.Sprintf("job:%d", held)}
		for i := range held {
			if _, err := s.Acquire(ctx, set, fmt.Sprintf("%022d", i), 100, 60_000); err != nil {
				t.Fatal(err)
			}
		}
		k := s.keys.Leases(set)
		report = append(report, fmt.Sprintf("lease set of %d: %d bytes", held, usage(k[0])+usage(k[1])))
	}
	t.Logf("MEMORY USAGE (key name %q): %s", s.keys.Counter(engine.Counter{Account: "acme", Namespace: "api", Key: "user:100000", Algorithm: engine.FixedWindow, WindowMS: 60_000}), strings.Join(report, "; "))
}
