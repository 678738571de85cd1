package engine

import (
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Failed-authentication slowing (spec §15.7): by default each client address may fail
// authentication AuthFailureBurst times at once, then once per AuthFailureEvery; past
// that, its calls are refused with too_many_auth_failures before their key is even looked
// at, whatever the key, until a failure is allowed again. Other addresses are not
// affected. It is kept per process, on the process's own clock: it protects this instance,
// decides nothing that the store keeps.
const (
	AuthFailureBurst = 20
	AuthFailureEvery = time.Second
	// maxAuthAddrs bounds the addresses tracked; an address is forgotten once it could
	// fail a whole burst again. While the table is full, the addresses it has no room for
	// share one overflow allowance of the same burst and rate: the guard never fails open.
	maxAuthAddrs = 100_000
	// sweepEvery is how often Check forgets the addresses no longer slowed, so that once
	// an attack ends the lock-free path comes back.
	sweepEvery = 10 * time.Second
)

// CodeTooManyAuthFailures refuses a client address that failed authentication too often.
const CodeTooManyAuthFailures Code = "too_many_auth_failures"

// AuthGuard counts failed authentications by client address and slows the addresses
// that fail too often. It is safe for concurrent use; the zero value is not usable (see
// NewAuthGuard).
type AuthGuard struct {
	mu       sync.Mutex
	addrs    map[netip.Addr]*rate.Limiter
	overflow *rate.Limiter // shared by the addresses a full table has no room for
	full     bool          // the table was full at the last failure of a new address
	tracked  atomic.Int64  // len(addrs), plus 1 while full: while 0, Check takes no lock
	swept    time.Time     // the last sweep
	maxAddrs int
	now      func() time.Time
	burst    int
	every    time.Duration
	failures atomic.Uint64
	refused  atomic.Uint64
}

// AuthGuardOptions configure an AuthGuard; zero fields take the defaults.
type AuthGuardOptions struct {
	// Burst is how many failures an address may have at once (AuthFailureBurst).
	Burst int
	// Every is how often one more failure is allowed after the burst (AuthFailureEvery).
	Every time.Duration
	// Now is the guard's clock (time.Now).
	Now func() time.Time
	// MaxAddrs bounds the addresses tracked one by one (100,000).
	MaxAddrs int
}

// NewAuthGuard returns a guard.
func NewAuthGuard(o AuthGuardOptions) *AuthGuard {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Burst <= 0 {
		o.Burst = AuthFailureBurst
	}
	if o.Every <= 0 {
		o.Every = AuthFailureEvery
	}
	if o.MaxAddrs <= 0 {
		o.MaxAddrs = maxAuthAddrs
	}
	return &AuthGuard{addrs: make(map[netip.Addr]*rate.Limiter), now: o.Now, burst: o.Burst, every: o.Every,
		maxAddrs: o.MaxAddrs, overflow: rate.NewLimiter(rate.Every(o.Every), o.Burst)}
}

// Tracking reports whether any address is tracked: while none is, Check allows every
// address, and a caller may skip it (and finding the address) altogether.
func (g *AuthGuard) Tracking() bool { return g.tracked.Load() != 0 }

// Check reports whether addr may try to authenticate now; when it may not, retryAfter
// is the wait in whole seconds (at least 1) and the refusal is counted.
func (g *AuthGuard) Check(addr netip.Addr) (retryAfter int64, ok bool) {
	if g.tracked.Load() == 0 {
		return 0, true
	}
	now := g.now()
	g.mu.Lock()
	if now.Sub(g.swept) >= sweepEvery {
		g.sweep(now)
	}
	l := g.addrs[addr]
	if l == nil && g.full {
		l = g.overflow // an address the full table has no room for
	}
	var tokens float64
	if l != nil {
		tokens = l.TokensAt(now)
	}
	g.mu.Unlock()
	if l == nil || tokens >= 1 {
		return 0, true
	}
	g.refused.Add(1)
	wait := (1 - tokens) * g.every.Seconds()
	return max(1, int64(math.Ceil(wait))), false
}

// Failed records one failed authentication from addr.
func (g *AuthGuard) Failed(addr netip.Addr) {
	g.failures.Add(1)
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.addrs[addr]
	if l == nil {
		if len(g.addrs) >= g.maxAddrs && now.Sub(g.swept) >= time.Second {
			g.sweep(now) // at most once a second: a sweep reads the whole table
		}
		if len(g.addrs) >= g.maxAddrs {
			// Every tracked address is still slowed: this one counts against the
			// allowance that every address without an entry shares until room is made.
			g.full = true
			g.tracked.Store(int64(len(g.addrs)) + 1)
			g.overflow.AllowN(now, 1)
			return
		}
		l = rate.NewLimiter(rate.Every(g.every), g.burst)
		g.addrs[addr] = l
		g.tracked.Store(int64(len(g.addrs)))
	}
	l.AllowN(now, 1)
}

// sweep forgets the addresses whose whole burst is available again.
func (g *AuthGuard) sweep(now time.Time) {
	g.swept = now
	for a, l := range g.addrs {
		if l.TokensAt(now) >= float64(g.burst) {
			delete(g.addrs, a)
		}
	}
	if g.full && len(g.addrs) < g.maxAddrs && g.overflow.TokensAt(now) >= float64(g.burst) {
		g.full = false // room again, and the overflow's failures have all been forgiven
	}
	n := int64(len(g.addrs))
	if g.full {
		n++
	}
	g.tracked.Store(n)
}

// Failures is how many failed authentications were recorded.
func (g *AuthGuard) Failures() uint64 { return g.failures.Load() }

// Refused is how many calls were refused with too_many_auth_failures.
func (g *AuthGuard) Refused() uint64 { return g.refused.Load() }
