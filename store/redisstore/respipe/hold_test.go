package respipe

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/leashd/leash/testkit"
	"github.com/leashd/leash/testkit/redistest"
)

// argKeysScript is an ArgKeys Merge of Head 1, Width 1, Reply 3: per call {tag, the call's
// key's count after an INCR, how many calls the command carried}. It fails the command
// unless it declares one key, the first call's, and the head is "h".
const argKeysScript = `
if #KEYS ~= 1 or KEYS[1] ~= ARGV[2] then return redis.error_reply('ERR declared ' .. #KEYS .. ' keys') end
if ARGV[1] ~= 'h' then return redis.error_reply('ERR head ' .. ARGV[1]) end
local n = (#ARGV - 1) / 2
local out = {}
for i = 1, n do
  out[#out + 1] = tonumber(ARGV[1 + 2 * i])
  out[#out + 1] = redis.call('INCR', ARGV[2 * i])
  out[#out + 1] = n
end
return out`

// slowScript keeps Redis busy for ARGV[1] ms and replies {1}.
const slowScript = `
local function ms() local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end
local stop = ms() + tonumber(ARGV[1])
while ms() < stop do end
return {1}`

func argKeysCall(ctx context.Context, p *Pipe, m *Merge, key string, tag int64) ([]int64, error) {
	c := p.NewMerged(m, "", key)
	c.Str("h")
	c.Int(tag)
	return p.Do(ctx, c, nil)
}

func slow(ctx context.Context, p *Pipe, ms int64) error {
	c := p.NewCall(4)
	c.Str("EVAL")
	c.Str(slowScript)
	c.Int(0)
	c.Int(ms)
	_, err := p.Do(ctx, c, nil)
	return err
}

// TestArgKeysMerge: calls of an ArgKeys Merge on different keys share commands that declare
// the first call's key and carry every call's key among the arguments, and each call gets
// its own reply.
func TestArgKeysMerge(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	pl := newPool(t, Options{})
	p := pl.Pipe(srv.Addr())
	m := loadMerge(t, srv, argKeysScript, 1, 1, 3, 8)
	m.ArgKeys = true
	ctx := context.Background()
	const callers, calls = 32, 50
	err := burst(callers, calls, func(g, i int) error {
		r, err := argKeysCall(ctx, p, m, fmt.Sprintf("{k%d}", g), int64(100+g))
		if err != nil {
			return err
		}
		if len(r) != 3 || r[0] != int64(100+g) || r[1] != int64(i+1) || r[2] < 1 || r[2] > 8 {
			return fmt.Errorf("caller %d call %d: %v", g, i, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := pl.Stats(); st.Commands >= st.Calls {
		t.Fatalf("%+v: none merged", st)
	}
	if r, err := argKeysCall(ctx, p, m, "alone", 7); err != nil || len(r) != 3 || r[0] != 7 || r[1] != 1 || r[2] != 1 {
		t.Fatalf("a call alone: %v, %v", r, err)
	}
}

// TestHoldMergesBehindOwedReplies: with Hold set, calls queued while Redis owes replies to
// two earlier commands are held and written together once it has answered the first, long
// before Hold ends; a call with nothing else in flight is not held.
func TestHoldMergesBehindOwedReplies(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, false)
	pl := newPool(t, Options{Hold: 5 * time.Second, ReadTimeout: 5 * time.Second})
	p := pl.Pipe(srv.Addr())
	m := loadMerge(t, srv, argKeysScript, 1, 1, 3, 64)
	m.ArgKeys = true
	ctx := context.Background()

	start := time.Now()
	if _, err := argKeysCall(ctx, p, m, "lone", 1); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("a lone call took %v: held", d)
	}

	written := pl.Stats().Calls
	var wg sync.WaitGroup
	for range 2 { // two commands owed: Redis busy 300 ms with each
		wg.Go(func() {
			if err := slow(ctx, p, 300); err != nil {
				t.Error(err)
			}
		})
	}
	testkit.Eventually(t, "both slow commands written", 5*time.Second, func() bool { return pl.Stats().Calls >= written+2 })
	const n = 20
	widths := make([]int64, n)
	start = time.Now()
	for i := range n {
		wg.Go(func() {
			r, err := argKeysCall(ctx, p, m, fmt.Sprintf("k%d", i), int64(i))
			if err != nil || len(r) != 3 {
				t.Errorf("call %d: %v, %v", i, r, err)
				return
			}
			widths[i] = r[2]
		})
		// Each call arrives on its own: the next starts once this one is queued (held) or
		// written, so only the hold can put them in one command.
		arrived(t, p, written+2, i+1)
	}
	wg.Wait()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("held calls answered after %v: not written when the first reply came", d)
	}
	for i, w := range widths {
		if w != n {
			t.Fatalf("call %d was in a command of %d calls, want all %d held together (%v)", i, w, n, widths)
		}
	}
}

// arrived waits, up to 5 s, until n calls made after the first `from` written on p are
// queued on its connection or written.
func arrived(t *testing.T, p *Pipe, from int64, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		pc := p.cur
		p.mu.Unlock()
		queued := 0
		if pc != nil {
			pc.mu.Lock()
			queued = len(pc.queued)
			pc.mu.Unlock()
		}
		if int64(queued)+p.stats.calls.Load()-from >= int64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls queued or written after 5 s", int64(queued)+p.stats.calls.Load()-from, n)
		}
		runtime.Gosched()
	}
}
