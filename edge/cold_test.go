package edge

import (
	"context"
	"fmt"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// newColdEdge is an edge over an origin that grants the cold allowance share, which it has
// heard once (its heartbeat), so that it holds the grant.
func newColdEdge(t *testing.T, share float64) (*Edge, *engine.Engine, *engine.ManualClock) {
	t.Helper()
	e, origin, clock := newInternalEdgeOrigin(t, engine.Config{MaxMemoryBytes: 1 << 30, ColdShare: share})
	e.Heartbeat()
	return e, origin, clock
}

// TestEdgeColdAllowance: a tuple the edge has never seen is admitted without a round trip
// within the allowance its origin granted, once per cell, and only while nothing of it
// awaits the origin's acknowledgement; its replay brings a lease, and the origin counts it.
func TestEdgeColdAllowance(t *testing.T) {
	e, origin, clock := newColdEdge(t, 0.01)
	reads := func() uint64 { return e.reads.Load() }
	limit := func(name string, lim, cost uint64) engine.Decision {
		t.Helper()
		tp, _, _, _ := internalTuple(e, clock, name)
		d, err := e.Limit(context.Background(), tp, lim, cost)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := reads()
	if d := limit("a", 1000, 1); !d.Allowed || d.Remaining != 999 || reads() != base {
		t.Fatalf("first sight of a, limit 1000: %+v, %d reads; want allowed locally", d, reads()-base)
	}
	if got := e.Stats().ColdAdmitted; got != 1 {
		t.Fatalf("ColdAdmitted %d, want 1", got)
	}
	// Its cost awaits the origin: the next request reads (and gets a lease).
	if d := limit("a", 1000, 1); !d.Allowed || reads() != base+1 {
		t.Fatalf("second request of a before its replay: %+v, %d reads; want 1 read", d, reads()-base)
	}
	// Beyond the allowance (1000 x 0.01 = 10), or a limit too small for any: a round trip.
	for _, c := range []struct {
		name      string
		lim, cost uint64
	}{{"b", 1000, 11}, {"c", 99, 1}, {"d", 10, 1}} {
		r := reads()
		if d := limit(c.name, c.lim, c.cost); !d.Allowed || reads() != r+1 {
			t.Fatalf("%s limit %d cost %d: %+v, %d reads; want 1", c.name, c.lim, c.cost, d, reads()-r)
		}
	}
	if got := e.Stats().ColdAdmitted; got != 1 {
		t.Fatalf("ColdAdmitted %d, want still 1", got)
	}
	r := reads()
	if d := limit("e", 1000, 10); !d.Allowed || reads() != r {
		t.Fatalf("e cost 10 of allowance 10: %+v, %d reads; want local", d, reads()-r)
	}
	for e.FlushOnce() {
	}
	tpE, keyE, _, l := internalTuple(e, clock, "e")
	if st := origin.Status(tpE); st.CurrentRegional != 10 {
		t.Fatalf("origin counts %d of e, want 10", st.CurrentRegional)
	}
	// The replay brought a lease: the next request is local.
	if d := limit("e", 1000, 1); !d.Allowed || reads() != r {
		t.Fatalf("e after its replay: %+v, %d reads; want local under its lease", d, reads()-r)
	}
	for e.FlushOnce() {
	}

	// Once per cell: an entry the cache lost does not use the allowance again in its cell.
	_, keyF, _, _ := internalTuple(e, clock, "f")
	if d := limit("f", 100, 1); !d.Allowed || reads() != r {
		t.Fatalf("f: %+v; want local", d)
	}
	for e.FlushOnce() {
	}
	for _, k := range [][]byte{keyE, keyF} {
		e.cache.Del(e.lookup(l, k).hash)
	}
	e.cache.Wait()
	if le := e.lookup(l, keyF); le != nil {
		t.Fatal("f is still cached")
	}
	if d := limit("f", 100, 1); !d.Allowed || reads() != r+1 {
		t.Fatalf("f again in its cell after eviction: %+v, %d reads; want 1", d, reads()-r)
	}
	for e.FlushOnce() {
	}
	// Next cell, the lease ended: f may use the allowance again.
	clock.Advance(61_000 + engine.DefaultLeaseTTL.Milliseconds())
	e.Heartbeat()
	r = reads()
	if d := limit("f", 100, 1); !d.Allowed || reads() != r {
		t.Fatalf("f in a later cell: %+v, %d reads; want local", d, reads()-r)
	}
}

// TestEdgeColdAllowanceEnds: the allowance is the origin's grant: none before the edge has
// heard its origin, none past the grant's end, none from an origin that grants none.
func TestEdgeColdAllowanceEnds(t *testing.T) {
	e, _, clock := newColdEdge(t, 0.01)
	clock.Advance(engine.DefaultLeaseTTL.Milliseconds()) // the grant of the heartbeat ended
	tp, _, _, _ := internalTuple(e, clock, "a")
	r := e.reads.Load()
	if _, err := e.Limit(context.Background(), tp, 1000, 1); err != nil || e.reads.Load() != r+1 {
		t.Fatalf("after the grant ended: %d reads, %v; want 1", e.reads.Load()-r, err)
	}
	off, _, clock2 := newColdEdge(t, 0)
	tp, _, _, _ = internalTuple(off, clock2, "a")
	if _, err := off.Limit(context.Background(), tp, 1000, 1); err != nil || off.reads.Load() != 1 {
		t.Fatalf("origin without a cold share: %d reads, %v; want 1", off.reads.Load(), err)
	}
}

// TestEdgeLeasedStaleIsLocal: a tuple holding a lease that covers the request is decided
// from local memory however stale (SPEC section 5); its replay brings the origin's counts.
func TestEdgeLeasedStaleIsLocal(t *testing.T) {
	e, origin, clock := newInternalEdge(t)
	tp, key, seq, _ := internalTuple(e, clock, "k")
	if _, err := e.Limit(context.Background(), tp, 1000, 1); err != nil {
		t.Fatal(err)
	}
	for e.FlushOnce() {
	}
	r := e.reads.Load()
	origin.ServeReplay(engine.ReplayBatch{Node: "other/1", ID: 1, Items: []engine.ReplayItem{{Key: key, Seq: seq, Cost: 40}}})
	clock.Advance(5_000) // stale (--freshness 1s), the lease (a minute) alive
	d, err := e.Limit(context.Background(), tp, 1000, 1)
	if err != nil || !d.Allowed || e.reads.Load() != r {
		t.Fatalf("stale leased request: %+v, %v, %d reads; want allowed locally", d, err, e.reads.Load()-r)
	}
	for e.FlushOnce() {
	}
	if d, _ := e.Limit(context.Background(), tp, 1000, 1); d.Remaining != 1000-43 || e.reads.Load() != r {
		t.Fatalf("after the replay: remaining %d, %d reads; want %d, none", d.Remaining, e.reads.Load()-r, 1000-43)
	}
	// A peek spends no lease: a stale tuple is read first.
	clock.Advance(5_000)
	if _, err := e.Limit(context.Background(), tp, 1000, 0); err != nil || e.reads.Load() != r+1 {
		t.Fatalf("stale peek: %d reads, %v; want 1", e.reads.Load()-r, err)
	}
}

// TestEdgeColdAllowanceBacklog: while the replays lag (coldBacklogBatches full batches
// waiting), new tuples read the origin instead of using the allowance, which paces them.
func TestEdgeColdAllowanceBacklog(t *testing.T) {
	e, _, clock := newColdEdge(t, 0.01)
	e.cfg.MaxBatchItems = 2
	backlog := coldBacklogBatches * 2
	for i := range backlog {
		tp, _, _, _ := internalTuple(e, clock, fmt.Sprintf("k%d", i))
		if _, err := e.Limit(context.Background(), tp, 1000, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.Stats().ColdAdmitted; got != uint64(backlog) {
		t.Fatalf("ColdAdmitted %d, want %d", got, backlog)
	}
	r := e.reads.Load()
	tp, _, _, _ := internalTuple(e, clock, "late")
	if _, err := e.Limit(context.Background(), tp, 1000, 1); err != nil || e.reads.Load() != r+1 {
		t.Fatalf("a new tuple with %d cells waiting: %d reads, %v; want 1", backlog, e.reads.Load()-r, err)
	}
	for e.FlushOnce() {
	}
	tp, _, _, _ = internalTuple(e, clock, "after")
	if _, err := e.Limit(context.Background(), tp, 1000, 1); err != nil || e.reads.Load() != r+1 {
		t.Fatalf("a new tuple once the replays caught up: %d reads, %v; want none", e.reads.Load()-r-1, err)
	}
}
