package engine_test

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
)

// Memory benchmarks: the bytes one live cell costs, in the origin's cell store and in an
// edge's local memory. They only run when asked:
//
//	go test -run xxx -bench BenchmarkMemory -benchtime 1x ./engine
//
// heap-B/cell is the growth of the Go heap (HeapAlloc after a GC) over the live cells;
// rss-B/cell the growth of the process's resident set after a GC and a return of freed
// memory to the OS (debug.FreeOSMemory), so what a steady process keeps; peak-rss-B/cell
// the resident growth before that return (what the fill itself needed, growth copies
// included).

// memTuple writes tuple i ("user:%08d", default/default, 60 s) into buf and returns it.
func memTuple(buf []byte, i int) engine.Tuple {
	buf = append(buf[:0], "user:"...)
	n := strconv.AppendInt(nil, int64(i), 10)
	for j := len(n); j < 8; j++ {
		buf = append(buf, '0')
	}
	buf = append(buf, n...)
	return engine.Tuple{Workspace: "default", Namespace: "default", Key: buf, WindowMs: 60_000}
}

// rssBytes reads the resident set size of this process (Linux), or 0.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

type memReading struct{ heap, inuse, rss int64 }

func readMem(release bool) memReading {
	runtime.GC()
	runtime.GC()
	if release {
		debug.FreeOSMemory()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memReading{heap: int64(ms.HeapAlloc), inuse: int64(ms.HeapInuse), rss: rssBytes()}
}

// measureCells calls setup (whose memory is not counted), then fill, and reports the
// memory growth per cell.
func measureCells(b *testing.B, cells int, setup func() (fill func(), keep any)) {
	b.ReportAllocs()
	var before, peak, after memReading
	for b.Loop() {
		fill, keep := setup()
		before = readMem(true)
		fill()
		peak = readMem(false)
		after = readMem(true)
		runtime.KeepAlive(keep)
	}
	per := func(d int64) float64 { return float64(d) / float64(cells) }
	b.ReportMetric(per(after.heap-before.heap), "heap-B/cell")
	b.ReportMetric(per(after.inuse-before.inuse), "heapinuse-B/cell")
	b.ReportMetric(per(after.rss-before.rss), "rss-B/cell")
	b.ReportMetric(per(peak.rss-before.rss), "peak-rss-B/cell")
}

// BenchmarkMemory fills an origin's cell store: 1M tuples with one live cell each, and
// 500k tuples with two (the previous and the current window).
func BenchmarkMemory(b *testing.B) {
	const w = 60_000
	origin := func(tuples int, twoCells bool) func() (func(), any) {
		return func() (func(), any) {
			c := engine.NewManualClock(t0)
			e := engine.New(c, engine.Config{MaxMemoryBytes: 4 << 30})
			fill := func() {
				var buf [32]byte
				rounds := 1
				if twoCells {
					rounds = 2
				}
				for r := 0; r < rounds; r++ {
					c.Set(t0 + int64(r)*w)
					for i := 0; i < tuples; i++ {
						if _, err := e.Limit(memTuple(buf[:0], i), 1000, 1); err != nil {
							b.Fatal(err)
						}
					}
				}
				if got, want := e.Stats().Cells, int64(tuples*rounds); got != want {
					b.Fatalf("%d cells, want %d", got, want)
				}
			}
			return fill, e
		}
	}
	b.Run("origin/1Mx1", func(b *testing.B) { measureCells(b, 1_000_000, origin(1_000_000, false)) })
	b.Run("origin/500kx2", func(b *testing.B) { measureCells(b, 1_000_000, origin(500_000, true)) })
	b.Run("edge/1Mx1", func(b *testing.B) { measureCells(b, 1_000_000, edgeFill(b, 1_000_000)) })
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
		e, err := engine.NewEdge(c, engine.EdgeConfig{
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
				if _, err := e.Limit(memTuple(buf[:0], i), 1000, 1); err != nil {
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
			b.ReportMetric(float64(st.Tuples), "edge-entries")
			if st.ReplayPending != 0 {
				b.Fatalf("replay pending: %+v", st)
			}
		}
		return fill, e
	}
}

// BenchmarkKVMemory fills the counter keyspace with 1M keys ("user:%08d", a counter of 1
// with a TTL), and reports the heap and resident growth per key beside the estimate that
// --max-memory counts (est-B/key). Run it with:
//
//	go test -run xxx -bench BenchmarkKVMemory -benchtime 1x ./engine (the engine's keyspace)
func BenchmarkKVMemory(b *testing.B) {
	const keys = 1_000_000
	var est float64
	measureCells(b, keys, func() (func(), any) {
		c := engine.NewManualClock(t0)
		e := engine.New(c, engine.Config{MaxMemoryBytes: 4 << 30})
		fill := func() {
			var buf [32]byte
			k := [][]byte{nil}
			for i := range keys {
				k[0] = memTuple(buf[:0], i).Key
				if err := e.KV().Do("default", k, func(tx *keyspace.Tx) error {
					if _, err := tx.IncrBy(0, 1); err != nil {
						return err
					}
					tx.SetExpireAt(0, tx.Now()+60_000)
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			est = float64(e.Stats().MemoryBytes) / keys
		}
		return fill, e
	})
	b.ReportMetric(est, "est-B/key")
}
