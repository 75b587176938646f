package persist_test

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/persist"
)

// realisticRecords returns n records as an origin holds them: tuples of the default
// workspace and namespace with keys "user:%08d" and a 60 s window, in the current or the
// previous sequence, small counts and no foreign components.
func realisticRecords(n int) []engine.CellRecord {
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	const seq = 29_000_000
	recs := make([]engine.CellRecord, n)
	for i := range recs {
		recs[i] = engine.CellRecord{
			Key:      key("default", "default", fmt.Sprintf("user:%08d", i), 60_000),
			Seq:      int64(seq - rng.IntN(2)),
			Regional: 1 + rng.Uint64N(1000),
		}
	}
	return recs
}

// realisticKV returns n counter keys as drop-in limiters leave them: fixed-window counters
// ("rl:user:%08d", a few digits, a minute's TTL) and CL.THROTTLE's state (a 19-digit TAT
// in ns, a TTL), half each.
func realisticKV(n int) []keyspace.Record {
	const now = 1_750_000_000_000
	recs := make([]keyspace.Record, n)
	for i := range recs {
		r := keyspace.Record{Workspace: "default", ExpireAtMs: now + int64(i%60_000)}
		if i%2 == 0 {
			r.Key, r.Value = fmt.Sprintf("rl:user:%08d", i), fmt.Appendf(nil, "%d", 1+i%997)
		} else {
			r.Key, r.Value = fmt.Sprintf("throttle:user:%08d", i), fmt.Appendf(nil, "%d", now*1_000_000+int64(i))
		}
		recs[i] = r
	}
	return recs
}

// BenchmarkSave: one periodic snapshot of n cells (and kv counter keys), written, synced
// and renamed.
func BenchmarkSave(b *testing.B) {
	for _, sz := range []struct{ cells, kv int }{{100_000, 0}, {1_000_000, 0}, {1_000_000, 100_000}} {
		name := fmt.Sprintf("cells=%d", sz.cells)
		if sz.kv > 0 {
			name += fmt.Sprintf(",kv=%d", sz.kv)
		}
		b.Run(name, func(b *testing.B) {
			s, _ := openStore(b)
			recs := realisticRecords(sz.cells)
			var kv iter.Seq[keyspace.Record]
			if sz.kv > 0 {
				kv = slices.Values(realisticKV(sz.kv))
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := s.SaveAll(slices.Values(recs), kv); err != nil {
					b.Fatal(err)
				}
			}
			perSave := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(perSave/1e6, "ms/save")
			b.ReportMetric(perSave/float64(sz.cells+sz.kv), "ns/record")
		})
	}
}

// BenchmarkSnapshot: an origin of 100k live cells copied (Engine.Snapshot) and saved, and
// streamed into a save (Engine.Records into SaveSeq), which is what Run does every
// interval.
func BenchmarkSnapshot(b *testing.B) {
	const n = 100_000
	clock := engine.NewManualClock(29_000_000 * 60_000)
	e := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})
	for i := range n {
		t := engine.Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "user:%08d", i), WindowMs: 60_000}
		if _, err := e.Limit(t, 1_000_000, 1+uint64(i%7)); err != nil {
			b.Fatal(err)
		}
	}
	if got := len(e.Snapshot()); got != n {
		b.Fatalf("snapshot of %d cells, want %d", got, n)
	}
	b.Run("engine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = e.Snapshot()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/cell")
	})
	b.Run("engine+save", func(b *testing.B) {
		s, _ := openStore(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Save(e.Snapshot()); err != nil {
				b.Fatal(err)
			}
		}
		perSave := time.Duration(b.Elapsed().Nanoseconds() / int64(b.N))
		b.ReportMetric(float64(perSave)/1e6, "ms/save")
		b.ReportMetric(float64(perSave)/n, "ns/cell")
	})
	// The same origin with as many counter keys, streamed from keyspace.KV.Records (each
	// shard copied under its lock) into the same save.
	kvOrigin := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})
	for _, r := range realisticKV(n) {
		if err := kvOrigin.KV().Do(r.Workspace, [][]byte{[]byte(r.Key)}, func(tx *keyspace.Tx) error {
			return tx.Set(0, r.Value, 0)
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("records+kv+saveall", func(b *testing.B) {
		s, _ := openStore(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.SaveAll(e.Records, kvOrigin.KV().Records); err != nil {
				b.Fatal(err)
			}
		}
		if st := s.Stats(); st.LastCells != n || st.LastKV != n {
			b.Fatalf("saved %d cells and %d keys, want %d each", st.LastCells, st.LastKV, n)
		}
		perSave := time.Duration(b.Elapsed().Nanoseconds() / int64(b.N))
		b.ReportMetric(float64(perSave)/1e6, "ms/save")
		b.ReportMetric(float64(perSave)/(2*n), "ns/record")
	})
	b.Run("records+saveseq", func(b *testing.B) {
		s, _ := openStore(b)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.SaveSeq(e.Records); err != nil {
				b.Fatal(err)
			}
		}
		if got := s.Stats().LastCells; got != n {
			b.Fatalf("saved %d cells, want %d", got, n)
		}
		perSave := time.Duration(b.Elapsed().Nanoseconds() / int64(b.N))
		b.ReportMetric(float64(perSave)/1e6, "ms/save")
		b.ReportMetric(float64(perSave)/n, "ns/cell")
	})
}

// BenchmarkSnapshotLeases: what Run writes every interval for an origin whose 100k tuples
// each hold a lease of one edge run (an edge serving random keys): the runs, the leases and
// the cells, streamed from the engine. "cells" is the same origin's save without the runs
// and leases.
func BenchmarkSnapshotLeases(b *testing.B) {
	const n = 100_000
	const seq = 29_000_000
	clock := engine.NewManualClock(seq * 60_000)
	e := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})
	const run = "edge-127.0.0.1:16382/18a7c3d2e4f5a6b7"
	for i := range n {
		k := []byte(key("default", "default", fmt.Sprintf("key:%012d", i), 60_000))
		e.ServeRead(run, []engine.ReadItem{{Key: k, Seq: seq, Limit: 1 << 40, Want: 4}})
		e.ServeReplay(engine.ReplayBatch{Node: run, ID: uint64(i + 1),
			Items: []engine.ReplayItem{{Key: k, Seq: seq, Cost: 1, Limit: 1 << 40, Want: 4}}})
	}
	for _, withLeases := range []bool{false, true} {
		b.Run(map[bool]string{false: "cells", true: "cells+leases"}[withLeases], func(b *testing.B) {
			s, dir := openStore(b)
			src := persist.Source{Cells: e.Records}
			if withLeases {
				src = persist.Source{Runs: e.Runs, Tuples: e.Tuples} // as an origin saves
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Write(src); err != nil {
					b.Fatal(err)
				}
			}
			if got := s.Stats().LastCells; got != n {
				b.Fatalf("saved %d cells, want %d", got, n)
			}
			perSave := time.Duration(b.Elapsed().Nanoseconds() / int64(b.N))
			b.ReportMetric(float64(perSave)/1e6, "ms/save")
			if info, err := os.Stat(filepath.Join(dir, "snapshot.db")); err == nil {
				b.ReportMetric(float64(info.Size())/n, "file-B/tuple")
			}
		})
	}
}
