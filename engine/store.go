package engine

import (
	"errors"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
)

// The store holds the authoritative counts of this process.
//
// Concurrency: the store is split into shards by a hash of the tuple key. Each shard's
// mutex guards its map and every entry in it; a decision holds exactly one shard lock for
// the lookup, the window math and the add, so decisions on one tuple are serialised (and
// exact) while decisions on different tuples run in parallel. The byte and cell gauges
// are atomics shared by all shards.
//
// Each tuple keeps its two newest cells. A third sequence replaces the older one: cells
// older than seq-1 never matter again. A sweep drops tuples whose newest cell is older
// than seq-1; nothing else ever removes a cell, so a live cell is never forgotten.

const shardCount = 256

// entryOverhead estimates the bytes one tuple costs beyond its key: the map slot, the
// string header, the entry itself and allocator slack. It only feeds the --max-memory bound.
const entryOverhead = 128

// ErrFull is returned when a request needs a new cell and the store is at --max-memory.
var ErrFull = errors.New("OOM cell store is full (--max-memory)")

// emptySeq marks an unused slot; no real sequence is negative this far.
const emptySeq = math.MinInt64

type cell struct {
	seq       int64  // emptySeq: unused slot
	regional  uint64 // this region's count
	imported  uint64 // the sum of foreign
	published uint64 // the regional count last handed to the publisher
	minLimit  uint64 // the lowest limit seen for the cell; 0 when none was
	foreign   []component
}

// component is one foreign region's share of a cell, merged with max.
type component struct {
	region uint16 // index in the engine's region table
	count  uint64
}

// raise merges a foreign region's count into the cell with max, keeping imported the sum.
func (c *cell) raise(region uint16, count uint64) bool {
	count = capCount(count)
	for i := range c.foreign {
		if f := &c.foreign[i]; f.region == region {
			if count <= f.count {
				return false
			}
			c.imported = satAdd(c.imported-f.count, count)
			f.count = count
			return true
		}
	}
	if count == 0 {
		return false
	}
	c.foreign = append(c.foreign, component{region: region, count: count})
	c.imported = satAdd(c.imported, count)
	return true
}

// seeLimit records a limit used against the cell.
func (c *cell) seeLimit(limit uint64) {
	if limit > 0 && (c.minLimit == 0 || limit < c.minLimit) {
		c.minLimit = limit
	}
}

func (c cell) total() uint64 { return satAdd(c.regional, c.imported) }

type entry struct {
	cells [2]cell
}

func newEntry() *entry {
	return &entry{cells: [2]cell{{seq: emptySeq}, {seq: emptySeq}}}
}

// find returns the slot holding seq, or nil.
func (e *entry) find(seq int64) *cell {
	for i := range e.cells {
		if e.cells[i].seq == seq {
			return &e.cells[i]
		}
	}
	return nil
}

// counts returns the totals of cells seq and seq-1.
func (e *entry) counts(seq int64) (cur, prev cell) {
	cur, prev = cell{seq: seq}, cell{seq: seq - 1}
	for _, c := range e.cells {
		switch c.seq {
		case seq:
			cur = c
		case seq - 1:
			prev = c
		}
	}
	return cur, prev
}

// slot returns the slot for seq, given the current sequence now of the tuple's window,
// or nil when seq cannot be kept. A new seq takes an empty slot or one whose cell can no
// longer matter (older than now-1). Live cells (now-1, now) are never pushed out, with one
// exception: a cell from the future (a peer or an edge whose clock runs a little ahead)
// gives way to the current one. A late or future seq that finds no such slot is refused.
// grew reports that a previously empty slot was taken (the store holds one more cell).
func (e *entry) slot(seq, now int64) (c *cell, grew bool) {
	if c := e.find(seq); c != nil {
		return c, false
	}
	if seq < now-1 {
		return nil, false // dead on arrival
	}
	victim := -1
	for i := range e.cells {
		if s := e.cells[i].seq; s == emptySeq || s < now-1 {
			if victim < 0 || s < e.cells[victim].seq {
				victim = i
			}
		}
	}
	if victim < 0 && seq <= now {
		for i := range e.cells {
			if e.cells[i].seq > now && (victim < 0 || e.cells[i].seq > e.cells[victim].seq) {
				victim = i
			}
		}
	}
	if victim < 0 {
		return nil, false
	}
	grew = e.cells[victim].seq == emptySeq
	e.cells[victim] = cell{seq: seq}
	return &e.cells[victim], grew
}

func (e *entry) held() int64 {
	var n int64
	for _, c := range e.cells {
		if c.seq != emptySeq {
			n++
		}
	}
	return n
}

// dropBefore empties the slots older than seq and returns how many it emptied.
func (e *entry) dropBefore(seq int64) int64 {
	var n int64
	for i := range e.cells {
		if c := &e.cells[i]; c.seq != emptySeq && c.seq < seq {
			*c = cell{seq: emptySeq}
			n++
		}
	}
	return n
}

type shard struct {
	mu sync.Mutex
	m  map[string]*entry
}

type store struct {
	seed     maphash.Seed
	shards   [shardCount]shard
	maxBytes int64
	bytes    atomic.Int64 // estimated bytes of all entries
	cells    atomic.Int64 // occupied cell slots
	tuples   atomic.Int64
}

func newStore(maxBytes int64) *store {
	s := &store{seed: maphash.MakeSeed(), maxBytes: maxBytes}
	for i := range s.shards {
		s.shards[i].m = make(map[string]*entry)
	}
	return s
}

func (s *store) shardOf(key []byte) *shard {
	return &s.shards[maphash.Bytes(s.seed, key)%shardCount]
}

// insert adds an empty entry for key to sh (locked by the caller), or returns ErrFull.
// force skips the bound: a snapshot's live cells are loaded even past it.
func (s *store) insert(sh *shard, key []byte, force bool) (*entry, error) {
	size := int64(len(key)) + entryOverhead
	if n := s.bytes.Add(size); n > s.maxBytes && !force {
		s.bytes.Add(-size)
		return nil, ErrFull
	}
	e := newEntry()
	sh.m[string(key)] = e
	s.tuples.Add(1)
	return e, nil
}

// eachLive calls fn for every live cell (sequence >= seq-1 of its window at nowMs), with
// its shard locked; fn may change the cell. It stops when fn returns false.
func (s *store) eachLive(nowMs int64, fn func(key string, c *cell) bool) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, ent := range sh.m {
			w := windowOfKey(k)
			if w <= 0 {
				continue
			}
			for j := range ent.cells {
				if c := &ent.cells[j]; c.seq != emptySeq && c.seq >= nowMs/w-1 && !fn(k, c) {
					sh.mu.Unlock()
					return
				}
			}
		}
		sh.mu.Unlock()
	}
}

// sweep drops every cell older than seq-1 at nowMs, and the tuples left with none. It
// returns the number of cells dropped.
func (s *store) sweep(nowMs int64) int64 {
	var dropped int64
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			live := int64(math.MaxInt64) // a key without a valid window holds nothing live
			if w := windowOfKey(k); w > 0 {
				live = nowMs/w - 1
			}
			dropped += e.dropBefore(live)
			if e.held() == 0 {
				s.bytes.Add(-(int64(len(k)) + entryOverhead))
				s.tuples.Add(-1)
				delete(sh.m, k)
			}
		}
		sh.mu.Unlock()
	}
	s.cells.Add(-dropped)
	return dropped
}
