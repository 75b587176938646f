package engine_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// leaseRecords collects what e.Leases yields, its keys copied.
func leaseRecords(e *engine.Engine) []engine.LeaseRecord {
	var out []engine.LeaseRecord
	e.Leases(func(r engine.LeaseRecord) bool {
		r.Key = strings.Clone(r.Key)
		out = append(out, r)
		return true
	})
	return out
}

// restartClean is a clean restart of the origin o 100 ms later: a new Engine on the same
// clock (so a new Boot) that restores o's cells, replay marks and leases.
func restartClean(t *testing.T, o *engine.Engine, clock *engine.ManualClock) *engine.Engine {
	t.Helper()
	cells, runs, leases := o.Snapshot(), slices.Collect(o.Runs), leaseRecords(o)
	clock.Advance(100)
	n := engine.New(clock, engine.Config{LeaseTTL: time.Second})
	if _, _, err := n.Restore(cells); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if loaded, dropped := n.RestoreRuns(runs); loaded != len(runs) || dropped != 0 {
		t.Fatalf("RestoreRuns: loaded %d, dropped %d of %d", loaded, dropped, len(runs))
	}
	if loaded, dropped, err := n.RestoreLeases(leases); err != nil || loaded != len(leases) || dropped != 0 {
		t.Fatalf("RestoreLeases: loaded %d, dropped %d of %d: %v", loaded, dropped, len(leases), err)
	}
	return n
}

// TestRestoreKeepsReplayMarks: a batch the origin applied before a clean restart, re-sent
// because its answer was lost, is not applied again; the run's next batch is.
func TestRestoreKeepsReplayMarks(t *testing.T) {
	r := newLeaseRig(t)
	r.replay("e1/a", 7, engine.ReplayItem{Cost: 5, Limit: 100})
	r.o = restartClean(t, r.o, r.clock)
	if cc := r.replay("e1/a", 7, engine.ReplayItem{Cost: 5, Limit: 100}); cc.CurRegional != 5 {
		t.Fatalf("batch 7 re-sent after the restart: regional %d, want 5 (applied once)", cc.CurRegional)
	}
	cc, meta := r.o.ServeReplay(engine.ReplayBatch{Node: "e1/a", ID: 8,
		Items: []engine.ReplayItem{{Key: r.key, Seq: r.seq, Cost: 3, Limit: 100}}})
	if cc[0].CurRegional != 8 || meta.Applied != 8 {
		t.Fatalf("batch 8 after the restart: regional %d, applied %d; want 8, 8", cc[0].CurRegional, meta.Applied)
	}
	runs := slices.Collect(r.o.Runs)
	if len(runs) != 1 || runs[0].Run != "e1/a" || runs[0].Applied != 8 || runs[0].ReplayMs != r.clock.NowMs() {
		t.Fatalf("Runs after batch 8: %+v", runs)
	}
}

// TestRestoreKeepsLeases: after a clean restart the origin still counts the lease it
// granted as held: a hand-off beside it is refused as before the restart, the run's
// replays spend it, it ends by the usual rules, and newer grants get higher sequences.
func TestRestoreKeepsLeases(t *testing.T) {
	r := newLeaseRig(t)
	first := r.read("e1/a", 100, 1000)
	if first.LeaseLeft != 50 { // 100 / (2 x 1 edge)
		t.Fatalf("lease %d, want 50", first.LeaseLeft)
	}
	if d := r.decide("e2/a", engine.DecideRequest{Limit: 100, Cost: 51}); d.Allowed {
		t.Fatalf("before the restart: a hand-off of 51 beside a lease of 50 was allowed: %+v", d)
	}
	r.o = restartClean(t, r.o, r.clock)
	if d := r.decide("e2/a", engine.DecideRequest{Limit: 100, Cost: 51}); d.Allowed {
		t.Fatalf("after the restart: a hand-off of 51 beside a restored lease of 50 was allowed: %+v", d)
	}
	if d := r.decide("e2/a", engine.DecideRequest{Limit: 100, Cost: 45}); !d.Allowed {
		t.Fatalf("after the restart: a hand-off of 45 beside a restored lease of 50 was refused: %+v", d)
	}
	// e1 spent 20 of its lease before it heard of the restart: its reservation falls to 30.
	if cc := r.replay("e1/a", 1, engine.ReplayItem{Cost: 20, Limit: 100}); cc.CurRegional != 65 {
		t.Fatalf("regional %d after e1's replay, want 65", cc.CurRegional)
	}
	r.fitsExactly("e2/a", engine.DecideRequest{Limit: 100, Cost: 5}, "65 used and 30 leased")
	// The restored lease ends as it would have: e1 replayed after its until (heard, its
	// replay reported what it spent), so it holds nothing and its room is free again.
	r.clock.Advance(2100)
	r.replay("e1/a", 2, engine.ReplayItem{Limit: 100})
	if d := r.decide("e2/a", engine.DecideRequest{Limit: 100, Cost: 30}); !d.Allowed {
		t.Fatalf("a hand-off of 30 once the restored lease ended was refused: %+v", d)
	}
	if cc := r.read("e1/a", 1000, 10); cc.LeaseLeft == 0 || cc.LeaseSeq <= first.LeaseSeq {
		t.Fatalf("a grant after the restart (%+v) has sequence %d, not above the restored %d", cc, cc.LeaseSeq, first.LeaseSeq)
	}
}

// TestRestoreLeasesDrops: records that are ended, unnamed or undecodable are dropped; an
// until far ahead is cut to a new grant's; a run missing from the marks gets new ones.
func TestRestoreLeasesDrops(t *testing.T) {
	r := newLeaseRig(t)
	now := r.clock.NowMs()
	key := string(r.key)
	loaded, dropped, err := r.o.RestoreLeases([]engine.LeaseRecord{
		{Key: key, Run: "e1/a", G: 10, Seq: 5, UntilMs: now - 1},    // ended
		{Key: key, Run: "", G: 10, Seq: 5, UntilMs: now + 100},      // no run
		{Key: "nonsense", Run: "e1/a", G: 10, Seq: 5, UntilMs: now}, // bad key
		{Key: key, Run: "e2/a", G: 10, Seq: 0, UntilMs: now + 100},  // no sequence
		{Key: key, Run: "e3/a", G: 10, Seq: 9, UntilMs: 1 << 62},    // far ahead
	})
	if err == nil || loaded != 1 || dropped != 4 {
		t.Fatalf("RestoreLeases: loaded %d, dropped %d, err %v; want 1, 4 and an error", loaded, dropped, err)
	}
	got := leaseRecords(r.o)
	if len(got) != 1 || got[0].Run != "e3/a" || got[0].UntilMs != now+2000 {
		t.Fatalf("leases %+v: want e3/a's, until now + TTL + grace", got)
	}
	if runs := slices.Collect(r.o.Runs); len(runs) != 1 || runs[0].Run != "e3/a" {
		t.Fatalf("runs %+v: want e3/a's new marks", runs)
	}
	if loaded, dropped := r.o.RestoreRuns([]engine.RunRecord{{Run: ""}, {Run: strings.Repeat("x", engine.MaxRunLen+1)},
		{Run: "e4/a", Applied: 3, HeardMs: 1 << 62}}); loaded != 1 || dropped != 2 {
		t.Fatalf("RestoreRuns: loaded %d, dropped %d; want 1, 2", loaded, dropped)
	}
	for _, run := range slices.Collect(r.o.Runs) {
		if run.Run == "e4/a" && (run.Applied != 3 || run.HeardMs != now) {
			t.Fatalf("e4/a restored as %+v: want applied 3, heard now (not later)", run)
		}
	}
}

// TestLeaseGrantMarksChanged: a lease grant is saved state, so a periodic snapshot that
// asks Changed writes it.
func TestLeaseGrantMarksChanged(t *testing.T) {
	r := newLeaseRig(t)
	r.o.Changed()
	if cc := r.read("e1/a", 100, 10); cc.LeaseLeft == 0 || !r.o.Changed() {
		t.Fatalf("a grant (%+v) did not mark the engine changed", cc)
	}
}
