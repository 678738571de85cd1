package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/leashd/leash/client"
	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/wiring"
	"github.com/leashd/leash/httpapi"
	"github.com/leashd/leash/store/memstore"
)

// exampleKey is the API key of the examples' Leash.
const exampleKey = "lsh_example"

// exampleLeash serves the real /v1 API over the memory store in this process, with one
// account (plan scale) whose key is exampleKey, as `make run` does on :8080; stop ends it.
// In your program the URL is where Leash runs, e.g. "http://localhost:8080".
func exampleLeash() (url string, stop func()) {
	dir, err := engine.NewDirectory([]engine.AccountSpec{{
		ID: "dev", Plan: engine.BuiltinPlans()["scale"], KeyHashes: [][32]byte{engine.HashKey(exampleKey)},
	}})
	if err != nil {
		panic(err)
	}
	store := memstore.New(memstore.Options{})
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Engine: wiring.New(engine.RolesOf(store), dir, wiring.Options{})}))
	return srv.URL, func() { srv.Close(); _ = store.Close() }
}

// A fixed-window check of 2 per minute: the third call in the minute is denied, which
// is a result (Allowed false), not an error.
func ExampleClient_Limit() {
	url, stop := exampleLeash()
	defer stop()
	c, err := client.New(client.Options{BaseURL: url, APIKey: exampleKey})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		res, err := c.Limit(ctx, "api", "user-42",
			client.WithAlgorithm(client.FixedWindow), client.WithLimit(2), client.WithWindow(time.Minute))
		if client.IsCode(err, client.CodeHardCapExceeded) {
			fmt.Println("over the month's hard cap")
			return
		}
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed %v, %d of %d remaining\n", res.Allowed, res.Remaining, res.Limit)
		if !res.Allowed && res.RetryAfter() <= time.Minute {
			fmt.Println("denied until the minute ends")
		}
	}
	// Output:
	// allowed true, 1 of 2 remaining
	// allowed true, 0 of 2 remaining
	// allowed false, 0 of 2 remaining
	// denied until the minute ends
}

// A lease with a one-second time-to-live held for longer than that: KeepAlive renews it
// while the work runs, so a second caller is still refused, and Release frees the slot.
func ExampleLease_KeepAlive() {
	url, stop := exampleLeash()
	defer stop()
	c, err := client.New(client.Options{BaseURL: url, APIKey: exampleKey})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	one := []client.Option{client.WithLimit(1), client.WithWindow(time.Second)} // 1 holder, TTL 1 s
	lease, err := c.Acquire(ctx, "jobs", "export", one...)
	if err != nil {
		panic(err)
	}
	defer lease.Release(context.WithoutCancel(ctx)) // idempotent
	lost := lease.KeepAlive(ctx)

	select { // the work: 1.5 s, past the TTL
	case err := <-lost:
		fmt.Println("lease lost, stop working:", err)
		return
	case <-time.After(1500 * time.Millisecond):
	}
	_, err = c.Acquire(ctx, "jobs", "export", one...)
	fmt.Println("another caller refused:", client.IsDenied(err))

	res, err := lease.Release(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("released:", res.Released, "still held:", res.Active)
	// Output:
	// another caller refused: true
	// released: true still held: 0
}

// Middleware limits an http.Handler per caller (here by the X-User header) and sets the
// RateLimit-* headers; a denied request is answered 429 without reaching the handler.
func ExampleMiddleware() {
	url, stop := exampleLeash()
	defer stop()
	c, err := client.New(client.Options{BaseURL: url, APIKey: exampleKey})
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello", r.Header.Get("X-User"))
	})
	limited := client.Middleware(c, client.MiddlewareOptions{
		Namespace: "api", Key: client.KeyByHeader("X-User"),
		Algorithm: client.FixedWindow, Limit: 2, Window: time.Minute,
	})(hello)

	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/hello", nil)
		req.Header.Set("X-User", "alice")
		rec := httptest.NewRecorder()
		limited.ServeHTTP(rec, req)
		fmt.Println(rec.Code, "RateLimit-Remaining:", rec.Header().Get("RateLimit-Remaining"), strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// 200 RateLimit-Remaining: 1 hello alice
	// 200 RateLimit-Remaining: 0 hello alice
	// 429 RateLimit-Remaining: 0 {"code":"rate_limited","error":"rate limit exceeded"}
}
