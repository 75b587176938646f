package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// Resets (engine/reset.go): a reset zeroes a tuple on its origin, never comes undone by a
// replay or an import from before it, and reaches other regions without lowering any
// G-Counter component.

func used(e *engine.Engine, tp engine.Tuple) uint64 { return e.Status(tp).Used() }

// TestResetZeroesATuple: RL.RESET on an origin, in the current and the previous cell.
func TestResetZeroesATuple(t *testing.T) {
	e, clock := newEngine(t0)
	tp := tup("login:alice", 60_000)
	for range 10 {
		mustLimit(t, e, tp, 10, 1)
	}
	clock.Advance(60_000 + 30_000) // the 10 are in the previous cell, at half weight
	mustLimit(t, e, tp, 10, 1)
	if d := mustLimit(t, e, tp, 10, 5); d.Allowed {
		t.Fatalf("before the reset, 5 more were allowed: %+v", d)
	}
	other := tup("login:bob", 60_000)
	mustLimit(t, e, other, 10, 3)
	n, err := e.Reset([]engine.Tuple{tp, tup("never", 60_000), tup("login:alice", 1000)})
	if err != nil || n != 1 {
		t.Fatalf("Reset = %d, %v; want 1 tuple that held usage", n, err)
	}
	st := e.Status(tp)
	if st.CurrentRegional != 0 || st.PreviousRegional != 0 {
		t.Fatalf("after the reset: %+v", st)
	}
	for i := range 10 {
		if d := mustLimit(t, e, tp, 10, 1); !d.Allowed {
			t.Fatalf("request %d after the reset refused: %+v", i, d)
		}
	}
	if d := mustLimit(t, e, tp, 10, 1); d.Allowed {
		t.Fatalf("the 11th request after the reset allowed")
	}
	if used(e, other) != 3 {
		t.Fatalf("another tuple changed: %d", used(e, other))
	}
}

// TestResetReplayFromBefore: an edge's replay made before it applied the reset (its batch
// carries an older change version) is not counted; one made after is. Re-deliveries
// change nothing.
func TestResetReplayFromBefore(t *testing.T) {
	e, _ := newEngine(t0)
	tp := tup("k", 60_000)
	key := engine.AppendKey(nil, tp)
	seq := t0 / 60_000
	_, meta := e.ServeRead("edge/1", nil)
	v0 := meta.Changes
	replay := func(id, changes, cost uint64) engine.OriginMeta {
		_, m := e.ServeReplay(engine.ReplayBatch{Node: "edge/1", ID: id, Changes: changes,
			Items: []engine.ReplayItem{{Key: key, Seq: seq, Cost: cost, Limit: 100}}})
		return m
	}
	replay(1, v0, 3)
	if used(e, tp) != 3 {
		t.Fatalf("used %d before the reset, want 3", used(e, tp))
	}
	if n, _ := e.Reset([]engine.Tuple{tp}); n != 1 {
		t.Fatalf("reset %d tuples", n)
	}
	m := replay(2, v0, 4) // accepted before the edge heard of the reset
	if used(e, tp) != 0 || m.Changes <= v0 {
		t.Fatalf("a replay from before the reset counted: used %d (meta changes %d, was %d)", used(e, tp), m.Changes, v0)
	}
	replay(3, m.Changes, 2) // the edge applied the reset
	replay(3, m.Changes, 2) // a re-delivery
	replay(1, v0, 3)        // an old re-delivery
	if used(e, tp) != 2 {
		t.Fatalf("used %d, want the 2 replayed after the reset", used(e, tp))
	}
	// Other tuples' replays are not touched by the reset.
	k2 := engine.AppendKey(nil, tup("k2", 60_000))
	e.ServeReplay(engine.ReplayBatch{Node: "edge/1", ID: 4, Changes: v0, Items: []engine.ReplayItem{{Key: k2, Seq: seq, Cost: 5}}})
	if used(e, tup("k2", 60_000)) != 5 {
		t.Fatalf("another tuple's replay was dropped")
	}
}

// TestResetLeasesHoldNothing: a reset empties the tuple's leases, so the whole limit is
// free again for a hand-off.
func TestResetLeasesHoldNothing(t *testing.T) {
	e, _ := newEngine(t0)
	tp := tup("leased", 60_000)
	key := engine.AppendKey(nil, tp)
	seq := t0 / 60_000
	cc, _ := e.ServeRead("edge/1", []engine.ReadItem{{Key: key, Seq: seq, Limit: 10, Want: 5}})
	if cc[0].LeaseLeft == 0 {
		t.Fatalf("no lease granted")
	}
	decide := func() engine.Decision {
		d, _, _, err := e.ServeDecide("edge/2", engine.DecideRequest{Key: key, Limit: 10, Cost: 10})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := decide(); d.Allowed {
		t.Fatalf("the lease did not reserve anything")
	}
	e.Reset([]engine.Tuple{tp})
	if d := decide(); !d.Allowed {
		t.Fatalf("after the reset the old lease still reserves room: %+v", d)
	}
}

// regionPair is two regions' origins on one clock.
func regionPair(t *testing.T) (a, b *engine.Engine, clock *engine.ManualClock) {
	t.Helper()
	clock = engine.NewManualClock(t0)
	a = engine.New(clock, engine.Config{Region: "a", MaxMemoryBytes: 1 << 30})
	b = engine.New(clock, engine.Config{Region: "b", MaxMemoryBytes: 1 << 30})
	return a, b, clock
}

// TestResetReachesOtherRegion: a reset in region a, carried with the components, zeroes
// the tuple in b too, in any order of delivery, duplicated; b's own usage that a had not
// seen survives; old imports bring nothing back.
func TestResetReachesOtherRegion(t *testing.T) {
	tp := tup("k", 60_000)
	for seed := range uint64(30) {
		a, b, _ := regionPair(t)
		r := rand.New(rand.NewPCG(seed, 1))
		mustLimit(t, a, tp, 100, 5)
		mustLimit(t, b, tp, 100, 3)
		b.MergeComponents(a.Components())
		a.MergeComponents(b.Components())
		oldA, oldB := a.Components(), b.Components()
		if used(a, tp) != 8 || used(b, tp) != 8 {
			t.Fatalf("before: %d %d", used(a, tp), used(b, tp))
		}
		a.Reset([]engine.Tuple{tp})
		if used(a, tp) != 0 {
			t.Fatalf("seed %d: a after its reset: %d", seed, used(a, tp))
		}
		mustLimit(t, b, tp, 100, 2) // b counts on, not having heard of the reset
		// a's publication (reset rows and components), a's anti-entropy, and old rows, in a
		// random order, each maybe twice.
		rows := slices.Concat(a.Publishable(0, 1000), a.Components(), oldA, oldB)
		r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		for _, c := range rows {
			b.MergeComponents([]engine.Component{c})
			if r.IntN(2) == 0 {
				b.MergeComponents([]engine.Component{c})
			}
		}
		if got := used(b, tp); got != 2 {
			t.Fatalf("seed %d: b holds %d after the reset, want the 2 a had not seen", seed, got)
		}
		a.MergeComponents(slices.Concat(oldB, b.Components(), oldA))
		if got := used(a, tp); got != 2 {
			t.Fatalf("seed %d: a holds %d, want the 2 b counted after", seed, got)
		}
		b.MergeComponents(a.Components())
		if used(b, tp) != 2 || used(a, tp) != 2 {
			t.Fatalf("seed %d: not converged: a %d, b %d", seed, used(a, tp), used(b, tp))
		}
	}
}

// TestResetSurvivesRestart: a snapshot holds the reset; the restarted origin counts from
// zero, and peers' copies of what it published before the reset bring nothing back.
func TestResetSurvivesRestart(t *testing.T) {
	a, b, clock := regionPair(t)
	tp := tup("k", 60_000)
	mustLimit(t, a, tp, 100, 7)
	b.MergeComponents(a.Components()) // b holds a's 7
	a.Reset([]engine.Tuple{tp})
	mustLimit(t, a, tp, 100, 1)
	recs := a.Snapshot()
	var resets []engine.ResetRecord
	for r := range a.Resets {
		resets = append(resets, r)
	}
	v := a.ChangeVersion()

	clock.Advance(1000)
	a2 := engine.New(clock, engine.Config{Region: "a", MaxMemoryBytes: 1 << 30})
	if n := a2.RestoreResets(resets); n != 1 {
		t.Fatalf("restored %d reset records", n)
	}
	a2.RestoreChanges(v)
	if _, _, err := a2.Restore(recs); err != nil {
		t.Fatal(err)
	}
	if got := used(a2, tp); got != 1 {
		t.Fatalf("restarted: used %d, want the 1 after the reset", got)
	}
	a2.MergeComponents(b.Components()) // anti-entropy: b's copy of a's row from before
	if got := used(a2, tp); got != 1 {
		t.Fatalf("after b's anti-entropy: used %d, want 1", got)
	}
	if r := a2.ChangesSince("edge/1", v-1); !r.Resync {
		t.Fatalf("an edge behind the saved change version is not told to resync")
	}
	// b learns the reset from the restarted a's anti-entropy.
	b.MergeComponents(a2.Components())
	if got := used(b, tp); got != 1 {
		t.Fatalf("b after a's anti-entropy: %d, want 1", got)
	}
}

// TestResetRecordKeepsLiveCells: a tuple reset every window keeps its record for good, but
// the record holds only what was cancelled of live cells (this window's and the previous
// one's), in memory and in what a snapshot saves: not one value per window it lived.
func TestResetRecordKeepsLiveCells(t *testing.T) {
	e, clock := newEngine(t0)
	tp := tup("svc", 1000)
	for range 3000 {
		mustLimit(t, e, tp, 10, 1)
		if _, err := e.Reset([]engine.Tuple{tp}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(1000)
	}
	if n := e.ResetCancels(tp); n > 2 {
		t.Errorf("the record holds %d cancelled values, want at most 2 (two live cells, one region)", n)
	}
	for r := range e.Resets {
		if len(r.Cancels) > 2 {
			t.Errorf("record %q saved with %d cancelled values, want at most 2", r.Key, len(r.Cancels))
		}
	}
}

// TestResetRowsRefreshOnlyWhatTheyLower: a peer's reset row makes this origin's edges
// re-read the tuple (a ChangeRefresh) only when it lowered a count held here. Rows of
// tuples never held here, and the same rows again (anti-entropy at every reconnect), add
// nothing to the change feed, whose ring would otherwise overflow and resync every edge.
func TestResetRowsRefreshOnlyWhatTheyLower(t *testing.T) {
	a, b, _ := regionPair(t)
	held, notHeld := tup("held", 60_000), tup("elsewhere", 60_000)
	mustLimit(t, a, held, 100, 5)
	mustLimit(t, a, notHeld, 100, 5)
	b.MergeComponents(slices.DeleteFunc(a.Components(), func(c engine.Component) bool {
		return string(c.Key) != string(engine.AppendKey(nil, held))
	}))
	if _, err := a.Reset([]engine.Tuple{held, notHeld}); err != nil {
		t.Fatal(err)
	}
	v := b.ChangeVersion()
	b.MergeComponents(a.Components())
	if got := b.ChangeVersion() - v; got != 1 {
		t.Fatalf("b's feed grew by %d changes, want the one refresh of the tuple it held", got)
	}
	if used(b, held) != 0 {
		t.Fatalf("b holds %d of the reset tuple", used(b, held))
	}
	v = b.ChangeVersion()
	for range 3 {
		b.MergeComponents(a.Components())
	}
	if got := b.ChangeVersion() - v; got != 0 {
		t.Fatalf("the same rows again added %d changes to b's feed", got)
	}
}

// TestResetOfUnusedTupleKeepsNothing: a reset of a tuple with no live usage and no lease
// answers 0 and keeps nothing (no record, no change for the edges), so resets of tuples
// never used cannot fill the reset table or the change feed. A tuple leased but not yet
// counted is in use: edges may hold cost under the lease.
func TestResetOfUnusedTupleKeepsNothing(t *testing.T) {
	e, clock := newEngine(t0)
	v := e.ChangeVersion()
	for i := range 1000 {
		if n, err := e.Reset([]engine.Tuple{tup(fmt.Sprint("never", i), 60_000)}); n != 0 || err != nil {
			t.Fatalf("Reset of an unused tuple = %d, %v", n, err)
		}
	}
	old := tup("old", 60_000)
	mustLimit(t, e, old, 10, 1)
	clock.Advance(2 * 60_000) // its cell died
	if n, _ := e.Reset([]engine.Tuple{old}); n != 0 {
		t.Fatalf("Reset of a tuple whose usage died = %d", n)
	}
	if got := e.ChangeVersion(); got != v {
		t.Fatalf("resets of unused tuples added %d changes", got-v)
	}
	for r := range e.Resets {
		t.Fatalf("a reset of an unused tuple kept a record: %q", r.Key)
	}

	leased := tup("leased", 60_000)
	key := engine.AppendKey(nil, leased)
	if cc, _ := e.ServeRead("edge/1", []engine.ReadItem{{Key: key, Seq: clock.NowMs() / 60_000, Limit: 10, Want: 5}}); cc[0].LeaseLeft == 0 {
		t.Fatal("no lease granted")
	}
	if _, err := e.Reset([]engine.Tuple{leased}); err != nil {
		t.Fatal(err)
	}
	if e.ChangeVersion() == v {
		t.Fatal("a reset of a leased tuple told the edges nothing")
	}
}

// TestResetTableFull: a full reset table refuses a reset with ErrTooManyResets and a
// peer's reset row of a tuple not in it, counting both (Stats.ResetsRefused, a metric),
// not silently; and a record counts once in the memory estimate, however often it is
// merged or restored.
func TestResetTableFull(t *testing.T) {
	a, b, _ := regionPair(t)
	b.SetResetLimit(2)
	ts := []engine.Tuple{tup("r1", 60_000), tup("r2", 60_000), tup("r3", 60_000)}
	for _, tp := range ts {
		mustLimit(t, a, tp, 100, 1)
		mustLimit(t, b, tp, 100, 1)
	}
	mem := b.Stats().MemoryBytes
	if n, err := b.Reset(ts[:2]); n != 2 || err != nil {
		t.Fatalf("Reset = %d, %v", n, err)
	}
	one := (b.Stats().MemoryBytes - mem) / 2
	if _, err := b.Reset(ts[2:]); !errors.Is(err, engine.ErrTooManyResets) {
		t.Fatalf("a reset into a full table: %v, want ErrTooManyResets", err)
	}
	if _, err := a.Reset(ts[2:]); err != nil {
		t.Fatal(err)
	}
	b.MergeComponents(a.Publishable(0, 100)) // a's reset row of r3: no room in b
	if got := b.Stats().ResetsRefused; got != 2 {
		t.Fatalf("ResetsRefused = %d, want the reset and the peer's row", got)
	}
	var recs []engine.ResetRecord
	for r := range b.Resets {
		recs = append(recs, r)
	}
	mem = b.Stats().MemoryBytes
	b.RestoreResets(recs)
	if got := b.Stats().MemoryBytes; got != mem {
		t.Fatalf("restoring records already held grew the memory estimate by %d (a record is %d)", got-mem, one)
	}
}
