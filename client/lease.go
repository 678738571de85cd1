package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/leashd/leash/wire"
)

// ErrLeaseLost is what KeepAlive reports when the lease is no longer held: a renewal
// answered renewed: false, or renewals failed until the lease's time-to-live ran out.
var ErrLeaseLost = errors.New("leash: lease lost")

// Lease is a held concurrency lease (spec §5). Release it on every path (defer
// lease.Release(ctx)); Release and KeepAlive are safe to call from several goroutines,
// and Release is idempotent.
type Lease struct {
	// ID is the lease id (spec §5.3).
	ID string
	// Namespace and Key name the lease set.
	Namespace, Key string
	// Limit is the resolved limit; Active the leases held when this one was acquired.
	Limit, Active int64
	// TTL is the time-to-live the lease was acquired with.
	TTL time.Duration

	c        *Client
	mu       sync.Mutex
	released bool
	stop     chan struct{} // closed by Release to stop KeepAlive
	done     chan struct{} // closed when KeepAlive's goroutine has returned
	lost     <-chan error
}

// Acquire takes a lease on (namespace, key): POST /v1/leases. WithLimit sets the most
// leases held at once and WithWindow the time-to-live; either missing comes from the
// namespace's concurrent rule. When every slot is held the error is a *DeniedError
// (IsDenied). Never retried.
func (c *Client) Acquire(ctx context.Context, namespace, key string, opts ...Option) (*Lease, error) {
	p := collect(opts)
	if p.algorithm != "" || p.cost != nil {
		return nil, errors.New("leash client: a lease takes no algorithm or cost")
	}
	body := wire.LeaseRequest{Namespace: namespace, Key: key, Limit: wire.SomePtr(p.limit), WindowMS: wire.SomePtr(p.windowMS)}
	var d wire.LeaseDecision
	if _, err := c.call(ctx, http.MethodPost, "/v1/leases", body, false, &d); err != nil {
		return nil, err
	}
	if !d.Allowed {
		return nil, &DeniedError{Namespace: namespace, Key: key, Active: d.Active, Limit: d.Limit,
			Reset: time.Duration(d.ResetMS) * time.Millisecond}
	}
	if d.LeaseID == "" {
		return nil, fmt.Errorf("leash client: POST /v1/leases: allowed without a lease_id")
	}
	return &Lease{ID: d.LeaseID, Namespace: namespace, Key: key, Limit: d.Limit, Active: d.Active,
		TTL: time.Duration(d.ResetMS) * time.Millisecond, c: c, stop: make(chan struct{})}, nil
}

// AcquireWait is Acquire that waits for a slot while every slot is held, until ctx ends
// (give it a deadline). Between attempts it waits a backoff that starts at 50 ms and
// doubles up to 2 s, with jitter, but never longer than the denied answer's reset_ms
// (when the soonest lease ends). It returns the last *DeniedError when the next attempt
// would fall after ctx's deadline, and any other error at once.
func (c *Client) AcquireWait(ctx context.Context, namespace, key string, opts ...Option) (*Lease, error) {
	backoff := 50 * time.Millisecond
	for {
		l, err := c.Acquire(ctx, namespace, key, opts...)
		var de *DeniedError
		if !errors.As(err, &de) {
			return l, err
		}
		wait := time.Duration(float64(backoff) * (0.75 + 0.5*rand.Float64()))
		if de.Reset > 0 && de.Reset < wait {
			wait = de.Reset
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// ReleaseResult is the answer to a release (spec §5.4).
type ReleaseResult = wire.ReleaseResult

// RenewResult is the answer to a renewal (spec §5.5).
type RenewResult = wire.RenewResult

// Release frees a lease by id: DELETE /v1/leases/{id}. Retried when safe (releasing is
// idempotent).
func (c *Client) Release(ctx context.Context, leaseID string) (*ReleaseResult, error) {
	var out ReleaseResult
	if _, err := c.call(ctx, http.MethodDelete, "/v1/leases/"+escape(leaseID), nil, true, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Renew extends a lease by id: POST /v1/leases/{id}/renew; ttl 0 reuses the lease's own
// time-to-live. Not retried by the client (KeepAlive retries on its own schedule).
func (c *Client) Renew(ctx context.Context, leaseID string, ttl time.Duration) (*RenewResult, error) {
	if ttl > 0 {
		ms := ttl.Milliseconds()
		return c.RenewWindowMS(ctx, leaseID, &ms)
	}
	return c.RenewWindowMS(ctx, leaseID, nil)
}

// RenewWindowMS is Renew with window_ms sent as given (spec §5.5): nil sends none and
// reuses the lease's own time-to-live; a value out of range is the service's
// invalid_request.
func (c *Client) RenewWindowMS(ctx context.Context, leaseID string, windowMS *int64) (*RenewResult, error) {
	var body any
	if windowMS != nil {
		body = wire.RenewRequest{WindowMS: wire.Some(*windowMS)}
	}
	var out RenewResult
	if _, err := c.call(ctx, http.MethodPost, "/v1/leases/"+escape(leaseID)+"/renew", body, false, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Release stops KeepAlive (waiting for it) and frees the lease. Calling it again, or on a
// nil Lease, does nothing and returns (nil, nil).
func (l *Lease) Release(ctx context.Context) (*ReleaseResult, error) {
	if l == nil {
		return nil, nil
	}
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil, nil
	}
	l.released = true
	close(l.stop)
	done := l.done
	l.mu.Unlock()
	if done != nil {
		<-done
	}
	return l.c.Release(ctx, l.ID)
}

// Renew extends the lease once; ttl 0 reuses its time-to-live.
func (l *Lease) Renew(ctx context.Context, ttl time.Duration) (*RenewResult, error) {
	return l.c.Renew(ctx, l.ID, ttl)
}

// KeepAlive (spec §13.2) renews the lease in a goroutine every third of its time-to-live until Release
// is called or ctx ends. A failed renewal is tried again sooner (every tenth of the TTL)
// while the lease can still be held. The returned channel receives ErrLeaseLost (wrapping
// the last error, if any) when the lease is no longer held, and is closed when keeping
// alive stops for any reason. Calling KeepAlive again returns the same channel.
func (l *Lease) KeepAlive(ctx context.Context) <-chan error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	lost := make(chan error, 1)
	l.lost = lost
	if l.released {
		close(lost)
		return lost
	}
	l.done = make(chan struct{})
	go l.keepAlive(ctx, lost)
	return lost
}

func (l *Lease) keepAlive(ctx context.Context, lost chan<- error) {
	defer close(l.done)
	defer close(lost)
	ttl := l.TTL
	if ttl <= 0 {
		ttl = time.Second
	}
	every, again := max(ttl/3, time.Millisecond), max(ttl/10, time.Millisecond)
	expires := time.Now().Add(ttl)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.stop:
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, max(time.Until(expires), again))
		sent := time.Now()
		res, err := l.c.Renew(rctx, l.ID, ttl)
		cancel()
		select {
		case <-l.stop: // released meanwhile: whatever the renewal said no longer matters
			return
		default:
		}
		switch {
		case err == nil && res.Renewed:
			expires = sent.Add(time.Duration(res.ResetMS) * time.Millisecond)
			t.Reset(every)
		case err == nil:
			lost <- ErrLeaseLost
			return
		case ctx.Err() != nil:
			return
		case !time.Now().Before(expires):
			lost <- fmt.Errorf("%w: %w", ErrLeaseLost, err)
			return
		default:
			t.Reset(min(again, time.Until(expires)))
		}
	}
}
