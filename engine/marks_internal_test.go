package engine

import (
	"fmt"
	"testing"
)

// TestRestoreLeasesKeepsMarks: restoring a lease of a run the full node table does not
// hold never pushes another run's replay marks out (its re-sent batch would be applied
// twice), and a lease sequence from the far future is dropped, not loaded.
func TestRestoreLeasesKeepsMarks(t *testing.T) {
	const t0 = 1_704_067_200_000
	clock := NewManualClock(t0)
	e := New(clock, Config{})
	var runs []RunRecord
	for i := range maxTrackedNodes {
		runs = append(runs, RunRecord{Run: fmt.Sprintf("edge%d/a", i), Applied: 7, HeardMs: t0 - int64(i)})
	}
	if loaded, _ := e.RestoreRuns(runs); loaded != maxTrackedNodes {
		t.Fatalf("loaded %d runs, want %d", loaded, maxTrackedNodes)
	}
	key := string(AppendKey(nil, Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 60_000}))
	seq := uint64(t0) << 20
	loaded, dropped, err := e.RestoreLeases([]LeaseRecord{
		{Key: key, Run: "stranger/a", G: 10, Seq: seq, UntilMs: t0 + 1000},
		{Key: key, Run: "edge0/a", G: 10, Seq: ^uint64(0), UntilMs: t0 + 1000},
	})
	if err != nil || loaded != 1 || dropped != 1 {
		t.Fatalf("RestoreLeases: loaded %d, dropped %d, err %v; want the stranger's loaded, the far-future one dropped", loaded, dropped, err)
	}
	oldest := fmt.Sprintf("edge%d/a", maxTrackedNodes-1)
	cc, _ := e.ServeReplay(ReplayBatch{Node: oldest, ID: 7, Items: []ReplayItem{{Key: []byte(key), Seq: t0 / 60_000, Cost: 5}}})
	if cc[0].CurRegional != 0 {
		t.Fatalf("batch 7 of %s, applied before the restart, was applied again: count %d", oldest, cc[0].CurRegional)
	}
	if d, _, _, _ := e.ServeDecide("other/a", DecideRequest{Key: []byte(key), Limit: 10, Cost: 1}); d.Allowed {
		t.Fatal("the stranger's restored lease of 10 does not hold")
	}
	if next := e.nextLeaseSeq(); next <= seq || next > seq+(1<<40) {
		t.Fatalf("next lease sequence %d after restoring %d (and dropping a far-future one)", next, seq)
	}
}

// TestLeaseSetHeapBytes: a tuple's first grant lives inline and costs no heap bytes; once
// a second grant moves them to the heap, every grant there counts, and the inline copy
// keeps no run alive.
func TestLeaseSetHeapBytes(t *testing.T) {
	var ls leaseSet
	a, b := &runMarks{name: "a/1", id: 1}, &runMarks{name: "b/1", id: 2}
	ga := ls.grantOf(a, 0, true)
	if ga == nil || ls.heapBytes() != 0 {
		t.Fatalf("one grant: %d heap bytes, want 0 (inline)", ls.heapBytes())
	}
	ga.until = 1000 // alive: not reused for the next run
	if gb := ls.grantOf(b, 0, true); gb == nil || len(ls.grants) != 2 {
		t.Fatalf("second grant: %v, %d grants", gb, len(ls.grants))
	}
	if got, want := ls.heapBytes(), int64(cap(ls.grants))*leaseGrantBytes; got != want || got == 0 {
		t.Fatalf("two grants: %d heap bytes, want %d", got, want)
	}
	if ls.inline[0].run != nil {
		t.Fatal("the inline copy still points at a run after the grants moved to the heap")
	}
	if g := ls.grantOf(a, 0, false); g == nil || g.run != a {
		t.Fatal("the first grant was lost in the move")
	}
}
