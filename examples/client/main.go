// Command client is an example Go service that uses Leash through package client:
// middleware limits GET /hello per caller, and POST /export holds a concurrency lease
// kept alive while it works.
//
//	LEASH_URL=http://localhost:8080 LEASH_API_KEY=lsh_... go run ./examples/client
//	curl -H 'X-User: alice' localhost:8000/hello        # 429 after 5 a minute
//	curl -X POST -H 'X-User: alice' localhost:8000/export  # at most 2 at once
//
// With -demo it serves on a free loopback port (unless -addr is given), calls itself a few
// times, prints what happened and exits:
//
//	LEASH_URL=http://localhost:8080 LEASH_API_KEY=lsh_... go run ./examples/client -demo
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/leashd/leash/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8000", "where the example service listens (with -demo: a free loopback port unless set)")
	demo := fs.Bool("demo", false, "call the service a few times, print the answers and exit")
	work := fs.Duration("work", 3*time.Second, "how long one export works")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *demo && !flagSet(fs, "addr") {
		*addr = "127.0.0.1:0"
	}
	c, err := client.New(client.Options{BaseURL: getenv("LEASH_URL"), APIKey: getenv("LEASH_API_KEY")})
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(out, nil))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello", r.Header.Get("X-User"))
	})
	mux.HandleFunc("POST /export", func(w http.ResponseWriter, r *http.Request) {
		exportHandler(c, *work, w, r)
	})
	limit := client.Middleware(c, client.MiddlewareOptions{
		Namespace: "example-api",
		Key:       client.KeyByHeader("X-User"),
		Algorithm: client.SlidingWindow, Limit: 5, Window: time.Minute,
		OnError: func(r *http.Request, err error) { log.Warn("leash unavailable, failing open", "err", err) },
	})
	handler := http.NewServeMux()
	handler.Handle("/hello", limit(mux))
	handler.Handle("/export", mux)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("example service", "addr", ln.Addr().String(), "leash", c.BaseURL())

	if *demo {
		err = demoCalls(ctx, "http://"+ln.Addr().String(), out)
	} else {
		<-ctx.Done()
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// exportHandler does slow work under a lease: at most 2 exports at once per user, each
// lease renewed while the work runs and released on every path.
func exportHandler(c *client.Client, work time.Duration, w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	lease, err := c.Acquire(ctx, "example-exports", r.Header.Get("X-User"),
		client.WithLimit(2), client.WithWindow(time.Second))
	if client.IsDenied(err) {
		http.Error(w, "too many exports running", http.StatusTooManyRequests)
		return
	}
	if err != nil {
		http.Error(w, "cannot take a lease", http.StatusServiceUnavailable)
		return
	}
	defer lease.Release(context.WithoutCancel(ctx))
	lost := lease.KeepAlive(ctx)
	select {
	case <-time.After(work): // the export's real work would go here
		fmt.Fprintln(w, "exported")
	case err := <-lost:
		http.Error(w, "lease lost: "+fmt.Sprint(err), http.StatusConflict)
	case <-ctx.Done():
	}
}

// demoCalls calls /hello 6 times (the 6th is limited), then starts two exports and, after
// their leases' 1 s time-to-live has passed, a third: it is refused because KeepAlive
// renewed the two.
func demoCalls(ctx context.Context, base string, out io.Writer) error {
	call := func(method, path string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, nil)
		req.Header.Set("X-User", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for i := 1; i <= 6; i++ {
		code, err := call(http.MethodGet, "/hello")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "GET /hello #%d: %d\n", i, code)
	}
	codes := make(chan int, 2)
	for range 2 {
		go func() {
			code, _ := call(http.MethodPost, "/export")
			codes <- code
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	code, err := call(http.MethodPost, "/export")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "POST /export while two run (after their TTL): %d\n", code)
	for range 2 {
		fmt.Fprintf(out, "POST /export: %d\n", <-codes)
	}
	return nil
}
