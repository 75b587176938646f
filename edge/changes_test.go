package edge_test

import (
	"context"
	"testing"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
)

// The change feed, the edge's side: an answer that shows the origin's change version
// ahead makes the edge fetch the changes and apply them.

// TestEdgeFollowsChanges: a reset in the origin's feed drops the edge's view, lease and
// pending cost of the tuple, and the edge's next decision on it reads the origin.
func TestEdgeFollowsChanges(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 1, edge.Config{})
	e, f := r.edges[0], r.fakes[0]
	tp := tup("feed", 60_000)
	for range 3 {
		edgeLimit(t, e, tp, 100, 1) // one read, then within the lease
	}
	reads := f.reads.Load()
	edgeLimit(t, e, tp, 100, 1)
	if f.reads.Load() != reads {
		t.Fatalf("a leased, fresh tuple read the origin")
	}
	v := r.origin.AddChange(engine.ChangeReset, engine.AppendKey(nil, tp), nil)
	e.Heartbeat() // its answer shows the edge behind
	e.CatchUpChanges()
	if got := e.ChangesVersion()[0]; got != v {
		t.Fatalf("edge at change %d, want %d", got, v)
	}
	st := e.Stats()
	if st.ChangesApplied != 1 || st.ResetDropped != 4 {
		t.Fatalf("applied %d changes, dropped %d units; want 1 and the 4 pending", st.ChangesApplied, st.ResetDropped)
	}
	reads = f.reads.Load() // the heartbeat was one
	edgeLimit(t, e, tp, 100, 1)
	if f.reads.Load() != reads+1 {
		t.Fatalf("after the reset the tuple was decided without reading the origin")
	}
	if flushAll(t, e); originCount(r.origin, tp) != 1 {
		t.Fatalf("origin counts %d, want the one request made after the reset", originCount(r.origin, tp))
	}
}

// TestEdgeResyncsWhenTooFarBehind: an edge that missed more changes than the origin keeps
// drops every view of that origin's tuples (keeping their pending cost), and goes on from
// the origin's version.
func TestEdgeResyncsWhenTooFarBehind(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 1, edge.Config{})
	e, f := r.edges[0], r.fakes[0]
	tp := tup("resync", 60_000)
	edgeLimit(t, e, tp, 100, 1)
	edgeLimit(t, e, tp, 100, 1)
	other := engine.AppendKey(nil, tup("other", 60_000))
	var v uint64
	for range 5000 {
		v = r.origin.AddChange(engine.ChangeReset, other, nil)
	}
	e.Heartbeat()
	e.CatchUpChanges()
	if got, st := e.ChangesVersion()[0], e.Stats(); got != v || st.Resyncs != 1 || st.ResetDropped != 0 {
		t.Fatalf("edge at %d with %d resyncs, %d units dropped; want %d, 1, 0", got, st.Resyncs, st.ResetDropped, v)
	}
	reads := f.reads.Load()
	edgeLimit(t, e, tp, 100, 1)
	if f.reads.Load() != reads+1 {
		t.Fatalf("after a resync the tuple was decided without reading the origin")
	}
	if flushAll(t, e); originCount(r.origin, tp) != 3 {
		t.Fatalf("origin counts %d, want all 3 requests (a resync keeps pending cost)", originCount(r.origin, tp))
	}
}

// TestEdgeReset: RL.RESET through one edge goes to the origin, which zeroes the tuple;
// that edge sees it at once, another edge once it follows the feed; the other edge's cost
// accepted before it heard of the reset never reaches the count, whether replayed before or
// after it applied the reset.
func TestEdgeReset(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 2, edge.Config{})
	a, b := r.edges[0], r.edges[1]
	tp := tup("login:alice", 60_000)
	admitted := 0
	for range 30 {
		for _, e := range []*edge.Edge{a, b} {
			if edgeLimit(t, e, tp, 20, 1).Allowed {
				admitted++
			}
		}
	}
	flushAll(t, a)
	flushAll(t, b)
	if admitted != 20 || originCount(r.origin, tp) != 20 {
		t.Fatalf("admitted %d, origin %d; want the limit", admitted, originCount(r.origin, tp))
	}
	// b holds a lease and accepts 2 more locally: pending, not replayed.
	b.Heartbeat()
	n, err := a.Reset(context.Background(), []engine.Tuple{tp, tup("login:bob", 60_000)})
	if err != nil || n != 1 {
		t.Fatalf("Reset through a = %d, %v; want 1", n, err)
	}
	if originCount(r.origin, tp) != 0 {
		t.Fatalf("origin holds %d after the reset", originCount(r.origin, tp))
	}
	for i := range 20 {
		if !edgeLimit(t, a, tp, 20, 1).Allowed {
			t.Fatalf("a refused request %d after its reset", i)
		}
	}
	if edgeLimit(t, a, tp, 20, 1).Allowed {
		t.Fatalf("a allowed a 21st request after the reset")
	}
	flushAll(t, a)
	if originCount(r.origin, tp) != 20 {
		t.Fatalf("origin %d after a's 20, want 20", originCount(r.origin, tp))
	}
	// b had not heard: its batches of cost from before (none pending here, its view full)
	// change nothing; once it follows the feed it reads the origin again.
	b.Heartbeat()
	b.CatchUpChanges()
	if edgeLimit(t, b, tp, 20, 1).Allowed {
		t.Fatalf("b allowed past the limit after following the feed")
	}
	if v := b.ChangesVersion()[0]; v != r.origin.ChangeVersion() {
		t.Fatalf("b at change %d, origin at %d", v, r.origin.ChangeVersion())
	}
}

// TestEdgeDelayedReplayAfterReset: cost an edge accepted before a reset, replayed after it
// (the batch built before the edge heard of the reset), is not counted.
func TestEdgeDelayedReplayAfterReset(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 1, edge.Config{})
	e := r.edges[0]
	tp := tup("delayed", 60_000)
	for range 5 {
		edgeLimit(t, e, tp, 100, 1)
	}
	// The origin resets the tuple while the edge's cost is pending, then the edge replays.
	if _, err := r.origin.Reset([]engine.Tuple{tp}); err != nil {
		t.Fatal(err)
	}
	flushAll(t, e)
	if got := originCount(r.origin, tp); got != 0 {
		t.Fatalf("origin counts %d after a replay from before the reset, want 0", got)
	}
	e.Heartbeat()
	e.CatchUpChanges()
	edgeLimit(t, e, tp, 100, 1)
	flushAll(t, e)
	if got := originCount(r.origin, tp); got != 1 {
		t.Fatalf("origin counts %d, want the one request after the reset", got)
	}
}

// TestEdgeRefreshKeepsPendingCost: a refresh (another region's reset lowered the tuple's
// counts) makes the edge re-read the tuple, and keeps the cost it accepted.
func TestEdgeRefreshKeepsPendingCost(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 1, edge.Config{})
	e, f := r.edges[0], r.fakes[0]
	tp := tup("refresh", 60_000)
	for range 3 {
		edgeLimit(t, e, tp, 100, 1)
	}
	r.origin.AddChange(engine.ChangeRefresh, engine.AppendKey(nil, tp), nil)
	e.Heartbeat()
	e.CatchUpChanges()
	if st := e.Stats(); st.ChangesApplied != 1 || st.ResetDropped != 0 {
		t.Fatalf("applied %d changes, dropped %d units; want 1 and none", st.ChangesApplied, st.ResetDropped)
	}
	reads := f.reads.Load()
	edgeLimit(t, e, tp, 100, 0) // a peek of a tuple that is no longer fresh reads the origin
	if f.reads.Load() != reads+1 {
		t.Fatalf("after a refresh the tuple was not read again")
	}
	if flushAll(t, e); originCount(r.origin, tp) != 3 {
		t.Fatalf("origin counts %d, want the 3 accepted before the refresh", originCount(r.origin, tp))
	}
}

// TestEdgeOldCostVouchesOnlyForItself: after a resync, the pending cost accepted before it
// claims only the version applied then (it may predate a reset the edge missed), but a
// batch carrying it beside another tuple's cost must not make that cost claim the old
// version too: the cost of b accepted after the edge applied b's reset counts at the origin.
func TestEdgeOldCostVouchesOnlyForItself(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 1, edge.Config{})
	e := r.edges[0]
	a, b := tup("a", 60_000), tup("b", 60_000)
	edgeLimit(t, e, a, 100, 1) // pending, accepted before the resync
	other := engine.AppendKey(nil, tup("other", 60_000))
	for range 5000 {
		r.origin.AddChange(engine.ChangeReset, other, nil)
	}
	e.Heartbeat()
	e.CatchUpChanges() // resync: a's pending cost now vouches only for the old version
	if _, err := r.origin.Reset([]engine.Tuple{b}); err != nil {
		t.Fatal(err)
	}
	e.Heartbeat()
	e.CatchUpChanges() // the edge applied b's reset
	for range 3 {
		edgeLimit(t, e, b, 100, 1) // accepted after the edge applied the reset
	}
	flushAll(t, e)
	if got := originCount(r.origin, b); got != 3 {
		t.Errorf("origin counts %d of b, want the 3 requests accepted after the edge applied b's reset", got)
	}
	if got := originCount(r.origin, a); got != 1 {
		t.Errorf("origin counts %d of a, want 1", got)
	}
}

// TestEdgeResetClearsOldVouch: a reset applied to an entry drops its cost from before the
// resync, and with it the old version that cost vouched for: the entry's cost accepted
// after the reset counts at the origin.
func TestEdgeResetClearsOldVouch(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 1, edge.Config{})
	e := r.edges[0]
	b := tup("b", 60_000)
	edgeLimit(t, e, b, 100, 1) // pending, accepted before the resync
	other := engine.AppendKey(nil, tup("other", 60_000))
	for range 5000 {
		r.origin.AddChange(engine.ChangeReset, other, nil)
	}
	e.Heartbeat()
	e.CatchUpChanges() // resync: b's pending cost vouches only for the old version
	if _, err := r.origin.Reset([]engine.Tuple{b}); err != nil {
		t.Fatal(err)
	}
	e.Heartbeat()
	e.CatchUpChanges() // the edge applied b's reset: the old cost is dropped
	for range 3 {
		edgeLimit(t, e, b, 100, 1)
	}
	flushAll(t, e)
	if got := originCount(r.origin, b); got != 3 {
		t.Errorf("origin counts %d of b, want the 3 requests accepted after the edge applied b's reset", got)
	}
}

// TestEdgeFreshDoesNotResync: a new edge whose changes loop polls before any answer came
// has applied nothing: it has no version to ask from (asking from 0, an origin that
// restored a version would tell it to resync, a warning and a Resyncs count for nothing).
// It waits for the first answer's version, which it adopts.
func TestEdgeFreshDoesNotResync(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 1, edge.Config{})
	r.origin.RestoreChanges(12345)
	e := r.edges[0]
	e.CatchUpChanges() // what the poll does 50 ms after start when no answer came yet
	if st := e.Stats(); st.Resyncs != 0 {
		t.Errorf("a fresh edge resynced %d times", st.Resyncs)
	}
	e.Heartbeat()
	if got, want := e.ChangesVersion()[0], r.origin.ChangeVersion(); got != want {
		t.Errorf("after its first answer the edge is at version %d, want the origin's %d", got, want)
	}
}
