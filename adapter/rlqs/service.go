package rlqs

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"hash/fnv"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/leashd/leash/adapter/descriptors"
	"github.com/leashd/leash/adapter/domains"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
)

// ServiceName is the gRPC service Envoy's rate_limit_quota filter calls.
const ServiceName = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"

// Defaults of Options (spec §14.6).
const (
	DefaultReportingInterval    = time.Second
	DefaultTTLIntervals         = 3
	DefaultMaxBucketsPerStream  = 1000
	DefaultMaxBucketsPerAccount = 10_000
)

// Bounds of the assignments' time-to-live.
const (
	minTTL = 50 * time.Millisecond
	maxTTL = time.Duration(engine.MaxDemandTTLMS) * time.Millisecond
)

// maxCount is the largest request count one report may carry for a bucket (spec §14.6).
const maxCount = uint64(engine.MaxLimit)

// Counters is what the service's streams are counted in, by StreamInterceptor alone; nil
// fields are skipped. domain is bounded: a configured domain (envoy.domains or a
// descriptor file's), else "other".
type Counters struct {
	// Streams adds delta to the open streams.
	Streams func(delta int)
	// Buckets adds delta to the buckets tracked.
	Buckets func(delta int)
	// Sent counts one bucket action sent: allow_all, deny_all, token_bucket or abandon.
	Sent func(kind string)
	// Reported counts the requests one report says a proxy allowed and denied.
	Reported func(domain string, allowed, denied uint64)
	// Rejected counts one report or bucket refused: no_domain, bad_domain,
	// unmapped_domain, bad_bucket, bad_counts, too_many_buckets.
	Rejected func(reason string)
}

// Options configures a Service.
type Options struct {
	Engine *wiring.Engine
	// Demand is the store of every stream's recent demand (the engine's store).
	Demand engine.DemandStore
	// Accounts resolves an account id (the engine's directory, which reloads replace).
	Accounts func(id string) (*engine.Account, bool)
	// Config returns the descriptor config and routing in force (the RateLimitService's,
	// so reloads and xDS updates apply to both).
	Config func() *domains.Config
	// ReportingInterval is assumed for a stream until its reports show their own;
	// default DefaultReportingInterval.
	ReportingInterval time.Duration
	// TTLIntervals is the assignments' time-to-live in reporting intervals (and the
	// demand entries'); default DefaultTTLIntervals.
	TTLIntervals int
	// MaxBucketsPerStream and MaxBucketsPerAccount bound the buckets tracked, per stream
	// and per account on this instance; a bucket beyond them is ignored.
	MaxBucketsPerStream, MaxBucketsPerAccount int
	// Counters count the streams, through StreamInterceptor.
	Counters Counters
	Logger   *slog.Logger
}

// Service implements envoy.service.rate_limit_quota.v3.RateLimitQuotaService.
type Service struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer
	opts Options

	mu       sync.Mutex
	perAcct  map[string]int // buckets tracked per account
	done     chan struct{}
	shutdown sync.Once
}

// NewService returns a service; Shutdown ends its streams.
func NewService(opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.ReportingInterval = cmp.Or(opts.ReportingInterval, DefaultReportingInterval)
	opts.TTLIntervals = cmp.Or(opts.TTLIntervals, DefaultTTLIntervals)
	opts.MaxBucketsPerStream = cmp.Or(opts.MaxBucketsPerStream, DefaultMaxBucketsPerStream)
	opts.MaxBucketsPerAccount = cmp.Or(opts.MaxBucketsPerAccount, DefaultMaxBucketsPerAccount)
	return &Service{opts: opts, perAcct: make(map[string]int), done: make(chan struct{})}
}

// Shutdown ends every stream with UNAVAILABLE, so proxies reconnect to another
// instance while keeping their assignments until these expire; later streams end at once.
func (s *Service) Shutdown() { s.shutdown.Do(func() { close(s.done) }) }

// proxyStream is what the service tracks of one proxy's stream.
type proxyStream struct {
	id       string
	domain   string
	account  string
	label    string        // the domain's metrics label
	interval time.Duration // the reporting interval, as the reports show it
	nowMS    int64         // the store's clock at the last decision
	buckets  map[string]*bucket
	failing  bool   // decisions fail (logged once until one succeeds)
	tally    *tally // counts what the stream's reports came to; nil: not counted
}

// bucket is one bucket of a stream.
type bucket struct {
	id       *rlqsv3.BucketId
	entry    string  // the stream's demand entry id for this bucket
	counter  string  // the counter key it spent last
	rule     string  // the rule it was assigned under: "" none, "ns" the namespace's, else the descriptor's
	demand   float64 // requests per second, smoothed; <0 before the first measure
	lastMS   int64
	sent     *typev3.RateLimitStrategy
	sentMS   int64
	assigned bool
}

// StreamRateLimitQuotas serves one proxy's stream (spec §14.1).
func (s *Service) StreamRateLimitQuotas(st grpc.BidiStreamingServer[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]) error {
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	msgs := make(chan *rlqsv3.RateLimitQuotaUsageReports)
	recvErr := make(chan error, 1)
	go func() { // ends when the stream does (the handler's return cancels it)
		for {
			m, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	proxy := &proxyStream{id: newStreamID(), interval: s.opts.ReportingInterval, buckets: make(map[string]*bucket), tally: tallyOf(st.Context())}
	defer s.forgetAll(proxy)
	for {
		select {
		case m := <-msgs:
			resp, err := s.report(ctx, proxy, m)
			if err != nil {
				return err
			}
			if len(resp.GetBucketAction()) > 0 {
				if err := st.Send(resp); err != nil {
					return err
				}
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case <-s.done:
			return status.Error(codes.Unavailable, "leash is shutting down; reconnect")
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// report handles one message: the domain (first message), then each bucket's usage.
func (s *Service) report(ctx context.Context, proxy *proxyStream, m *rlqsv3.RateLimitQuotaUsageReports) (*rlqsv3.RateLimitQuotaResponse, error) {
	cfg := s.opts.Config()
	if proxy.domain == "" {
		d := m.GetDomain()
		if d == "" {
			proxy.tally.reject("no_domain")
			return nil, status.Error(codes.InvalidArgument, "the first report must name a domain")
		}
		if engine.CheckNamespace(d) != nil {
			proxy.tally.reject("bad_domain")
			return nil, status.Error(codes.InvalidArgument, "the domain is not a valid namespace")
		}
		proxy.domain, proxy.label = d, domainLabel(cfg, d)
	}
	id := cfg.Routing.AccountOf(proxy.domain)
	if proxy.account != "" && id != proxy.account {
		// A reload moved the domain: start over on a new stream.
		return nil, status.Error(codes.Unavailable, "the domain's account changed; reconnect")
	}
	acct, ok := (*engine.Account)(nil), false
	if id != "" {
		acct, ok = s.opts.Accounts(id)
	}
	if !ok {
		proxy.tally.reject("unmapped_domain")
		return nil, status.Error(codes.FailedPrecondition, "the domain maps to no account: set envoy.domains or envoy.default_account")
	}
	proxy.account = id
	resp := &rlqsv3.RateLimitQuotaResponse{}
	for _, u := range m.GetBucketQuotaUsages() {
		if a := s.usage(ctx, proxy, cfg, acct, u); a != nil {
			resp.BucketAction = append(resp.BucketAction, a)
		}
	}
	return resp, nil
}

// resolved is what a bucket spends and under which rule.
type resolved struct {
	item engine.Item
	rule string
}

// resolve matches a bucket id against the domain's descriptors (spec §14.2).
func resolve(cfg *domains.Config, domain string, bid map[string]string) resolved {
	if m, ok := cfg.Descriptors.MatchBucket(domain, bid); ok {
		r := resolved{rule: m.Rule.File + "#" + m.Rule.Path}
		if m.Rule.Unlimited {
			r.item.Source = engine.NoLimit
			return r
		}
		r.item = engine.Item{Key: domains.CounterKey(m.Entries), Source: engine.Given, Limits: m.Rule.EngineLimits, Shadow: m.Rule.ShadowMode}
		return r
	}
	return resolved{rule: "ns", item: engine.Item{Key: sortedKey(bid), Source: engine.RuleIfAny}}
}

// sortedKey is the counter key of a bucket no descriptor orders: its entries sorted by
// key (spec §14.2).
func sortedKey(bid map[string]string) string {
	keys := slices.Sorted(maps.Keys(bid))
	es := make([]descriptors.Entry, len(keys))
	for i, k := range keys {
		es[i] = descriptors.Entry{Key: k, Value: bid[k]}
	}
	return domains.CounterKey(es)
}

// usage spends one bucket's report and returns the action to send, if any.
func (s *Service) usage(ctx context.Context, proxy *proxyStream, cfg *domains.Config, acct *engine.Account, u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	bid := u.GetBucketId().GetBucket()
	if len(bid) == 0 || len(bid) > descriptors.MaxBucketEntries {
		proxy.tally.reject("bad_bucket")
		return nil
	}
	allowed, denied := u.GetNumRequestsAllowed(), u.GetNumRequestsDenied()
	if allowed > maxCount || denied > maxCount {
		proxy.tally.reject("bad_counts")
		return nil
	}
	proxy.tally.report(proxy.label, allowed, denied)
	key := sortedKey(bid)
	b := proxy.buckets[key]
	if b == nil {
		if len(proxy.buckets) >= s.opts.MaxBucketsPerStream || !s.take(proxy.account) {
			proxy.tally.reject("too_many_buckets")
			return nil
		}
		b = &bucket{id: u.GetBucketId(), entry: entryID(proxy.id, key), demand: -1}
		proxy.buckets[key] = b
		proxy.tally.track(1)
	}
	b.id = u.GetBucketId()

	// How often this stream reports, and this bucket's demand.
	elapsed := u.GetTimeElapsed().AsDuration()
	if elapsed <= 0 && b.lastMS > 0 && proxy.nowMS > b.lastMS {
		elapsed = time.Duration(proxy.nowMS-b.lastMS) * time.Millisecond
	}
	back := 0.0 // a proxy coming back: the rate it admitted under its last assignment
	if elapsed > 0 {
		proxy.interval = (proxy.interval + min(max(elapsed, 10*time.Millisecond), maxTTL)) / 2
		b.demand = smooth(b.demand, float64(allowed+denied)/elapsed.Seconds(), elapsed, proxy.interval)
		if !b.assigned && u.GetTimeElapsed().AsDuration() > 0 && allowed > 0 {
			back = float64(allowed) / elapsed.Seconds()
		}
	}

	res := resolve(cfg, proxy.domain, bid)
	it := res.item
	it.Cost, it.Report = int64(allowed), &engine.Report{Allowed: int64(allowed), Denied: int64(denied)}
	q := engine.Query{Edge: engine.EdgeRLQS, Namespace: proxy.domain, Items: []engine.Item{it}}
	var out [1]engine.ItemResult
	o, err := s.opts.Engine.Limits.Decide(ctx, acct, &q, out[:])
	ttl := min(max(time.Duration(s.opts.TTLIntervals)*proxy.interval, minTTL), maxTTL)
	var strat *typev3.RateLimitStrategy
	switch {
	case engine.CodeOf(err) == engine.CodeHardCapExceeded:
		strat = Blanket(typev3.RateLimitStrategy_DENY_ALL)
	case err != nil:
		// The store is down or the rule is not on the plan: the proxy keeps its last
		// assignment until it expires.
		if !proxy.failing {
			s.opts.Logger.Warn("rlqs: reports cannot be decided; proxies keep their assignments", "domain", proxy.domain, "code", string(engine.CodeOf(err)))
			proxy.failing = true
		}
		return nil
	default:
		proxy.nowMS, proxy.failing = o.NowMS, false
		r := &out[0]
		if r.Limited && r.Index == -1 && it.Source == engine.RuleIfAny {
			res.rule = "ns"
		} else if !r.Limited && it.Source == engine.RuleIfAny {
			res.rule = ""
		}
		if b.assigned && b.rule != "" && b.rule != res.rule {
			// The rule this bucket was assigned under is gone (spec §14.5).
			s.forget(proxy, key, b)
			return &rlqsv3.RateLimitQuotaResponse_BucketAction{
				BucketId:     b.id,
				BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{}},
			}
		}
		b.rule = res.rule
		switch {
		case !r.Limited || it.Shadow:
			strat = Blanket(typev3.RateLimitStrategy_ALLOW_ALL)
		case r.Limit.Limit == 0:
			strat = Blanket(typev3.RateLimitStrategy_DENY_ALL)
		default:
			strat = s.share(ctx, proxy, b, it, r, ttl, back)
			if strat == nil {
				return nil
			}
		}
	}
	b.lastMS = proxy.nowMS
	if b.assigned && !changed(b.sent, strat) {
		if time.Duration(proxy.nowMS-b.sentMS)*time.Millisecond < ttl/2 {
			return nil
		}
		// A refresh repeats the strategy in force exactly: the proxy then only extends
		// its time-to-live, where any other strategy would refill its token bucket.
		strat = b.sent
	}
	b.sent, b.sentMS, b.assigned = strat, proxy.nowMS, true
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId: b.id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
			AssignmentTimeToLive: durationpb.New(ttl),
			RateLimitStrategy:    strat,
		}},
	}
}

// share records the bucket's demand and returns its share of the budget as a token
// bucket (spec §14.4); nil when the store did not answer. back > 0 is the rate a proxy
// coming back (a new stream's first report of a bucket with usage since an earlier
// report, as after its instance was lost) admitted meanwhile: its first share is at most
// Headroom times that, so proxies reconnecting one by one do not each look alone.
func (s *Service) share(ctx context.Context, proxy *proxyStream, b *bucket, it engine.Item, r *engine.ItemResult, ttl time.Duration, back float64) *typev3.RateLimitStrategy {
	limits := it.Limits
	if it.Source != engine.Given {
		limits = []engine.Limit{r.Limit}
	}
	budget := math.Inf(1)
	for _, l := range limits {
		budget = min(budget, float64(l.Limit)*1000/float64(l.WindowMS))
	}
	budget = clampBudget(budget, r, proxy.interval)
	want := max(b.demand, 0) * Headroom
	db := engine.DemandBucket{Account: proxy.account, Namespace: proxy.domain, Key: it.Key}
	if b.counter != "" && b.counter != it.Key {
		_ = s.opts.Demand.DropDemand(ctx, engine.DemandBucket{Account: proxy.account, Namespace: proxy.domain, Key: b.counter}, b.entry)
	}
	b.counter = it.Key
	all, err := s.opts.Demand.ReportDemand(ctx, engine.DemandReport{Bucket: db, Stream: b.entry,
		MilliRPS: int64(min(want*1000, engine.MaxDemandMilliRPS)), TTLMS: ttl.Milliseconds()})
	if err != nil {
		s.opts.Logger.Warn("rlqs: demand not recorded", "domain", proxy.domain, "err", err)
		return nil
	}
	wants := make([]float64, 0, len(all)+1)
	own := -1
	for _, d := range all {
		if d.Stream == b.entry {
			own = len(wants)
		}
		wants = append(wants, float64(d.MilliRPS)/1000)
	}
	if own < 0 { // the bucket's entries are full: count this stream all the same
		own = len(wants)
		wants = append(wants, want)
	}
	sh := Share(budget, wants, own)
	if back > 0 {
		sh = min(sh, back*Headroom)
	}
	return TokenBucket(sh, proxy.interval/2)
}

// clampBudget lowers the steady budget pace (requests/s) when the counter is behind it
// (spec §14.4). Near a reset (less than two reporting intervals away) the pace stands: the
// window turns before a new assignment would matter. Otherwise an exhausted counter gives
// 0; a fixed window paces what remains to its reset, counting one interval of the pace as
// not yet its own (reports arrive an interval late, so each window's counter holds the
// tail of the one before), once that falls below ClampRatio of the pace; a sliding window
// or token bucket that could not take a report halves the pace. Within the band the
// budget stays at the pace, so shares do not follow the counter's noise: every change
// pushed refills the proxies' token buckets.
func clampBudget(pace float64, r *engine.ItemResult, interval time.Duration) float64 {
	switch {
	case time.Duration(r.ResetMS)*time.Millisecond < 2*interval:
		return pace
	case r.Remaining <= 0:
		return 0
	case r.Limit.Algorithm != engine.FixedWindow:
		if !r.Allowed {
			return pace / 2
		}
		return pace
	}
	paced := (float64(r.Remaining) + pace*interval.Seconds()) * 1000 / float64(r.ResetMS)
	if paced < ClampRatio*pace {
		return paced
	}
	return pace
}

// smooth folds a measured demand into the estimate (spec §14.4): the first measure is
// taken as it is, a higher one moves the estimate halfway at once, a lower one decays it
// with a time constant of DemandDecay reporting intervals, so a proxy whose demand
// grows is served at once and one reporting an unlucky empty interval is not starved.
func smooth(est, rate float64, elapsed, interval time.Duration) float64 {
	switch {
	case est < 0:
		return rate
	case rate >= est:
		return (est + rate) / 2
	}
	a := 1 - math.Exp(-elapsed.Seconds()/(DemandDecay*interval).Seconds())
	return est + (rate-est)*a
}

// take reserves a bucket of account's bound; false when it is full.
func (s *Service) take(account string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perAcct[account] >= s.opts.MaxBucketsPerAccount {
		return false
	}
	s.perAcct[account]++
	return true
}

// forget stops tracking one bucket of a stream and gives its share back.
func (s *Service) forget(proxy *proxyStream, key string, b *bucket) {
	delete(proxy.buckets, key)
	s.release(proxy, []*bucket{b})
}

// forgetAll stops tracking every bucket of an ended stream.
func (s *Service) forgetAll(proxy *proxyStream) {
	bs := slices.Collect(maps.Values(proxy.buckets))
	clear(proxy.buckets)
	s.release(proxy, bs)
}

// release drops the buckets' demand entries, so the other streams' shares grow at their
// next report, and their places in the account's bound. While the service shuts down the
// entries are left to expire instead: the proxies reconnect to another instance at once,
// and without them each would look alone there until the others report.
func (s *Service) release(proxy *proxyStream, bs []*bucket) {
	if len(bs) == 0 {
		return
	}
	s.mu.Lock()
	if s.perAcct[proxy.account] -= len(bs); s.perAcct[proxy.account] <= 0 {
		delete(s.perAcct, proxy.account)
	}
	s.mu.Unlock()
	proxy.tally.track(-len(bs))
	select {
	case <-s.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, b := range bs {
		if b.counter == "" {
			continue
		}
		if err := s.opts.Demand.DropDemand(ctx, engine.DemandBucket{Account: proxy.account, Namespace: proxy.domain, Key: b.counter}, b.entry); err != nil {
			// The entry expires within one time-to-live all the same.
			s.opts.Logger.Debug("rlqs: demand entry not dropped", "err", err)
			return
		}
	}
}

// domainLabel bounds the domain label of metrics: a configured domain, else "other".
func domainLabel(cfg *domains.Config, d string) string {
	if _, ok := cfg.Routing.Domains[d]; ok || cfg.Descriptors.File(d) != "" {
		return d
	}
	return "other"
}

// newStreamID returns a random stream id, unique across instances.
func newStreamID() string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// entryID is a bucket's demand entry id: the stream's id and a hash of the bucket, so
// two buckets of one stream that spend one counter keep two entries.
func entryID(stream, key string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return stream + "." + strconv.FormatUint(h.Sum64(), 16)
}
