// Command diskengines compares three embedded storage engines on the disk store's
// workload: many small overwrites of counter records, written without a sync and made
// durable by one sync per interval (store.disk.sync_interval). It lives in its own module
// so that the engines it compares stay out of Leash's go.mod.
//
//	cd scripts/diskengines && go run . -writes 300000 -keys 100000 -workers 4
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	badger "github.com/dgraph-io/badger/v4"
	bolt "go.etcd.io/bbolt"
)

// engine is one storage engine under test.
type engine interface {
	// set overwrites key with value, without a sync.
	set(key, value []byte) error
	// sync makes every write so far durable.
	sync() error
	close() error
}

func main() {
	writes := flag.Int("writes", 300_000, "writes per engine, over all workers")
	keys := flag.Int("keys", 100_000, "distinct counter keys; a fifth of the writes go to 1% of them (hot keys)")
	workers := flag.Int("workers", 4, "concurrent writers")
	interval := flag.Duration("sync", time.Second, "sync interval (0: sync after every write)")
	only := flag.String("engine", "", "run only this engine (pebble, bbolt or badger)")
	flag.Parse()
	fmt.Printf("writes=%d keys=%d workers=%d sync=%s\n", *writes, *keys, *workers, *interval)
	fmt.Printf("%-8s %12s %10s %10s %12s\n", "engine", "writes/s", "p50_us", "p99_us", "dir_bytes")
	for _, name := range []string{"pebble", "bbolt", "badger"} {
		if *only != "" && *only != name {
			continue
		}
		if err := run(name, *writes, *keys, *workers, *interval); err != nil {
			fmt.Fprintln(os.Stderr, name+":", err)
			os.Exit(1)
		}
	}
}

// run opens name in a fresh temporary directory, writes, and prints one row.
func run(name string, writes, keys, workers int, interval time.Duration) error {
	dir, err := os.MkdirTemp("", "diskengines-"+name)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e, err := open(name, dir)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	stop := make(chan struct{})
	var syncer sync.WaitGroup
	var syncErr error
	if interval > 0 {
		syncer.Go(func() {
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if err := e.sync(); err != nil && syncErr == nil {
						syncErr = err
					}
				}
			}
		})
	}
	lat := make([][]time.Duration, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			key := make([]byte, 0, 64)
			value := make([]byte, 24) // count, window start, expiry
			n := writes / workers
			lat[w] = make([]time.Duration, 0, n)
			for i := range n {
				k := r.IntN(keys)
				if i%5 == 0 {
					k = r.IntN(max(keys/100, 1))
				}
				key = fmt.Appendf(key[:0], "c/acct-%d/ns/user-%08d", k%16, k)
				binary.BigEndian.PutUint64(value, uint64(i))
				binary.BigEndian.PutUint64(value[8:], uint64(time.Now().UnixMilli()))
				binary.BigEndian.PutUint64(value[16:], uint64(time.Now().Add(time.Minute).UnixMilli()))
				t0 := time.Now()
				err := e.set(key, value)
				if err == nil && interval == 0 {
					err = e.sync()
				}
				lat[w] = append(lat[w], time.Since(t0))
				if err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	syncer.Wait()
	if err := e.sync(); err != nil {
		return err
	}
	if err := e.close(); err != nil {
		return err
	}
	for _, err := range append(errs, syncErr) {
		if err != nil {
			return err
		}
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	size, err := dirBytes(dir)
	if err != nil {
		return err
	}
	fmt.Printf("%-8s %12.0f %10.1f %10.1f %12d\n", name, float64(len(all))/elapsed.Seconds(),
		us(all[len(all)/2]), us(all[len(all)*99/100]), size)
	return nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// dirBytes is the size of every file under dir.
func dirBytes(dir string) (int64, error) {
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
	return n, err
}

func open(name, dir string) (engine, error) {
	switch name {
	case "pebble":
		db, err := pebble.Open(dir, &pebble.Options{})
		return pebbleEngine{db}, err
	case "bbolt":
		db, err := bolt.Open(filepath.Join(dir, "bolt.db"), 0o600, &bolt.Options{NoSync: true, NoFreelistSync: true})
		if err != nil {
			return nil, err
		}
		err = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(boltBucket); return err })
		return boltEngine{db}, err
	case "badger":
		db, err := badger.Open(badger.DefaultOptions(dir).WithSyncWrites(false).WithLogger(nil))
		return badgerEngine{db}, err
	}
	return nil, fmt.Errorf("unknown engine %q", name)
}

type pebbleEngine struct{ db *pebble.DB }

func (e pebbleEngine) set(k, v []byte) error { return e.db.Set(k, v, pebble.NoSync) }
func (e pebbleEngine) sync() error           { return e.db.LogData(nil, pebble.Sync) }
func (e pebbleEngine) close() error          { return e.db.Close() }

var boltBucket = []byte("c")

type boltEngine struct{ db *bolt.DB }

func (e boltEngine) set(k, v []byte) error {
	return e.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(boltBucket).Put(k, v) })
}
func (e boltEngine) sync() error  { return e.db.Sync() }
func (e boltEngine) close() error { return e.db.Close() }

type badgerEngine struct{ db *badger.DB }

func (e badgerEngine) set(k, v []byte) error {
	return e.db.Update(func(txn *badger.Txn) error { return txn.Set(k, v) })
}
func (e badgerEngine) sync() error  { return e.db.Sync() }
func (e badgerEngine) close() error { return e.db.Close() }
