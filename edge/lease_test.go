package edge_test

import (
	"testing"
	"time"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
)

// The edge's side of leases (engine/lease.go has the origin's): an edge spends only the
// lease its origin granted, and renews it on time.

// TestEdgeSpendsOnlyItsLease: an edge decides locally within its lease, hands over what
// the lease does not cover, and never spends a lease past its TTL or of another origin
// run.
func TestEdgeSpendsOnlyItsLease(t *testing.T) {
	r := newEdgeRig(t, t0/60_000*60_000, 2, edge.Config{})
	a, b := r.edges[0], r.edges[1]
	tp := tup("lease", 60_000)
	// Two edges are active: a's first read is granted (100)/4 = 25 at most, 16 asked.
	r.origin.Heard("edge-2/boot")
	for i := range 16 {
		if d := edgeLimit(t, a, tp, 100, 1); !d.Allowed {
			t.Fatalf("request %d within the lease refused: %+v", i, d)
		}
	}
	if n := handed(a); n != 0 {
		t.Fatalf("%d hand-offs within the lease, want 0", n)
	}
	if d := edgeLimit(t, a, tp, 100, 1); !d.Allowed || handed(a) != 1 {
		t.Fatalf("the 17th request: %+v, %d hand-offs; want allowed by the origin", d, handed(a))
	}
	flushAll(t, a)
	// b floods: together they never pass the limit.
	admitted := 17
	for range 200 {
		if d := edgeLimit(t, b, tp, 100, 1); d.Allowed {
			admitted++
		}
		if d := edgeLimit(t, a, tp, 100, 1); d.Allowed {
			admitted++
		}
	}
	flushAll(t, a)
	flushAll(t, b)
	if admitted != 100 || originCount(r.origin, tp) != 100 {
		t.Fatalf("admitted %d, origin counts %d; want exactly the limit, 100", admitted, originCount(r.origin, tp))
	}

}

// TestEdgeLeaseNotPastTTL: with its origin down, an edge spends its lease, and not
// past the lease's TTL (the degraded limit here admits nothing).
func TestEdgeLeaseNotPastTTL(t *testing.T) {
	r := newEdgeRig(t, t0/3_600_000*3_600_000, 1, edge.Config{DegradedShare: 0.0001})
	e := r.edges[0]
	tp := tup("lease-ttl", 3_600_000) // the TTL ends inside the cell
	edgeLimit(t, e, tp, 1000, 1)      // a lease of 16
	flushAll(t, e)
	r.fakes[0].down.Store(true)
	for i := range 5 {
		if d := edgeLimit(t, e, tp, 1000, 1); !d.Allowed {
			t.Fatalf("request %d within the lease, origin down: %+v", i, d)
		}
	}
	r.clock.Advance(engine.DefaultLeaseTTL.Milliseconds())
	if d := edgeLimit(t, e, tp, 1000, 1); d.Allowed {
		t.Fatalf("after the lease's TTL, origin down: %+v; want refused by the degraded limit", d)
	}
}

// TestEdgeRenewsWhenLow: a replay asks the origin to renew the lease only when the lease
// no longer covers what the demand asks for (or half of its life is over): a quiet warm
// tuple's replays carry no lease request, a busy tuple's carry one every batch.
func TestEdgeRenewsWhenLow(t *testing.T) {
	r := newEdgeRig(t, t0/3_600_000*3_600_000, 1, edge.Config{Freshness: time.Hour}) // no reads renew
	e := r.edges[0]
	quiet, busy := tup("quiet", 3_600_000), tup("busy", 3_600_000)
	lastWant := func(tp engine.Tuple) uint64 {
		t.Helper()
		bs := r.fakes[0].recorded()
		for _, it := range bs[len(bs)-1].Items {
			if string(it.Key) == string(engine.AppendKey(nil, tp)) {
				return it.Want
			}
		}
		t.Fatalf("no item of %q in the last batch", tp.Key)
		return 0
	}
	edgeLimit(t, e, quiet, 1_000_000, 1) // read: a lease of 16
	flushAll(t, e)
	for range 3 {
		edgeLimit(t, e, quiet, 1_000_000, 1)
		flushAll(t, e)
		if w := lastWant(quiet); w != 0 {
			t.Fatalf("a quiet tuple's replay asked for a lease of %d, with most of its lease left", w)
		}
	}
	edgeLimit(t, e, busy, 1_000_000, 1)
	flushAll(t, e)
	for round := range 3 {
		for range 12 {
			edgeLimit(t, e, busy, 1_000_000, 1)
		}
		flushAll(t, e)
		if w := lastWant(busy); w != 48 {
			t.Fatalf("round %d: a busy tuple's replay asked for %d, want 48 (4 x its demand of 12)", round, w)
		}
	}
	r.clock.Advance(engine.DefaultLeaseTTL.Milliseconds() / 2)
	edgeLimit(t, e, quiet, 1_000_000, 1)
	flushAll(t, e)
	if w := lastWant(quiet); w != 16 {
		t.Fatalf("half through its life, a quiet tuple's lease was not renewed (want %d)", w)
	}
}

// TestEdgeRenewsWithinFreshness: a tuple used at least once per freshness keeps its lease
// as it keeps its freshness. With a freshness as long as the lease (no reads renew it), a
// batch renews the lease once an eighth of its life is over, not only at half its life:
// a tuple used every 20 s never falls back to a hand-off when its lease ends.
func TestEdgeRenewsWithinFreshness(t *testing.T) {
	ttl := engine.DefaultLeaseTTL.Milliseconds()
	r := newEdgeRig(t, t0/3_600_000*3_600_000, 1, edge.Config{Freshness: engine.DefaultLeaseTTL})
	e, tp := r.edges[0], tup("k", 3_600_000)
	edgeLimit(t, e, tp, 1_000_000, 1) // read: a lease
	flushAll(t, e)
	for i := range 10 { // 75 s: past the first grant's end
		r.clock.Advance(ttl/8 + 1)
		edgeLimit(t, e, tp, 1_000_000, 1)
		flushAll(t, e)
		bs := r.fakes[0].recorded()
		if last := bs[len(bs)-1].Items; len(last) != 1 || last[0].Want == 0 {
			t.Fatalf("use %d, %d ms after the last grant: the batch did not renew the lease: %+v", i, ttl/8+1, last)
		}
	}
}
