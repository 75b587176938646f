package persist_test

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/persist"
)

// leaseFixture returns run and lease records of every kind: extreme values, binary names,
// and enough leases to fill several chunks.
func leaseFixture(n int) ([]engine.RunRecord, []engine.LeaseRecord) {
	runs := []engine.RunRecord{
		{Run: "edge-1/0a0b0c", Applied: 7, HeardMs: 1_750_000_000_000, ReplayMs: 1_749_999_999_000, Hands: 12},
		{Run: "edge-1/old", Applied: math.MaxUint64, HeardMs: -1, Superseded: true, Hands: math.MaxUint64},
		{Run: "e\x00\xff/x", HeardMs: math.MaxInt64, ReplayMs: math.MinInt64},
		{Run: ""},
	}
	leases := make([]engine.LeaseRecord, n)
	for i := range leases {
		key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "ns",
			Key: fmt.Appendf(nil, "user:%d:%s", i, strings.Repeat("k", i%200)), WindowMs: 60_000}))
		leases[i] = engine.LeaseRecord{Key: key, Run: runs[i%len(runs)].Run, G: uint64(i) * 1000, Spent: uint64(i),
			Seq: uint64(i)<<40 | 1, UntilMs: 1_750_000_060_000 + int64(i)}
	}
	leases = append(leases, engine.LeaseRecord{G: math.MaxUint64, Spent: math.MaxUint64, Seq: math.MaxUint64, UntilMs: math.MinInt64},
		// A run outside the run records (the engine's table was full) is named in full.
		engine.LeaseRecord{Key: "k", Run: "edge-2/not-a-run", G: 3, Seq: 1, UntilMs: math.MaxInt64})
	return runs, leases
}

// TestRunsAndLeasesRoundTrip: the runs and leases a save is given load back as they were,
// in order, beside cells and counter keys.
func TestRunsAndLeasesRoundTrip(t *testing.T) {
	s, _ := openStore(t)
	cells, kv := genRecords(100, 6), kvRecords(50, 6)
	runs, leases := leaseFixture(3000) // over 64 KiB of leases: several chunks
	err := s.Write(persist.Source{Cells: slices.Values(cells), KV: slices.Values(kv),
		Runs: slices.Values(runs), Leases: slices.Values(leases)})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Cells) != len(cells) || len(snap.KV) != len(kv) {
		t.Fatalf("loaded %d cells and %d keys, want %d and %d", len(snap.Cells), len(snap.KV), len(cells), len(kv))
	}
	if !reflect.DeepEqual(snap.Runs, runs) {
		t.Fatalf("runs %+v, want %+v", snap.Runs, runs)
	}
	if !reflect.DeepEqual(snap.Leases, leases) {
		t.Fatalf("leases differ: %d loaded, %d saved", len(snap.Leases), len(leases))
	}

	// A save without runs and leases holds none.
	if err := s.SaveAll(slices.Values(cells), nil); err != nil {
		t.Fatal(err)
	}
	if snap, err := s.LoadAll(); err != nil || len(snap.Runs) != 0 || len(snap.Leases) != 0 {
		t.Fatalf("LoadAll after a save of cells only: %d runs, %d leases, %v", len(snap.Runs), len(snap.Leases), err)
	}
}

// TestSaveRefusesLongRunName: a run name past engine.MaxRunLen fails the save, which
// leaves the previous snapshot.
func TestSaveRefusesLongRunName(t *testing.T) {
	s, _ := openStore(t)
	long := strings.Repeat("r", engine.MaxRunLen+1)
	if err := s.Write(persist.Source{Runs: slices.Values([]engine.RunRecord{{Run: long}})}); err == nil {
		t.Fatal("a run record with an overlong name was saved")
	}
	if err := s.Write(persist.Source{Leases: slices.Values([]engine.LeaseRecord{{Key: "k", Run: long}})}); err == nil {
		t.Fatal("a lease record with an overlong run name was saved")
	}
}

// TestCleanRestartKeepsMarksAndLeases: an origin saved with Write and restored from
// LoadAll does not apply again a batch it applied before, and still counts the lease it
// granted: a hand-off beside it is refused as before.
func TestCleanRestartKeepsMarksAndLeases(t *testing.T) {
	const w = 60_000
	clock := engine.NewManualClock(1_750_000_000_000 / w * w)
	cfg := engine.Config{LeaseTTL: time.Second}
	o := engine.New(clock, cfg)
	tp := engine.Tuple{Workspace: "default", Key: []byte("k"), WindowMs: w}
	key := engine.AppendKey(nil, tp)
	seq := clock.NowMs() / w
	batch := engine.ReplayBatch{Node: "e1/a", ID: 3, Items: []engine.ReplayItem{{Key: key, Seq: seq, Cost: 10, Limit: 100, Want: 1000}}}
	cc, _ := o.ServeReplay(batch)
	if cc[0].CurRegional != 10 || cc[0].LeaseLeft != 45 { // (100 - 10) / 2
		t.Fatalf("before the restart: %+v, want regional 10 and a lease of 45", cc[0])
	}

	s, _ := openStore(t)
	if err := s.Write(persist.Source{Tuples: o.Tuples, KV: o.KV().Records, Runs: o.Runs}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(500)
	n := engine.New(clock, cfg)
	if _, _, err := n.Restore(snap.Cells); err != nil {
		t.Fatal(err)
	}
	if loaded, _ := n.RestoreRuns(snap.Runs); loaded != 1 {
		t.Fatalf("restored %d runs of %+v, want 1", loaded, snap.Runs)
	}
	if loaded, _, err := n.RestoreLeases(snap.Leases); loaded != 1 || err != nil {
		t.Fatalf("restored %d leases of %+v (%v), want 1", loaded, snap.Leases, err)
	}
	cc, meta := n.ServeReplay(batch) // its answer was lost: the edge sends it again
	if cc[0].CurRegional != 10 || meta.Applied != 3 {
		t.Fatalf("re-sent batch after the restart: regional %d, applied %d; want 10, 3", cc[0].CurRegional, meta.Applied)
	}
	d, _, _, err := n.ServeDecide("e2/a", engine.DecideRequest{Key: key, Limit: 100, Cost: 46})
	if err != nil || d.Allowed {
		t.Fatalf("a hand-off of 46 beside 10 used and a restored lease of 45 = %+v, %v; want refused", d, err)
	}
}

// TestTuplesRoundTrip: a save from engine.Tuples, as an origin makes it (grants that refer
// to their tuple's cell record for the key), loads back every live cell and grant: of
// tuples with one cell and with two, with a lease and without, a lease whose cells have
// ended, grants of two runs on one tuple, and enough tuples for several chunks of each.
func TestTuplesRoundTrip(t *testing.T) {
	const w = 1000
	clock := engine.NewManualClock(1_750_000_000_000 / w * w)
	o := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})
	key := func(i int) []byte {
		return engine.AppendKey(nil, engine.Tuple{Workspace: "default", Key: fmt.Appendf(nil, "user:%d", i), WindowMs: w})
	}
	read := func(run string, k []byte, want uint64) {
		o.ServeRead(run, []engine.ReadItem{{Key: k, Seq: clock.NowMs() / w, Limit: 1 << 40, Want: want}})
	}
	read("e1/a", key(0), 5) // a lease whose cells end below
	clock.Advance(2 * w)
	for i := 1; i <= 6000; i++ {
		switch {
		case i%3 == 0:
			read("e1/a", key(i), 7) // a lease and no cell yet: a lease-only tuple
		case i%3 == 1:
			read("e1/a", key(i), 9)
			read("e2/b", key(i), 4)
			o.ServeReplay(engine.ReplayBatch{Node: "e1/a", ID: uint64(i), Items: []engine.ReplayItem{{Key: key(i), Seq: clock.NowMs() / w, Cost: 2, Limit: 1 << 40}}})
		default:
			tp, _ := engine.ParseKey(key(i))
			if _, err := o.Limit(tp, 1<<40, 3); err != nil { // a cell and no lease
				t.Fatal(err)
			}
		}
	}
	clock.Advance(w) // the cells of the last window are now the previous ones, still live
	tp, _ := engine.ParseKey(key(2))
	if _, err := o.Limit(tp, 1<<40, 1); err != nil { // two live cells
		t.Fatal(err)
	}
	wantLeases := engineLeases(o)
	wantCells := o.Snapshot()
	s, _ := openStore(t)
	if err := s.Write(persist.Source{Runs: o.Runs, Tuples: o.Tuples}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(wantLeases) != 6001 || !sameLeases(snap.Leases, wantLeases) {
		t.Fatalf("loaded %d leases, want the %d the engine holds (6001)", len(snap.Leases), len(wantLeases))
	}
	byKeySeq := func(a, b engine.CellRecord) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return int(a.Seq - b.Seq)
	}
	slices.SortFunc(wantCells, byKeySeq)
	slices.SortFunc(snap.Cells, byKeySeq)
	if len(wantCells) != 4001 || !reflect.DeepEqual(snap.Cells, wantCells) {
		t.Fatalf("loaded %d cells, want the %d the engine holds (4001)", len(snap.Cells), len(wantCells))
	}
	if lease0 := string(key(0)); !slices.ContainsFunc(snap.Leases, func(r engine.LeaseRecord) bool { return r.Key == lease0 }) {
		t.Fatal("the lease whose cells ended was not saved")
	}
}

// TestTuplesAfterCellsAndLeases: records of Cells and Leases written before those of
// Tuples shift the tuples' cell references (a cell's index counts the cells before the
// tuples) and leave the lease chunk's differences where the tuples' records start afresh.
func TestTuplesAfterCellsAndLeases(t *testing.T) {
	const w = 1000
	clock := engine.NewManualClock(1_750_000_000_000 / w * w)
	o := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})
	for i := range 50 {
		k := engine.AppendKey(nil, engine.Tuple{Workspace: "default", Key: fmt.Appendf(nil, "user:%d", i), WindowMs: w})
		o.ServeRead("e1/a", []engine.ReadItem{{Key: k, Seq: clock.NowMs() / w, Limit: 1 << 40, Want: 3}})
		o.ServeReplay(engine.ReplayBatch{Node: "e1/a", ID: uint64(i + 1), Items: []engine.ReplayItem{{Key: k, Seq: clock.NowMs() / w, Cost: 1, Limit: 1 << 40}}})
	}
	other := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Key: []byte("other"), WindowMs: w}))
	cells := []engine.CellRecord{{Key: other, Seq: clock.NowMs() / w, Regional: 4}, {Key: other + "x", Seq: 1, Regional: 1}}
	leases := []engine.LeaseRecord{{Key: other, Run: "e1/a", G: 9, Seq: 1 << 62, UntilMs: 1 << 50}}
	wantLeases := append(engineLeases(o), leases...)
	s, _ := openStore(t)
	if err := s.Write(persist.Source{Runs: o.Runs, Cells: slices.Values(cells), Leases: slices.Values(leases), Tuples: o.Tuples}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(wantLeases) != 51 || !sameLeases(snap.Leases, wantLeases) {
		t.Fatalf("loaded leases %+v, want %+v", snap.Leases, wantLeases)
	}
	if len(snap.Cells) != 52 {
		t.Fatalf("loaded %d cells, want 52", len(snap.Cells))
	}
}

// engineLeases returns every lease the engine holds, their keys copied (Leases lends them
// only for the call).
func engineLeases(o *engine.Engine) []engine.LeaseRecord {
	var out []engine.LeaseRecord
	for r := range o.Leases {
		r.Key = strings.Clone(r.Key)
		out = append(out, r)
	}
	return out
}

// sameLeases reports whether a and b hold the same grants, in any order (both are sorted).
func sameLeases(a, b []engine.LeaseRecord) bool {
	byKeyRun := func(x, y engine.LeaseRecord) int { return strings.Compare(x.Key+"/"+x.Run, y.Key+"/"+y.Run) }
	slices.SortFunc(a, byKeyRun)
	slices.SortFunc(b, byKeyRun)
	return reflect.DeepEqual(a, b)
}
