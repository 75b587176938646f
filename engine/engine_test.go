package engine_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// t0 is a realistic wall-clock instant (2024-01-01T00:00:00Z), a multiple of every window
// used below, so that cell boundaries are easy to reason about.
const t0 int64 = 1_704_067_200_000

func newEngine(now int64) (*engine.Engine, *engine.ManualClock) {
	clock := engine.NewManualClock(now)
	return engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30}), clock
}

func tup(key string, windowMs int64) engine.Tuple {
	return engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte(key), WindowMs: windowMs}
}

func mustLimit(t testing.TB, e *engine.Engine, tp engine.Tuple, limit, cost uint64) engine.Decision {
	t.Helper()
	d, err := e.Limit(tp, limit, cost)
	if err != nil {
		t.Fatalf("Limit(%q, %d, %d): %v", tp.Key, limit, cost, err)
	}
	return d
}

// TestLimitExactUnderConcurrency: 640 goroutines on one cold tuple with limit 100 admit
// exactly 100, every time.
func TestLimitExactUnderConcurrency(t *testing.T) {
	const goroutines, limit = 640, 100
	for round := 0; round < 8; round++ {
		e, _ := newEngine(t0 + 123)
		tp := tup(fmt.Sprintf("hot:%d", round), 60_000)
		var allowed, denied atomic.Int64
		var start, done sync.WaitGroup
		start.Add(1)
		for g := 0; g < goroutines; g++ {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				d, err := e.Limit(tp, limit, 1)
				if err != nil {
					t.Errorf("Limit: %v", err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				} else {
					denied.Add(1)
				}
			}()
		}
		start.Done()
		done.Wait()
		if allowed.Load() != limit || denied.Load() != goroutines-limit {
			t.Fatalf("round %d: %d allowed, %d denied; want %d and %d", round, allowed.Load(), denied.Load(), limit, goroutines-limit)
		}
		st := e.Status(tp)
		if st.CurrentRegional != limit || st.Used() != limit {
			t.Fatalf("round %d: status %+v, used %d; want current %d", round, st, st.Used(), limit)
		}
		if s := e.Stats(); s.Allowed != limit || s.Denied != goroutines-limit || s.Tuples != 1 || s.Cells != 1 {
			t.Fatalf("round %d: stats %+v", round, s)
		}
	}
}

// TestLimitConcurrentManyTuples runs parallel traffic on several tuples with mixed costs;
// each tuple's admitted cost never exceeds its limit and equals what Status shows.
func TestLimitConcurrentManyTuples(t *testing.T) {
	e, _ := newEngine(t0)
	const tuples, limit = 16, 50
	var admitted [tuples]atomic.Uint64
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				k := (g + i) % tuples
				cost := uint64(i % 4)
				d, err := e.Limit(tup(fmt.Sprintf("k%d", k), 1000), limit, cost)
				if err != nil {
					t.Errorf("Limit: %v", err)
					return
				}
				if d.Allowed {
					admitted[k].Add(cost)
				}
			}
		}()
	}
	wg.Wait()
	for k := range admitted {
		st := e.Status(tup(fmt.Sprintf("k%d", k), 1000))
		if got := admitted[k].Load(); got > limit || st.CurrentRegional != got {
			t.Fatalf("tuple %d: admitted %d (limit %d), status current %d", k, got, limit, st.CurrentRegional)
		}
	}
}

// TestLimitCostZeroAndOverLimitCountNothing: peeks and cost > L change no count and
// create no cell.
func TestLimitCostZeroAndOverLimitCountNothing(t *testing.T) {
	e, _ := newEngine(t0)
	tp := tup("quiet", 1000)
	if d := mustLimit(t, e, tp, 10, 0); !d.Allowed || d.Remaining != 10 || d.ResetAfterMs != 0 {
		t.Fatalf("peek on empty: %+v", d)
	}
	if d := mustLimit(t, e, tp, 10, 11); d.Allowed || d.RetryAfterMs != -1 || d.Remaining != 10 {
		t.Fatalf("cost > L: %+v", d)
	}
	if s := e.Stats(); s.Tuples != 0 || s.Cells != 0 {
		t.Fatalf("peek and cost > L created state: %+v", s)
	}
	mustLimit(t, e, tp, 10, 4)
	mustLimit(t, e, tp, 10, 0)
	mustLimit(t, e, tp, 10, 11)
	mustLimit(t, e, tp, 10, 7) // denied: 4 + 7 > 10
	if st := e.Status(tp); st.CurrentRegional != 4 {
		t.Fatalf("current = %d, want 4", st.CurrentRegional)
	}
	if s := e.Stats(); s.Allowed != 3 || s.Denied != 3 {
		t.Fatalf("stats %+v, want 3 allowed (2 peeks, 1 count) and 3 denied", s)
	}
}

// TestLimitErrFull: with a tiny --max-memory, the tuples that fit keep working, a new one
// is refused with ErrFull and nothing is counted for it; peeks and denials of new tuples
// need no cell and still answer; a sweep frees room.
func TestLimitErrFull(t *testing.T) {
	a, b := tup("a", 1000), tup("b", 1000)
	keyLen := len(engine.AppendKey(nil, a))
	// Room for exactly one tuple: its key plus the per-entry overhead. The overhead is an
	// estimate internal to the store; find the smallest bound that admits one tuple.
	var e *engine.Engine
	var clock *engine.ManualClock
	var maxBytes int64
	for maxBytes = int64(keyLen); maxBytes < int64(keyLen)+4096; maxBytes++ {
		clock = engine.NewManualClock(t0)
		e = engine.New(clock, engine.Config{MaxMemoryBytes: maxBytes, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if _, err := e.Limit(a, 10, 1); err == nil {
			break
		} else if !errors.Is(err, engine.ErrFull) {
			t.Fatalf("Limit: %v, want nil or ErrFull", err)
		}
	}
	if e.Stats().Tuples != 1 {
		t.Fatalf("no bound below %d admits one tuple", maxBytes)
	}

	d, err := e.Limit(b, 10, 1)
	if !errors.Is(err, engine.ErrFull) {
		t.Fatalf("new tuple past the bound: %+v, %v; want ErrFull", d, err)
	}
	if d.Allowed {
		t.Fatalf("refused request reported allowed: %+v", d)
	}
	if st := e.Status(b); st.CurrentRegional != 0 || st.Used() != 0 {
		t.Fatalf("refused request counted: %+v", st)
	}
	// Requests that need no new cell still answer.
	if d, err := e.Limit(b, 10, 0); err != nil || !d.Allowed || d.Remaining != 10 {
		t.Fatalf("peek on a new tuple in a full store: %+v, %v", d, err)
	}
	if d, err := e.Limit(b, 10, 11); err != nil || d.Allowed || d.RetryAfterMs != -1 {
		t.Fatalf("cost > L on a new tuple in a full store: %+v, %v", d, err)
	}
	// The existing tuple keeps working, in this cell and the next.
	for i := 0; i < 9; i++ {
		if d := mustLimit(t, e, a, 10, 1); !d.Allowed {
			t.Fatalf("existing tuple denied at %d: %+v", i, d)
		}
	}
	if d := mustLimit(t, e, a, 10, 1); d.Allowed {
		t.Fatalf("existing tuple over its limit: %+v", d)
	}
	clock.Advance(1000)
	if d := mustLimit(t, e, a, 10, 0); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("existing tuple after rollover: %+v", d)
	}
	clock.Advance(500)
	if d := mustLimit(t, e, a, 10, 5); !d.Allowed {
		t.Fatalf("existing tuple, new cell in a full store: %+v", d)
	}
	if _, err := e.Limit(b, 10, 1); !errors.Is(err, engine.ErrFull) {
		t.Fatalf("still full: %v", err)
	}
	s := e.Stats()
	if s.RefusedFull != 2 || s.Tuples != 1 || s.MemoryBytes > s.MaxMemoryBytes || s.MaxMemoryBytes != maxBytes {
		t.Fatalf("stats %+v", s)
	}
	// Once a's cells are dead, a sweep frees its room and b fits.
	clock.Advance(3000)
	if n := e.Sweep(); n != 2 {
		t.Fatalf("sweep dropped %d cells, want 2", n)
	}
	if d, err := e.Limit(b, 10, 1); err != nil || !d.Allowed {
		t.Fatalf("after sweep: %+v, %v", d, err)
	}
}

// TestLimitZeroMaxMemory: the zero Config means the default bound, not a bound of zero.
func TestLimitZeroMaxMemory(t *testing.T) {
	e := engine.New(engine.NewManualClock(t0), engine.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if _, err := e.Limit(tup("x", 1000), 10, 1); err != nil {
		t.Fatalf("zero Config: %v, want the default bound", err)
	}
	if got := e.Stats().MaxMemoryBytes; got != engine.DefaultMaxMemory {
		t.Fatalf("MaxMemoryBytes = %d, want %d", got, engine.DefaultMaxMemory)
	}
}

// TestErrFullLogIsRateLimited: the store-full log line is written at most once per 10 s.
func TestErrFullLogIsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	clock := engine.NewManualClock(t0)
	e := engine.New(clock, engine.Config{MaxMemoryBytes: 1, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	for i := 0; i < 100; i++ {
		if _, err := e.Limit(tup(fmt.Sprint(i), 1000), 10, 1); !errors.Is(err, engine.ErrFull) {
			t.Fatalf("Limit: %v", err)
		}
	}
	if n := bytes.Count(buf.Bytes(), []byte("store is full (--max-memory)")); n != 1 {
		t.Fatalf("%d log lines in the same second, want 1:\n%s", n, buf.String())
	}
	clock.Advance(10_000)
	e.Limit(tup("late", 1000), 10, 1)
	if n := bytes.Count(buf.Bytes(), []byte("store is full (--max-memory)")); n != 2 {
		t.Fatalf("%d log lines after 10 s, want 2", n)
	}
	if s := e.Stats(); s.RefusedFull != 101 {
		t.Fatalf("RefusedFull = %d, want 101", s.RefusedFull)
	}
}

// TestSweep: at sequence seq, cells older than seq-1 go; seq-1 and seq stay, with their
// counts.
func TestSweep(t *testing.T) {
	const w = 1000
	e, clock := newEngine(t0) // t0 is the start of sequence s
	stale := tup("stale", w)  // only cell s
	prev := tup("prev", w)    // cells s+1
	both := tup("both", w)    // cells s+1 and s+2
	cur := tup("cur", w)      // cell s+2
	long := tup("long", 10*w) // window 10 s: cell t0/10000 stays live throughout

	mustLimit(t, e, stale, 100, 3)
	mustLimit(t, e, long, 100, 9)
	clock.Advance(w)
	mustLimit(t, e, prev, 100, 4)
	mustLimit(t, e, both, 100, 5)
	clock.Advance(w + 999) // seq = s+2, elapsed 999
	mustLimit(t, e, both, 100, 6)
	mustLimit(t, e, cur, 100, 7)

	if s := e.Stats(); s.Tuples != 5 || s.Cells != 6 {
		t.Fatalf("before sweep: %+v", s)
	}
	if n := e.Sweep(); n != 1 {
		t.Fatalf("Sweep dropped %d cells, want 1 (stale)", n)
	}
	if s := e.Stats(); s.Tuples != 4 || s.Cells != 5 {
		t.Fatalf("after sweep: %+v", s)
	}
	check := func(tp engine.Tuple, cur, prev uint64) {
		t.Helper()
		st := e.Status(tp)
		if st.CurrentRegional != cur || st.PreviousRegional != prev {
			t.Fatalf("%s: current %d previous %d, want %d %d", tp.Key, st.CurrentRegional, st.PreviousRegional, cur, prev)
		}
	}
	check(stale, 0, 0)
	check(prev, 0, 4)
	check(both, 6, 5)
	check(cur, 7, 0)
	check(long, 9, 0)
	if n := e.Sweep(); n != 0 {
		t.Fatalf("second sweep dropped %d", n)
	}

	// One more window: cell s+1 is now older than seq-1, in "prev" and in "both".
	clock.Advance(1)
	if n := e.Sweep(); n != 2 {
		t.Fatalf("Sweep at s+3 dropped %d cells, want 2 (prev's and both's s+1)", n)
	}
	check(both, 0, 6)
	check(cur, 0, 7)
	if s := e.Stats(); s.Tuples != 3 || s.Cells != 3 {
		t.Fatalf("after second sweep: %+v", s)
	}
	if len(e.Snapshot()) != 3 {
		t.Fatalf("snapshot after sweeps: %+v", e.Snapshot())
	}
}

// TestSweepDropsDeadCellOfLiveTuple: a tuple that skipped a window holds a live cell
// (seq-1) and a dead one (seq-3). Sweep is documented to drop "the cells that can no
// longer matter", and Stats.Cells (DBSIZE, "cells held") should count live cells.
func TestSweepDropsDeadCellOfLiveTuple(t *testing.T) {
	const w = 1000
	e, clock := newEngine(t0)
	tp := tup("gap", w)
	mustLimit(t, e, tp, 100, 1) // cell s
	clock.Advance(2 * w)
	mustLimit(t, e, tp, 100, 2) // cell s+2; slot of s is kept, s+1 is empty
	clock.Advance(w)            // seq s+3: cell s is dead, s+2 is live (previous)
	n := e.Sweep()
	if st := e.Status(tp); st.PreviousRegional != 2 || st.CurrentRegional != 0 {
		t.Fatalf("live cell lost: %+v", st)
	}
	if len(e.Snapshot()) != 1 {
		t.Fatalf("snapshot holds dead cells: %+v", e.Snapshot())
	}
	if n != 1 || e.Stats().Cells != 1 {
		t.Fatalf("Sweep dropped %d cells and Stats.Cells = %d; want 1 dropped (cell s) and 1 held (cell s+2)", n, e.Stats().Cells)
	}
}

// TestRolloverWeighting: a tuple carries into the next window with the previous cell
// weighted by the time left in it.
func TestRolloverWeighting(t *testing.T) {
	const w = 1000
	e, clock := newEngine(t0)
	tp := tup("roll", w)
	for i := 0; i < 10; i++ {
		if d := mustLimit(t, e, tp, 10, 1); !d.Allowed || d.Remaining != uint64(9-i) || d.ResetAfterMs != 2*w {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	// Full: the next cell must let 10*(1000-e2) <= 9*1000, e2 >= 100.
	if d := mustLimit(t, e, tp, 10, 1); d.Allowed || d.RetryAfterMs != w+100 || d.ResetAfterMs != 2*w {
		t.Fatalf("11th: %+v", d)
	}
	clock.Advance(w + 99)
	if d := mustLimit(t, e, tp, 10, 1); d.Allowed || d.RetryAfterMs != 1 || d.ResetAfterMs != w-99 {
		t.Fatalf("1 ms early: %+v", d)
	}
	clock.Advance(1)
	if d := mustLimit(t, e, tp, 10, 1); !d.Allowed || d.Remaining != 0 || d.ResetAfterMs != 2*w-100 {
		t.Fatalf("at retry time: %+v", d)
	}
	// Half way: previous 10 weighs 5, current holds 1.
	clock.Advance(400)
	for i := 0; i < 4; i++ {
		if d := mustLimit(t, e, tp, 10, 1); !d.Allowed {
			t.Fatalf("half-way request %d denied: %+v", i, d)
		}
	}
	st := e.Status(tp)
	if st.PreviousRegional != 10 || st.CurrentRegional != 5 || st.Used() != 10 || st.ElapsedMs != 500 || st.Sequence != t0/w+1 {
		t.Fatalf("status %+v used %d", st, st.Used())
	}
	if d := mustLimit(t, e, tp, 10, 1); d.Allowed || d.RetryAfterMs != 100 {
		// needs 5 + 10*(500-t)/1000 <= 9: t >= 100.
		t.Fatalf("over at half way: %+v", d)
	}
	// Two windows later nothing is left.
	clock.Advance(2 * w)
	if d := mustLimit(t, e, tp, 10, 0); !d.Allowed || d.Remaining != 10 || d.ResetAfterMs != 0 {
		t.Fatalf("after two windows: %+v", d)
	}
}

// TestTupleIndependence: every part of the tuple separates counts, and a limit does not.
func TestTupleIndependence(t *testing.T) {
	e, _ := newEngine(t0)
	base := engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 1000}
	variants := []engine.Tuple{
		base,
		{Workspace: "acme", Namespace: "default", Key: []byte("k"), WindowMs: 1000},
		{Workspace: "default", Namespace: "login", Key: []byte("k"), WindowMs: 1000},
		{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 60_000},
		{Workspace: "default", Namespace: "default", Key: []byte("K"), WindowMs: 1000},
		// Boundaries between parts must not blur.
		{Workspace: "defaul", Namespace: "tdefault", Key: []byte("k"), WindowMs: 1000},
		{Workspace: "default", Namespace: "defaultk", Key: nil, WindowMs: 1000},
		{Workspace: "default", Namespace: "default", Key: []byte("k\x00"), WindowMs: 1000},
		{Workspace: "", Namespace: "", Key: []byte("k"), WindowMs: 1000},
	}
	for i, v := range variants {
		if d := mustLimit(t, e, v, 100, uint64(i+1)); !d.Allowed {
			t.Fatalf("variant %d: %+v", i, d)
		}
	}
	for i, v := range variants {
		if st := e.Status(v); st.CurrentRegional != uint64(i+1) {
			t.Fatalf("variant %d %+v: current %d, want %d", i, v, st.CurrentRegional, i+1)
		}
	}
	// Different limits on one tuple share one count.
	mustLimit(t, e, base, 5, 1)
	if d := mustLimit(t, e, base, 2, 1); d.Allowed {
		t.Fatalf("limit 2 after 2 counted: %+v", d)
	}
	if st := e.Status(base); st.CurrentRegional != 2 {
		t.Fatalf("shared count %d, want 2", st.CurrentRegional)
	}
	if s := e.Stats(); s.Tuples != int64(len(variants)) {
		t.Fatalf("tuples %d, want %d", s.Tuples, len(variants))
	}
}

// TestLongKey: keys up to the 1024-byte maximum (beyond the engine's stack buffer) work.
func TestLongKey(t *testing.T) {
	e, _ := newEngine(t0)
	k := bytes.Repeat([]byte{0xff}, 1024)
	tp := engine.Tuple{Workspace: "default", Namespace: string(bytes.Repeat([]byte("n"), 128)), Key: k, WindowMs: engine.MaxWindowMs}
	for i := 0; i < 3; i++ {
		mustLimit(t, e, tp, 3, 1)
	}
	if d := mustLimit(t, e, tp, 3, 1); d.Allowed {
		t.Fatalf("fourth: %+v", d)
	}
	if st := e.Status(tp); st.CurrentRegional != 3 {
		t.Fatalf("status %+v", st)
	}
	k2 := bytes.Clone(k)
	k2[1023] = 0xfe
	if st := e.Status(engine.Tuple{Workspace: tp.Workspace, Namespace: tp.Namespace, Key: k2, WindowMs: tp.WindowMs}); st.CurrentRegional != 0 {
		t.Fatalf("neighbouring long key shares a count: %+v", st)
	}
}

// TestSnapshotRestore: a snapshot restored into a new engine at the same instant gives the
// same Status for every tuple; cells no longer live at the restore instant are dropped.
func TestSnapshotRestore(t *testing.T) {
	const w = 1000
	e, clock := newEngine(t0 + 250)
	tuples := []engine.Tuple{tup("a", w), tup("b", w), tup("c", 10*w), tup("d", 1),
		{Workspace: "acme", Namespace: "ns", Key: []byte{0, 1, 2}, WindowMs: w}}
	for i, tp := range tuples {
		mustLimit(t, e, tp, 1000, uint64(i+1))
	}
	clock.Advance(w)
	for i, tp := range tuples[:3] {
		mustLimit(t, e, tp, 1000, uint64(10*(i+1)))
	}
	clock.Advance(100)
	recs := e.Snapshot()
	// Live: a,b,c (2 cells each except c: window 10 s, one cell), "acme" previous; d
	// (window 1 ms) is long dead.
	if len(recs) != 2+2+1+1 {
		t.Fatalf("snapshot has %d records, want 6: %+v", len(recs), recs)
	}

	same := engine.New(engine.NewManualClock(clock.NowMs()), engine.Config{MaxMemoryBytes: 1 << 30})
	loaded, dropped, err := same.Restore(recs)
	if err != nil || loaded != len(recs) || dropped != 0 {
		t.Fatalf("Restore: loaded %d dropped %d err %v", loaded, dropped, err)
	}
	for _, tp := range tuples {
		if a, b := e.Status(tp), same.Status(tp); a != b {
			t.Fatalf("%+v: status %+v after restore, %+v before", tp, b, a)
		}
	}
	if a, b := e.Stats(), same.Stats(); b.Cells != int64(len(recs)) || b.Tuples != 4 {
		t.Fatalf("restored stats %+v (source %+v)", b, a)
	}
	// Decisions continue from the restored counts.
	if a, b := mustLimit(t, e, tuples[0], 12, 1), mustLimit(t, same, tuples[0], 12, 1); a != b {
		t.Fatalf("decision after restore %+v, before %+v", b, a)
	}

	// Restore one window later: the cells of sequence s (now seq-2) are dropped.
	later := engine.New(engine.NewManualClock(clock.NowMs()+w), engine.Config{MaxMemoryBytes: 1 << 30})
	loaded, dropped, err = later.Restore(recs)
	if err != nil || loaded != 3 || dropped != 3 {
		t.Fatalf("Restore a window later: loaded %d dropped %d err %v; want 3 and 3", loaded, dropped, err)
	}
	if st := later.Status(tuples[0]); st.PreviousRegional != 10 || st.CurrentRegional != 0 {
		t.Fatalf("a a window later: %+v", st)
	}
	if st := later.Status(tuples[2]); st.CurrentRegional != 33 {
		t.Fatalf("c (10 s window) a window later: %+v", st)
	}
	if len(later.Snapshot()) != 3 {
		t.Fatalf("later snapshot %+v", later.Snapshot())
	}

	// Far in the future nothing is live.
	far := engine.New(engine.NewManualClock(clock.NowMs()+100*w), engine.Config{MaxMemoryBytes: 1 << 30})
	if loaded, dropped, err := far.Restore(recs); err != nil || loaded != 0 || dropped != len(recs) {
		t.Fatalf("Restore far later: loaded %d dropped %d err %v", loaded, dropped, err)
	}
	if s := far.Stats(); s.Tuples != 0 || s.Cells != 0 {
		t.Fatalf("far restore kept state: %+v", s)
	}
}

// TestRestoreMergesWithMax: restoring into an engine that already counts keeps, per cell,
// the larger of each count, and restoring twice changes nothing.
func TestRestoreMergesWithMax(t *testing.T) {
	e, _ := newEngine(t0)
	tp := tup("m", 1000)
	key := string(engine.AppendKey(nil, tp))
	seq := t0 / 1000
	mustLimit(t, e, tp, 100, 5)
	recs := []engine.CellRecord{
		{Key: key, Seq: seq, Regional: 3, Imported: 7},
		{Key: key, Seq: seq - 1, Regional: 8, Imported: 1},
	}
	for i := 0; i < 2; i++ {
		if loaded, dropped, err := e.Restore(recs); err != nil || loaded != 2 || dropped != 0 {
			t.Fatalf("Restore #%d: %d %d %v", i, loaded, dropped, err)
		}
		st := e.Status(tp)
		want := engine.Status{Sequence: seq, WindowMs: 1000, CurrentRegional: 5, CurrentImported: 7, PreviousRegional: 8, PreviousImported: 1, Source: "origin", Fresh: true}
		if st != want {
			t.Fatalf("after restore #%d: %+v, want %+v", i, st, want)
		}
	}
	// Imported counts take part in decisions: used = 12 + 9 = 21.
	if d := mustLimit(t, e, tp, 21, 0); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("peek at 21: %+v", d)
	}
	if d := mustLimit(t, e, tp, 21, 1); d.Allowed {
		t.Fatalf("request over imported counts: %+v", d)
	}
}

// TestRestoreBadRecords: a record whose key does not decode is reported and skipped; the
// others load.
func TestRestoreBadRecords(t *testing.T) {
	e, _ := newEngine(t0)
	good := engine.AppendKey(nil, tup("g", 1000))
	recs := []engine.CellRecord{
		{Key: "short", Seq: 1, Regional: 1},
		{Key: string(good), Seq: t0 / 1000, Regional: 4},
		{Key: string(engine.AppendKey(nil, tup("zero window", 0))), Seq: 1, Regional: 1},
		{Key: string(good) + "", Seq: t0/1000 + 5, Regional: 9}, // future: not live
	}
	loaded, dropped, err := e.Restore(recs)
	if err == nil || loaded != 1 || dropped != 3 {
		t.Fatalf("Restore: loaded %d dropped %d err %v; want 1, 3 and an error", loaded, dropped, err)
	}
	if st := e.Status(tup("g", 1000)); st.CurrentRegional != 4 {
		t.Fatalf("good record: %+v", st)
	}
}

// TestRestoreKeepsLivePrevious: Restore accepts a cell of sequence seq+1 (clock skew
// between the snapshotting and the restoring process). It must not evict the live
// previous cell (seq-1) to make room for it: the store never forgets a live cell.
func TestRestoreKeepsLivePrevious(t *testing.T) {
	e, _ := newEngine(t0 + 500)
	tp := tup("skew", 1000)
	key := string(engine.AppendKey(nil, tp))
	seq := t0 / 1000
	recs := []engine.CellRecord{
		{Key: key, Seq: seq - 1, Regional: 5},
		{Key: key, Seq: seq, Regional: 3},
		{Key: key, Seq: seq + 1, Regional: 7},
	}
	e.Restore(recs)
	st := e.Status(tp)
	if st.CurrentRegional != 3 {
		t.Fatalf("current cell lost: %+v", st)
	}
	if st.PreviousRegional != 5 {
		t.Fatalf("live previous cell forgotten for a future cell: %+v (want previous 5)", st)
	}
}

// TestParseKeyRoundTrip: ParseKey(AppendKey(t)) == t for tuples with any bytes.
func TestParseKeyRoundTrip(t *testing.T) {
	tuples := []engine.Tuple{
		tup("user:1", 1000),
		{Workspace: "", Namespace: "", Key: nil, WindowMs: 1},
		{Workspace: "w", Namespace: "n", Key: []byte{0, 0, 0}, WindowMs: engine.MaxWindowMs},
		{Workspace: string(bytes.Repeat([]byte{0x80}, 300)), Namespace: string(bytes.Repeat([]byte{0xff}, 128)), Key: bytes.Repeat([]byte("k"), 1024), WindowMs: 86_400_000},
		{Workspace: "\x00\x01", Namespace: "\xff", Key: []byte("\x08\x00\x00"), WindowMs: 0x01020304},
	}
	for _, tp := range tuples {
		prefix := []byte("prefix")
		k := engine.AppendKey(prefix, tp)
		if !bytes.Equal(k[:6], []byte("prefix")) {
			t.Fatalf("AppendKey overwrote dst")
		}
		got, err := engine.ParseKey(k[6:])
		if err != nil {
			t.Fatalf("ParseKey(AppendKey(%+v)): %v", tp, err)
		}
		if got.Workspace != tp.Workspace || got.Namespace != tp.Namespace || !bytes.Equal(got.Key, tp.Key) || got.WindowMs != tp.WindowMs {
			t.Fatalf("round trip: %+v -> %+v", tp, got)
		}
	}
	// Distinct tuples have distinct keys.
	seen := map[string]int{}
	for i, tp := range tuples {
		k := string(engine.AppendKey(nil, tp))
		if j, ok := seen[k]; ok {
			t.Fatalf("tuples %d and %d share key %q", i, j, k)
		}
		seen[k] = i
	}
}

// TestParseKeyRejects: malformed keys are errors, never panics.
func TestParseKeyRejects(t *testing.T) {
	bad := [][]byte{
		nil,
		{},
		{0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, // window 0
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0},                                  // window -1
		append(engine.AppendKey(nil, engine.Tuple{WindowMs: engine.MaxWindowMs + 1}), 0),        // window too long
		{0, 0, 0, 0, 0, 0, 3, 0xe8},                                                             // no lengths
		{0, 0, 0, 0, 0, 0, 3, 0xe8, 5, 'a'},                                                     // workspace cut short
		{0, 0, 0, 0, 0, 0, 3, 0xe8, 0},                                                          // namespace length missing
		{0, 0, 0, 0, 0, 0, 3, 0xe8, 0, 0x80},                                                    // truncated varint
		append([]byte{0, 0, 0, 0, 0, 0, 3, 0xe8}, bytes.Repeat([]byte{0xff}, 11)...),            // varint overflow
		{0, 0, 0, 0, 0, 0, 3, 0xe8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, // length 2^64-1
	}
	for _, k := range bad {
		if tp, err := engine.ParseKey(k); err == nil {
			t.Errorf("ParseKey(%x) = %+v, want an error", k, tp)
		}
	}
}

// FuzzParseKey: ParseKey never panics; whatever it accepts re-encodes to the same bytes
// and has a window in range.
func FuzzParseKey(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 3, 0xe8, 0, 0})
	f.Add(engine.AppendKey(nil, tup("user:1", 1000)))
	f.Add(engine.AppendKey(nil, engine.Tuple{Workspace: "acme", Namespace: "login", Key: []byte{0xff, 0}, WindowMs: engine.MaxWindowMs}))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 3, 0xe8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, k []byte) {
		tp, err := engine.ParseKey(k)
		if err != nil {
			return
		}
		if tp.WindowMs < 1 || tp.WindowMs > engine.MaxWindowMs {
			t.Fatalf("accepted window %d", tp.WindowMs)
		}
		if again := engine.AppendKey(nil, tp); !bytes.Equal(again, k) {
			// Uvarint accepts non-minimal encodings (e.g. 0x80 0x00 for 0); those keys
			// are never produced by AppendKey, but they must at least decode stably.
			tp2, err := engine.ParseKey(again)
			if err != nil || tp2.Workspace != tp.Workspace || tp2.Namespace != tp.Namespace || !bytes.Equal(tp2.Key, tp.Key) || tp2.WindowMs != tp.WindowMs {
				t.Fatalf("re-encoding %x of %x does not decode to %+v", again, k, tp)
			}
		}
	})
}

// TestLimitAtStaleInstant: a batch's instant that precedes a window already counted is not
// used: the decision is made at the clock's reading, the current cell keeps its count, and
// the limit holds.
func TestLimitAtStaleInstant(t *testing.T) {
	const w = 1000
	e, clock := newEngine(10*w + 500)
	tp := tup("k", w)
	for i := 0; i < 9; i++ {
		if d, err := e.Limit(tp, 10, 1); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v", i, d, err)
		}
	}
	// A request read two windows ago, decided only now.
	d, err := e.LimitAt(tp, 10, 1, clock.NowMs()-2*w)
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("stale request: %+v, %v (want allowed with remaining 0: decided now)", d, err)
	}
	if d, _ := e.Limit(tp, 10, 1); d.Allowed {
		t.Fatalf("11th request in one window allowed: %+v", d)
	}
	if st := e.Status(tp); st.CurrentRegional != 10 {
		t.Fatalf("current cell holds %d, want 10", st.CurrentRegional)
	}
}

// TestChanged: Changed reports count changes once (a periodic snapshot skips idle
// intervals), and only changes: a denial, a peek or a read changes nothing.
func TestChanged(t *testing.T) {
	const w = 60_000
	e, clock := newEngine(10 * w)
	tp := tup("k", w)
	key := engine.AppendKey(nil, tp)
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"new engine", func() {}, false},
		{"allowed request", func() { mustLimit(t, e, tp, 1, 1) }, true},
		{"nothing since", func() {}, false},
		{"denied request", func() { mustLimit(t, e, tp, 1, 1) }, false},
		{"peek", func() { mustLimit(t, e, tp, 5, 0) }, false},
		{"status", func() { e.Status(tp) }, false},
		{"replay", func() {
			e.ServeReplay(engine.ReplayBatch{Node: "n", ID: 1, Items: []engine.ReplayItem{{Key: key, Seq: clock.NowMs() / w, Cost: 2, Limit: 10}}})
		}, true},
		{"replay redelivered", func() {
			e.ServeReplay(engine.ReplayBatch{Node: "n", ID: 1, Items: []engine.ReplayItem{{Key: key, Seq: clock.NowMs() / w, Cost: 2, Limit: 10}}})
		}, false},
		{"foreign component", func() {
			e.MergeComponents([]engine.Component{{Key: key, Seq: clock.NowMs() / w, Region: "other", Count: 3}})
		}, true},
		{"same component again", func() {
			e.MergeComponents([]engine.Component{{Key: key, Seq: clock.NowMs() / w, Region: "other", Count: 3}})
		}, false},
	}
	for _, s := range steps {
		s.do()
		if got := e.Changed(); got != s.want {
			t.Fatalf("%s: Changed() = %v, want %v", s.name, got, s.want)
		}
	}
}

// TestRecordsMatchesSnapshot: Records yields what Snapshot copies, foreign components
// included, and stops when yield says so.
func TestRecordsMatchesSnapshot(t *testing.T) {
	const w = 60_000
	e, clock := newEngine(10 * w)
	for i := range 300 {
		mustLimit(t, e, tup(fmt.Sprintf("k%d", i), w), 1000, uint64(1+i%3))
	}
	key := engine.AppendKey(nil, tup("k7", w))
	e.MergeComponents([]engine.Component{{Key: key, Seq: clock.NowMs() / w, Region: "eu", Count: 4}})
	clock.Advance(w) // the cells are previous ones now, still live
	mustLimit(t, e, tup("k7", w), 1000, 2)

	canon := func(recs []engine.CellRecord) []string {
		var out []string
		for _, r := range recs {
			out = append(out, fmt.Sprintf("%q %d %d %d %v", r.Key, r.Seq, r.Regional, r.Imported, r.Foreign))
		}
		sort.Strings(out)
		return out
	}
	var streamed []engine.CellRecord
	e.Records(func(r engine.CellRecord) bool {
		r.Key = strings.Clone(r.Key) // lent for the call only
		r.Foreign = slices.Clone(r.Foreign)
		streamed = append(streamed, r)
		return true
	})
	want := canon(e.Snapshot())
	if got := canon(streamed); !slices.Equal(got, want) {
		t.Fatalf("Records yielded %d records, Snapshot %d:\n%v\n%v", len(got), len(want), got, want)
	}
	if len(want) != 301 {
		t.Fatalf("%d records, want 301 (300 cells, and k7's new one)", len(want))
	}
	n := 0
	e.Records(func(engine.CellRecord) bool { n++; return n < 5 })
	if n != 5 {
		t.Fatalf("Records went on after yield returned false: %d calls", n)
	}
}
