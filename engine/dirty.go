package engine

import (
	"math/bits"
	"runtime"
	"sync/atomic"
)

// Incremental snapshots (persist's delta log) write only the tuples changed since the last
// save. The store keeps, per shard, a bitmap of its slot indexes whose tuple changed what a
// snapshot holds of it (a count, a lease grant) since the last pass of Dirty: one bit a
// slot, outside the slot (table.go's layout is not touched), set under the shard's lock by
// every site that changes a count or a grant (markSlot, markTuple) and moved with the slot when a
// delete moves the last slot into a hole (movedSlot). A pass of Dirty reads the marked
// tuples of a shard and clears their bits under one hold of its lock, so a change is
// either in that pass or marked for the next one.
//
// The request paths mark the slot their lookup found (markSlot): no second probe of the
// index. Marking costs only when Config.Snapshots is set: an engine whose snapshots
// nobody takes marks nothing.

// dirtySet is one shard's marks: bit i of bits is slot i's. Guarded by the shard's lock,
// but for n, which a pass reads without the lock to skip a shard with nothing marked.
type dirtySet struct {
	bits []uint64
	n    atomic.Int64 // bits set
}

// markTuple marks key's tuple (sh locked, h its hash from locate) as changed, when the
// store tracks changes and the tuple is held. It probes the index for the tuple's slot: a
// site that has the slot from its own lookup marks it with markSlot instead (the request
// paths: decideLocked, decideAllLocked, applyReplay), so a request pays one probe.
func (s *store) markTuple(sh *shard, h uint32, key []byte) {
	if !s.tracking {
		return
	}
	if i := sh.find(h, key); i >= 0 {
		s.markSlot(sh, i)
	}
}

// markSlot marks the tuple of slot i of sh (locked) as changed, when the store tracks
// changes. i comes from lookupSlot or insertSlot under the same hold of sh's lock: only a
// remove (the sweep's) moves a slot.
func (s *store) markSlot(sh *shard, i int) {
	if !s.tracking {
		return
	}
	d := &sh.dirty
	w := i >> 6
	if w >= len(d.bits) {
		d.bits = append(d.bits, make([]uint64, w+1-len(d.bits)+len(d.bits)/4)...)
	}
	if bit := uint64(1) << (i & 63); d.bits[w]&bit == 0 {
		d.bits[w] |= bit
		d.n.Add(1)
	}
}

// lookupSlot is shard.lookup that also returns the entry's slot index (-1 with nil), for
// markSlot.
func (sh *shard) lookupSlot(h uint32, key []byte) (*entry, int) {
	i := sh.find(h, key)
	if i < 0 {
		return nil, -1
	}
	return &sh.at(i).ent, i
}

// insertSlot is store.insert that also returns the new entry's slot index (-1 with an
// error), for markSlot: shard.add appends the slot, so it is the shard's last.
func (s *store) insertSlot(sh *shard, h uint32, key []byte, force bool) (*entry, int, error) {
	ent, err := s.insert(sh, h, key, force)
	if ent == nil {
		return nil, -1, err
	}
	return ent, sh.n - 1, err
}

// movedSlot moves slot last's mark to slot to (sh locked): shard.remove(to) moved the last
// slot into the hole at to (to == last: the last slot was removed).
func (s *store) movedSlot(sh *shard, to, last int) {
	d := &sh.dirty
	if d.n.Load() == 0 {
		return
	}
	get := func(i int) bool { return i>>6 < len(d.bits) && d.bits[i>>6]&(1<<(i&63)) != 0 }
	clearBit := func(i int) {
		if get(i) {
			d.bits[i>>6] &^= 1 << (i & 63)
			d.n.Add(-1)
		}
	}
	moved := get(last)
	clearBit(to)
	clearBit(last)
	if moved && to != last {
		d.bits[to>>6] |= 1 << (to & 63)
		d.n.Add(1)
	}
}

// DirtyCount returns the number of tuples marked changed since the last pass of Dirty: about
// what the next pass yields (a change after this read adds to it). Lock-free; a save
// sizes its frame's buffer from it.
func (e *Engine) DirtyCount() int64 {
	var n int64
	for i := range e.store.shards {
		n += e.store.shards[i].dirty.n.Load()
	}
	return n
}

// Dirty yields every tuple whose counts or lease grants changed since the last pass of
// Dirty (since New for the first), as Tuples yields them: its live cells and its grants
// that have not ended, read under its shard's lock, and with its Part; a tuple left with
// neither is yielded too (empty), so that a later load drops the grants an earlier save
// had. A tuple is marked again by its next change, so each change is in this pass or the
// next one. Records are valid only during the call. It needs Config.Snapshots (without it
// nothing is marked). A pass that stops early (yield returns false) leaves the shards it
// did not reach marked, but not the tuples it read: a caller that does not save them all
// saves in full next (persist does). A pass does not wait for a lazy load: a tuple is marked only once
// its part is loaded.
func (e *Engine) Dirty(yield func(TupleRecord) bool) {
	var c tupleCapture
	now := e.clock.NowMs()
	for i := range e.store.shards {
		d := &e.store.shards[i].dirty
		if d.n.Load() == 0 {
			continue
		}
		c.reset()
		c.reserve(int(d.n.Load()) * 9 / 8) // and marks that come before the lock
		sh := &e.store.shards[i]
		lockYielding(&sh.mu)
		c.begin(e)
		for w := range d.bits {
			for b := d.bits[w]; b != 0; b &= b - 1 {
				j := w<<6 | bits.TrailingZeros64(b)
				if j < sh.n {
					c.add(e, sh, j, now, true)
				}
			}
			d.bits[w] = 0
		}
		d.n.Store(0)
		sh.mu.Unlock()
		if !c.yield(e, yield) {
			return
		}
		runtime.Gosched()
	}
}
