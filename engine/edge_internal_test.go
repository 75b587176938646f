package engine

import (
	"hash/maphash"
	"testing"
)

// This file is package engine: it exports a test hook to the black-box tests of
// edge_test.go (package engine_test), and holds the tests that must reach the edge's
// internals to set up an interleaving deterministically.

// FlushOnce runs one replay flush of every origin link, exactly as one tick of Run's
// flusher does (backoff included). It reports whether more may remain. Test hook.
func (e *Edge) FlushOnce() (more bool) {
	for _, l := range e.links {
		if e.flush(l, false) {
			more = true
		}
	}
	return more
}

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
	const t0 int64 = 1_704_067_200_000
	clock := NewManualClock(t0 + 100)
	origin := New(clock, Config{MaxMemoryBytes: 1 << 30})
	e, err := NewEdge(clock, EdgeConfig{
		Origins:        []Origin{LocalOrigin{Engine: origin, Node: "edge-1/boot"}},
		OriginIDs:      []string{"o1"},
		NodeRun:        "edge-1/boot",
		DegradedShare:  1,
		MaxMemoryBytes: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	tp := Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 60_000}
	key := AppendKey(nil, tp)
	seq := clock.NowMs() / tp.WindowMs
	l := e.link(key)

	// Warm the tuple and deliver its first request, so that its entry is cached, fresh,
	// and unpinned.
	if d, err := e.Limit(tp, 1000, 1); err != nil || !d.Allowed {
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
	if d, err := e.Limit(tp, 1000, 1); err != nil || !d.Allowed {
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
		if d, err := e.Limit(tp, 1000, 1); err != nil || !d.Allowed {
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
