package reliability

import (
	"syscall"
	"testing"

	"github.com/leashd/leash/testkit/leashproc"
	"github.com/leashd/leash/testkit/redistest"
)

// TestKilledHolderStrandsLittle: leash A decides a hot counter from slices (spec §4.13)
// and is killed (SIGKILL) while holding one; leash B on the same Redis then gets all of the
// counter's budget but what A admitted and at most A's last slice, 1 % of the limit.
func TestKilledHolderStrandsLittle(t *testing.T) {
	const limit, spentOnA = 5000, 300
	r := redistest.StartServer(t, false)
	env := []string{"LEASH_DEV_API_KEY=k", "LEASH_STORE_BACKEND=redis", "LEASH_STORE_REDIS_URL=" + r.URL(),
		"LEASH_STORE_REDIS_READ_TIMEOUT=2s"}
	body := `{"namespace":"api","key":"hot","algorithm":"fixed_window","limit":5000,"window_ms":3600000}`
	spend := func(p *leashproc.Proc) bool {
		code, out := leashproc.Call(t, "POST", "http://"+p.HTTP+"/v1/limit", "k", body)
		if code != 200 {
			t.Fatalf("check: %d %v", code, out)
		}
		return out["allowed"].(bool)
	}
	a := leashproc.Start(t, binary, nil, env...)
	for i := range spentOnA {
		if !spend(a) {
			t.Fatalf("request %d on A denied", i)
		}
	}
	if err := a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.Exited
	b := leashproc.Start(t, binary, nil, env...)
	var onB int
	for spend(b) {
		onB++
		if onB > limit {
			t.Fatal("B admitted more than the limit")
		}
	}
	if stranded := limit - spentOnA - onB; stranded < 0 || stranded > limit/100 {
		t.Fatalf("B admitted %d after A's %d: %d of %d stranded by the killed instance, want at most 1 %% (%d)",
			onB, spentOnA, stranded, limit, limit/100)
	} else {
		t.Logf("B admitted %d after A's %d: %d stranded", onB, spentOnA, stranded)
	}
}
