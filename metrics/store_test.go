package metrics_test

import (
	"context"
	"testing"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/engine/memstore"
	"github.com/leashd/leash/metrics"
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
