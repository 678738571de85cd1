package clients

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"testing"

	"github.com/leashd/leash/client"
)

// scenarioFile is clients/scenarios.json.
type scenarioFile struct {
	Scenarios []scenario `json:"scenarios"`
}

type scenario struct {
	Name   string `json:"name"`
	Server string `json:"server"` // "" (memory) or "redis"
	As     string `json:"as"`     // the account's name in keys; "" is scale
	Steps  []step `json:"steps"`
}

type step struct {
	Call         string         `json:"call"`
	Args         map[string]any `json:"args"`
	Want         map[string]any `json:"want"`
	WantError    *wantError     `json:"want_error"`
	RetryAfterS  []float64      `json:"retry_after_s"`
	MinElapsedMS int64          `json:"min_elapsed_ms"`
	WorkMS       int64          `json:"work_ms"`
	Throw        bool           `json:"throw"`
	During       []step         `json:"during"`
}

type wantError struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
}

// scenarioRun is one scenario's state.
type scenarioRun struct {
	t      *testing.T
	c      *client.Client
	ns     string
	outage string
	lease  string // the id the last acquire got
}

// errWork is what a with_lease step's work fails with when it throws.
var errWork = errors.New("the work failed")

func runScenario(t *testing.T, s servers, ns string, sc scenario) {
	url := s.memory
	if sc.Server == "redis" {
		url = s.redis
	}
	as := sc.As
	if as == "" {
		as = "scale"
	}
	c, err := client.New(client.Options{BaseURL: url, APIKey: keys[as]})
	if err != nil {
		t.Fatal(err)
	}
	r := &scenarioRun{t: t, c: c, ns: ns, outage: s.outage}
	for i, st := range sc.Steps {
		r.step(fmt.Sprintf("step %d (%s)", i+1, st.Call), st)
	}
}

func (r *scenarioRun) str(a map[string]any, k string) string {
	v, _ := a[k].(string)
	if v == "$lease" {
		return r.lease
	}
	return v
}

func num(a map[string]any, k string) (int64, bool) {
	v, ok := a[k].(float64)
	return int64(v), ok
}

// options are the check options a step's args give.
func options(a map[string]any) []client.Option {
	var o []client.Option
	if v, ok := a["algorithm"].(string); ok {
		o = append(o, client.WithAlgorithm(v))
	}
	if v, ok := num(a, "limit"); ok {
		o = append(o, client.WithLimit(v))
	}
	if v, ok := num(a, "window_ms"); ok {
		o = append(o, client.WithWindowMS(v))
	}
	if v, ok := num(a, "cost"); ok {
		o = append(o, client.WithCost(v))
	}
	if v, _ := a["overdraft"].(bool); v {
		o = append(o, client.WithOverdraft())
	}
	return o
}

// wire is v as its JSON members.
func wire(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func (r *scenarioRun) step(name string, st step) {
	t := r.t
	ctx := context.Background()
	a := st.Args
	start := time.Now()
	var (
		got        map[string]any
		err        error
		retryAfter time.Duration
	)
	switch st.Call {
	case "limit":
		var res *client.LimitResult
		if res, err = r.c.Limit(ctx, r.ns, r.str(a, "key"), options(a)...); err == nil {
			got, retryAfter = wire(res), res.RetryAfter()
		}
	case "reset":
		var ok bool
		if ok, err = r.c.Reset(ctx, r.ns, r.str(a, "key"), options(a)...); err == nil {
			got = map[string]any{"reset": ok}
		}
	case "acquire":
		var l *client.Lease
		l, err = r.c.Acquire(ctx, r.ns, r.str(a, "key"), options(a)...)
		var d *client.DeniedError
		switch {
		case err == nil:
			r.lease = l.ID
			got = map[string]any{"allowed": true, "lease_id": l.ID, "active": float64(l.Active), "limit": float64(l.Limit), "reset_ms": float64(l.TTL.Milliseconds())}
		case errors.As(err, &d):
			got, err = map[string]any{"allowed": false, "active": float64(d.Active), "limit": float64(d.Limit), "reset_ms": float64(d.Reset.Milliseconds())}, nil
		}
	case "renew":
		var w *int64
		if v, ok := num(a, "window_ms"); ok {
			w = &v
		}
		var res *client.RenewResult
		if res, err = r.c.RenewWindowMS(ctx, r.str(a, "lease_id"), w); err == nil {
			got = wire(res)
		}
	case "release":
		var res *client.ReleaseResult
		if res, err = r.c.Release(ctx, r.str(a, "lease_id")); err == nil {
			got = wire(res)
		}
	case "leases":
		var res *client.LeaseList
		if res, err = r.c.Leases(ctx, r.ns, r.str(a, "key")); err == nil {
			got = wire(res)
		}
	case "stats":
		var res *client.Stats
		if res, err = r.c.Stats(ctx, r.ns); err == nil {
			got = wire(res)
		}
	case "outage":
		ms, _ := num(a, "ms")
		res, perr := http.Post(fmt.Sprintf("%s?ms=%d", r.outage, ms), "", nil)
		if perr != nil || res.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: the outage endpoint: %v %v", name, res, perr)
		}
		res.Body.Close()
		return
	case "with_lease":
		err = r.withLease(ctx, name, st)
		if st.Throw {
			if !errors.Is(err, errWork) {
				t.Fatalf("%s: with_lease = %v, want the work's error", name, err)
			}
			return
		}
	default:
		t.Fatalf("%s: unknown call %q", name, st.Call)
	}
	elapsed := time.Since(start)
	if st.WantError != nil {
		var e *client.Error
		if !errors.As(err, &e) || e.StatusCode != st.WantError.Status || e.Code != st.WantError.Code {
			t.Fatalf("%s: got %v (%v), want error %d %s", name, err, got, st.WantError.Status, st.WantError.Code)
		}
		retryAfter = e.RetryAfter
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for k, want := range st.Want {
		if fmt.Sprint(got[k]) != fmt.Sprint(want) {
			t.Fatalf("%s: %s = %v, want %v (answer %v)", name, k, got[k], want, got)
		}
	}
	if len(st.RetryAfterS) == 2 {
		s := retryAfter.Seconds()
		if s < st.RetryAfterS[0] || s > st.RetryAfterS[1] {
			t.Fatalf("%s: Retry-After %v, want %v..%v s", name, retryAfter, st.RetryAfterS[0], st.RetryAfterS[1])
		}
	}
	if st.MinElapsedMS > 0 && elapsed < time.Duration(st.MinElapsedMS)*time.Millisecond {
		t.Fatalf("%s: took %v, want at least %d ms (a retry after Retry-After)", name, elapsed, st.MinElapsedMS)
	}
}

// withLease is the Go client's form of withLease: Acquire, KeepAlive, the work, Release
// deferred so that it runs however the work ends.
func (r *scenarioRun) withLease(ctx context.Context, name string, st step) (err error) {
	l, err := r.c.Acquire(ctx, r.ns, r.str(st.Args, "key"), options(st.Args)...)
	if err != nil {
		return err
	}
	defer l.Release(ctx)
	lost := l.KeepAlive(ctx)
	select {
	case <-time.After(time.Duration(st.WorkMS) * time.Millisecond):
	case e := <-lost:
		return fmt.Errorf("lease lost during the work: %v", e)
	}
	for i, d := range st.During {
		r.step(fmt.Sprintf("%s, during %d (%s)", name, i+1, d.Call), d)
	}
	if st.Throw {
		return errWork
	}
	return nil
}
