package engine_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

func benchTuples(n int) []engine.Tuple {
	ts := make([]engine.Tuple, n)
	for i := range ts {
		ts[i] = engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte(fmt.Sprintf("user:%08d", i)), WindowMs: 60_000}
	}
	return ts
}

// BenchmarkLimitHotKey: every request on one tuple, all allowed and counted.
func BenchmarkLimitHotKey(b *testing.B) {
	e, _ := newEngine(t0)
	tp := benchTuples(1)[0]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Limit(tp, engine.MaxLimit, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLimitManyKeys: requests spread over 64Ki tuples (created on the first pass).
func BenchmarkLimitManyKeys(b *testing.B) {
	benchLimitManyKeys(b, engine.Config{MaxMemoryBytes: 1 << 30})
}

// BenchmarkLimitManyKeysTracked is BenchmarkLimitManyKeys on an origin that snapshots:
// every counted request marks its tuple for the next incremental save (dirty.go).
func BenchmarkLimitManyKeysTracked(b *testing.B) {
	benchLimitManyKeys(b, engine.Config{MaxMemoryBytes: 1 << 30, Snapshots: true})
}

func benchLimitManyKeys(b *testing.B, cfg engine.Config) {
	e := engine.New(engine.NewManualClock(t0), cfg)
	ts := benchTuples(1 << 16)
	for _, tp := range ts {
		e.Limit(tp, 1000, 1)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := e.Limit(ts[i&(len(ts)-1)], 1000, 1); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkLimitParallel: GOMAXPROCS goroutines on 64Ki shared tuples.
func BenchmarkLimitParallel(b *testing.B) {
	e, _ := newEngine(t0)
	ts := benchTuples(1 << 16)
	for _, tp := range ts {
		e.Limit(tp, 1000, 1)
	}
	var seed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seed.Add(7919))
		for pb.Next() {
			if _, err := e.Limit(ts[i&(len(ts)-1)], 1000, 1); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkLimitRandomKeys: requests on 1Mi tuples in a random order (created first), so
// that nearly every lookup misses the CPU caches, as with redis-benchmark -r.
func BenchmarkLimitRandomKeys(b *testing.B) {
	benchLimitRandomKeys(b, engine.Config{MaxMemoryBytes: 1 << 30})
}

// BenchmarkLimitRandomKeysTracked is BenchmarkLimitRandomKeys on an origin that snapshots
// (dirty.go marks every counted tuple).
func BenchmarkLimitRandomKeysTracked(b *testing.B) {
	benchLimitRandomKeys(b, engine.Config{MaxMemoryBytes: 1 << 30, Snapshots: true})
}

func benchLimitRandomKeys(b *testing.B, cfg engine.Config) {
	e := engine.New(engine.NewManualClock(t0), cfg)
	ts := benchTuples(1 << 20)
	for _, tp := range ts {
		e.Limit(tp, 1000, 1)
	}
	order := make([]uint32, 1<<16)
	x := uint32(2463534242)
	for i := range order {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		order[i] = x & (1<<20 - 1)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := e.Limit(ts[order[i&(len(order)-1)]], 1000, 1); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkServeReplay is an origin applying replay batches of 1000 items, one cost
// unit each on random keys of 100k warm tuples, as from an edge serving random keys. With
// "leased" the edge run holds a lease on every tuple (each item spends it); "unleased"
// is the same work without leases; "tracked" is "unleased" on an origin that snapshots
// (dirty.go marks every tuple an item counts in). ns/op is per item.
func BenchmarkServeReplay(b *testing.B) {
	for _, run := range []struct {
		name            string
		leased, tracked bool
	}{{"unleased", false, false}, {"leased", true, false}, {"tracked", false, true}} {
		leased := run.leased
		b.Run(run.name, func(b *testing.B) {
			const keys, batch = 100_000, 1000
			clock := engine.NewManualClock(t0)
			o := engine.New(clock, engine.Config{Snapshots: run.tracked})
			ks := make([][]byte, keys)
			for i := range ks {
				ks[i] = engine.AppendKey(nil, tup(fmt.Sprintf("key:%012d", i), 60_000))
				want := uint64(0)
				if leased {
					want = 1 << 30
				}
				o.ServeRead("e1/a", []engine.ReadItem{{Key: ks[i], Seq: t0 / 60_000, Limit: 1 << 40, Want: want}})
				o.ServeReplay(engine.ReplayBatch{Node: "e1/a", ID: uint64(i + 1),
					Items: []engine.ReplayItem{{Key: ks[i], Seq: t0 / 60_000, Cost: 1, Limit: 1 << 40}}})
			}
			r := rand.New(rand.NewPCG(1, 2))
			items := make([]engine.ReplayItem, batch)
			id := uint64(keys)
			b.ResetTimer()
			for n := 0; n < b.N; n += batch {
				for i := range items {
					items[i] = engine.ReplayItem{Key: ks[r.IntN(keys)], Seq: t0 / 60_000, Cost: 1, Limit: 1 << 40}
				}
				id++
				o.ServeReplay(engine.ReplayBatch{Node: "e1/a", ID: id, Items: items})
			}
		})
	}
}

// BenchmarkCapture: what a snapshot reads of an origin whose 100k tuples each hold one
// edge run's lease: every live cell (Records), every live lease grant (Leases), or both in
// one pass (Tuples, what a save reads); each reads every tuple's side struct. ns/tuple is
// per tuple.
func BenchmarkCapture(b *testing.B) {
	const keys = 100_000
	clock := engine.NewManualClock(t0)
	o := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})
	for i := range keys {
		k := engine.AppendKey(nil, tup(fmt.Sprintf("key:%012d", i), 60_000))
		o.ServeRead("e1/a", []engine.ReadItem{{Key: k, Seq: t0 / 60_000, Limit: 1 << 40, Want: 4}})
		o.ServeReplay(engine.ReplayBatch{Node: "e1/a", ID: uint64(i + 1),
			Items: []engine.ReplayItem{{Key: k, Seq: t0 / 60_000, Cost: 1, Limit: 1 << 40, Want: 4}}})
	}
	for _, bc := range []struct {
		name string
		scan func() int
	}{
		{"records", func() (n int) {
			for range o.Records {
				n++
			}
			return n
		}},
		{"leases", func() (n int) {
			for range o.Leases {
				n++
			}
			return n
		}},
		{"tuples", func() (n int) {
			for t := range o.Tuples {
				n += min(len(t.Cells), len(t.Leases))
			}
			return n
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if n := bc.scan(); n != keys {
					b.Fatalf("%d records, want %d", n, keys)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/keys, "ns/tuple")
		})
	}
}

// BenchmarkRestore: Restore of a snapshot's 1M cells (one per tuple, user:%08d, 60 s
// window) into an empty standalone origin, as a restart does after persist has decoded
// them. ns/cell is per cell.
func BenchmarkRestore(b *testing.B) {
	const n = 1_000_000
	clock := engine.NewManualClock(t0)
	recs := make([]engine.CellRecord, n)
	for i := range recs {
		recs[i] = engine.CellRecord{Key: string(engine.AppendKey(nil, tup(fmt.Sprintf("user:%08d", i), 60_000))), Seq: t0 / 60_000, Regional: 3}
	}
	for b.Loop() {
		e := engine.New(clock, engine.Config{MaxMemoryBytes: 4 << 30, Standalone: true})
		if loaded, _, err := e.Restore(recs); err != nil || loaded != n {
			b.Fatalf("loaded %d: %v", loaded, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/cell")
}

// BenchmarkLoadAhead: a restart's load before it listens, on one worker (and the
// background load's goroutine, unpaced: no request comes): 2M cells (one per tuple,
// user:%012d:api, 1 h window), grouped by load part as a snapshot holds them, into
// an empty origin that adopted the snapshot's seed and reserved its index
// (engine.ReserveTuples), restored part by part (LoadLazily, LoadAhead). ns/cell is per
// cell.
func BenchmarkLoadAhead(b *testing.B) {
	const n = 2_000_000
	clock := engine.NewManualClock(t0)
	seed := engine.New(clock, engine.Config{}).ShardSeed()
	recs := make([]engine.CellRecord, n)
	for i := range recs {
		recs[i] = engine.CellRecord{Key: string(engine.AppendKey(nil, tup(fmt.Sprintf("user:%012d:api", i), 3_600_000))), Seq: t0 / 3_600_000, Regional: 3}
	}
	starts := make([]int, engine.Parts+1) // part p's records: recs[starts[p]:starts[p+1]]
	for _, r := range recs {
		starts[engine.PartOf(seed, r.Key)+1]++
	}
	for p := range engine.Parts {
		starts[p+1] += starts[p]
	}
	byPart := make([]engine.CellRecord, n)
	at := slices.Clone(starts)
	for _, r := range recs {
		p := engine.PartOf(seed, r.Key)
		byPart[at[p]] = r
		at[p]++
	}
	recs = byPart
	for b.Loop() {
		e := engine.New(clock, engine.Config{MaxMemoryBytes: 4 << 30, Standalone: true})
		if err := e.AdoptShardSeed(seed); err != nil {
			b.Fatal(err)
		}
		e.ReserveTuples(n)
		var failed atomic.Pointer[error] // restores run on the load's goroutines, not the benchmark's
		e.LoadLazily(func(from, to int, keep func(string) bool, _ uint64) {
			if _, _, err := e.Restore(recs[starts[from]:starts[to]]); err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
		if !e.LoadAhead(make(chan struct{}), 1) {
			b.Fatal("not loaded")
		}
		if err := failed.Load(); err != nil {
			b.Fatal(*err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/cell")
}
