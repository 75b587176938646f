package edge

import (
	"context"
	"fmt"
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
