package edge_test

import (
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
