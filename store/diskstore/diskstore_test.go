package diskstore_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/diskstore"
	"github.com/leashd/leash/testkit/storetest"
)

var ctx = context.Background()

const t0 = storetest.BaseMS

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// open opens a store in dir with the clock, failing the test on error.
func open(t testing.TB, dir string, clock engine.Clock, opts diskstore.Options) *diskstore.Store {
	t.Helper()
	opts.Path, opts.Clock = dir, clock
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	s, err := diskstore.Open(ctx, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

func mustClose(t testing.TB, s *diskstore.Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, clock engine.Clock) engine.Store {
		s := open(t, t.TempDir(), clock, diskstore.Options{SyncInterval: diskstore.DefaultSyncInterval})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestConformanceReopened runs the suite on a store that is closed and opened again
// every few calls, so most answers depend on what the disk kept. Its property tests run
// one random case in reopenSample (TestConformance runs them all on one store).
func TestConformanceReopened(t *testing.T) {
	if testing.Short() {
		t.Skip("reopens a store thousands of times")
	}
	storetest.Run(t, func(t *testing.T, clock engine.Clock) engine.Store {
		r := &reopening{t: t, dir: t.TempDir(), clock: clock}
		r.s = open(t, r.dir, clock, diskstore.Options{SyncInterval: time.Hour})
		t.Cleanup(func() { r.Close() })
		return r
	}, storetest.Sample(reopenSample))
}

// reopenSample: TestConformanceReopened's property tests run one case in 4, or in
// LEASH_DISK_REOPEN_SAMPLE (make test-disk-long: 1, every case).
var reopenSample = envInt("LEASH_DISK_REOPEN_SAMPLE", 4)

// reopening is an engine.Store that reopens its disk store before each call.
type reopening struct {
	t     *testing.T
	dir   string
	clock engine.Clock
	mu    sync.Mutex
	s     *diskstore.Store
	calls int
}

// reopenEvery is how many calls pass between reopenings: 48, or LEASH_DISK_REOPEN_EVERY
// (make test-disk-long: 8). Reopening before every call makes the suite take many minutes.
var reopenEvery = envInt("LEASH_DISK_REOPEN_EVERY", 48)

// envInt is the positive integer in the environment variable name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// cur takes the lock, which the caller releases after its call, and reopens the store
// every reopenEvery calls.
func (r *reopening) cur() *diskstore.Store {
	r.mu.Lock()
	if r.calls++; r.calls%reopenEvery != 0 {
		return r.s
	}
	if err := r.s.Close(); err != nil {
		r.t.Errorf("Close: %v", err)
	}
	r.s = open(r.t, r.dir, r.clock, diskstore.Options{SyncInterval: time.Hour})
	return r.s
}

func (r *reopening) Spend(ctx context.Context, s engine.Spend) (engine.Decision, error) {
	defer r.mu.Unlock()
	return r.cur().Spend(ctx, s)
}
func (r *reopening) SpendAll(ctx context.Context, s []engine.Spend, out []engine.Decision) error {
	defer r.mu.Unlock()
	return r.cur().SpendAll(ctx, s, out)
}
func (r *reopening) Reset(ctx context.Context, c engine.Counter) (bool, error) {
	defer r.mu.Unlock()
	return r.cur().Reset(ctx, c)
}
func (r *reopening) Acquire(ctx context.Context, set engine.LeaseSet, token string, limit, ttlMS int64) (engine.LeaseDecision, error) {
	defer r.mu.Unlock()
	return r.cur().Acquire(ctx, set, token, limit, ttlMS)
}
func (r *reopening) Release(ctx context.Context, set engine.LeaseSet, token string) (engine.ReleaseResult, error) {
	defer r.mu.Unlock()
	return r.cur().Release(ctx, set, token)
}
func (r *reopening) Renew(ctx context.Context, set engine.LeaseSet, token string, ttlMS int64) (engine.RenewResult, error) {
	defer r.mu.Unlock()
	return r.cur().Renew(ctx, set, token, ttlMS)
}
func (r *reopening) NowMS(ctx context.Context) (int64, error) {
	defer r.mu.Unlock()
	return r.cur().NowMS(ctx)
}
func (r *reopening) HeldLeases(ctx context.Context, set engine.LeaseSet) (engine.HeldLeases, error) {
	defer r.mu.Unlock()
	return r.cur().HeldLeases(ctx, set)
}
func (r *reopening) Rules(ctx context.Context, account, namespace string) (engine.Rules, error) {
	defer r.mu.Unlock()
	return r.cur().Rules(ctx, account, namespace)
}
func (r *reopening) PutRule(ctx context.Context, account, namespace string, rule engine.Rule) (bool, error) {
	defer r.mu.Unlock()
	return r.cur().PutRule(ctx, account, namespace, rule)
}
func (r *reopening) DeleteRule(ctx context.Context, account, namespace string, kind engine.RuleKind) (bool, error) {
	defer r.mu.Unlock()
	return r.cur().DeleteRule(ctx, account, namespace, kind)
}
func (r *reopening) RuleNamespaces(ctx context.Context, account string) ([]engine.NamespaceRules, error) {
	defer r.mu.Unlock()
	return r.cur().RuleNamespaces(ctx, account)
}
func (r *reopening) AddUsage(ctx context.Context, b engine.UsageBatch) error {
	defer r.mu.Unlock()
	return r.cur().AddUsage(ctx, b)
}
func (r *reopening) ReadUsage(ctx context.Context, q engine.UsageQuery) (engine.UsageReport, error) {
	defer r.mu.Unlock()
	return r.cur().ReadUsage(ctx, q)
}
func (r *reopening) MonthTotals(ctx context.Context, m engine.Month, accounts []string) ([]int64, error) {
	defer r.mu.Unlock()
	return r.cur().MonthTotals(ctx, m, accounts)
}
func (r *reopening) ReadAccountUsage(ctx context.Context, q engine.AccountUsageQuery) (engine.AccountUsageReport, error) {
	defer r.mu.Unlock()
	return r.cur().ReadAccountUsage(ctx, q)
}
func (r *reopening) Webhook(ctx context.Context, account string) (engine.Webhook, bool, error) {
	defer r.mu.Unlock()
	return r.cur().Webhook(ctx, account)
}
func (r *reopening) PutWebhook(ctx context.Context, account string, w engine.Webhook) error {
	defer r.mu.Unlock()
	return r.cur().PutWebhook(ctx, account, w)
}
func (r *reopening) DeleteWebhook(ctx context.Context, account string) (bool, error) {
	defer r.mu.Unlock()
	return r.cur().DeleteWebhook(ctx, account)
}
func (r *reopening) Enqueue(ctx context.Context, ev engine.OutboxEvent, onceKey string) (bool, error) {
	defer r.mu.Unlock()
	return r.cur().Enqueue(ctx, ev, onceKey)
}
func (r *reopening) Claim(ctx context.Context, max int, visibilityMS int64) ([]engine.OutboxEvent, error) {
	defer r.mu.Unlock()
	return r.cur().Claim(ctx, max, visibilityMS)
}
func (r *reopening) Ack(ctx context.Context, id string) error {
	defer r.mu.Unlock()
	return r.cur().Ack(ctx, id)
}
func (r *reopening) Retry(ctx context.Context, id string, delayMS int64) error {
	defer r.mu.Unlock()
	return r.cur().Retry(ctx, id, delayMS)
}
func (r *reopening) OutboxLen(ctx context.Context) (int64, error) {
	defer r.mu.Unlock()
	return r.cur().OutboxLen(ctx)
}
func (r *reopening) ReportDemand(ctx context.Context, d engine.DemandReport) ([]engine.StreamDemand, error) {
	defer r.mu.Unlock()
	r.mu.Lock() // RLQS demand is volatile: no reopening
	return r.s.ReportDemand(ctx, d)
}
func (r *reopening) DropDemand(ctx context.Context, b engine.DemandBucket, stream string) error {
	defer r.mu.Unlock()
	r.mu.Lock() // RLQS demand is volatile: no reopening
	return r.s.DropDemand(ctx, b, stream)
}
func (r *reopening) Ping(ctx context.Context) error {
	defer r.mu.Unlock()
	return r.cur().Ping(ctx)
}
func (r *reopening) CreateAccount(ctx context.Context, a engine.StoredAccount) (engine.StoredAccount, bool, error) {
	defer r.mu.Unlock()
	return r.cur().CreateAccount(ctx, a)
}
func (r *reopening) GetAccount(ctx context.Context, id string) (engine.StoredAccount, bool, error) {
	defer r.mu.Unlock()
	return r.cur().GetAccount(ctx, id)
}
func (r *reopening) ListAccounts(ctx context.Context, after string, limit int) ([]engine.StoredAccount, error) {
	defer r.mu.Unlock()
	return r.cur().ListAccounts(ctx, after, limit)
}
func (r *reopening) UpdateAccount(ctx context.Context, id string, u engine.AccountUpdate) (engine.StoredAccount, bool, error) {
	defer r.mu.Unlock()
	return r.cur().UpdateAccount(ctx, id, u)
}
func (r *reopening) DeleteAccount(ctx context.Context, id string) (bool, error) {
	defer r.mu.Unlock()
	return r.cur().DeleteAccount(ctx, id)
}
func (r *reopening) IssueKey(ctx context.Context, k engine.StoredKey) (engine.StoredKey, error) {
	defer r.mu.Unlock()
	return r.cur().IssueKey(ctx, k)
}
func (r *reopening) AccountKeys(ctx context.Context, account string) ([]engine.StoredKey, error) {
	defer r.mu.Unlock()
	return r.cur().AccountKeys(ctx, account)
}
func (r *reopening) RevokeKey(ctx context.Context, account, keyID string) (bool, error) {
	defer r.mu.Unlock()
	return r.cur().RevokeKey(ctx, account, keyID)
}
func (r *reopening) AccountsVersion(ctx context.Context) (int64, error) {
	defer r.mu.Unlock()
	return r.cur().AccountsVersion(ctx)
}
func (r *reopening) LoadAccounts(ctx context.Context) (engine.AccountsSnapshot, error) {
	defer r.mu.Unlock()
	return r.cur().LoadAccounts(ctx)
}
func (r *reopening) AppendAudit(ctx context.Context, e engine.AuditEntry) (engine.AuditEntry, error) {
	defer r.mu.Unlock()
	r.mu.Lock() // the audit tests append thousands: ListAudit reopens
	return r.s.AppendAudit(ctx, e)
}
func (r *reopening) ListAudit(ctx context.Context, account, before string, limit int) ([]engine.AuditEntry, error) {
	defer r.mu.Unlock()
	return r.cur().ListAudit(ctx, account, before, limit)
}
func (r *reopening) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.s.Close()
}

var (
	_ engine.Store        = (*reopening)(nil)
	_ engine.AccountStore = (*reopening)(nil)
	_ engine.AuditStore   = (*reopening)(nil)
)
