package reliability

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leashd/leash/testkit/leashproc"
)

// crashRounds is how many kill -9 rounds TestDiskCrash runs: 20, or LEASH_CRASH_ROUNDS.
func crashRounds(t *testing.T) int {
	if s := os.Getenv("LEASH_CRASH_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("LEASH_CRASH_ROUNDS=%q: want a positive integer", s)
		}
		return n
	}
	return 20
}

// crashState is what the rounds were answered, which every later start must keep.
type crashState struct {
	mu       sync.Mutex
	admitted map[string]int64     // key -> units answered allowed (hot and cold counters)
	leases   map[string]time.Time // lease id -> when its TTL ends, by the test's clock
	accounts []string             // accounts created through the admin API
	ruleMax  int64                // the namespace "rules" rate limit last answered 201/200
	hookURL  string               // the webhook URL last answered set
}

const (
	crashWindowMS = 24 * 3600 * 1000 // one fixed window for the whole test (it starts at 00:00 UTC)
	coldLimit     = 5
	leaseTTL      = 60 * time.Second
)

// TestDiskCrash is the disk store's durability contract (spec §11.5) under kill -9: each
// round starts leash on the same directory, checks what every earlier round was answered,
// makes rule, override, webhook, account and lease changes, puts load on a hot key and on
// cold keys from four clients, and kills the process (SIGKILL) under that load. After each
// restart: no counter is lower than the units answered allowed (nothing is over-admitted),
// every lease answered acquired is held until its TTL, and the accounts, the rule with its
// override and the webhook answered are all there. 20 rounds, or LEASH_CRASH_ROUNDS.
func TestDiskCrash(t *testing.T) {
	data := filepath.Join(t.TempDir(), "leash-data")
	env := []string{"LEASH_STORE_DISK_PATH=" + data, "LEASH_DEV_API_KEY=k", "LEASH_DEV_OPERATOR_KEY=op",
		"LEASH_WEBHOOKS_ALLOW_HTTP=true", "LEASH_WEBHOOKS_ALLOW_PRIVATE_TARGETS=true", "LEASH_GRPC_ADDR="}
	st := &crashState{admitted: map[string]int64{}, leases: map[string]time.Time{}}
	rounds := crashRounds(t)
	start := time.Now()
	for round := range rounds {
		p := leashproc.Start(t, binary, nil, env...)
		if p.Stdout.String() != "" && bytes.Contains([]byte(p.Stdout.String()), []byte("lsh_")) {
			t.Fatalf("round %d: a restart generated keys:\n%s", round, p.Stdout.String())
		}
		verifyCrashState(t, p, st, round)
		changeCrashState(t, p, st, round)
		loadAndKill(t, p, st, 200)
	}
	p := leashproc.Start(t, binary, nil, env...)
	verifyCrashState(t, p, st, rounds)
	p.NoCrash(t)
	var total int64
	for _, n := range st.admitted {
		total += n
	}
	t.Logf("%d kill -9 rounds in %s: %d units admitted on %d counters, %d leases, %d accounts, all kept",
		rounds, time.Since(start).Round(time.Millisecond), total, len(st.admitted), len(st.leases), len(st.accounts))
}

// crashCall is one /v1 call; err is a transport failure (the process may be gone).
func crashCall(c *http.Client, p *leashproc.Proc, method, path, key, body string) (int, map[string]any, error) {
	var rd *bytes.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, p.URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil && res.StatusCode != http.StatusNoContent {
		return res.StatusCode, nil, fmt.Errorf("decode the answer: %w", err)
	}
	return res.StatusCode, out, nil
}

// must is crashCall that fails the test on a transport error or another status than want.
func must(t *testing.T, p *leashproc.Proc, want int, method, path, key, body string) map[string]any {
	t.Helper()
	code, out, err := crashCall(http.DefaultClient, p, method, path, key, body)
	if err != nil || code != want {
		t.Fatalf("%s %s: %d %v %v, want %d", method, path, code, out, err, want)
	}
	return out
}

func limitBody(key string, limit, cost int64) string {
	return fmt.Sprintf(`{"namespace":"crash","key":%q,"algorithm":"fixed_window","limit":%d,"window_ms":%d,"cost":%d}`,
		key, limit, crashWindowMS, cost)
}

func limitOf(key string) int64 {
	if key == "hot" {
		return 1_000_000_000
	}
	return coldLimit
}

// verifyCrashState checks, after a restart, everything the rounds before were answered.
func verifyCrashState(t *testing.T, p *leashproc.Proc, st *crashState, round int) {
	t.Helper()
	st.mu.Lock()
	defer st.mu.Unlock()
	for key, n := range st.admitted {
		out := must(t, p, 200, "POST", "/v1/limit", "k", limitBody(key, limitOf(key), 0))
		used := limitOf(key) - int64(out["remaining"].(float64))
		if used < n {
			t.Fatalf("round %d: counter %s is at %d after the restart, but %d units were answered allowed (over-admission)", round, key, used, n)
		}
	}
	held := map[string]bool{}
	out := must(t, p, 200, "GET", "/v1/namespaces/jobs/leases?key=job", "k", "")
	for _, l := range out["leases"].([]any) {
		held[l.(map[string]any)["lease_id"].(string)] = true
	}
	for id, until := range st.leases {
		if time.Until(until) > 2*time.Second && !held[id] {
			t.Fatalf("round %d: lease %s answered acquired (TTL ends in %s) is not held after the restart", round, id, time.Until(until).Round(time.Millisecond))
		}
	}
	for _, id := range st.accounts {
		must(t, p, 200, "GET", "/v1/admin/accounts/"+id, "op", "")
	}
	if st.ruleMax > 0 {
		rules := must(t, p, 200, "GET", "/v1/namespaces/rules/rules", "k", "")
		list, _ := rules["rules"].([]any)
		var rate map[string]any
		if len(list) > 0 {
			rate, _ = list[0].(map[string]any)
		}
		if rate == nil || int64(rate["limit"].(float64)) != st.ruleMax {
			t.Fatalf("round %d: the rate rule is %v after the restart, want limit %d", round, rules, st.ruleMax)
		}
		overrides, _ := rate["overrides"].([]any)
		if len(overrides) != 1 || int64(overrides[0].(map[string]any)["limit"].(float64)) != st.ruleMax*10 {
			t.Fatalf("round %d: the rule's override is %v after the restart, want limit %d", round, overrides, st.ruleMax*10)
		}
	}
	if st.hookURL != "" {
		hook := must(t, p, 200, "GET", "/v1/webhook", "k", "")
		if hook["url"] != st.hookURL {
			t.Fatalf("round %d: the webhook is %v after the restart, want %s", round, hook["url"], st.hookURL)
		}
	}
}

// changeCrashState makes one round's changes, recording each once it is answered.
func changeCrashState(t *testing.T, p *leashproc.Proc, st *crashState, round int) {
	t.Helper()
	id := fmt.Sprintf("crash-%d", round)
	must(t, p, 201, "POST", "/v1/admin/accounts", "op", fmt.Sprintf(`{"id":%q,"plan":"pro"}`, id))
	limit := int64(round + 1)
	code, out, err := crashCall(http.DefaultClient, p, "POST", "/v1/namespaces/rules/rules", "k",
		fmt.Sprintf(`{"algorithm":"fixed_window","limit":%d,"window_ms":60000,"overrides":[{"key":"vip","limit":%d}]}`, limit, limit*10))
	if err != nil || (code != 200 && code != 201) {
		t.Fatalf("set the rule: %d %v %v", code, out, err)
	}
	url := fmt.Sprintf("http://127.0.0.1:9/hook-%d", round)
	must(t, p, 200, "PUT", "/v1/webhook", "k", fmt.Sprintf(`{"url":%q}`, url))
	acquired := time.Now()
	lease := must(t, p, 200, "POST", "/v1/leases", "k", fmt.Sprintf(`{"namespace":"jobs","key":"job","limit":1000,"window_ms":%d}`, leaseTTL.Milliseconds()))
	st.mu.Lock()
	st.accounts = append(st.accounts, id)
	st.ruleMax, st.hookURL = limit, url
	if lease["allowed"] == true {
		st.leases[lease["lease_id"].(string)] = acquired.Add(leaseTTL)
	}
	st.mu.Unlock()
}

// loadAndKill runs four clients against a hot key and 200 cold keys until n answers came
// back, then kills the process with SIGKILL while they are still sending; only answers
// received count.
func loadAndKill(t *testing.T, p *leashproc.Proc, st *crashState, n int64) {
	t.Helper()
	var stop atomic.Bool
	var wg sync.WaitGroup
	var answered atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			c := &http.Client{Timeout: 5 * time.Second}
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for !stop.Load() {
				key := "hot"
				if r.IntN(2) == 0 {
					key = "cold-" + strconv.Itoa(r.IntN(200))
				}
				code, out, err := crashCall(c, p, "POST", "/v1/limit", "k", limitBody(key, limitOf(key), 1))
				if err != nil || code != 200 {
					continue // killed meanwhile: not answered, so not counted
				}
				answered.Add(1)
				if out["allowed"] == true {
					st.mu.Lock()
					st.admitted[key]++
					st.mu.Unlock()
				}
			}
		})
	}
	// Polling with a deadline: the answers come from another process.
	for deadline := time.Now().Add(20 * time.Second); answered.Load() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("only %d answers under load in 20 s", answered.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.Exited
	stop.Store(true)
	wg.Wait()
}
