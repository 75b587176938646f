package persist_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
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

// BenchmarkSave: one periodic snapshot of n cells, written, synced and renamed.
func BenchmarkSave(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("cells=%d", n), func(b *testing.B) {
			s, _ := openStore(b)
			recs := realisticRecords(n)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Save(recs); err != nil {
					b.Fatal(err)
				}
			}
			perSave := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(perSave/1e6, "ms/save")
			b.ReportMetric(perSave/float64(n), "ns/cell")
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
