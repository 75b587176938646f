package edge_test

import (
	"fmt"
	"testing"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
)

// TestEdgeOverrides: an edge reads its origin's overrides in full when it starts, then
// follows them in the change feed (a SET, a prefix, a DEL); a resync reads them in full
// again; a tuple without an override keeps the request's limit.
func TestEdgeOverrides(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 1, edge.Config{})
	e := r.edges[0]
	ov := r.origin.Overrides()
	a, b, other := tup("user:a", 60_000), tup("user:b", 60_000), tup("other", 60_000)
	if err := ov.Set(a, false, 7); err != nil { // before the edge's first read
		t.Fatal(err)
	}
	check := func(step string, want map[string]uint64) {
		t.Helper()
		for _, tp := range []engine.Tuple{a, b, other} {
			w, ok := want[string(tp.Key)]
			if !ok {
				w = 1000
			}
			if got := e.OverrideLimit(tp, 1000); got != w {
				t.Errorf("%s: %s's limit %d, want %d", step, tp.Key, got, w)
			}
		}
	}
	check("before any read", nil)
	e.Heartbeat()
	e.CatchUpChanges()
	check("read in full", map[string]uint64{"user:a": 7})

	steps := []struct {
		name string
		do   func()
		want map[string]uint64
	}{
		{"a prefix", func() { mustOK(t, ov.Set(tup("user:", 60_000), true, 20)) }, map[string]uint64{"user:a": 7, "user:b": 20}},
		{"a changed", func() { mustOK(t, ov.Set(a, false, 8)) }, map[string]uint64{"user:a": 8, "user:b": 20}},
		{"a deleted", func() { ov.Delete(a, false) }, map[string]uint64{"user:a": 20, "user:b": 20}},
		{"the prefix deleted", func() { ov.Delete(tup("user:", 60_000), true) }, nil},
	}
	for _, st := range steps {
		st.do()
		e.Heartbeat() // its answer shows the edge behind
		e.CatchUpChanges()
		check(st.name, st.want)
	}

	// A resync (the edge missed more changes than the origin keeps) reads them in full.
	mustOK(t, ov.Set(b, false, 3))
	for i := range 5000 {
		r.origin.AddChange(engine.ChangeReset, engine.AppendKey(nil, tup(fmt.Sprint("x", i), 60_000)), nil)
	}
	e.Heartbeat()
	e.CatchUpChanges()
	if st := e.Stats(); st.Resyncs != 1 {
		t.Fatalf("resyncs %d, want 1", st.Resyncs)
	}
	e.CatchUpChanges()
	check("after a resync", map[string]uint64{"user:b": 3})
	if got := e.OverrideList("default", "", nil, 0); len(got) != 1 || string(got[0].Tuple.Key) != "user:b" {
		t.Errorf("OverrideList = %+v, want user:b's", got)
	}
}

func mustOK(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestEdgeFeedProbeFreesLink: when the changes loop's call is the probe of an origin that
// was down (its backoff passed), its success makes the origin reachable again; a probe
// left taken would keep every later call, the feed's included, from being made.
func TestEdgeFeedProbeFreesLink(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 1, edge.Config{})
	e, f := r.edges[0], r.fakes[0]
	e.Heartbeat()
	e.CatchUpChanges() // the overrides read in full
	f.down.Store(true)
	e.Heartbeat() // fails: the origin is unreachable, in backoff
	f.down.Store(false)
	r.clock.Advance(5_000) // past the backoff
	e.CatchUpChanges()     // the probe: it succeeds
	reads := f.reads.Load()
	e.Heartbeat()
	if f.reads.Load() != reads+1 {
		t.Fatalf("after the feed's probe succeeded, the heartbeat was not sent: the link stayed unusable")
	}
	mustOK(t, r.origin.Overrides().Set(tup("k", 60_000), false, 3))
	e.Heartbeat()
	e.CatchUpChanges()
	if got := e.OverrideLimit(tup("k", 60_000), 1000); got != 3 {
		t.Errorf("override after the origin came back: %d, want 3", got)
	}
}
