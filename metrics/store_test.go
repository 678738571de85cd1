package metrics_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/metrics"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/tracing"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

var benchSpend = engine.Spend{
	Counter: engine.Counter{Account: "a", Namespace: "n", Key: "k", Algorithm: engine.FixedWindow, WindowMS: 60000},
	Limit:   1_000_000_000, Cost: 1,
}

// TestTimedSpendAddsNoAllocation: a spend through the timed store allocates no more than
// on the bare store, with or without a tracer (no request span: no child span).
func TestTimedSpendAddsNoAllocation(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = ms.Close() })
	tr := tracing.NewWithProcessor(tracetest.NewSpanRecorder(), tracing.Options{SamplingRatio: 1})
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	m := metrics.New()
	ctx := context.Background()
	allocs := func(s engine.Decider) float64 {
		return testing.AllocsPerRun(1000, func() { _, _ = s.Spend(ctx, benchSpend) })
	}
	bare := allocs(ms)
	if timed := allocs(m.Instrument(ms)); timed > bare {
		t.Errorf("a timed spend allocates %v times, %v on the bare store", timed, bare)
	}
	if traced := allocs(m.InstrumentTraced(ms, tr.Tracer())); traced > bare {
		t.Errorf("a timed spend with a tracer allocates %v times, %v on the bare store", traced, bare)
	}
}

// BenchmarkTimedSpend is one Spend on the memory store: bare, through the timed store,
// and through the timed store with a tracer but no request span:
//
//	go test -run='^$' -bench=TimedSpend -benchmem ./metrics/
func BenchmarkTimedSpend(b *testing.B) {
	ms := memstore.New(memstore.Options{})
	b.Cleanup(func() { _ = ms.Close() })
	tr := tracing.NewWithProcessor(tracetest.NewSpanRecorder(), tracing.Options{SamplingRatio: 1})
	b.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	m := metrics.New()
	for _, bc := range []struct {
		name string
		s    engine.Decider
	}{{"bare", ms}, {"timed", m.Instrument(ms)}, {"traced", m.InstrumentTraced(ms, tr.Tracer())}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.s.Spend(ctx, benchSpend); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// storeRoles are the roles of engine.Store; TestEveryStoreMethodIsTimed checks that the
// store is nothing else (but Close).
var storeRoles = []reflect.Type{
	reflect.TypeFor[engine.Decider](),
	reflect.TypeFor[engine.RuleStore](),
	reflect.TypeFor[engine.UsageStore](),
	reflect.TypeFor[engine.WebhookStore](),
	reflect.TypeFor[engine.DemandStore](),
	reflect.TypeFor[engine.Pinger](),
}

// storeSamples returns the observations of each store operation (both results).
func storeSamples(t *testing.T, m *metrics.Metrics) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, mt := range families(t, m)["leash_store_operation_duration_seconds"].GetMetric() {
		out[labels(mt)["op"]] += mt.GetHistogram().GetSampleCount()
	}
	return out
}

// TestEveryStoreMethodIsTimed: every method of every role of engine.Store, called
// through the timed store, is observed once under an op of its own, and traced as that
// op's child span of a recording request span. A method added to a role, or a role added
// to the store, is covered without editing this test.
func TestEveryStoreMethodIsTimed(t *testing.T) {
	inRole := map[string]bool{}
	for _, r := range storeRoles {
		for i := range r.NumMethod() {
			inRole[r.Method(i).Name] = true
		}
	}
	st := reflect.TypeFor[engine.Store]()
	for i := range st.NumMethod() {
		if name := st.Method(i).Name; name != "Close" && !inRole[name] {
			t.Errorf("engine.Store.%s is in none of the roles this test calls", name)
		}
	}

	rec := tracetest.NewSpanRecorder()
	tr := tracing.NewWithProcessor(rec, tracing.Options{SamplingRatio: 1})
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = ms.Close() })
	m := metrics.New()
	timed := reflect.ValueOf(m.InstrumentTraced(ms, tr.Tracer()))
	ctx, req := tr.Tracer().Start(context.Background(), "request")
	defer req.End()

	opOf := map[string]string{} // op -> the method observed under it
	for _, r := range storeRoles {
		for i := range r.NumMethod() {
			meth := r.Method(i)
			args := []reflect.Value{reflect.ValueOf(ctx)} // the rest zero: an error is timed too
			for j := 1; j < meth.Type.NumIn(); j++ {
				args = append(args, reflect.Zero(meth.Type.In(j)))
			}
			before := storeSamples(t, m)
			spans := len(rec.Ended())
			timed.MethodByName(meth.Name).Call(args)
			var moved []string
			for op, n := range storeSamples(t, m) {
				if n != before[op] {
					moved = append(moved, op)
					if n != before[op]+1 {
						t.Errorf("%s.%s: op %q observed %d times, want once", r.Name(), meth.Name, op, n-before[op])
					}
				}
			}
			if len(moved) != 1 {
				t.Errorf("%s.%s: observed under ops %q, want exactly one", r.Name(), meth.Name, moved)
				continue
			}
			op := moved[0]
			if other, ok := opOf[op]; ok {
				t.Errorf("%s.%s: observed under op %q, as %s is", r.Name(), meth.Name, op, other)
			}
			opOf[op] = meth.Name
			ended := rec.Ended()[spans:]
			if len(ended) != 1 || ended[0].Name() != "store."+op || ended[0].Parent().SpanID() != req.SpanContext().SpanID() {
				names := make([]string, len(ended))
				for k, s := range ended {
					names[k] = s.Name()
				}
				t.Errorf("%s.%s: child spans %q, want one store.%s of the request", r.Name(), meth.Name, names, op)
			}
		}
	}
	if ops := storeSamples(t, m); len(opOf) != len(ops) {
		t.Errorf("methods observed under %d ops, %d ops registered", len(opOf), len(ops))
	}
}
