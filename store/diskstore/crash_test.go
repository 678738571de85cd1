package diskstore_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/diskstore"
)

// crashEntries bounds the crash test's store far above what it writes, so no counter is
// evicted (an evicted counter starts over, spec §11.1).
const crashEntries = 8_000_000

// crashEnv names the directory the crash test's child process writes to.
const crashEnv = "LEASH_DISKSTORE_CRASH_DIR"

// fixedClock is a clock that never moves, so the parent and its child agree on now.
type fixedClock struct{}

// Now returns the suite's base instant.
func (fixedClock) Now() time.Time { return time.UnixMilli(t0) }

var (
	crashHot  = ctr("hot", 3_600_000)
	crashSet  = engine.LeaseSet{Account: "acct", Namespace: "ns", Key: "jobs"}
	crashRule = "crash"
)

// TestCrashChild is the crash test's child: it writes until it is killed, printing each
// change after it was answered. It runs only under TestKill9.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("runs as TestKill9's child")
	}
	s := open(t, dir, fixedClock{}, diskstore.Options{SyncInterval: diskstore.DefaultSyncInterval, MaxEntries: crashEntries})
	out := os.Stdout
	for i := 0; ; i++ {
		d := spend(t, s, crashHot, 1_000_000_000, 1)
		fmt.Fprintln(out, "hot", (1_000_000_000)-d.Remaining)
		spend(t, s, ctr(fmt.Sprint("cold", i), 3_600_000), 10, 1)
		fmt.Fprintln(out, "cold", i)
		tok := fmt.Sprint(os.Getpid(), "-", i)
		if ld, err := s.Acquire(t.Context(), crashSet, tok, 1_000_000_000, 3_600_000); err != nil || !ld.Allowed {
			t.Fatalf("Acquire: %+v, %v", ld, err)
		}
		fmt.Fprintln(out, "lease", tok)
		if i%20 == 0 {
			id := fmt.Sprintf("a%d-%d", os.Getpid(), i)
			if _, _, err := s.CreateAccount(t.Context(), engine.StoredAccount{ID: id, Plan: "free"}); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(out, "account", id)
			r := engine.Rule{Algorithm: engine.FixedWindow, Limit: int64(i + 1), WindowMS: 60_000}
			if _, err := s.PutRule(t.Context(), "acct", crashRule, r); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(out, "rule", i+1)
		}
	}
}

// TestKill9 kills a process writing to the store with SIGKILL, 5 times (LEASH_CRASH_ROUNDS
// sets more; make test-disk-long runs 20; tests/reliability's TestDiskCrash does 20 through
// the binary in make test), and checks
// after each that every change it answered is there: the hot counter is not lower, the
// cold counters, leases, accounts and the latest rule are all kept.
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	var hot int64
	for round := range envInt("LEASH_CRASH_ROUNDS", 5) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var (
			colds    []string
			leases   []string
			accounts []string
			rule     int64
			lines    int
		)
		sc := bufio.NewScanner(stdout)
		killed := false
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 2 {
				t.Logf("round %d: child: %s", round, sc.Text())
				continue
			}
			switch f[0] {
			case "hot":
				n, _ := strconv.ParseInt(f[1], 10, 64)
				hot = max(hot, n)
			case "cold":
				colds = append(colds, f[1])
			case "lease":
				leases = append(leases, f[1])
			case "account":
				accounts = append(accounts, f[1])
			case "rule":
				rule, _ = strconv.ParseInt(f[1], 10, 64)
			}
			if lines++; lines == 2000+round*100 && !killed {
				if err := cmd.Process.Kill(); err != nil { // SIGKILL: no Close runs
					t.Fatal(err)
				}
				killed = true // read on: what was printed before the kill was answered
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: the child ended before it was killed", round)
		}

		s := open(t, dir, fixedClock{}, diskstore.Options{MaxEntries: crashEntries})
		d := spend(t, s, crashHot, 1_000_000_000, 1)
		if got := 1_000_000_000 - d.Remaining - 1; got < hot {
			t.Errorf("round %d: hot counter %d after the crash, %d answered before", round, got, hot)
		}
		hot++
		for _, k := range colds {
			if d := spend(t, s, ctr("cold"+k, 3_600_000), 10, 10); d.Allowed {
				t.Errorf("round %d: cold counter %s forgotten", round, k)
				break
			}
		}
		held, err := s.HeldLeases(t.Context(), crashSet)
		if err != nil {
			t.Fatal(err)
		}
		tokens := make(map[string]bool, len(held.Leases))
		for _, l := range held.Leases {
			tokens[l.Token] = true
		}
		for _, tok := range leases {
			if !tokens[tok] {
				t.Errorf("round %d: lease %s forgotten", round, tok)
				break
			}
		}
		for _, id := range accounts {
			if _, ok, _ := s.GetAccount(t.Context(), id); !ok {
				t.Errorf("round %d: account %s forgotten", round, id)
			}
		}
		if rs, _ := s.Rules(t.Context(), "acct", crashRule); rs.Rate == nil || rs.Rate.Limit < rule {
			t.Errorf("round %d: rule %+v, answered limit %d", round, rs.Rate, rule)
		}
		// The cold counters of this round were checked by spending 10: start the next
		// round's keys afresh by resetting them.
		for _, k := range colds {
			if _, err := s.Reset(t.Context(), ctr("cold"+k, 3_600_000)); err != nil {
				t.Fatal(err)
			}
		}
		mustClose(t, s)
		t.Logf("round %d: %d lines answered before the kill; hot counter %d", round, lines, hot)
	}
}
