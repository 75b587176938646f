package engine

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"unsafe"

	"github.com/ratchet/ratchet/internal/prefetch"
)

// NoSnapshots is the Durable an origin without snapshots reports: its restart keeps
// nothing, so edges keep nothing for it.
const NoSnapshots = math.MaxInt64

// CellRecord is one cell as it is saved and loaded: the tuple key made by AppendKey, the
// sequence, this region's count, the sum of the other regions' counts, and those counts
// one by one. Imported without Foreign (a record made by hand) restores as one component
// of an unnamed region.
type CellRecord struct {
	Key      string
	Seq      int64
	Regional uint64
	Imported uint64
	Foreign  []RegionCount
}

// RegionCount is one foreign region's component of a cell.
type RegionCount struct {
	Region string
	Count  uint64
}

// Snapshot returns every live cell (sequence >= seq-1 of its window), raw as Tuples
// yields them. Each tuple is copied under its shard's lock (a span of the shard's tuples
// at a time), so every record is a count that was really held; records of different
// spans may be a few microseconds apart.
func (e *Engine) Snapshot() []CellRecord {
	out := make([]CellRecord, 0, e.store.cellCount())
	for r := range e.Records {
		r.Key = strings.Clone(r.Key)
		r.Foreign = slices.Clone(r.Foreign)
		out = append(out, r)
	}
	return out
}

// TupleRecord is one tuple as a snapshot captures it: its key, its live cells and its lease
// grants that have not ended, read under one lock. The Key of each of its cells and grants
// is empty: it is the tuple's.
type TupleRecord struct {
	Key    string
	Cells  []CellRecord
	Leases []LeaseRecord
	// Part is the tuple's load part (0 to Parts-1), 1/1024 of its shard: Tuples
	// yields the tuples in part order, for a snapshot that LoadLazily reads back part by
	// part.
	Part int
}

// Tuples yields every tuple that holds a live cell or a lease grant that has not ended,
// without copying the store: a shard's tuples are gathered into buffers reused from shard
// to shard, and yielded after its lock is released, so a periodic save of a million cells
// makes no garbage. A record (its key, cells, grants and their Foreign) is valid only
// during the call. Shards are visited in turn, giving way between them, and a shard is
// read tupleSpan tuples under each hold of its lock (the sweep removes no tuple while a
// pass runs, so none is missed or read twice). A snapshot reads
// the cells and the grants in this one pass: each tuple's side struct is read once, and
// a grant's record can refer to its tuple's cell record for the key (persist).
func (e *Engine) Tuples(yield func(TupleRecord) bool) {
	var c tupleCapture
	now := e.clock.NowMs()
	e.store.passes.Add(1)
	defer e.store.passes.Add(-1)
	for i := range e.store.shards {
		e.store.waitShard(i)
		c.reset()
		sh := &e.store.shards[i]
		// A shard is read tupleSpan slots at a time, each under one hold of its lock: a
		// request waits for a span, not the shard (40,000 tuples at 10M). Between two
		// spans the sweep removes nothing (passes), so no slot moves; a tuple inserted
		// meanwhile is read if it comes before the end, and is marked changed (Dirty).
		for j := 0; ; {
			c.reserve(tupleSpan)
			lockYielding(&sh.mu)
			end := min(sh.n, j+tupleSpan)
			if j == 0 {
				// Count the shard's grants first, to size the buffer: a loop of loads that
				// do not depend on each other, so the CPU fetches many side structs at
				// once, where the pass below would wait for each in turn.
				n := 0
				for _, sd := range sh.sides {
					if sd != nil {
						n += len(sd.leases.grants)
					}
				}
				c.leases = slices.Grow(c.leases, n)
			}
			c.begin(e) // under this hold: a reset may have come since the last
			for ; j < end; j++ {
				c.add(e, sh, j, now, false)
			}
			more := j < sh.n
			sh.mu.Unlock()
			if !more {
				break
			}
		}
		if !c.yield(e, yield) {
			return
		}
		runtime.Gosched()
	}
}

// tupleSpan is the number of slots Tuples reads under one hold of a shard's lock (about
// 100 µs).
const tupleSpan = 1024

// tupleCapture gathers the records of one shard's tuples under its lock, into buffers
// reused from shard to shard (Tuples, Dirty), and yields them once the lock is released.
type tupleCapture struct {
	tuples  []tupleAt
	order   []int // tuples' indexes in part order
	keys    []byte
	cells   []CellRecord
	fAt     []span // per cell, its foreign components in foreign
	foreign []RegionCount
	leases  []LeaseRecord
	// last is what the last shard's capture held (reset), for reserve.
	last   struct{ tuples, cells, foreign, keys int }
	named  bool // foreign regions have names (read under the shard's lock)
	resets bool // some tuple has a reset record
}

type span struct{ off, n int }

type tupleAt struct {
	key, cells, leases span
	part               int
}

// reserve makes room in the buffers for n more tuples, with as many cells, foreign
// components and key bytes a tuple as the last shard's had (one cell and 48 bytes before
// any). It is called before the shard's lock is taken: an append under the lock that grows
// a buffer allocates, and an allocation may assist the garbage collector, parked with the
// lock held (a save of the first frame after a 10M restart kept requests waiting on its
// shards for milliseconds, the buffers grown by doubling from empty in every pass).
// Leases are not reserved for: few tuples have grants (Tuples counts them first).
func (c *tupleCapture) reserve(n int) {
	per := func(total, fallback int) int { // n tuples' worth of total over the last tuples
		if c.last.tuples == 0 {
			return n * fallback
		}
		return (n*total + c.last.tuples - 1) / c.last.tuples
	}
	cells := per(c.last.cells, 1)
	c.tuples = slices.Grow(c.tuples, n)
	c.cells = slices.Grow(c.cells, cells)
	c.fAt = slices.Grow(c.fAt, cells)
	c.foreign = slices.Grow(c.foreign, per(c.last.foreign, 0))
	c.keys = slices.Grow(c.keys, per(c.last.keys, 48))
}

// reset empties the buffers for the next shard, their lengths kept for reserve.
func (c *tupleCapture) reset() {
	if len(c.tuples) > 0 {
		c.last.tuples, c.last.cells, c.last.foreign, c.last.keys = len(c.tuples), len(c.cells), len(c.foreign), len(c.keys)
	}
	c.tuples, c.keys, c.cells, c.fAt, c.foreign, c.leases = c.tuples[:0], c.keys[:0], c.cells[:0], c.fAt[:0], c.foreign[:0], c.leases[:0]
}

// begin reads what add needs of the engine, the shard's lock held.
func (c *tupleCapture) begin(e *Engine) {
	c.named = !e.regions.empty()
	c.resets = e.resets.count.Load() > 0
}

// add captures slot j of sh (locked) at now: its live cells and its grants that have not
// ended; a tuple with neither is kept only with empty set.
func (c *tupleCapture) add(e *Engine, sh *shard, j int, now int64, empty bool) {
	sl := sh.at(j)
	key := sh.keyOf(sl)
	t := tupleAt{cells: span{len(c.cells), 0}, leases: span{len(c.leases), 0}}
	if w := windowOfKey(key); w > 0 {
		var r *tupleReset // the cells are saved raw: plus what resets cancelled (reset.go)
		if c.resets {
			r = sh.resets[key]
		}
		for k := range entryCells {
			if !sl.ent.live(k, w, now) {
				continue
			}
			cl := sh.cell(&sl.ent, k)
			f0 := len(c.foreign)
			imported := cl.imported
			if c.named {
				for _, f := range sh.foreign(&sl.ent, k) {
					name := e.regions.name(f.region)
					n := satAdd(f.count, r.cancelled(cl.seq, name))
					imported = satAdd(imported, n-f.count)
					c.foreign = append(c.foreign, RegionCount{Region: name, Count: n})
				}
			}
			c.fAt = append(c.fAt, span{f0, len(c.foreign) - f0})
			c.cells = append(c.cells, CellRecord{Seq: cl.seq, Regional: satAdd(cl.regional, r.cancelled(cl.seq, e.region)), Imported: imported})
		}
	}
	if sd := sh.side(&sl.ent); sd != nil {
		sh.settle(&sl.ent)
		for _, g := range sd.leases.grants {
			if g.held(now) == 0 {
				continue // it reserves nothing, and never will again without a new grant
			}
			c.leases = append(c.leases, LeaseRecord{Run: g.run.name, G: g.g, Spent: g.spent, Seq: g.seq, UntilMs: g.until})
		}
	}
	t.cells.n, t.leases.n = len(c.cells)-t.cells.off, len(c.leases)-t.leases.off
	if t.cells.n == 0 && t.leases.n == 0 && !empty {
		return
	}
	t.key = span{len(c.keys), len(key)}
	c.keys = append(c.keys, key...)
	c.tuples = append(c.tuples, t)
}

// yield yields the captured tuples in part order, and reports false when yield stopped.
func (c *tupleCapture) yield(e *Engine, yield func(TupleRecord) bool) bool {
	for k, fs := range c.fAt {
		if fs.n > 0 {
			c.cells[k].Foreign = c.foreign[fs.off : fs.off+fs.n : fs.off+fs.n]
		}
	}
	// In part order (a counting sort: the part is the next bits of the hash that picked
	// the shard).
	var at [loadParts + 1]int
	for k := range c.tuples {
		t := &c.tuples[k]
		t.part = partOf(hashKey(e.store.seed, c.keys[t.key.off:t.key.off+t.key.n]))
		at[t.part%loadParts+1]++
	}
	for p := 1; p <= loadParts; p++ {
		at[p] += at[p-1]
	}
	c.order = slices.Grow(c.order[:0], len(c.tuples))[:len(c.tuples)]
	for k := range c.tuples {
		p := c.tuples[k].part % loadParts
		c.order[at[p]] = k
		at[p]++
	}
	for _, k := range c.order {
		t := &c.tuples[k]
		r := TupleRecord{
			Part:   t.part,
			Cells:  c.cells[t.cells.off : t.cells.off+t.cells.n : t.cells.off+t.cells.n],
			Leases: c.leases[t.leases.off : t.leases.off+t.leases.n : t.leases.off+t.leases.n],
		}
		if t.key.n > 0 {
			r.Key = unsafe.String(&c.keys[t.key.off], t.key.n)
		}
		if !yield(r) {
			return false
		}
	}
	return true
}

// Records yields every live cell, as Snapshot returns them, from Tuples: a record (its key
// and Foreign) is valid only during the call.
func (e *Engine) Records(yield func(CellRecord) bool) {
	for t := range e.Tuples {
		for _, c := range t.Cells {
			c.Key = t.Key
			if !yield(c) {
				return
			}
		}
	}
}

// Restore merges records into the store with max, keeping only cells that are still live.
// Records are raw (Tuples): what the resets restored before (RestoreResets) cancelled of
// each component is taken off.
// Live cells are loaded even beyond --max-memory (a bound must never forget a live cell);
// new cells are then refused until the sweep frees room. It returns the number of cells
// loaded and dropped; a record whose key does not decode is an error and stops nothing
// else.
func (e *Engine) Restore(recs []CellRecord) (loaded, dropped int, err error) {
	r := restoring{e: e}
	defer r.release() // also when a panic (a fault reading the file a lazy load aliases) is recovered above
	now := e.clock.NowMs()
	var lastW, seq int64 // the sequence at now of the window lastW (a division saved)
	var hashes [restoreAhead]uint64
	for g := 0; g < len(recs); g += restoreAhead {
		group := recs[g:min(g+restoreAhead, len(recs))]
		if r.run >= restoreRun {
			r.release() // not held over the next group's hashing
		}
		for j := range group {
			hashes[j] = hashKey(e.store.seed, group[j].Key)
		}
		r.prefetch(hashes[:len(group)])
		for j := range group {
			r.run++ // every record passed under a hold counts, kept or not
			rec := &group[j]
			key := unsafe.Slice(unsafe.StringData(rec.Key), len(rec.Key)) // not kept, nor changed: addTuple copies it
			w, _, _, perr := splitKey(key)
			if perr != nil {
				err = fmt.Errorf("restore cell: %w", perr)
				dropped++
				continue
			}
			if w != lastW {
				lastW, seq = w, now/w
			}
			// Only seq-1 and seq can matter; a later sequence means the clock that wrote
			// the snapshot was ahead of ours, and taking it could push out a live cell.
			if rec.Seq < seq-1 || rec.Seq > seq {
				dropped++
				continue
			}
			sh := &e.store.shards[hashes[j]%shardCount] // as locateLoaded: a lazy load's own restore, or no lazy load
			r.lock(sh)
			if !e.restoreRecord(rec, key, sh, uint32(hashes[j]>>32), w, seq, &r.bytes) {
				dropped++
				continue
			}
			loaded++
		}
	}
	return loaded, dropped, err
}

// restoreAhead is how many records Restore hashes ahead, asking for the index bucket
// where each record's lookup begins when its shard's lock is held already (a load part's
// records are of one shard): the misses overlap, rather than one lookup after the other
// (BenchmarkLoadAhead: 112 to 123 ns a cell with plain reads of the buckets, 102 with
// prefetches, which do not hold up the instructions after them).
const restoreAhead = 8

// prefetch asks for the home buckets of the keys of hashes hs that are in the shard held.
func (r *restoring) prefetch(hs []uint64) {
	sh := r.held
	if sh == nil || len(sh.index) == 0 {
		return
	}
	for _, h := range hs {
		if &r.e.store.shards[h%shardCount] == sh {
			prefetch.Line(unsafe.Pointer(&sh.index[sh.homeOf(uint32(h>>32))]))
		}
	}
}

// restoreRun is the most records Restore passes under one hold of a shard's lock: a load
// part's records are of one shard (partOf), and locking it once for them saved a lock per
// record. A request waiting for the lock may still wait longer: Go's mutex lets the
// goroutine that let go of it take it again at once, until a waiter has waited 1 ms. The
// background load's calls are batches of loadBatch parts (about 600 records at 10M
// tuples, 0.1 ms), whose part locks a request on them waits for anyway.
const restoreRun = 64

// restoring is Restore's hold of a shard's lock, kept across consecutive records of the
// shard (restoreRun at most), and the bytes of the tuples it added, counted into the
// store's total when it lets go of the lock (one write of a cache line every core writes,
// rather than one a tuple; a request's bound lags them by a run's tuples at most for
// each Restore under way: LoadAhead's workers and the background load's).
type restoring struct {
	e     *Engine
	held  *shard
	run   int // records passed under the hold
	bytes int64
}

// lock holds sh's lock, letting go of the one held unless it is sh's and held for fewer
// than restoreRun records.
func (r *restoring) lock(sh *shard) {
	if sh == r.held && r.run < restoreRun {
		return
	}
	r.release()
	sh.mu.Lock()
	r.held, r.run = sh, 1
}

// release lets go of the shard lock held, if any, and counts the bytes added.
func (r *restoring) release() {
	if r.bytes != 0 {
		r.e.store.bytes.Add(r.bytes)
		r.bytes = 0
	}
	if r.held != nil {
		r.held.mu.Unlock()
		r.held = nil
	}
	r.run = 0
}

// restoreRecord merges one record of Restore (key its key's bytes, of hash h in shard sh,
// locked by the caller; w its window, seq the window's sequence now) into the store, and
// reports whether it was kept. The bytes of a tuple it adds are added to *bytes, not to the
// store's total.
func (e *Engine) restoreRecord(r *CellRecord, key []byte, sh *shard, h uint32, w, seq int64, bytes *int64) bool {
	ent := sh.lookup(h, key)
	if ent == nil {
		if ent = e.store.addTuple(sh, h, key); ent != nil { // nil only when the shard holds maxSlots
			*bytes += tupleBytes(len(key))
		}
	}
	i := -1
	if ent != nil {
		i = e.store.slot(sh, ent, r.Seq, seq, w)
	}
	if i < 0 {
		return false
	}
	var rs *tupleReset // what the resets restored before cancelled
	if e.resets.count.Load() > 0 {
		rs = sh.resets[string(key)] // a lookup: the file's bytes are not kept
	}
	eff := func(region string, n uint64) uint64 {
		return capCount(n) - min(capCount(n), rs.cancelled(r.Seq, region))
	}
	ent.regional[i] = max(ent.regional[i], eff(e.region, r.Regional))
	foreign := r.Foreign
	if len(foreign) == 0 && r.Imported > 0 {
		foreign = []RegionCount{{Count: r.Imported}}
	}
	for _, f := range foreign {
		if f.Region == e.region {
			ent.regional[i] = max(ent.regional[i], eff(e.region, f.Count))
		} else if id, err := e.regions.id(f.Region); err == nil {
			e.store.raise(sh, ent, i, id, eff(f.Region, f.Count))
		}
	}
	if !e.standalone {
		e.store.setPublished(sh, ent, i, max(sh.published(ent, i), ent.regional[i])) // published before, or restored from a peer
	}
	return true
}
