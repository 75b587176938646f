package edge_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/testwait"
)

// crashOrigin is an origin that can be killed (kill -9) and restarted from its last saved
// snapshot: each edge reaches whichever run is current through its node's LocalOrigin.
type crashOrigin struct {
	clock     *engine.ManualClock
	snapshots bool

	mu  sync.Mutex
	eng *engine.Engine
}

// crashSnap is a saved snapshot: what persist writes, captured in its order.
type crashSnap struct {
	runs   []engine.RunRecord
	cells  []engine.CellRecord
	leases []engine.LeaseRecord
}

func newCrashOrigin(clock *engine.ManualClock, snapshots bool) *crashOrigin {
	return &crashOrigin{clock: clock, snapshots: snapshots, eng: engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30, Snapshots: snapshots})}
}

func (o *crashOrigin) engine() *engine.Engine {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.eng
}

// save captures a snapshot as persist.Write does (the runs' marks, then the cells and
// leases) and puts it on disk (RunsSaved).
func (o *crashOrigin) save() crashSnap {
	e := o.engine()
	s := crashSnap{runs: slices.Collect(e.Runs), cells: e.Snapshot()}
	e.Leases(func(r engine.LeaseRecord) bool {
		r.Key = strings.Clone(r.Key)
		s.leases = append(s.leases, r)
		return true
	})
	e.RunsSaved()
	return s
}

// crash kills the current run and starts a new one (a later boot) from snap.
func (o *crashOrigin) crash(t *testing.T, snap crashSnap) {
	t.Helper()
	o.clock.Advance(1) // a run's boot is its start time
	e := engine.New(o.clock, engine.Config{MaxMemoryBytes: 1 << 30, Snapshots: o.snapshots})
	if _, _, err := e.Restore(snap.cells); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	e.RestoreRuns(snap.runs)
	if _, _, err := e.RestoreLeases(snap.leases); err != nil {
		t.Fatalf("RestoreLeases: %v", err)
	}
	o.mu.Lock()
	o.eng = e
	o.mu.Unlock()
}

// crashLink is one edge run's connection to whichever run of the origin is current.
type crashLink struct {
	o    *crashOrigin
	node string
}

func (c crashLink) local() engine.LocalOrigin {
	return engine.LocalOrigin{Engine: c.o.engine(), Node: c.node}
}

func (c crashLink) Read(ctx context.Context, items []engine.ReadItem) ([]engine.CellCounts, engine.OriginMeta, error) {
	return c.local().Read(ctx, items)
}

func (c crashLink) Replay(ctx context.Context, b engine.ReplayBatch) ([]engine.CellCounts, engine.OriginMeta, error) {
	return c.local().Replay(ctx, b)
}

func (c crashLink) Decide(ctx context.Context, r engine.DecideRequest) (engine.Decision, engine.CellCounts, engine.OriginMeta, error) {
	return c.local().Decide(ctx, r)
}

func crashEdges(t testing.TB, o *crashOrigin, n int, cfg edge.Config) []*edge.Edge {
	t.Helper()
	var edges []*edge.Edge
	for i := range n {
		run := fmt.Sprintf("edge-%d/boot", i+1)
		c := cfg
		c.Origins, c.OriginIDs, c.NodeRun = []engine.Origin{crashLink{o: o, node: run}}, []string{"origin-1:6380"}, run
		c.DegradedShare = 1
		if c.MaxMemoryBytes == 0 {
			c.MaxMemoryBytes = 1 << 20
		}
		e, err := edge.New(o.clock, c)
		if err != nil {
			t.Fatalf("edge.New: %v", err)
		}
		t.Cleanup(e.Close)
		edges = append(edges, e)
	}
	return edges
}

// TestEdgeKeepsUnsavedCostAcrossOriginCrash: an origin killed with kill -9 restarts from
// its last snapshot; the cost its edges replayed (or handed off) since, which they keep
// until a snapshot holds it, reaches the new run exactly once, whether the snapshot is
// older than every replay since the edges last heard its mark, or holds some the edges
// did not hear of. Two edges, each taking requests on two tuples; some are handed off
// (the first of each tuple, before a lease covers it).
func TestEdgeKeepsUnsavedCostAcrossOriginCrash(t *testing.T) {
	a, b := tup("a", 600_000), tup("b", 600_000)
	for _, tc := range []struct {
		name string
		// saveAfter: the last snapshot before the crash is taken after that many rounds
		// of traffic (of 3), and the edges hear of it (through the next round's answers)
		// when heard is set.
		saveAfter int
		heard     bool
	}{
		{"no snapshot", 0, false},
		{"snapshot heard of, more since", 1, true},
		{"snapshot not heard of", 3, false},
		{"snapshot heard of, nothing since", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := engine.NewManualClock(t0 + 100)
			o := newCrashOrigin(clock, true)
			edges := crashEdges(t, o, 2, edge.Config{})
			var snap crashSnap
			if tc.saveAfter == 0 {
				snap = o.save() // empty
			}
			admitted := map[string]uint64{}
			for round := 1; round <= 3; round++ {
				for _, e := range edges {
					for i := 0; i < 40; i++ {
						for _, tp := range []engine.Tuple{a, b} {
							if d := edgeLimit(t, e, tp, 1_000_000, 1); d.Allowed {
								admitted[string(tp.Key)]++
							}
						}
					}
					flushAll(t, e)
				}
				clock.Advance(10)
				if round == tc.saveAfter {
					snap = o.save()
				}
			}
			if tc.heard {
				for _, e := range edges {
					e.Heartbeat()
				}
			}
			before := []uint64{originCount(o.engine(), a), originCount(o.engine(), b)}
			if before[0] != admitted["a"] || before[1] != admitted["b"] {
				t.Fatalf("before the crash the origin has %v, want %d and %d", before, admitted["a"], admitted["b"])
			}
			var unsaved uint64
			for _, e := range edges {
				unsaved += e.Stats().ReplayUnsaved
			}
			if saved := uint64(0); tc.heard && tc.saveAfter == 3 && unsaved != saved {
				t.Fatalf("the edges keep %d units a snapshot they heard of holds", unsaved)
			} else if tc.saveAfter < 3 && unsaved == 0 {
				t.Fatal("the edges keep nothing the origin has not saved")
			}

			o.crash(t, snap)
			// One edge has new cost (its next batch, sent for the old run, is refused and
			// tells it of the restart); the other is idle (its heartbeat tells it).
			if d := edgeLimit(t, edges[0], a, 1_000_000, 1); d.Allowed {
				admitted["a"]++
			}
			edges[1].Heartbeat()
			for _, e := range edges {
				flushAll(t, e)
			}
			after := []uint64{originCount(o.engine(), a), originCount(o.engine(), b)}
			if after[0] != admitted["a"] || after[1] != admitted["b"] {
				t.Fatalf("after the crash the origin has %v, want %d and %d (resent %d, %d)",
					after, admitted["a"], admitted["b"], edges[0].Stats().ReplayResent, edges[1].Stats().ReplayResent)
			}

			// A save of the new run covers everything: the edges keep nothing more.
			o.save()
			for _, e := range edges {
				e.Heartbeat()
				if s := e.Stats(); s.ReplayUnsaved != 0 || s.ReplayUnsavedDropped != 0 {
					t.Fatalf("after a save: unsaved %d, dropped %d", s.ReplayUnsaved, s.ReplayUnsavedDropped)
				}
			}
		})
	}
}

// TestEdgeKeepsNothingWithoutSnapshots: an origin that saves no snapshots says so, and its
// edges keep nothing for it.
func TestEdgeKeepsNothingWithoutSnapshots(t *testing.T) {
	clock := engine.NewManualClock(t0 + 100)
	o := newCrashOrigin(clock, false)
	e := crashEdges(t, o, 1, edge.Config{})[0]
	for i := 0; i < 100; i++ {
		edgeLimit(t, e, tup("a", 600_000), 1_000_000, 1)
	}
	flushAll(t, e)
	if s := e.Stats(); s.ReplayUnsaved != 0 || originCount(o.engine(), tup("a", 600_000)) != 100 {
		t.Fatalf("unsaved %d, origin %d", s.ReplayUnsaved, originCount(o.engine(), tup("a", 600_000)))
	}
}

// TestEdgeUnsavedBound: past Config.MaxUnsavedBytes the oldest kept cost is dropped
// and counted, the cost of dead cells first.
func TestEdgeUnsavedBound(t *testing.T) {
	clock := engine.NewManualClock(t0 + 100)
	o := newCrashOrigin(clock, true)
	const bound = 16 // cells of distinct tuples
	// Each keeps a cell or two of 40 bytes; its entry is cached, in the cache's bound.
	e := crashEdges(t, o, 1, edge.Config{MaxUnsavedBytes: bound * 40})[0]
	var total uint64
	for i := 0; i < 40; i++ {
		tp := tup(fmt.Sprint("k", i), 1000)
		edgeLimit(t, e, tp, 1_000_000, 1)
		edgeLimit(t, e, tp, 1_000_000, 1)
		total += 2
		flushAll(t, e)
		clock.Advance(100) // tuples of 1 s windows: the first ones die on the way
	}
	s := e.Stats()
	if s.ReplayUnsavedDropped == 0 || s.ReplayUnsaved > 2*bound || s.ReplayUnsaved == 0 {
		t.Fatalf("unsaved %d (bound %d items), dropped %d of %d", s.ReplayUnsaved, bound, s.ReplayUnsavedDropped, total)
	}
}

// TestReplayForAnotherOriginRun: a batch sent for another run of the origin (ReplayBatch.
// Boot) is answered with the origin's run and its mark, and applies nothing, leases
// included; one for this run, or for none (0), is applied.
func TestReplayForAnotherOriginRun(t *testing.T) {
	o, clock := newEngine(t0 + 100)
	_ = clock
	key := engine.AppendKey(nil, tup("a", 60_000))
	seq := (t0 + 100) / 60_000
	item := []engine.ReplayItem{{Key: key, Seq: seq, Cost: 3, Limit: 100, Want: 16}}
	_, meta := o.ServeReplay(engine.ReplayBatch{Node: "e/1", ID: 1, Items: item})
	if meta.Applied != 1 || originCount(o, tup("a", 60_000)) != 3 {
		t.Fatalf("batch for no run: applied %d, count %d", meta.Applied, originCount(o, tup("a", 60_000)))
	}
	cc, meta := o.ServeReplay(engine.ReplayBatch{Node: "e/1", ID: 2, Boot: meta.Boot - 5, Items: item})
	if meta.Applied != 1 || originCount(o, tup("a", 60_000)) != 3 || cc[0].LeaseSeq != 0 {
		t.Fatalf("batch for another run: applied %d, count %d, lease %+v", meta.Applied, originCount(o, tup("a", 60_000)), cc[0])
	}
	_, meta = o.ServeReplay(engine.ReplayBatch{Node: "e/1", ID: 2, Boot: meta.Boot, Items: item})
	if meta.Applied != 2 || originCount(o, tup("a", 60_000)) != 6 {
		t.Fatalf("batch for this run: applied %d, count %d", meta.Applied, originCount(o, tup("a", 60_000)))
	}
	if meta.Durable != engine.NoSnapshots {
		t.Fatalf("an origin without snapshots reports durable %d", meta.Durable)
	}
}

// TestEdgeKeepHandOffsSavedAreNotResent: hand-offs alone (a tuple near its limit) produce
// no replay batch; once the origin's snapshot holds them (its final one, at a clean
// shutdown), the next run of the origin must not get them again, whether or not the edge
// flushed in between. Limit 30: 15 handed off and 15 local, the count stays 30.
func TestEdgeKeepHandOffsSavedAreNotResent(t *testing.T) {
	for _, flush := range []bool{false, true} {
		clock := engine.NewManualClock(t0 + 100)
		o := newCrashOrigin(clock, true)
		e := crashEdges(t, o, 1, edge.Config{})[0]
		a := tup("a", 600_000)
		flushAll(t, e)
		o.save()
		e.Heartbeat()
		for range 40 {
			edgeLimit(t, e, a, 30, 1)
		}
		if flush {
			flushAll(t, e)
		}
		o.crash(t, o.save()) // clean shutdown: the final snapshot holds everything
		e.Heartbeat()
		flushAll(t, e)
		if got := originCount(o.engine(), a); got != 30 {
			t.Errorf("flush=%v: the origin counts %d after a clean restart, want 30 (resent %d)",
				flush, got, e.Stats().ReplayResent)
		}
	}
}

// lockedBuffer is a log sink safe for the edge's goroutines and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestEdgeStopWaitsForTheOriginsSave: an edge that stops keeps asking for the durable mark
// until the origin's snapshot holds what it keeps (saved: it stops with nothing kept and
// says nothing), or, when the origin does not save, until its bound passes, then says at
// warn what a kill -9 of the origin would now lose.
func TestEdgeStopWaitsForTheOriginsSave(t *testing.T) {
	for _, saves := range []bool{true, false} {
		clock := engine.NewManualClock(t0 + 100)
		o := newCrashOrigin(clock, true)
		var log lockedBuffer
		e := crashEdges(t, o, 1, edge.Config{ReplayInterval: time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(&log, nil))})[0]
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { e.Run(ctx); close(done) }()
		a := tup("a", 600_000)
		for range 40 { // 30 counted: some handed off, some replayed
			edgeLimit(t, e, a, 30, 1)
		}
		testwait.Until(t, time.Minute, "the edge to keep 30 units", func() (bool, string) {
			units, _ := e.Undelivered()
			kept := e.Stats().ReplayUnsaved
			return units == 0 && kept == 30, fmt.Sprintf("%d undelivered, %d kept", units, kept)
		})
		cancel()
		if saves {
			o.save()
		}
		for stopped := false; !stopped; {
			select {
			case <-done:
				stopped = true
			case <-time.After(10 * time.Millisecond):
				if !saves {
					clock.Advance(500)
				}
			}
		}
		warned := strings.Contains(log.String(), "stopping with cost the origin has not saved yet")
		if unsaved := e.Stats().ReplayUnsaved; saves && (unsaved != 0 || warned) {
			t.Errorf("saved: the edge stopped keeping %d units (warned %v), want 0", unsaved, warned)
		}
		if !saves && (!warned || !strings.Contains(log.String(), "units=30")) {
			t.Errorf("not saved: the edge stopped without saying it keeps 30 units:\n%s", log.String())
		}
	}
}

// TestEdgeUnsavedBoundCountsCachedEntriesOnce: the unsaved bound counts what kept cost
// keeps alive beyond the cache: its cells, and the entries the cache let go. An entry the
// cache still holds is in the cache's bound already: counted in both, 2,000 tuples of one
// unit each (kept cells 80 kB, their cached entries about 520 kB) passed a bound of
// 200 kB and dropped kept cost, as 200k tuples touched within an origin's save did at the
// default 32 MiB (bench/compare.sh's two-limit runs).
func TestEdgeUnsavedBoundCountsCachedEntriesOnce(t *testing.T) {
	clock := engine.NewManualClock(t0 + 100)
	o := newCrashOrigin(clock, true) // it never saves
	const tuples = 2000
	e := crashEdges(t, o, 1, edge.Config{MaxMemoryBytes: 64 << 20, MaxUnsavedBytes: tuples * 100})[0]
	for i := range tuples {
		edgeLimit(t, e, tup(fmt.Sprintf("k%05d", i), 600_000), 1_000_000, 1)
		if i%100 == 99 {
			flushAll(t, e)
		}
	}
	flushAll(t, e)
	e.Heartbeat()
	if s := e.Stats(); s.ReplayUnsaved != tuples || s.ReplayUnsavedDropped != 0 {
		t.Fatalf("kept %d units, dropped %d; want all %d kept", s.ReplayUnsaved, s.ReplayUnsavedDropped, tuples)
	}
}
