package usage_test

import (
	"context"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/usage"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
)

// portOnly hides every method of the store but the Port's.
type portOnly struct{ usage.Port }

type fixedDir struct{ d *engine.Directory }

func (f fixedDir) Directory() *engine.Directory { return f.d }

// notifications is a Notifier that keeps what it was told.
type notifications struct {
	months []engine.Month
	totals []int64
}

func (n *notifications) NotifyUsage(_ context.Context, _ int64, month engine.Month, accounts []*engine.Account, totals []int64) error {
	for i := range accounts {
		n.months = append(n.months, month)
		n.totals = append(n.totals, totals[i])
	}
	return nil
}

// refusals is an Observer that counts hard-cap refusals.
type refusals struct{ n int }

func (*refusals) Decided(*engine.Account, *engine.Query, *engine.Item, *engine.ItemResult) {}
func (r *refusals) HardCapRefused(*engine.Account, engine.Edge)                            { r.n++ }

// TestMeterCountsFlushesAndCaps: decisions recorded are flushed over the port and read
// back per namespace and per account; the month total reaches the hard cap, which then
// refuses with the seconds left in the month, and the Notifier hears the total.
func TestMeterCountsFlushesAndCaps(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ms := memstore.New(memstore.Options{Clock: testkit.NewFakeClock(now)})
	t.Cleanup(func() { ms.Close() })
	plan := engine.BuiltinPlans()["pro"]
	plan.HardCap = testkit.Ptr(int64(4))
	dir, err := engine.NewDirectory([]engine.AccountSpec{{ID: "acme", Plan: plan}})
	if err != nil {
		t.Fatal(err)
	}
	acme, _ := dir.Account("acme")
	note, obs := &notifications{}, &refusals{}
	m := usage.New(portOnly{ms}, fixedDir{dir}, usage.Options{Notifier: note, Observer: obs})

	nowMS := now.UnixMilli()
	m.Record(acme, "api", nowMS, false)
	m.Record(acme, "api", nowMS, true)
	m.RecordN(acme, "web", nowMS, 2, 1)
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := m.Stats(ctx, acme, "api")
	if err != nil || st.Total != 2 || st.Blocked != 1 || st.Month.Total != 4 || len(st.Days) != usage.StatsDays {
		t.Fatalf("stats: %+v, %v", st, err)
	}
	u, err := m.Usage(ctx, acme)
	if err != nil || len(u.Namespaces) != 2 || u.Namespaces[1].Namespace != "web" || u.Namespaces[1].Total != 2 {
		t.Fatalf("usage: %+v, %v", u, err)
	}
	nss, err := m.Namespaces(ctx, acme)
	if err != nil || len(nss) != 2 {
		t.Fatalf("namespaces: %+v, %v", nss, err)
	}
	err = m.HardCap(acme, engine.EdgeLimit)
	var e *engine.Error
	if engine.CodeOf(err) != engine.CodeHardCapExceeded {
		t.Fatalf("hard cap at 4 of 4: %v", err)
	}
	if e, _ = err.(*engine.Error); e.RetryAfterSec != int64(engine.MonthOf(now).End().Sub(now)/time.Second) {
		t.Fatalf("retry after %d s, want the rest of the month", e.RetryAfterSec)
	}
	if obs.n != 1 {
		t.Fatalf("observer saw %d refusals, want 1", obs.n)
	}
	if len(note.totals) != 1 || note.totals[0] != 4 || note.months[0] != engine.MonthOf(now) {
		t.Fatalf("notifier heard %v in %v, want 4 this month", note.totals, note.months)
	}
}
