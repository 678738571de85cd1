package diskstore_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/diskstore"
	"github.com/leashd/leash/testkit"
)

func ctr(key string, windowMS int64) engine.Counter {
	return engine.Counter{Account: "acct", Namespace: "ns", Key: key, Algorithm: engine.FixedWindow, WindowMS: windowMS}
}

func spend(t testing.TB, s engine.Decider, c engine.Counter, limit, cost int64) engine.Decision {
	t.Helper()
	d, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: limit, Cost: cost})
	if err != nil {
		t.Fatalf("Spend(%q): %v", c.Key, err)
	}
	return d
}

// TestReopenKeepsState closes a store holding every kind of durable state and opens it
// again: counters are not lower, held leases stay held until their TTL, and rules with
// overrides, usage, accounts and keys, webhooks and outbox events are all there.
func TestReopenKeepsState(t *testing.T) {
	dir := t.TempDir()
	clock := testkit.NewFakeClock(time.UnixMilli(t0))
	s := open(t, dir, clock, diskstore.Options{SyncInterval: time.Hour})

	hot := ctr("hot", 60_000)
	for range 7 {
		spend(t, s, hot, 10, 1)
	}
	bucket := engine.Counter{Account: "acct", Namespace: "ns", Key: "tb", Algorithm: engine.TokenBucket, WindowMS: 60_000}
	spend(t, s, bucket, 5, 5)
	set := engine.LeaseSet{Account: "acct", Namespace: "ns", Key: "jobs"}
	for i := range 3 {
		if d, err := s.Acquire(ctx, set, fmt.Sprintf("tok%d", i), 3, 30_000); err != nil || !d.Allowed {
			t.Fatalf("Acquire: %+v, %v", d, err)
		}
	}
	name := "api"
	rule := engine.Rule{Algorithm: engine.SlidingWindow, Limit: 100, WindowMS: 60_000, Name: &name,
		Overrides: engine.NewOverrides([]engine.Override{{Key: "vip", Limit: 1000}})}
	if _, err := s.PutRule(ctx, "acct", "ns", rule); err != nil {
		t.Fatal(err)
	}
	today := engine.DayOf(t0)
	uk := engine.UsageKey{Account: "acct", Namespace: "ns", Day: today}
	if err := s.AddUsage(ctx, engine.UsageBatch{ID: "b1", Counts: map[engine.UsageKey]engine.UsageCount{uk: {Total: 40, Blocked: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateAccount(ctx, engine.StoredAccount{ID: "tenant", Plan: "pro"}); err != nil {
		t.Fatal(err)
	}
	key := engine.StoredKey{ID: "k1", Account: "tenant", Name: "ci", Prefix: "lsk_ab", Hash: [32]byte{1, 2, 3}}
	if _, err := s.IssueKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := s.PutWebhook(ctx, "tenant", engine.Webhook{URL: "https://example.test/hook", Secret: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ev1", "ev2"} {
		ev := engine.OutboxEvent{ID: id, Account: "tenant", Type: "usage.quota_exceeded", CreatedMS: t0, Data: []byte(`{"a": 1}`)}
		if _, err := s.Enqueue(ctx, ev, "once-"+id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Retry(ctx, "ev2", 60_000); err != nil {
		t.Fatal(err)
	}
	version, _ := s.AccountsVersion(ctx)
	mustClose(t, s)

	clock.Advance(10 * time.Second)
	s = open(t, dir, clock, diskstore.Options{SyncInterval: time.Hour})
	defer mustClose(t, s)
	if d := spend(t, s, hot, 10, 1); !d.Allowed || d.Remaining != 2 {
		t.Errorf("hot counter after reopen: %+v, want allowed with 2 remaining (7 spent before)", d)
	}
	if d := spend(t, s, bucket, 5, 5); d.Allowed {
		t.Errorf("token bucket emptied before reopen allowed 5 more 10 s later: %+v", d)
	}
	if d, _ := s.Acquire(ctx, set, "tok9", 3, 30_000); d.Allowed || d.Active != 3 {
		t.Errorf("lease set after reopen: %+v, want 3 held and refused", d)
	}
	held, _ := s.HeldLeases(ctx, set)
	if len(held.Leases) != 3 || held.Leases[0].ExpiresMS != t0+30_000 {
		t.Errorf("held leases after reopen: %+v", held.Leases)
	}
	rs, _ := s.Rules(ctx, "acct", "ns")
	if rs.Rate == nil || rs.Rate.Limit != 100 || rs.Rate.Name == nil || *rs.Rate.Name != "api" || rs.Rate.Overrides.Len() != 1 {
		t.Errorf("rule after reopen: %+v", rs.Rate)
	} else if o, ok := rs.Rate.Overrides.Lookup("vip"); !ok || o.Limit != 1000 {
		t.Errorf("override after reopen: %+v %v", o, ok)
	}
	rep, _ := s.ReadUsage(ctx, engine.UsageQuery{Account: "acct", Namespace: "ns", FirstDay: today, LastDay: today, Month: today.Month()})
	if rep.Days[0] != (engine.UsageCount{Total: 40, Blocked: 2}) || rep.MonthTotal != 40 {
		t.Errorf("usage after reopen: %+v", rep)
	}
	if err := s.AddUsage(ctx, engine.UsageBatch{ID: "b1", Counts: map[engine.UsageKey]engine.UsageCount{uk: {Total: 40}}}); err != nil {
		t.Fatal(err)
	}
	if tot, _ := s.MonthTotals(ctx, today.Month(), []string{"acct"}); tot[0] != 40 {
		t.Errorf("batch b1 applied twice across a reopen: month total %d", tot[0])
	}
	snap, _ := s.LoadAccounts(ctx)
	if snap.Version != version || len(snap.Accounts) != 1 || snap.Accounts[0].Plan != "pro" || snap.Accounts[0].Keys != 1 ||
		len(snap.Keys) != 1 || snap.Keys[0].Hash != key.Hash || snap.Keys[0].Prefix != "lsk_ab" {
		t.Errorf("accounts after reopen: %+v (version %d before)", snap, version)
	}
	if w, ok, _ := s.Webhook(ctx, "tenant"); !ok || w.Secret != "s3cret" {
		t.Errorf("webhook after reopen: %+v %v", w, ok)
	}
	if n, _ := s.OutboxLen(ctx); n != 2 {
		t.Errorf("outbox after reopen holds %d events, want 2", n)
	}
	if added, _ := s.Enqueue(ctx, engine.OutboxEvent{ID: "ev3", Account: "tenant", Type: "t", Data: []byte(`{}`)}, "once-ev1"); added {
		t.Error("a once-key used before the reopen was used again")
	}
	evs, _ := s.Claim(ctx, 10, 60_000)
	if len(evs) != 1 || evs[0].ID != "ev1" || string(evs[0].Data) != `{"a":1}` {
		t.Errorf("claim after reopen: %+v, want ev1 only (ev2 is due later)", evs)
	}
	clock.Advance(30 * time.Second)
	if d, _ := s.Acquire(ctx, set, "tok9", 3, 30_000); !d.Allowed || d.Active != 1 {
		t.Errorf("leases past their TTL still held after reopen: %+v", d)
	}
}

// TestSecondOpenLocked: a directory in use is refused with ErrLocked, naming the path,
// and can be opened once the first store is closed.
func TestSecondOpenLocked(t *testing.T) {
	dir := t.TempDir()
	clock := testkit.NewFakeClock(time.UnixMilli(t0))
	s := open(t, dir, clock, diskstore.Options{})
	_, err := diskstore.Open(ctx, diskstore.Options{Path: dir, Clock: clock, Logger: quiet})
	if !errors.Is(err, diskstore.ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name the directory", err)
	}
	mustClose(t, s)
	mustClose(t, open(t, dir, clock, diskstore.Options{}))
}

// syncFS counts the syncs of the write-ahead log's files.
type syncFS struct {
	vfs.FS
	syncs atomic.Int64
}

func (fs *syncFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil || filepath.Ext(name) != ".log" {
		return f, err
	}
	return &syncFile{File: f, fs: fs}, nil
}

func (fs *syncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(f, name, err)
}

func (fs *syncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(f, newname, err)
}

type syncFile struct {
	vfs.File
	fs *syncFS
}

func (f *syncFile) Sync() error {
	f.fs.syncs.Add(1)
	return f.File.Sync()
}

func (f *syncFile) SyncData() error {
	f.fs.syncs.Add(1)
	return f.File.SyncData()
}

func (f *syncFile) SyncTo(length int64) (bool, error) {
	f.fs.syncs.Add(1)
	return f.File.SyncTo(length)
}

// TestSyncEveryWrite: with SyncInterval 0 every answered write has synced the log; with
// an interval the log is synced by the syncer, not per write, and at Close.
func TestSyncEveryWrite(t *testing.T) {
	const writes = 50
	run := func(t *testing.T, every time.Duration) (perWrite []int64, afterClose int64) {
		fs := &syncFS{FS: vfs.Default}
		clock := testkit.NewFakeClock(time.UnixMilli(t0))
		s := open(t, t.TempDir(), clock, diskstore.Options{SyncInterval: every, FS: fs})
		for i := range writes {
			before := fs.syncs.Load()
			spend(t, s, ctr(fmt.Sprint("k", i), 60_000), 10, 1)
			perWrite = append(perWrite, fs.syncs.Load()-before)
		}
		before := fs.syncs.Load()
		mustClose(t, s)
		return perWrite, fs.syncs.Load() - before
	}
	t.Run("zero", func(t *testing.T) {
		perWrite, _ := run(t, 0)
		for i, n := range perWrite {
			if n < 1 {
				t.Fatalf("write %d returned without a sync of the log", i)
			}
		}
	})
	t.Run("interval", func(t *testing.T) {
		perWrite, atClose := run(t, time.Hour)
		if slices.Max(perWrite) != 0 {
			t.Errorf("writes synced the log with a one-hour interval: %v", perWrite)
		}
		if atClose < 1 {
			t.Error("Close did not sync the log")
		}
	})
}

// records counts the records in a closed store's directory by kind (first byte).
func records(t *testing.T, dir string) map[byte]int {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: quietPebble{}})
	if err != nil {
		t.Fatalf("pebble.Open(%s): %v", dir, err)
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := make(map[byte]int)
	for it.First(); it.Valid(); it.Next() {
		n[it.Key()[0]]++
	}
	return n
}

type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// TestReclaimed: expired counters and leases, usage past its retention and delivered
// events leave the disk after a sweep, while live state stays.
func TestReclaimed(t *testing.T) {
	dir := t.TempDir()
	clock := testkit.NewFakeClock(time.UnixMilli(t0))
	s := open(t, dir, clock, diskstore.Options{SyncInterval: time.Hour})
	for i := range 100 {
		spend(t, s, ctr(fmt.Sprint("short", i), 1_000), 10, 1)
	}
	spend(t, s, ctr("long", 3_600_000), 10, 1)
	set := engine.LeaseSet{Account: "acct", Namespace: "ns", Key: "jobs"}
	for i := range 20 {
		if _, err := s.Acquire(ctx, set, fmt.Sprint("t", i), 100, 1_000); err != nil {
			t.Fatal(err)
		}
	}
	old := engine.UsageKey{Account: "acct", Namespace: "ns", Day: engine.DayOf(t0)}
	if err := s.AddUsage(ctx, engine.UsageBatch{ID: "old", Counts: map[engine.UsageKey]engine.UsageCount{old: {Total: 1}}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ev1", "ev2"} {
		if _, err := s.Enqueue(ctx, engine.OutboxEvent{ID: id, Account: "acct", Type: "t", Data: []byte(`{}`)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Ack(ctx, "ev1"); err != nil {
		t.Fatal(err)
	}
	// 50 days later the counter "long" has expired too; keep one live counter.
	clock.Advance(50 * 24 * time.Hour)
	spend(t, s, ctr("live", 60_000), 10, 1)
	s.Sweep()
	mustClose(t, s)

	got := records(t, dir)
	want := map[byte]int{'c': 1, 'e': 1, 'm': 1}
	for _, k := range []byte("cldbemtl") {
		if got[k] != want[k] {
			t.Errorf("records of kind %q on disk after the sweep: %d, want %d (all: %v)", k, got[k], want[k], got)
		}
	}
}

// TestBackupWhileWriting takes a backup while writers change counters, leases and usage,
// and opens it: each writer's changes form a prefix (a lease set never holds a token
// acquired after one it lacks) and every usage batch is whole (month total = sum of days).
func TestBackupWhileWriting(t *testing.T) {
	dir := t.TempDir()
	clock := testkit.NewFakeClock(time.UnixMilli(t0))
	s := open(t, dir, clock, diskstore.Options{SyncInterval: time.Hour})
	defer mustClose(t, s)
	const writers = 4
	var (
		wg       sync.WaitGroup
		stop     atomic.Bool
		acquired [writers]atomic.Int64
	)
	today := engine.DayOf(t0)
	for w := range writers {
		wg.Go(func() {
			set := engine.LeaseSet{Account: "acct", Namespace: "ns", Key: fmt.Sprint("w", w)}
			for i := 0; !stop.Load() || i < 200; i++ {
				if _, err := s.Acquire(ctx, set, fmt.Sprintf("%06d", i), 1_000_000, 3_600_000); err != nil {
					t.Error(err)
					return
				}
				acquired[w].Add(1)
				b := engine.UsageBatch{ID: fmt.Sprint(w, "-", i), Counts: map[engine.UsageKey]engine.UsageCount{
					{Account: "acct", Namespace: fmt.Sprint("a", w), Day: today}:     {Total: 1},
					{Account: "acct", Namespace: fmt.Sprint("b", w), Day: today - 1}: {Total: 2},
				}}
				if err := s.AddUsage(ctx, b); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	testkit.Eventually(t, "writer 0 holding 100 leases", 30*time.Second, func() bool { return acquired[0].Load() >= 100 })
	backup := filepath.Join(t.TempDir(), "backup")
	if err := s.Backup(ctx, backup); err != nil {
		t.Fatalf("Backup: %v", err)
	}
	stop.Store(true)
	wg.Wait()
	if err := s.Backup(ctx, backup); err == nil {
		t.Error("Backup into an existing directory succeeded")
	}

	b := open(t, backup, clock, diskstore.Options{})
	defer mustClose(t, b)
	for w := range writers {
		held, err := b.HeldLeases(ctx, engine.LeaseSet{Account: "acct", Namespace: "ns", Key: fmt.Sprint("w", w)})
		if err != nil {
			t.Fatal(err)
		}
		n := len(held.Leases)
		if n == 0 || int64(n) >= acquired[w].Load() && w == 0 {
			t.Errorf("writer %d: backup holds %d of %d leases", w, n, acquired[w].Load())
		}
		tokens := make([]string, n)
		for i, l := range held.Leases {
			tokens[i] = l.Token
		}
		slices.Sort(tokens)
		for i, tok := range tokens {
			if tok != fmt.Sprintf("%06d", i) {
				t.Fatalf("writer %d: backup holds token %s at %d: not a prefix", w, tok, i)
			}
		}
		rep, err := b.ReadAccountUsage(ctx, engine.AccountUsageQuery{Account: "acct", FirstDay: today - 1, LastDay: today, Month: today.Month()})
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, e := range rep.Entries {
			sum += e.Total
		}
		if rep.MonthTotal != sumMonth(rep, today.Month()) || sum < rep.MonthTotal {
			t.Errorf("usage in the backup is torn: month total %d, days %+v", rep.MonthTotal, rep.Entries)
		}
	}
	if _, err := os.Stat(filepath.Join(backup, "leash.lock")); err != nil {
		t.Errorf("the opened backup has no lock file: %v", err)
	}
}

// sumMonth sums the report's days that fall in month.
func sumMonth(rep engine.AccountUsageReport, month engine.Month) int64 {
	var n int64
	for _, e := range rep.Entries {
		if e.Day.Month() == month {
			n += e.Total
		}
	}
	return n
}

// TestConcurrentWritesReopen spends from many goroutines at once, so their commits
// overlap, on one hot counter and on counters of their own; after a reopen every counter
// holds exactly what was answered.
func TestConcurrentWritesReopen(t *testing.T) {
	dir := t.TempDir()
	clock := testkit.NewFakeClock(time.UnixMilli(t0))
	opts := diskstore.Options{SyncInterval: time.Hour}
	s := open(t, dir, clock, opts)
	const writers, rounds, own = 16, 300, 10
	hot := ctr("hot", 3_600_000)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				if _, err := s.Spend(ctx, engine.Spend{Counter: hot, Limit: 1_000_000, Cost: 1}); err != nil {
					t.Error(err)
					return
				}
				c := ctr(fmt.Sprintf("w%d-%d", w, i%own), 3_600_000)
				if _, err := s.Spend(ctx, engine.Spend{Counter: c, Limit: 1_000_000, Cost: 1}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	mustClose(t, s)
	s = open(t, dir, clock, opts)
	defer mustClose(t, s)
	if d := spend(t, s, hot, 1_000_000, 0); d.Remaining != 1_000_000-writers*rounds {
		t.Errorf("hot counter after reopen: remaining %d, want %d", d.Remaining, 1_000_000-writers*rounds)
	}
	for w := range writers {
		for k := range own {
			c := ctr(fmt.Sprintf("w%d-%d", w, k), 3_600_000)
			if d := spend(t, s, c, 1_000_000, 0); d.Remaining != 1_000_000-rounds/own {
				t.Errorf("counter %q after reopen: remaining %d, want %d", c.Key, d.Remaining, 1_000_000-rounds/own)
			}
		}
	}
}

// TestReopenBound reopens a store of 20,000 counters with room for all of them, then
// with room for 4,096: the first holds them all, the second no more than its bound, each
// counter it holds as it was (Open sizes the memory store from the tables it finds, but
// never beyond the bound).
func TestReopenBound(t *testing.T) {
	const n, small = 20_000, 4096
	dir := t.TempDir()
	clock := testkit.NewFakeClock(time.UnixMilli(t0))
	s := open(t, dir, clock, diskstore.Options{SyncInterval: time.Hour, MaxEntries: 2 * n})
	for i := range n {
		spend(t, s, ctr(fmt.Sprint("k", i), 3_600_000), 100, 1)
	}
	mustClose(t, s)
	for _, bound := range []int{2 * n, small} {
		s := open(t, dir, clock, diskstore.Options{SyncInterval: time.Hour, MaxEntries: bound})
		held := s.Len()
		if want := min(n, bound); held > want || (bound > n && held != n) {
			t.Errorf("MaxEntries %d: reopened store holds %d counters, want %d", bound, held, want)
		}
		kept := 0
		for i := range n {
			if d := spend(t, s, ctr(fmt.Sprint("k", i), 3_600_000), 100, 0); d.Remaining == 99 {
				kept++
			}
		}
		if kept != held {
			t.Errorf("MaxEntries %d: %d counters kept their count, want the %d held", bound, kept, held)
		}
		mustClose(t, s)
	}
}
