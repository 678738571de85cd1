package storetest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/leashd/leash/engine"
)

func (h *harness) bucket(key string) engine.DemandBucket {
	return engine.DemandBucket{Account: h.a, Namespace: "ns", Key: key}
}

// report records a demand and checks the entries returned.
func (h *harness) report(b engine.DemandBucket, stream string, milli, ttl int64, want ...engine.StreamDemand) {
	h.t.Helper()
	got, err := h.s.ReportDemand(h.ctx, engine.DemandReport{Bucket: b, Stream: stream, MilliRPS: milli, TTLMS: ttl})
	if err != nil {
		h.t.Fatalf("ReportDemand(%q, %q): %v", b.Key, stream, err)
	}
	if want == nil {
		want = []engine.StreamDemand{}
	}
	if got == nil {
		got = []engine.StreamDemand{}
	}
	if !slices.Equal(got, want) {
		h.t.Errorf("at Base%+d: ReportDemand(%q, %q, %d, ttl %d) =\n %+v\nwant\n %+v", h.clock.NowMS()-baseMS, b.Key, stream, milli, ttl, got, want)
	}
}

func sd(stream string, milli, expiresAt int64) engine.StreamDemand {
	return engine.StreamDemand{Stream: stream, MilliRPS: milli, ExpiresMS: baseMS + expiresAt}
}

func demandTests() []subtest {
	return []subtest{
		{"SetListExpire", func(h *harness) {
			b := h.bucket("k")
			h.at(0)
			h.report(b, "s2", 5000, 300, sd("s2", 5000, 300))
			h.at(100)
			h.report(b, "s1", 1000, 300, sd("s1", 1000, 400), sd("s2", 5000, 300))
			h.at(200) // s2 again: its entry is replaced, the expiry moves
			h.report(b, "s2", 7000, 300, sd("s1", 1000, 400), sd("s2", 7000, 500))
			h.at(400) // s1 expired at Base+400 exactly
			h.report(b, "s3", 0, 1000, sd("s2", 7000, 500), sd("s3", 0, 1400))
			h.at(1500) // every entry expired; a new one is alone
			h.report(b, "s1", 1, 100, sd("s1", 1, 1600))
		}},
		{"Drop", func(h *harness) {
			b := h.bucket("k")
			h.at(0)
			h.report(b, "a", 1, 1000, sd("a", 1, 1000))
			h.report(b, "b", 2, 1000, sd("a", 1, 1000), sd("b", 2, 1000))
			for range 2 { // a missing entry is no error
				if err := h.s.DropDemand(h.ctx, b, "a"); err != nil {
					h.t.Fatal(err)
				}
			}
			h.report(b, "b", 3, 1000, sd("b", 3, 1000))
			if err := h.s.DropDemand(h.ctx, b, "b"); err != nil {
				h.t.Fatal(err)
			}
			h.report(b, "c", 4, 1000, sd("c", 4, 1000))
		}},
		{"BucketsAndAccountsApart", func(h *harness) {
			h.at(0)
			h.report(h.bucket("x"), "s", 1, 1000, sd("s", 1, 1000))
			h.report(h.bucket("y"), "s", 2, 1000, sd("s", 2, 1000))
			other := engine.DemandBucket{Account: h.b, Namespace: "ns", Key: "x"}
			h.report(other, "t", 3, 1000, sd("t", 3, 1000))
			ns2 := engine.DemandBucket{Account: h.a, Namespace: "ns2", Key: "x"}
			h.report(ns2, "t", 4, 1000, sd("t", 4, 1000))
			h.report(h.bucket("x"), "s", 5, 1000, sd("s", 5, 1000))
		}},
		{"LargeValues", func(h *harness) {
			h.at(0)
			key := "k:{}%&=" // characters the Redis key layout escapes
			h.report(h.bucket(key), "stream-{1}", engine.MaxDemandMilliRPS, engine.MaxDemandTTLMS,
				sd("stream-{1}", engine.MaxDemandMilliRPS, engine.MaxDemandTTLMS))
		}},
		{"AtMostMaxStreams", func(h *harness) {
			b := h.bucket("k")
			h.at(0)
			for i := range engine.MaxDemandStreams {
				if _, err := h.s.ReportDemand(h.ctx, engine.DemandReport{Bucket: b, Stream: fmt.Sprintf("s%05d", i), MilliRPS: 1, TTLMS: 1000}); err != nil {
					h.t.Fatal(err)
				}
			}
			got, err := h.s.ReportDemand(h.ctx, engine.DemandReport{Bucket: b, Stream: "zz-extra", MilliRPS: 1, TTLMS: 1000})
			if err != nil || len(got) != engine.MaxDemandStreams || slices.ContainsFunc(got, func(d engine.StreamDemand) bool { return d.Stream == "zz-extra" }) {
				h.t.Fatalf("a stream beyond the bound: %d entries, %v", len(got), err)
			}
			// A stream already held is still updated.
			got, err = h.s.ReportDemand(h.ctx, engine.DemandReport{Bucket: b, Stream: "s00000", MilliRPS: 9, TTLMS: 1000})
			if err != nil || got[0] != sd("s00000", 9, 1000) {
				h.t.Fatalf("update at the bound: %+v, %v", got[0], err)
			}
		}},
		{"BadArguments", func(h *harness) {
			good := engine.DemandReport{Bucket: h.bucket("k"), Stream: "s", MilliRPS: 1, TTLMS: 1000}
			long := make([]byte, engine.MaxStreamID+1)
			for i := range long {
				long[i] = 's'
			}
			bad := []func(d *engine.DemandReport){
				func(d *engine.DemandReport) { d.Bucket.Account = "" },
				func(d *engine.DemandReport) { d.Bucket.Namespace = "" },
				func(d *engine.DemandReport) { d.Bucket.Key = "" },
				func(d *engine.DemandReport) { d.Stream = "" },
				func(d *engine.DemandReport) { d.Stream = string(long) },
				func(d *engine.DemandReport) { d.MilliRPS = -1 },
				func(d *engine.DemandReport) { d.MilliRPS = engine.MaxDemandMilliRPS + 1 },
				func(d *engine.DemandReport) { d.TTLMS = 0 },
				func(d *engine.DemandReport) { d.TTLMS = engine.MaxDemandTTLMS + 1 },
			}
			for i, f := range bad {
				d := good
				f(&d)
				if _, err := h.s.ReportDemand(h.ctx, d); !errors.Is(err, engine.ErrInvalidArgument) {
					h.t.Errorf("bad report %d: %v", i, err)
				}
			}
			if err := h.s.DropDemand(h.ctx, h.bucket("k"), ""); !errors.Is(err, engine.ErrInvalidArgument) {
				h.t.Errorf("drop without a stream: %v", err)
			}
			h.at(0)
			h.report(h.bucket("k"), "s", 1, 1000, sd("s", 1, 1000)) // nothing was recorded
		}},
	}
}
