package edge

import (
	"context"
	"hash/maphash"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// TestEdgeSiblingAfterEviction: a multi-limit request reaches its key's other windows
// through the first window's entry (siblings). Once the cache has let a sibling go and a
// single-limit request has made the tuple a new entry, multi-limit requests must count in
// the new entry, the one every lookup finds, and not in the old one the sibling set still
// names: two entries of one tuple would each spend its lease.
func TestEdgeSiblingAfterEviction(t *testing.T) {
	e, origin, clock := newInternalEdge(t)
	minute := engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 60_000}
	hour := minute
	hour.WindowMs = 3_600_000
	hourKey := engine.AppendKey(nil, hour)
	l := e.link(hourKey)
	ops := []engine.LimitOp{{Tuple: minute, Limit: 1000}, {Tuple: hour, Limit: 1000}}
	out := make([]engine.Decision, len(ops))
	both := func() {
		t.Helper()
		if b, err := e.LimitAll(context.Background(), ops, 1, out); err != nil || !out[b].Allowed {
			t.Fatalf("LimitAll: %+v, %v", out, err)
		}
	}
	both()
	both()
	first, old := e.lookup(l, engine.AppendKey(nil, minute)), e.lookup(l, hourKey)
	if first == nil || old == nil || first.sibling(hour.WindowMs, l) != old {
		t.Fatalf("the minute's entry does not know the hour's as its sibling (%p, %p)", first, old)
	}

	e.cache.Del(maphash.Bytes(e.seed, hourKey)) // the cache lets the hour's entry go...
	e.cache.Wait()
	for e.FlushOnce() { // ... and it holds nothing unacknowledged: no lookup finds it
	}
	if d, err := e.Limit(context.Background(), hour, 1000, 1); err != nil || !d.Allowed { // a new entry
		t.Fatalf("Limit: %+v, %v", d, err)
	}
	cur := e.lookup(l, hourKey)
	if cur == nil || cur == old {
		t.Fatalf("the single-limit request did not make a new entry (%p, old %p)", cur, old)
	}
	const more = 3 // past any multiple of siblingTouch, so that the sibling set is asked
	for range more {
		both()
	}
	seq := clock.NowMs() / hour.WindowMs
	cur.mu.Lock()
	got := cur.cells[0].pending + cur.cells[1].pending
	cur.mu.Unlock()
	if got != 1+more {
		t.Errorf("the hour's entry holds %d pending, want %d: multi-limit requests counted elsewhere", got, 1+more)
	}
	for i := 0; i < 10 && e.FlushOnce(); i++ {
	}
	if c := origin.Status(hour); c.CurrentRegional != 2+1+more || c.Sequence != seq {
		t.Fatalf("origin counts %d in the hour, want %d", c.CurrentRegional, 2+1+more)
	}
}

// TestEdgeSiblingsOnlyCached: a sibling set names only entries the cache holds. Once the
// cache lets the other windows' entries go, the first window's entry, cached still (single-
// limit traffic keeps it), must not keep them alive (their memory is outside the cache's
// bound); once it lets the first go, the others must not name it either.
func TestEdgeSiblingsOnlyCached(t *testing.T) {
	e, _, _ := newInternalEdge(t)
	ops := make([]engine.LimitOp, engine.MaxLimits)
	for i := range ops {
		ops[i] = engine.LimitOp{Tuple: engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"),
			WindowMs: int64(i+1) * 60_000}, Limit: 1000}
	}
	out := make([]engine.Decision, len(ops))
	if b, err := e.LimitAll(context.Background(), ops, 1, out); err != nil || !out[b].Allowed {
		t.Fatalf("LimitAll: %+v, %v", out, err)
	}
	key0 := engine.AppendKey(nil, ops[0].Tuple)
	first := e.lookup(e.link(key0), key0)
	named := func(le *localEntry) (n int) {
		if set := le.siblings.Load(); set != nil {
			for _, s := range set {
				if s != nil {
					n++
				}
			}
		}
		return n
	}
	if n := named(first); n != len(ops)-1 {
		t.Fatalf("the first window's entry names %d siblings, want %d", n, len(ops)-1)
	}
	for _, op := range ops[1:] {
		e.cache.Del(maphash.Bytes(e.seed, engine.AppendKey(nil, op.Tuple)))
	}
	e.cache.Wait()
	if !first.cached.Load() {
		t.Fatal("the first window's entry is not cached")
	}
	if n := named(first); n != 0 {
		t.Errorf("the first window's entry names %d entries the cache let go", n)
	}

	if b, err := e.LimitAll(context.Background(), ops, 1, out); err != nil || !out[b].Allowed { // siblings anew
		t.Fatalf("LimitAll: %+v, %v", out, err)
	}
	if n := named(first); n != len(ops)-1 {
		t.Fatalf("the first window's entry names %d siblings again, want %d", n, len(ops)-1)
	}
	e.cache.Del(maphash.Bytes(e.seed, key0))
	e.cache.Wait()
	for _, op := range ops[1:] {
		key := engine.AppendKey(nil, op.Tuple)
		if s := e.lookup(e.link(key), key); s.sibOf.Load() != nil {
			t.Errorf("window %d: names an entry as the one naming it after the cache let that go", op.Tuple.WindowMs)
		}
	}
}

// TestBoundKeptDropsDeadCostFirst: past the unsaved bound, the kept cost of dead cells is
// dropped before any live cost, also when the batch holding it holds live cost of a
// longer window too (boundKept skips a batch until its first cell dies).
func TestBoundKeptDropsDeadCostFirst(t *testing.T) {
	e, _, clock := newInternalEdge(t)
	l := e.links[0]
	entry := func(name string, window int64) *localEntry {
		key := engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte(name), WindowMs: window})
		return newLocalEntry(string(key), maphash.Bytes(e.seed, key), window, l)
	}
	bytesOf := func(le *localEntry) int64 { return keptItemBytes + entryBytes(le) }
	batch := func(id uint64, les ...*localEntry) *pendingBatch {
		b := &pendingBatch{entries: les}
		b.ID = id
		for _, le := range les {
			b.Items = append(b.Items, engine.ReplayItem{Key: le.key, Seq: clock.NowMs() / le.window, Cost: 1})
		}
		return b
	}
	meta := engine.OriginMeta{Boot: 7} // an origin that saved nothing yet
	hourA, second, hourB := entry("a", 3_600_000), entry("b", 1000), entry("c", 3_600_000)
	// The bound holds the first batch, not the second on top; without the dead second's
	// cost both fit under the 7/8 that boundKept drops down to.
	live := bytesOf(hourA) + bytesOf(hourB)
	e.cfg.MaxUnsavedBytes = live + bytesOf(second) - 1
	if live > e.cfg.MaxUnsavedBytes-e.cfg.MaxUnsavedBytes/8 {
		t.Fatalf("bound %d too tight for the live cost's %d bytes", e.cfg.MaxUnsavedBytes, live)
	}
	e.keep(l, batch(1, hourA, second), meta, clock.NowMs()) // the live item first
	clock.Advance(3000)                                     // the second's cell dies
	e.keep(l, batch(2, hourB), meta, clock.NowMs())
	if got, dropped := l.unsaved.Load(), e.unsavedDropped.Load(); got != 2 || dropped != 0 {
		t.Fatalf("unsaved %d, dropped live %d; want the two live units kept and the dead one gone", got, dropped)
	}
	if l.keptBytes() != live {
		t.Fatalf("kept bytes %d, want %d", l.keptBytes(), live)
	}
}

// TestPinnedEntryIndexedOnlyOnceEvicted: a pinned entry the cache holds is not in the
// replay set's index (byKey: a map insert and delete per replayed entry, cache misses
// with the replay set large); once the cache lets it go, it is, and a lookup finds it
// with its unacknowledged cost; delivered, it leaves the index.
func TestPinnedEntryIndexedOnlyOnceEvicted(t *testing.T) {
	e, origin, clock := newInternalEdge(t)
	tp, key, _, l := internalTuple(e, clock, "indexed")
	for range 2 {
		if d, err := e.Limit(context.Background(), tp, 1000, 1); err != nil || !d.Allowed {
			t.Fatalf("Limit: %+v, %v", d, err)
		}
	}
	le := e.lookup(l, key)
	l.mu.Lock()
	indexed, pinned, n := le.indexed, le.pinned, len(l.byKey)
	l.mu.Unlock()
	if !pinned || indexed || n != 0 {
		t.Fatalf("cached and pinned: pinned %v, indexed %v, byKey holds %d; want pinned only", pinned, indexed, n)
	}
	e.cache.Del(maphash.Bytes(e.seed, key))
	e.cache.Wait()
	l.mu.Lock()
	indexed = le.indexed
	l.mu.Unlock()
	if !indexed {
		t.Fatal("the cache let the pinned entry go and the index does not hold it")
	}
	if got := e.lookup(l, key); got != le {
		t.Fatalf("lookup after the eviction found %p, want the pinned entry %p", got, le)
	}
	for i := 0; i < 10 && e.FlushOnce(); i++ {
	}
	l.mu.Lock()
	indexed, n = le.indexed, len(l.byKey)
	l.mu.Unlock()
	if indexed || n != 0 {
		t.Fatalf("delivered: indexed %v, byKey holds %d", indexed, n)
	}
	if got := origin.Status(tp).CurrentRegional; got != 2 {
		t.Fatalf("origin counts %d, want 2", got)
	}
}

// TestKeptEntryCountedOnceTheCacheLetsGo: a kept entry the cache holds is in the cache's
// bound, not the unsaved bound; once the cache lets it go (evicted, or its Set rejected:
// leftCache, maybe twice) it counts there, once, until no kept item names it.
func TestKeptEntryCountedOnceTheCacheLetsGo(t *testing.T) {
	e, _, clock := newInternalEdge(t)
	l := e.links[0]
	key := engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("a"), WindowMs: 3_600_000})
	le := newLocalEntry(string(key), maphash.Bytes(e.seed, key), 3_600_000, l)
	le.cached.Store(true) // as remember sets it before offering the entry to the cache
	b := &pendingBatch{entries: []*localEntry{le}}
	b.ID = 1
	b.Items = []engine.ReplayItem{{Key: le.key, Seq: clock.NowMs() / le.window, Cost: 1}}
	meta := engine.OriginMeta{Boot: 7, Applied: 1} // an origin that saved nothing yet
	e.keep(l, b, meta, clock.NowMs())
	if got := l.keptBytes(); got != keptItemBytes {
		t.Fatalf("kept bytes with the entry cached: %d, want %d", got, keptItemBytes)
	}
	for range 2 {
		e.leftCache(le)
		if got, want := l.keptBytes(), keptItemBytes+entryBytes(le); got != want {
			t.Fatalf("kept bytes once the cache let the entry go: %d, want %d", got, want)
		}
	}
	meta.Durable = 1 // a save holds the batch: nothing is kept
	e.heard(l, meta, clock.NowMs())
	if got := l.keptBytes(); got != 0 || l.unsaved.Load() != 0 {
		t.Fatalf("kept bytes %d, units %d once saved; want none", got, l.unsaved.Load())
	}
}
