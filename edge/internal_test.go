package edge

import (
	"context"
	"errors"
	"hash/maphash"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// The tests that must reach the edge's internals to set up an interleaving
// deterministically.

// TestEdgeEvictedEntryDoesNotStealReplayPin reproduces, step by step, an interleaving of
// two concurrent Limit calls on one key while the local cache evicts its entry:
//
//  1. request A looks the key up and gets entry le1 from the cache (le1 holds nothing
//     unacknowledged, so it is not pinned);
//  2. the cache evicts le1 (ristretto may do so at any time);
//  3. request B misses the cache and the replay set, reads the origin, creates le2,
//     accepts 1 and pins le2 under the key;
//  4. request A goes on with le1: it accepts 1 and pins le1 under the same key.
//
// Both accepted requests must reach the origin. The replay set is a map keyed by the
// tuple key, and account() overwrites l.pins[key] without looking at what is there, so
// le2 (pinned flag set, absent from the map) is never flushed again: its cost, and every
// later request served from le2 (the cache now holds le2), is lost.
func TestEdgeEvictedEntryDoesNotStealReplayPin(t *testing.T) {
	e, origin, clock := newInternalEdge(t)
	tp, key, seq, l := internalTuple(e, clock, "k")

	// Warm the tuple and deliver its first request, so that its entry is cached, fresh,
	// and unpinned.
	if d, err := e.Limit(context.Background(), tp, 1000, 1); err != nil || !d.Allowed {
		t.Fatalf("warm-up: %+v, %v", d, err)
	}
	for e.FlushOnce() {
	}

	// 1. A's lookup.
	le1 := e.lookup(l, key)
	if le1 == nil {
		t.Fatal("the warm entry is neither cached nor pinned")
	}
	// 2. Eviction.
	e.cache.Del(maphash.Bytes(e.seed, key))
	e.cache.Wait()
	// 3. B, a whole request.
	if d, err := e.Limit(context.Background(), tp, 1000, 1); err != nil || !d.Allowed {
		t.Fatalf("B: %+v, %v", d, err)
	}
	// 4. The rest of A's Limit: decide on le1 and account (entry lock held, as Limit does).
	le1.mu.Lock()
	if err := e.account(l, le1, seq, 1, 100); err != nil {
		t.Fatalf("A: account: %v", err)
	}
	le1.mu.Unlock()

	// Later traffic goes to whatever the cache serves now.
	const later = 5
	for i := 0; i < later; i++ {
		if d, err := e.Limit(context.Background(), tp, 1000, 1); err != nil || !d.Allowed {
			t.Fatalf("later request %d: %+v, %v", i, d, err)
		}
	}
	for i := 0; i < 10 && e.FlushOnce(); i++ {
	}

	want := uint64(1 + 2 + later)
	if got := origin.Status(tp).CurrentRegional; got != want {
		t.Fatalf("origin counts %d after every flush, want %d accepted (stats %+v)", got, want, e.Stats())
	}
}

// newInternalEdge returns one edge over a LocalOrigin, with the origin's engine and clock.
func newInternalEdge(t testing.TB) (*Edge, *engine.Engine, *engine.ManualClock) {
	t.Helper()
	return newInternalEdgeOrigin(t, engine.Config{MaxMemoryBytes: 1 << 30})
}

// newInternalEdgeOrigin is newInternalEdge with an origin configured by ocfg.
func newInternalEdgeOrigin(t testing.TB, ocfg engine.Config) (*Edge, *engine.Engine, *engine.ManualClock) {
	t.Helper()
	const t0 int64 = 1_704_067_200_000
	clock := engine.NewManualClock(t0 + 100)
	origin := engine.New(clock, ocfg)
	e, err := New(clock, Config{
		Origins:        []engine.Origin{engine.LocalOrigin{Engine: origin, Node: "edge-1/boot"}},
		OriginIDs:      []string{"o1"},
		NodeRun:        "edge-1/boot",
		DegradedShare:  1,
		MaxMemoryBytes: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, origin, clock
}

// internalTuple returns a minute-window tuple of key name, its tuple key, its current
// sequence and its origin link.
func internalTuple(e *Edge, clock engine.Clock, name string) (engine.Tuple, []byte, int64, *originLink) {
	tp := engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte(name), WindowMs: 60_000}
	key := engine.AppendKey(nil, tp)
	return tp, key, clock.NowMs() / tp.WindowMs, e.link(key)
}

// TestEdgeFlushKeepsAnothersProbe: while an origin is unreachable, one caller at a time
// probes it once the backoff has passed. A flush with nothing to send released the probe
// slot whether or not it had taken it, so a probe still out (a request's read) was joined
// by a second one. Deterministic with the final flush (shutdown), which skips the backoff
// check; a periodic flush did the same when the origin failed, and its backoff passed and
// another caller took the slot, while it was building an empty batch.
func TestEdgeFlushKeepsAnothersProbe(t *testing.T) {
	e, _, clock := newInternalEdge(t)
	l := e.links[0]
	l.failed(clock.NowMs(), errors.New("test: down"))
	clock.Advance(2 * l.backoffMs.Load())
	if !l.usable(clock.NowMs()) {
		t.Fatal("the backoff has passed: the first caller should get the probe")
	}
	if e.flush(context.Background(), l, true) {
		t.Fatal("nothing is pending, yet the flush says more may remain")
	}
	if l.usable(clock.NowMs()) {
		t.Fatal("a second caller got through while the first probe is still out")
	}
	// The flusher's own probe, when it has nothing to send, is released.
	l.probing.Store(false)
	if e.flush(context.Background(), l, false) {
		t.Fatal("nothing is pending, yet the flush says more may remain")
	}
	if !l.usable(clock.NowMs()) {
		t.Fatal("the flusher kept the probe slot it took without sending anything")
	}
}

// TestEdgeTwinStaysFindable: two entries of one key can both be pinned (the cache evicted
// one while a request held it, see TestEdgeEvictedEntryDoesNotStealReplayPin). byKey found
// only one of them, and when that one was acknowledged and unpinned first, the other, still
// holding cost the origin has not seen, could no longer be found once the cache lost it
// too: the next request made a third entry from an origin read that lacks that cost (its
// cost still reached the origin: every pinned entry is flushed). Step by step:
//
//  1. request A gets the warm entry le1 from the cache; the cache evicts it;
//  2. request B misses, reads the origin and makes le2;
//  3. A accepts 1 on le1 and pins it (byKey holds le1), then B accepts 1 on le2;
//  4. a batch carries both; before it is answered, a request accepts 1 more on le2;
//  5. the answer unpins le1 (idle) but not le2 (pending 1); the cache loses le2.
//
// A lookup must still find le2, and the tuple's view must count all 4 accepted.
func TestEdgeTwinStaysFindable(t *testing.T) {
	e, origin, clock := newInternalEdge(t)
	tp, key, seq, l := internalTuple(e, clock, "twin")
	const limit = 1000
	accept := func(le *localEntry) {
		t.Helper()
		le.mu.Lock()
		defer le.mu.Unlock()
		if err := e.account(l, le, seq, 1, limit); err != nil {
			t.Fatalf("account: %v", err)
		}
	}
	evict := func() {
		e.cache.Del(maphash.Bytes(e.seed, key))
		e.cache.Wait()
	}

	if d, err := e.Limit(context.Background(), tp, limit, 1); err != nil || !d.Allowed {
		t.Fatalf("warm-up: %+v, %v", d, err)
	}
	for e.FlushOnce() {
	}
	le1 := e.lookup(l, key) // 1.
	if le1 == nil {
		t.Fatal("the warm entry is neither cached nor pinned")
	}
	evict()
	le2, ok := e.refresh(context.Background(), l, string(key), tp.WindowMs, seq, clock.NowMs(), 0, 0) // 2.
	if !ok || le2 == le1 {
		t.Fatalf("B's refresh: ok=%v, same entry=%v", ok, le2 == le1)
	}
	accept(le1) // 3.
	accept(le2)
	if b := e.buildBatch(l, clock.NowMs()); b == nil || len(b.Items) != 2 { // 4.
		t.Fatalf("batch %+v, want one item from each twin", b)
	}
	accept(le2)
	e.flush(context.Background(), l, false) // 5.
	evict()

	if got := e.lookup(l, key); got != le2 {
		t.Errorf("lookup after the cache lost le2 found %p, want le2 %p (still pinned: %v)", got, le2, le2.pinned)
	}
	if got := e.Status(context.Background(), tp).CurrentRegional; got != 4 {
		t.Errorf("the edge's view counts %d, want 4 accepted", got)
	}
	for i := 0; i < 10 && e.FlushOnce(); i++ {
	}
	if got := origin.Status(tp).CurrentRegional; got != 4 {
		t.Fatalf("origin counts %d after every flush, want 4 accepted", got)
	}
}

// TestCallTimeoutFollowsRTT: a call's timeout is --origin-timeout, or four smoothed round
// trips of the link's successful calls when longer, at most maxCallTimeout.
func TestCallTimeoutFollowsRTT(t *testing.T) {
	e, _, _ := newInternalEdge(t)
	l := e.links[0]
	if got := e.callTimeout(l); got != 100*time.Millisecond {
		t.Fatalf("no sample: %v, want the 100ms default", got)
	}
	for _, c := range []struct {
		sample time.Duration
		want   time.Duration
	}{
		{10 * time.Millisecond, 100 * time.Millisecond},
		{50 * time.Millisecond, 200 * time.Millisecond},
		{10 * time.Second, maxCallTimeout},
	} {
		l.srttUs.Store(0)
		for range 50 {
			l.sampleRTT(c.sample)
		}
		if got := e.callTimeout(l); got != c.want {
			t.Errorf("round trips of %v: timeout %v, want %v", c.sample, got, c.want)
		}
	}
	// One slow call moves the average by an eighth.
	l.srttUs.Store(0)
	l.sampleRTT(50 * time.Millisecond)
	l.sampleRTT(850 * time.Millisecond)
	if got := l.srttUs.Load(); got != 150_000 {
		t.Fatalf("srtt %d µs, want 150000", got)
	}
}
