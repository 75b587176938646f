package edge

import (
	"math"

	"github.com/ratchet/ratchet/engine"
)

// What an edge keeps of the cost its origin counted but has not saved, so that a kill -9
// of the origin loses none of it (docs/internal-protocol.md, "Unsaved cost").
//
// An origin's snapshot captures each edge run's replay mark before the cells
// (engine/marks.go), so once a save is on disk every batch up to the mark it captured is
// durable; answers report that mark (OriginMeta.Durable). The flusher keeps, per origin, the cost of every
// acknowledged batch after it (kept, under its batch ID) and of every hand-off the origin
// counted (hands, under the number the origin gave it: the origin numbers the run's
// hand-offs and saves the count with the marks, OriginMeta.HandsDurable), and drops them
// as the marks cover them. When the origin's run changes (its Boot), the new run restored
// its marks from its snapshot: the batches up to its mark (its Applied, before any batch of
// this edge lands there) and the hand-offs up to HandsRestored are in that snapshot, and
// the cost of the others goes back into the entries as pending cost, which the flusher
// then delivers in new batches, applied once like any other. A batch carries the run that
// counted what is kept (ReplayBatch.Boot): an origin of another run applies nothing of it
// and answers with its restored mark, so the edge learns that mark before any batch of its
// lands there.
//
// A snapshot may hold in its cells cost of batches and hand-offs its marks do not claim
// (the cells are captured after the marks): re-sent after a restart, that cost counts
// twice. So a kill -9 may over-count what was counted while the origin captured its
// snapshot; it never loses what an edge kept.
//
// kept and hands are owned by the flusher goroutine of the origin (flush, heartbeat); the
// hand-off path appends to originLink.handed under originLink.mu; Stats reads atomics.
// The local decision path never touches any of it.

// keptItem is one cell's cost counted by the origin: 32 bytes (the entry names the key
// and its window, and is kept alive by it even once the cache has evicted it).
type keptItem struct {
	le    *localEntry
	seq   int64
	cost  uint64
	limit uint64
}

// dies returns when (ms, the edge's clock) its cell stops mattering: from then on
// it.seq < now/window-1.
func (it keptItem) dies() int64 { return (it.seq + 2) * it.le.window }

// keptBatch is the cost of one acknowledged batch that no snapshot holds yet.
type keptBatch struct {
	id      uint64
	changes uint64 // the batch's ReplayBatch.Changes: a tuple reset after it gets none of its cost back
	items   []keptItem
	// dies is when (ms, the edge's clock) the first of items' cells dies (keptItem.dies):
	// before it, boundKept has nothing dead to drop there and does not read the items.
	dies int64
}

// keptHand is the cost of one hand-off the origin counted: run boot counted it as its
// hand-off number hand, after it had applied batch after of this edge run. Boots are start times, so a later run of the
// origin has a larger one (unless its clock stepped back across the restart).
type keptHand struct {
	keptItem
	after   uint64
	hand    uint64 // the number run boot gave it (OriginMeta.Hand)
	boot    int64
	changes uint64 // the answer's change version: a tuple reset after it gets none of its cost back
}

// keptItemBytes is what one kept item costs, with its share of the slices' headers; the
// entry it names costs what the cache counts for it (entryBytes) once per entry kept, and
// only while the cache does not hold it (countKept): a cached entry is in the cache's bound.
const keptItemBytes = 40

// keptCounted is the bit of localEntry.kept that says the entry is counted in its link's
// keptEntries; keptMask takes the count of kept items naming it.
const (
	keptCounted = 1 << 31
	keptMask    = keptCounted - 1
)

// hold counts in k's bytes a kept item taken in: the item, and its entry when it is the
// first kept item to name it and the cache does not hold it (else leftCache counts it
// once the cache lets it go).
func (k *keptState) hold(it keptItem) {
	k.items++
	k.bytes += keptItemBytes
	if it.le.kept.Add(1)&keptMask == 1 && !it.le.cached.Load() {
		it.le.countKept()
	}
}

// release undoes hold for an item let go.
func (k *keptState) release(it keptItem) {
	k.items--
	k.bytes -= keptItemBytes
	if it.le.kept.Add(^uint32(0))&keptMask == 0 {
		it.le.uncountKept()
	}
}

// countKept counts le's bytes in its link's keptEntries, unless they are already: le is
// kept and the cache does not hold it. hold (the flusher) and leftCache (the cache's
// goroutine, or a request's whose Set replaced or dropped le) may both call it for one
// entry; the keptCounted bit makes it once.
func (le *localEntry) countKept() {
	for {
		v := le.kept.Load()
		if v&keptCounted != 0 {
			return
		}
		if le.kept.CompareAndSwap(v, v|keptCounted) {
			le.link.keptEntries.Add(entryBytes(le))
			return
		}
	}
}

// uncountKept undoes countKept: no kept item names le any more.
func (le *localEntry) uncountKept() {
	for {
		v := le.kept.Load()
		if v&keptCounted == 0 {
			return
		}
		if le.kept.CompareAndSwap(v, v&^keptCounted) {
			le.link.keptEntries.Add(-entryBytes(le))
			return
		}
	}
}

// keptLeft counts le, which the cache let go (leftCache), in its link's kept bytes when
// kept items name it. A release between the two reads of the count may have found
// nothing to uncount: the second read undoes the count then; and a hold after that
// release (which counted le itself) may come before that undo: the loop counts le again
// then, until it reads a count that holds.
func (le *localEntry) keptLeft() {
	for le.kept.Load()&keptMask > 0 {
		le.countKept()
		if le.kept.Load()&keptMask > 0 {
			return
		}
		le.uncountKept()
	}
}

// keptBytes is what l's kept cost keeps alive beyond the cache's bound: its kept items
// and the entries of theirs the cache does not hold.
func (l *originLink) keptBytes() int64 { return l.keep.bytes + l.keptEntries.Load() }

// unsavedLogMs is the least time between two log lines about dropped unsaved cost.
const unsavedLogMs = 60_000

// keptState is an originLink's unsaved cost (owned by the flusher).
type keptState struct {
	kept  []keptBatch  // acknowledged by run boot, not durable there; IDs ascending
	hands []keptHand   // counted hand-offs not durable yet
	boot  int64        // the origin run that acknowledged kept (the last heard by the flusher)
	items int          // items in kept and hands
	bytes int64        // what they cost themselves (hold); their entries: originLink.keptEntries
	heard int64        // ms: when an answer to the flusher last told the durable mark
	free  [][]keptItem // item slices of dropped batches, reused by keep (at most maxFree)
}

// maxFree bounds the item slices a link keeps for reuse (at most 64 batches of
// MaxBatchItems: 2 MiB at the default 1000).
const maxFree = 64

func (k *keptState) empty() bool { return len(k.kept) == 0 && len(k.hands) == 0 }

// replayBoot is the Boot a batch carries: the run that counted what is kept, or 0 when
// nothing is (any run may apply the batch).
func (k *keptState) replayBoot() int64 {
	if k.empty() {
		return 0
	}
	return k.boot
}

// keepHandOff records, from the hand-off path, cost of le the origin counted (meta is its
// answer, seq the cell it counted it in): the flusher keeps it until a snapshot holds it.
func (e *Edge) keepHandOff(l *originLink, le *localEntry, seq int64, cost, limit uint64, meta engine.OriginMeta) {
	if cost == 0 || meta.Durable > meta.Applied {
		return // nothing to keep (an origin without snapshots reports NoSnapshots)
	}
	h := keptHand{keptItem: keptItem{le: le, seq: seq, cost: cost, limit: limit}, after: meta.Applied, hand: meta.Hand, boot: meta.Boot, changes: meta.Changes}
	l.mu.Lock()
	kept := len(l.handed) < maxHanded
	if kept {
		l.handed = append(l.handed, h)
	}
	l.mu.Unlock()
	if kept {
		l.unsaved.Add(cost)
	} else {
		e.unsavedDropped.Add(cost)
	}
}

// maxHanded bounds the hand-offs waiting for the flusher to take them into its kept cost.
const maxHanded = 1 << 16

// keep records that batch b was acknowledged by the origin with meta: what meta.Durable
// covers is dropped, and b's cost is kept unless that covers it too.
func (e *Edge) keep(l *originLink, b *pendingBatch, meta engine.OriginMeta, now int64) {
	e.heard(l, meta, now)
	if b.ID <= meta.Durable {
		return
	}
	k := &l.keep
	var items []keptItem
	if n := len(k.free); n > 0 {
		items, k.free[n-1] = k.free[n-1], nil
		k.free = k.free[:n-1]
	} else {
		items = make([]keptItem, 0, len(b.Items))
	}
	var units uint64
	dies := int64(math.MaxInt64)
	for i, it := range b.Items {
		if le := b.entries[i]; it.Cost > 0 && it.Seq >= now/le.window-1 { // a dead cell never matters again
			kept := keptItem{le: le, seq: it.Seq, cost: it.Cost, limit: it.Limit}
			items = append(items, kept)
			units = satAdd(units, it.Cost)
			dies = min(dies, kept.dies())
		}
	}
	if len(items) == 0 {
		k.recycle(items)
		return
	}
	k.kept = append(k.kept, keptBatch{id: b.ID, changes: b.Changes, items: items, dies: dies})
	for _, it := range items {
		k.hold(it)
	}
	l.unsaved.Add(units)
	e.boundKept(l, now)
}

// heard takes an answer to a call of the flusher (an acknowledged or refused batch, a
// heartbeat): it takes in the hand-offs counted since, and drops what the durable mark
// covers; an answer from another run of the origin while cost is kept means the origin
// restarted from its snapshot: what that lacks is handed back to the entries.
func (e *Edge) heard(l *originLink, meta engine.OriginMeta, now int64) {
	k := &l.keep
	// While batches are kept, every batch sent carries k.boot, so a new run has applied
	// none of them: its Applied is the mark it restored. Otherwise a batch may have landed.
	exact := len(k.kept) > 0
	l.mu.Lock()
	handed := l.handed
	l.handed = nil
	l.mu.Unlock()
	k.hands = append(k.hands, handed...) // keepHandOff counted them in l.unsaved
	for _, h := range handed {
		k.hold(h.keptItem)
	}
	if k.empty() {
		k.boot = meta.Boot
		return
	}
	k.heard = now
	if exact && meta.Boot != k.boot {
		e.requeue(l, meta, now)
	} else {
		e.dropDurable(l, meta, now)
	}
	k.boot = meta.Boot
	e.boundKept(l, now)
}

// dropDurable drops the kept batches up to meta's durable mark and the hand-offs its
// snapshots hold (handFate).
func (e *Edge) dropDurable(l *originLink, meta engine.OriginMeta, now int64) {
	k := &l.keep
	n := 0
	for n < len(k.kept) && k.kept[n].id <= meta.Durable {
		n++
	}
	e.dropKept(l, n)
	e.filterHands(l, now, func(h keptHand) (bool, bool) { return handFate(h, meta) })
}

// handFate says what becomes of kept hand-off h on an answer with meta: one of a later
// run than meta's (not heard by the flusher yet) is kept; one of meta's run is dropped once
// a saved snapshot holds it (its number, or a batch after it, is durable); one of an
// earlier run is dropped when the snapshot meta's run restored holds it (its number is
// not above HandsRestored: the count is saved before the cells), and requeued otherwise.
func handFate(h keptHand, meta engine.OriginMeta) (keep, requeue bool) {
	switch {
	case h.boot > meta.Boot:
		return true, false
	case h.boot < meta.Boot:
		return false, h.hand > meta.HandsRestored
	}
	return h.hand > meta.HandsDurable && h.after >= meta.Durable, false
}

// requeue handles a restart of the origin: run meta.Boot restored meta.Applied (its mark)
// and meta.HandsRestored from its snapshot. The kept batches up to the mark and the
// hand-offs the snapshot holds are dropped; the cost of the others goes back into the
// entries as pending cost, to be delivered in new batches. The hand-offs the new run
// counted itself are kept.
func (e *Edge) requeue(l *originLink, meta engine.OriginMeta, now int64) {
	k := &l.keep
	mark := meta.Applied
	var units uint64
	for _, kb := range k.kept {
		if kb.id > mark {
			for _, it := range kb.items {
				units = satAdd(units, e.repend(l, it, kb.changes, now))
			}
		}
	}
	e.dropKept(l, len(k.kept))
	e.filterHands(l, now, func(h keptHand) (keep, requeue bool) {
		if h.boot >= meta.Boot {
			return true, false
		}
		keep, requeue = handFate(h, meta)
		if requeue {
			units = satAdd(units, h.cost)
		}
		return keep, requeue
	})
	e.log.Info("origin restarted from its snapshot: re-sending the counted cost it lacks",
		"origin", l.id, "units", units, "snapshot_batch", mark, "snapshot_hand", meta.HandsRestored)
}

// filterHands keeps, drops or requeues each kept hand-off as f says.
func (e *Edge) filterHands(l *originLink, now int64, f func(keptHand) (keep, requeue bool)) {
	k := &l.keep
	hands := k.hands[:0]
	var gone uint64
	for _, h := range k.hands {
		keep, requeue := f(h)
		switch {
		case keep:
			hands = append(hands, h)
			continue
		case requeue:
			e.repend(l, h.keptItem, h.changes, now)
		}
		gone = satAdd(gone, h.cost)
		k.release(h.keptItem)
	}
	clear(k.hands[len(hands):])
	k.hands = hands
	if len(hands) == 0 {
		k.hands = nil
	}
	l.unsaved.Add(-gone)
}

// repend puts kept cost back into its entry as pending cost (the entry is pinned, so the
// next batches deliver it), unless its cell has died or a reset of the tuple newer than
// changes (the version the cost was counted under) cancelled it (changes.go); it returns
// the units requeued.
func (e *Edge) repend(l *originLink, it keptItem, changes uint64, now int64) uint64 {
	le := it.le
	le.mu.Lock()
	defer le.mu.Unlock()
	if it.seq < now/le.window-1 || le.resetAt > changes {
		return 0 // the cell never matters again, or a reset cancelled the cost
	}
	if err := e.pin(l, le); err != nil {
		e.unsavedDropped.Add(it.cost)
		return 0
	}
	c := le.slot(it.seq)
	if c == nil {
		return 0
	}
	c.pending = satAdd(c.pending, it.cost)
	le.vouch = min(le.vouch, changes) // a reset since, missed by a resync, drops it at the origin
	if c.minLimit == 0 || (it.limit > 0 && it.limit < c.minLimit) {
		c.minLimit = it.limit
	}
	e.resent.Add(it.cost)
	return it.cost
}

// recycle keeps items (emptied) for a later batch, unless enough are kept.
func (k *keptState) recycle(items []keptItem) {
	if cap(items) > 0 && len(k.free) < maxFree {
		clear(items)
		k.free = append(k.free, items[:0])
	}
}

// dropKept drops the n oldest kept batches.
func (e *Edge) dropKept(l *originLink, n int) (units uint64) {
	k := &l.keep
	if n == 0 {
		return 0
	}
	for i := range n {
		for _, it := range k.kept[i].items {
			units = satAdd(units, it.cost)
			k.release(it)
		}
		k.recycle(k.kept[i].items)
		k.kept[i] = keptBatch{}
	}
	k.kept = k.kept[n:]
	if len(k.kept) == 0 {
		k.kept = nil // let the array go
	}
	l.unsaved.Add(-units)
	return units
}

// boundKept holds what the kept items keep alive beyond the cache (keptBytes) within the
// edge's bound (Config.MaxUnsavedBytes, shared by the origins): past it, the cost of cells
// that have died is dropped first (it never matters again), then the oldest batches and
// hand-offs, down to 7/8 of the bound so that the work is done once per eighth of it;
// what is dropped is counted and logged (at most once a minute). Only an origin that
// saves rarely, or not at all, gets there, or a cache that let go of kept entries.
func (e *Edge) boundKept(l *originLink, now int64) {
	k := &l.keep
	bound := max(e.cfg.MaxUnsavedBytes/int64(len(e.links)), 1)
	if l.keptBytes() <= bound {
		return
	}
	target := bound - bound/8
	live := func(it keptItem) bool { return it.seq >= now/it.le.window-1 }
	var dead uint64
	for i := 0; i < len(k.kept) && l.keptBytes() > target; i++ {
		kb := &k.kept[i]
		if now < kb.dies {
			// Nothing of it has died: reading every item (an entry each, cache misses)
			// found nothing to drop, and took a tenth of a busy edge's time.
			continue
		}
		items := kb.items[:0]
		kb.dies = math.MaxInt64
		for _, it := range kb.items {
			if live(it) {
				items = append(items, it)
				kb.dies = min(kb.dies, it.dies())
			} else {
				dead = satAdd(dead, it.cost)
				k.release(it)
			}
		}
		clear(kb.items[len(items):])
		kb.items = items
	}
	l.unsaved.Add(-dead)
	if l.keptBytes() > target {
		e.filterHands(l, now, func(h keptHand) (bool, bool) { return live(h.keptItem), false })
	}
	var over uint64
	for len(k.kept) > 0 && (l.keptBytes() > target || len(k.kept[0].items) == 0) {
		over = satAdd(over, e.dropKept(l, 1))
	}
	if l.keptBytes() > target { // hand-offs alone are over: drop the oldest
		m := 0
		var u uint64
		for ; m < len(k.hands) && l.keptBytes() > target; m++ {
			u = satAdd(u, k.hands[m].cost)
			k.release(k.hands[m].keptItem)
		}
		l.unsaved.Add(-u)
		over = satAdd(over, u)
		clear(k.hands[:m])
		k.hands = k.hands[m:]
	}
	if over == 0 {
		return
	}
	e.unsavedDropped.Add(over)
	if last := e.lastUnsavedLog.Load(); now-last >= unsavedLogMs && e.lastUnsavedLog.CompareAndSwap(last, now) {
		e.log.Warn("counted cost the origin has not saved exceeds the edge's bound: dropped the oldest; a kill -9 of the origin would lose it",
			"origin", l.id, "units", over, "bound_bytes", bound, "dropped_total", e.unsavedDropped.Load())
	}
}
