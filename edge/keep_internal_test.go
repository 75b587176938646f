package edge

import (
	"context"
	"fmt"
	"hash/maphash"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// TestEdgeUnsavedBoundInBytes: the kept cost of many distinct tuples keeps their entries
// alive beyond the cache's eviction; what it keeps alive beyond the cache (about 40 bytes
// a kept cell, plus each kept entry the cache let go as the cache counts it: 200 bytes and
// the key) stays within an eighth of MaxMemoryBytes, the default bound, and the link's
// count of it (keptBytes) covers it.
func TestEdgeUnsavedBoundInBytes(t *testing.T) {
	e, _, _ := newInternalEdgeOrigin(t, engine.Config{MaxMemoryBytes: 1 << 30, Snapshots: true}) // it never saves
	const maxMemory = 1 << 20                                                                    // newInternalEdgeOrigin's
	for i := range 6000 {                                                                        // one unit of each of 6000 tuples: the cache holds some 3,900 entries
		tp := engine.Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "k%05d", i), WindowMs: 600_000}
		if _, err := e.Limit(context.Background(), tp, 1_000_000, 1); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			for e.FlushOnce() {
			}
		}
	}
	for e.FlushOnce() {
	}
	e.cache.Wait()
	e.Heartbeat()
	l := e.links[0]
	seen := make(map[*localEntry]bool)
	alive, evicted := l.keep.bytes, 0
	count := func(le *localEntry) {
		if !seen[le] && !le.cached.Load() {
			alive += entryBytes(le)
			evicted++
		}
		seen[le] = true
	}
	for _, kb := range l.keep.kept {
		for _, it := range kb.items {
			count(it.le)
		}
	}
	for _, h := range l.keep.hands {
		count(h.le)
	}
	s := e.Stats()
	if evicted == 0 || s.ReplayUnsavedDropped == 0 {
		t.Fatalf("%d kept entries the cache let go, %d units dropped: the test needs both", evicted, s.ReplayUnsavedDropped)
	}
	if alive > maxMemory/8 || l.keptBytes() < alive {
		t.Fatalf("kept cost keeps %d bytes alive beyond the cache (bound %d), counted %d", alive, maxMemory/8, l.keptBytes())
	}
}

// TestKeptEntryBackInTheCacheUncounted: a kept entry the cache let go (counted in the
// unsaved bound) that a lookup finds pinned in byKey goes back into the cache (remember):
// it is then in the cache's bound only, not in both (found by a review: 247 kept bytes
// counted for 40).
func TestKeptEntryBackInTheCacheUncounted(t *testing.T) {
	e, _, _ := newInternalEdge(t)
	l := e.links[0]
	key := engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("b"), WindowMs: 3_600_000})
	le := newLocalEntry(string(key), maphash.Bytes(e.seed, key), 3_600_000, l)
	l.keep.hold(keptItem{le: le, seq: 1, cost: 1}) // not cached: counted
	if got, want := l.keptBytes(), keptItemBytes+entryBytes(le); got != want {
		t.Fatalf("kept entry out of the cache: kept bytes %d, want %d", got, want)
	}
	for range 20 { // the cache's admission may refuse a Set: try until it takes it
		e.remember(le) // as lookup does for a pinned entry found in byKey
		e.cache.Wait()
		if v, ok := e.cache.Get(le.hash); ok && v == le && le.cached.Load() {
			break
		}
	}
	if !le.cached.Load() {
		t.Fatal("the cache never took the entry back")
	}
	if got, want := l.keptBytes(), int64(keptItemBytes); got != want {
		t.Fatalf("kept entry back in the cache: kept bytes %d, want %d (entry %d counted in both bounds)", got, want, entryBytes(le))
	}
	l.keep.release(keptItem{le: le, seq: 1, cost: 1})
	if got := l.keptBytes(); got != 0 {
		t.Fatalf("after the release kept bytes %d, want 0", got)
	}
}
