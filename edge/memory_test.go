package edge_test

import (
	"context"
	"testing"
	"time"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/testmem"
)

// BenchmarkMemory measures the bytes one live cell costs in an edge's local memory
// (package testmem says what each figure is). It only runs when asked:
//
//	go test -run xxx -bench BenchmarkMemory -benchtime 1x ./edge
func BenchmarkMemory(b *testing.B) {
	b.Run("edge/1Mx1", func(b *testing.B) { testmem.MeasureCells(b, 1_000_000, edgeFill(b, 1_000_000)) })
}

// memOrigin is an Origin that holds nothing: reads answer empty cells, replays echo their
// cost back as the regional count. The edge's memory is measured alone.
type memOrigin struct{}

func (memOrigin) Read(_ context.Context, items []engine.ReadItem) ([]engine.CellCounts, engine.OriginMeta, error) {
	out := make([]engine.CellCounts, len(items))
	for i, it := range items {
		out[i] = engine.CellCounts{Seq: it.Seq}
	}
	return out, engine.OriginMeta{Edges: 1}, nil
}

func (memOrigin) Replay(_ context.Context, b engine.ReplayBatch) ([]engine.CellCounts, engine.OriginMeta, error) {
	out := make([]engine.CellCounts, len(b.Items))
	for i, it := range b.Items {
		out[i] = engine.CellCounts{Seq: it.Seq, CurRegional: it.Cost}
	}
	return out, engine.OriginMeta{Edges: 1, Applied: b.ID}, nil
}

func (memOrigin) Decide(context.Context, engine.DecideRequest) (engine.Decision, engine.CellCounts, engine.OriginMeta, error) {
	return engine.Decision{}, engine.CellCounts{}, engine.OriginMeta{}, context.Canceled
}

// edgeFill builds an edge (its fixed-size cache structures are not counted) whose cells
// are then filled: one allowed request per tuple, replayed and acknowledged, so that
// every entry is in the local cache only (not in the replay set).
func edgeFill(b *testing.B, tuples int) func() (func(), any) {
	return func() (func(), any) {
		c := engine.NewManualClock(t0)
		e, err := edge.New(c, edge.Config{
			Origins: []engine.Origin{memOrigin{}}, OriginIDs: []string{"o"}, NodeRun: "mem/1",
			Freshness: time.Hour, DegradedShare: 1, MaxMemoryBytes: 2 << 30, MaxPinned: 4 << 20,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(e.Close)
		fill := func() {
			var buf [32]byte
			for i := 0; i < tuples; i++ {
				if _, err := e.Limit(context.Background(), memTuple(buf[:0], i), 1000, 1); err != nil {
					b.Fatal(err)
				}
				if i%1000 == 999 {
					for e.FlushOnce() {
					}
				}
			}
			for e.FlushOnce() {
			}
			st := e.Stats()
			b.ReportMetric(float64(st.Entries), "edge-entries")
			if st.ReplayPending != 0 {
				b.Fatalf("replay pending: %+v", st)
			}
		}
		return fill, e
	}
}

// memTuple is tuple i of the memory benchmarks: key testmem.Key, default/default, 60 s.
func memTuple(buf []byte, i int) engine.Tuple {
	return engine.Tuple{Workspace: "default", Namespace: "default", Key: testmem.Key(buf, i), WindowMs: 60_000}
}
