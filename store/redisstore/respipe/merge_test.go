package respipe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/leashd/leash/testkit/redistest"
)

// mergeScript is a Merge of Head 1, Width 1, Reply 3: per key {tag, the key's count after
// an INCR, how many keys the command carried}. It fails the command when its keys are not
// all of one group (the key's text up to the first '/') or when the head is not the one
// the key names (its text between the first and second '/').
const mergeScript = `
local g, h = string.match(KEYS[1], '^([^/]*)/([^/]*)/')
if ARGV[1] ~= h then return redis.error_reply('ERR head ' .. ARGV[1] .. ' for ' .. KEYS[1]) end
local out = {}
for i = 1, #KEYS do
  local gi, hi = string.match(KEYS[i], '^([^/]*)/([^/]*)/')
  if gi ~= g or hi ~= h then return redis.error_reply('ERR ' .. KEYS[i] .. ' merged with ' .. KEYS[1]) end
  out[#out + 1] = tonumber(ARGV[1 + i])
  out[#out + 1] = redis.call('INCR', KEYS[i])
  out[#out + 1] = #KEYS
end
return out`

// loadMerge loads src on srv and returns a Merge of it with Max keys.
func loadMerge(t *testing.T, srv *redistest.Server, src string, head, width, reply, max int) *Merge {
	t.Helper()
	sha, err := adminOf(t, &redis.Options{Addr: srv.Addr()}).ScriptLoad(context.Background(), src).Result()
	if err != nil {
		t.Fatal(err)
	}
	return &Merge{Sha: sha, Head: head, Width: width, Reply: reply, Max: max}
}

// merged runs one call of a mergeScript Merge on key (group/head/name) with tag.
func merged(ctx context.Context, p *Pipe, m *Merge, key string, tag int64) ([]int64, error) {
	group, rest, _ := strings.Cut(key, "/")
	head, _, _ := strings.Cut(rest, "/")
	c := p.NewMerged(m, group, key)
	c.Str(head)
	c.Int(tag)
	return p.Do(ctx, c, nil)
}

// burst runs fn(g, i) for i < calls in each of n goroutines, started together, and returns
// the first error.
func burst(n, calls int, fn func(g, i int) error) error {
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() {
			<-start
			for i := range calls {
				if err := fn(g, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	return <-errs
}

// failures runs fn(g) once in each of n goroutines, started together, and counts the calls
// that failed with ErrDown; any other error is returned.
func failures(n int, fn func(g int) error) (int, error) {
	var down atomic.Int64
	err := burst(n, 1, func(g, _ int) error {
		err := fn(g)
		if errors.Is(err, ErrDown) {
			down.Add(1)
			return nil
		}
		return err
	})
	return int(down.Load()), err
}

// TestMergedCallsShareCommands: concurrent calls of one Merge share commands, never more
// than Max keys, never across groups or different head arguments, and each call gets its
// own slice of the reply, in its own order.
func TestMergedCallsShareCommands(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	pl := newPool(t, Options{})
	p := pl.Pipe(srv.Addr())
	m := loadMerge(t, srv, mergeScript, 1, 1, 3, 5)
	ctx := context.Background()
	const callers, calls = 48, 100
	var mu sync.Mutex
	widest := int64(0)
	err := burst(callers, calls, func(g, i int) error {
		key := fmt.Sprintf("g%d/h%d/k%d", g%3, g%2, g)
		r, err := merged(ctx, p, m, key, int64(1000+g))
		if err != nil {
			return fmt.Errorf("caller %d call %d: %w", g, i, err)
		}
		if len(r) != 3 || r[0] != int64(1000+g) || r[1] != int64(i+1) || r[2] < 1 || r[2] > 5 {
			return fmt.Errorf("caller %d call %d: got %v, want [%d %d 1..5]", g, i, r, 1000+g, i+1)
		}
		mu.Lock()
		widest = max(widest, r[2])
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st := pl.Stats()
	t.Logf("%d calls in %d commands, widest %d keys", st.Calls, st.Commands, widest)
	if st.Calls != callers*calls || st.Commands >= st.Calls || widest < 2 {
		t.Fatalf("stats %+v, widest command %d keys: concurrent calls were not merged", st, widest)
	}
	// Sent alone, a call of a Merge is EVALSHA with one key.
	if r, err := merged(ctx, p, m, "g9/h9/alone", 7); err != nil || !slices.Equal(r, []int64{7, 1, 1}) {
		t.Fatalf("a call alone: %v, %v", r, err)
	}
}

// TestMergedCommandErrorReply: an error reply to a merged command reaches each of its
// calls once, and the connection carries on.
func TestMergedCommandErrorReply(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	pl := newPool(t, Options{})
	p := pl.Pipe(srv.Addr())
	m := loadMerge(t, srv, "return redis.error_reply('ERR leash: refused')", 1, 1, 3, 64)
	ctx := context.Background()
	var mu sync.Mutex
	answers := 0
	err := burst(32, 20, func(g, i int) error {
		_, err := merged(ctx, p, m, "g/h/k"+strconv.Itoa(g), 1)
		var re ReplyError
		if !errors.As(err, &re) || string(re) != "ERR leash: refused" {
			return fmt.Errorf("caller %d: %v, want the error reply", g, err)
		}
		mu.Lock()
		answers++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := pl.Stats(); answers != 32*20 || st.Commands >= st.Calls {
		t.Fatalf("%d answers, stats %+v", answers, st)
	}
	if r, err := incr(ctx, p, "after", 3); err != nil || !slices.Equal(r, []int64{3, 1}) {
		t.Fatalf("after the error replies: %v, %v", r, err)
	}
}

// TestMergedReplyOfWrongLength: a merged reply without Reply integers per call fails every
// call of the command with ErrDown and breaks the connection; the next call dials again.
func TestMergedReplyOfWrongLength(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	pl := newPool(t, Options{})
	p := pl.Pipe(srv.Addr())
	m := loadMerge(t, srv, "return {1, 2, 3}", 1, 1, 3, 64)
	ctx := context.Background()
	for attempt := 0; ; attempt++ {
		before := pl.Stats()
		down, err := failures(16, func(g int) error {
			_, err := merged(ctx, p, m, "g/h/k"+strconv.Itoa(g), 1)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		st := pl.Stats()
		if st.Commands-before.Commands < st.Calls-before.Calls {
			if down == 0 {
				t.Fatalf("a merged command was answered with 3 integers and no call failed")
			}
			break
		}
		if attempt == 50 {
			t.Fatal("16 concurrent calls were never merged")
		}
	}
	if r, err := incr(ctx, p, "after", 3); err != nil || !slices.Equal(r, []int64{3, 1}) {
		t.Fatalf("after a bad reply: %v, %v", r, err)
	}
}

// TestMergedCommandCut: a connection cut in the middle of a merged command's reply fails
// each of its calls once with ErrDown (none is answered as if it had its reply); the
// command did run, and the next calls dial again.
func TestMergedCommandCut(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	px := redistest.StartProxy(t, srv.Addr())
	pl := newPool(t, Options{})
	p := pl.Pipe(px.Addr())
	m := loadMerge(t, srv, mergeScript, 1, 1, 3, 64)
	ctx := context.Background()
	if _, err := merged(ctx, p, m, "g/h/warm", 0); err != nil {
		t.Fatal(err)
	}
	const callers = 24
	for attempt := 0; ; attempt++ {
		before := pl.Stats()
		px.CutAfter(10) // inside the first reply: "*72\r\n:1000\r\n..." when merged
		down, err := failures(callers, func(g int) error {
			_, err := merged(ctx, p, m, fmt.Sprintf("g/h/a%d-k%d", attempt, g), int64(g))
			return err // nil: written after the cut, on a new connection
		})
		px.CutAfter(-1)
		if err != nil {
			t.Fatal(err)
		}
		st := pl.Stats()
		if down < 2 || st.Commands-before.Commands >= st.Calls-before.Calls {
			if attempt == 50 {
				t.Fatal("no merged command was cut")
			}
			continue
		}
		// Each failed call's command ran or not; none ran twice.
		admin := adminOf(t, &redis.Options{Addr: srv.Addr()})
		for g := range callers {
			n, err := admin.Get(ctx, fmt.Sprintf("g/h/a%d-k%d", attempt, g)).Int64()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			if n > 1 {
				t.Fatalf("key of caller %d counted %d times", g, n)
			}
		}
		t.Logf("attempt %d: %d of %d calls failed with the cut", attempt, down, callers)
		break
	}
	if r, err := merged(ctx, p, m, "g/h/after", 5); err != nil || !slices.Equal(r, []int64{5, 1, 1}) {
		t.Fatalf("after the cut: %v, %v", r, err)
	}
}

// TestMergedCallArguments: a call of a Merge with the wrong number of arguments is refused
// before it is sent.
func TestMergedCallArguments(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	p := newPool(t, Options{}).Pipe(srv.Addr())
	m := loadMerge(t, srv, mergeScript, 1, 1, 3, 64)
	c := p.NewMerged(m, "g", "g/h/k")
	c.Str("h")
	if _, err := p.Do(context.Background(), c, nil); err == nil || !strings.Contains(err.Error(), "1 arguments, want 2") {
		t.Fatalf("got %v, want the argument count refused", err)
	}
}

// TestResendAfterNoScript: a call answered NOSCRIPT stays with its caller, encoded, and
// runs once sent again after the script is loaded; so do the calls of a merged command,
// each once.
func TestResendAfterNoScript(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	admin := adminOf(t, &redis.Options{Addr: srv.Addr()})
	ctx := context.Background()
	m := loadMerge(t, srv, mergeScript, 1, 1, 3, 64)
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p := newPool(t, Options{}).Pipe(srv.Addr())
	const n = 16
	calls := make([]*Call, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		c := p.NewMerged(m, "g", fmt.Sprintf("g/h/%d", i))
		c.Str("h")
		c.Int(int64(i))
		calls[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = p.Do(ctx, c, nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if !NotRunHere(err) || err.(ReplyError).Code() != "NOSCRIPT" {
			t.Fatalf("call %d before SCRIPT LOAD: %v, want NOSCRIPT", i, err)
		}
	}
	if _, err := admin.ScriptLoad(ctx, mergeScript).Result(); err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.Do(ctx, c, nil)
			if err == nil && (len(r) != 3 || r[0] != int64(i) || r[1] != 1) {
				err = fmt.Errorf("reply %v", r)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d sent again after SCRIPT LOAD: %v", i, err)
		}
	}
}

// TestAskingGoesFirst: a call marked Asking is written after ASKING, whose reply (here an
// error: the server is not a cluster) is read past, and is not merged with others.
func TestAskingGoesFirst(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	m := loadMerge(t, srv, mergeScript, 1, 1, 3, 64)
	pl := newPool(t, Options{})
	p := pl.Pipe(srv.Addr())
	ctx := context.Background()
	err := burst(8, 20, func(g, i int) error {
		c := p.NewMerged(m, "g", fmt.Sprintf("g/h/%d", g))
		c.Str("h")
		c.Int(int64(i))
		if g == 0 {
			c.Asking()
		}
		r, err := p.Do(ctx, c, nil)
		if err != nil {
			return err
		}
		if len(r) != 3 || r[0] != int64(i) || r[1] != int64(i+1) {
			return fmt.Errorf("goroutine %d call %d: reply %v", g, i, r)
		}
		if g == 0 && r[2] != 1 {
			return fmt.Errorf("an Asking call was merged with %d others", r[2]-1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	admin := adminOf(t, &redis.Options{Addr: srv.Addr()})
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "cmdstat_asking:calls=20,") {
		t.Fatalf("ASKING not sent once per Asking call:\n%s", info)
	}
}
