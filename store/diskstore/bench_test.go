package diskstore_test

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leashd/leash/engine"
	"github.com/leashd/leash/store/diskstore"
	"github.com/leashd/leash/store/memstore"
	"github.com/leashd/leash/testkit"
)

// BenchmarkSpendParallel spends on 10,000 keys from every goroutine, on the memory store
// and on the disk store (synced every second, and on every write), the latter with one
// and with 16 goroutines per GOMAXPROCS: a disk store's commits wait for the log's
// write, and concurrent ones share it.
func BenchmarkSpendParallel(b *testing.B) {
	const keys = 10_000
	names := make([]engine.Counter, keys)
	for i := range names {
		names[i] = ctr(fmt.Sprint("key", i), 60_000)
	}
	run := func(b *testing.B, s engine.Decider) {
		var next atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(next.Add(7919))
			for pb.Next() {
				i++
				if _, err := s.Spend(ctx, engine.Spend{Counter: names[i%keys], Limit: 1_000_000_000, Cost: 1}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("memstore", func(b *testing.B) {
		s := memstore.New(memstore.Options{})
		defer s.Close()
		run(b, s)
	})
	for _, every := range []time.Duration{diskstore.DefaultSyncInterval, 0} {
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("disk/sync=%v/goroutines=%dxGOMAXPROCS", every, par), func(b *testing.B) {
				s := open(b, b.TempDir(), engine.SystemClock{}, diskstore.Options{SyncInterval: every})
				defer mustClose(b, s)
				b.SetParallelism(par)
				run(b, s)
			})
		}
	}
}

// dirBytes is the size of the files under dir.
func dirBytes(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkOpen1M opens a store holding 1,000,000 live counters: the start-up time after
// a crash or a restart.
func BenchmarkOpen1M(b *testing.B) {
	const n = 1_000_000
	dir := b.TempDir()
	clock := testkit.NewFakeClock(time.UnixMilli(t0))
	opts := diskstore.Options{SyncInterval: time.Hour, MaxEntries: 2 * n}
	s := open(b, dir, clock, opts)
	for i := range n {
		spend(b, s, ctr(fmt.Sprint("key", i), 3_600_000), 100, 1)
	}
	mustClose(b, s)
	size := dirBytes(b, dir)
	for b.Loop() {
		s := open(b, dir, clock, opts)
		b.StopTimer()
		if got := s.Len(); got != n {
			b.Fatalf("reopened store holds %d counters, want %d", got, n)
		}
		mustClose(b, s)
		b.StartTimer()
	}
	b.ReportMetric(float64(size)/(1<<20), "dir-MiB")
}

// BenchmarkChurn1M spends once on each of 1,000,000 distinct keys with a one-second
// window, one key per millisecond of the store's clock, sweeping as the memory store's
// sweeper would; it reports the directory's size at the end, after every key expired and
// was swept.
func BenchmarkChurn1M(b *testing.B) {
	const n = 1_000_000
	for b.Loop() {
		dir := b.TempDir()
		clock := testkit.NewFakeClock(time.UnixMilli(t0))
		s := open(b, dir, clock, diskstore.Options{SyncInterval: time.Second})
		var peak int64
		for i := range n {
			spend(b, s, ctr(fmt.Sprint("churn", i), 1_000), 100, 1)
			clock.Advance(time.Millisecond)
			if i%1000 == 999 {
				s.Sweep()
			}
			if i%100_000 == 99_999 {
				peak = max(peak, dirBytes(b, dir))
			}
		}
		clock.Advance(2 * time.Second)
		s.Sweep()
		mustClose(b, s)
		b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
		b.ReportMetric(float64(dirBytes(b, dir))/(1<<20), "end-MiB")
	}
}
