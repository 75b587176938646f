package engine

import (
	"errors"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ratchet/ratchet/internal/shardlock"
)

// The store holds the authoritative counts of this process.
//
// Concurrency: the store is split into shards by a hash of the tuple key. Each shard's
// mutex guards its table and every entry in it; a decision holds exactly one shard lock
// for the lookup, the window math and the add, so decisions on one tuple are serialised
// (and exact) while decisions on different tuples run in parallel. The byte and cell
// gauges are atomics shared by all shards.
//
// Each tuple keeps its two newest cells. A third sequence replaces the older one: cells
// older than seq-1 never matter again. A sweep drops tuples whose newest cell is older
// than seq-1; nothing else ever removes a cell, so a live cell is never forgotten.
//
// Layout (table.go): each shard is an open-addressing table whose entries live inline in
// chunks of slots outside the Go heap, with their keys when short (nearly all are), so a
// lookup touches the index bucket and one slot (the key and the cells side by side), an
// entry with a short key costs no allocation of its own, and the garbage collector neither
// scans the store nor doubles its memory. A cell keeps inline only what decisions read
// (sequence, regional count, whether it has imports) and the lowest limit seen (the
// publication threshold), packed (entry); what only replication uses (the count last
// published, the foreign components, whose sum is the imported count) lives in a side
// struct that an entry allocates when replication or imports first touch it.
//
// Pointers: a *entry (and a *cell in it) found in a shard is valid only while that shard's
// lock is held and nothing is inserted into or deleted from the shard: a delete (sweep
// only) moves the last entry into the hole and may free a chunk, and an insert is left
// free to move entries (today's chunks never do). Every caller looks up, optionally inserts (then uses the pointer insert returned), changes the
// entry and unlocks, without keeping the pointer. The same holds for a slot's key string
// (shard.keyOf aliases the slot's bytes); eachLive hands its callback keys of its own.

const shardCount = 256

// entryOverhead estimates the bytes one tuple costs: its 80-byte slot (key included up to
// keyInline bytes), its share of the index (4-byte buckets at a load of 0.57 to 0.85 as it
// grows, 0.42 after a sweep shrinks it: at most 10 bytes) and of the last, partly touched
// page of its chunk. The chunks and the
// index are outside the Go heap, so this is what the process's memory grows by (no
// collector headroom on top). tupleBytes adds a long key's heap bytes. They only feed the
// --max-memory bound; BenchmarkMemory measures the real figure.
const entryOverhead = 90

// tupleBytes estimates the bytes a tuple whose key has n bytes costs.
func tupleBytes(n int) int64 {
	if n <= keyInline {
		return entryOverhead
	}
	return entryOverhead + 16 + int64(n+15)&^15 // the key's string header in the shard's longs, and its bytes as the allocator rounds them
}

// sideBytes estimates the bytes of an entry's side struct; componentBytes those of one
// foreign component. They are added to the store's bytes when allocated (never refused:
// they belong to cells the store already holds).
const (
	sideBytes      = 128
	componentBytes = 16
)

// ErrFull is returned when a request needs a new cell and the store is at --max-memory.
var ErrFull = errors.New("cell store is full")

// emptySeq is the sequence of a cell that is not held; no real sequence is negative this
// far.
const emptySeq = math.MinInt64

// cell is what a decision reads of one window cell: a copy, made by entry.cell.
type cell struct {
	seq      int64  // emptySeq: not held
	regional uint64 // this region's count
	imported uint64 // the sum of the foreign components
	minLimit uint64 // the lowest limit seen for the cell (rounded down: packLimit); 0 when none was
}

// cellSide is what replication keeps of one cell.
type cellSide struct {
	published uint64 // the regional count last handed to the publisher
	foreign   []component
}

// entrySide is the side struct of an entry: the tuple's leases (lease.go), which outlive
// its cells, and one cellSide per cell slot, same index. The leases come first: their
// slice header and inline grant fill the first 64 bytes, so a replay or a snapshot that
// reads a tuple's one grant touches one cache line of it (the allocator places 128-byte
// objects at multiples of 128).
type entrySide struct {
	leases leaseSet
	cells  [entryCells]cellSide
}

// empty reports whether sd holds nothing.
func (sd *entrySide) empty() bool {
	for _, c := range sd.cells {
		if c.published != 0 || c.foreign != nil {
			return false
		}
	}
	return len(sd.leases.grants) == 0
}

// component is one foreign region's share of a cell, merged with max.
type component struct {
	region uint16 // index in the engine's region table
	count  uint64
}

func (c cell) total() uint64 { return satAdd(c.regional, c.imported) }

// entryCells is the number of cells a tuple keeps: the current window's and the previous
// one's.
const entryCells = 2

// entry is a tuple's state in its slot: its two cells, packed, and the lease bookkeeping.
//
// The cells' sequences: seq is cell 0's when cell 0 is held, else cell 1's; when both are,
// cell 1's is seq plus the signed delta in meta's high bits. Two cells that matter are
// seq-1 and seq of one window, and any cell older than seq-1 is dead, so the delta of two
// cells worth keeping is small: one that does not fit (2^27 windows apart) is never kept
// beside the other (store.slot). A cell's imported count (the sum of its foreign
// components) lives with those components in the side struct, and meta says which cells
// have any: a decision on a tuple that has no imports (every tuple of an origin without
// peers) reads only the slot. minLimit is packed in 32 bits, rounded down (packLimit):
// it only sets the publication threshold, which rounding down can only lower.
//
// The side struct is held by the shard (shard.side): side is its index there, plus one
// (0: none until replication, an import or a lease needs one).
type entry struct {
	side uint32
	// owed is cost that the replays of the run whose id is owedRun applied to the cells
	// and that its lease grant (in side) has not been told of yet: a replay item adds to
	// it here, in the slot it has read already, instead of reaching into the side struct
	// for every item (one cache miss each). settle moves it into the grant; everything
	// that reads the grants settles first (lease.go).
	owedRun  uint32
	owed     uint32
	meta     uint32             // heldBit<<i, importsBit<<i, and cell 1's delta (see above)
	seq      int64              // see above
	regional [entryCells]uint64 // this region's count of each cell
	minLimit [entryCells]uint32 // packLimit of the lowest limit seen for each cell; 0 when none was
}

// The bits of entry.meta.
const (
	heldBit    = 1 << 0 // <<i: cell i holds a sequence
	importsBit = 1 << 2 // <<i: cell i has foreign components (in the side struct)
	deltaShift = 4      // meta's bits from deltaShift up: cell 1's sequence minus cell 0's, signed
	maxDelta   = 1<<(31-deltaShift) - 1
	minDelta   = -1 << (31 - deltaShift)
)

func (e *entry) reset() { *e = entry{} }

// seqOf returns the sequence of cell i, emptySeq when it is not held. The delta is 0
// unless both cells are held (setSeqs), so a held cell is seq plus the delta for cell 1.
func (e *entry) seqOf(i int) int64 {
	if e.meta>>i&heldBit == 0 {
		return emptySeq
	}
	return e.seq + int64(int32(e.meta)>>deltaShift)&-int64(i)
}

// setSeqs sets the sequences of the two cells (emptySeq: not held) and reports whether it
// could: two held cells more than 2^27 windows apart cannot be kept together, and then
// nothing changes.
func (e *entry) setSeqs(s0, s1 int64) bool {
	m := e.meta & (importsBit | importsBit<<1)
	switch {
	case s0 != emptySeq && s1 != emptySeq:
		d := s1 - s0
		if d < minDelta || d > maxDelta {
			return false
		}
		e.seq, m = s0, m|heldBit|heldBit<<1|uint32(int32(d))<<deltaShift
	case s0 != emptySeq:
		e.seq, m = s0, m|heldBit
	case s1 != emptySeq:
		e.seq, m = s1, m|heldBit<<1
	default:
		e.seq = 0
	}
	e.meta = m
	return true
}

// setSeq sets the sequence of cell i, as setSeqs.
func (e *entry) setSeq(i int, seq int64) bool {
	if i == 0 {
		return e.setSeqs(seq, e.seqOf(1))
	}
	return e.setSeqs(e.seqOf(0), seq)
}

// imported returns the imported count of ent's cell i: the sum of its foreign
// components.
func (sh *shard) imported(ent *entry, i int) uint64 {
	if ent.meta>>i&importsBit == 0 {
		return 0
	}
	var n uint64
	for _, f := range sh.side(ent).cells[i].foreign {
		n = satAdd(n, f.count)
	}
	return n
}

// cell returns a copy of ent's cell i.
func (sh *shard) cell(ent *entry, i int) cell {
	return cell{seq: ent.seqOf(i), regional: ent.regional[i], imported: sh.imported(ent, i), minLimit: unpackLimit(ent.minLimit[i])}
}

// add adds cost to cell i's regional count. With seeLimit, what a decision does to a cell
// (two functions: each is inlined).
func (e *entry) add(i int, cost uint64) { e.regional[i] = satAdd(e.regional[i], cost) }

// seeLimit records limit (0: none) as used against cell i.
func (e *entry) seeLimit(i int, limit uint64) {
	if p := packLimit(limit); p-1 < e.minLimit[i]-1 { // p > 0, and below the limit kept or none was (0)
		e.minLimit[i] = p
	}
}

// live reports whether cell i, of a tuple of window w, is held and still matters at nowMs:
// its sequence is the current one or the one before.
func (e *entry) live(i int, w, nowMs int64) bool {
	s := e.seqOf(i)
	return s != emptySeq && s >= nowMs/w-1
}

// limitMantissa is the bits of a limit that packLimit keeps.
const limitMantissa = 26

// packLimit packs limit in 32 bits, rounded down to its 26 highest bits (a relative error
// under 2^-25) when it is larger: the exponent (bits 26-31) and the mantissa. The packing
// keeps the order (a < b implies packLimit(a) <= packLimit(b)), 0 packs to 0 and nothing
// else does.
func packLimit(limit uint64) uint32 {
	sh := max(bits.Len64(limit), limitMantissa) - limitMantissa // 0 below 2^26: the limit itself
	return uint32(sh)<<limitMantissa | uint32(limit>>sh)
}

// unpackLimit returns the limit packLimit packed (rounded down).
func unpackLimit(p uint32) uint64 {
	return uint64(p&(1<<limitMantissa-1)) << (p >> limitMantissa)
}

// find returns the index of the cell holding seq, or -1.
func (e *entry) find(seq int64) int {
	for i := range entryCells {
		if e.seqOf(i) == seq {
			return i
		}
	}
	return -1
}

// newest returns the latest sequence held (emptySeq when none).
func (e *entry) newest() int64 { return max(e.seqOf(0), e.seqOf(1)) }

// counts returns ent's cells seq and seq-1 (zero cells when not held), without their
// limits (decisions do not read them).
func (sh *shard) counts(ent *entry, seq int64) (cur, prev cell) {
	cur, prev = ent.regionalCounts(seq)
	if ent.meta&(importsBit|importsBit<<1) != 0 {
		sh.importedOf(ent, &cur, &prev)
	}
	return cur, prev
}

// regionalCounts is counts without the imported counts: what a tuple without imports
// holds, from the slot alone (and small enough to be inlined).
func (e *entry) regionalCounts(seq int64) (cur, prev cell) {
	cur, prev = cell{seq: seq}, cell{seq: seq - 1}
	for i, r := range e.regional {
		if s := e.seqOf(i); s == seq {
			cur.regional = r
		} else if s == seq-1 {
			prev.regional = r
		}
	}
	return cur, prev
}

// importedOf sets the imported counts of cur and prev, cells of ent (counts).
func (sh *shard) importedOf(ent *entry, cur, prev *cell) {
	for i := range entryCells {
		switch ent.seqOf(i) {
		case cur.seq:
			cur.imported = sh.imported(ent, i)
		case prev.seq:
			prev.imported = sh.imported(ent, i)
		}
	}
}

// published returns the count of ent's cell slot i last handed to the publisher.
func (sh *shard) published(ent *entry, i int) uint64 {
	if sd := sh.side(ent); sd != nil {
		return sd.cells[i].published
	}
	return 0
}

// foreign returns the foreign components of ent's cell slot i.
func (sh *shard) foreign(ent *entry, i int) []component {
	if sd := sh.side(ent); sd != nil {
		return sd.cells[i].foreign
	}
	return nil
}

// held returns the number of cells held.
func (e *entry) held() int64 { return int64(e.meta&heldBit + e.meta>>1&heldBit) }

// side returns ent's side struct (ent in sh), nil when it has none.
func (sh *shard) side(ent *entry) *entrySide {
	if ent.side == 0 {
		return nil
	}
	return sh.sides[ent.side-1]
}

// sideOf returns ent's side struct (ent in sh), allocating it.
func (s *store) sideOf(sh *shard, ent *entry) *entrySide {
	if ent.side == 0 {
		sd := new(entrySide)
		if n := len(sh.freeSides); n > 0 {
			ent.side = sh.freeSides[n-1] + 1
			sh.freeSides = sh.freeSides[:n-1]
			sh.sides[ent.side-1] = sd
		} else {
			sh.sides = append(sh.sides, sd)
			ent.side = uint32(len(sh.sides))
		}
		s.bytes.Add(sideBytes)
		return sd
	}
	return sh.sides[ent.side-1]
}

// clearCell empties cell i: its sequence (emptySeq), counts and limit, and its
// replication state, freeing the side struct when nothing is left in it. The caller counts
// the cell out of the store's.
func (s *store) clearCell(sh *shard, ent *entry, i int) {
	ent.regional[i], ent.minLimit[i] = 0, 0
	ent.meta &^= importsBit << i
	ent.setSeq(i, emptySeq) // one cell held at most: it fits
	sd := sh.side(ent)
	if sd == nil {
		return
	}
	s.bytes.Add(-int64(cap(sd.cells[i].foreign)) * componentBytes)
	sd.cells[i] = cellSide{}
	s.freeSideIfEmpty(sh, ent)
}

// freeSideIfEmpty frees ent's side struct when nothing is left in it.
func (s *store) freeSideIfEmpty(sh *shard, ent *entry) {
	if sd := sh.side(ent); sd != nil && sd.empty() {
		s.bytes.Add(-sideBytes)
		at := ent.side - 1
		sh.sides[at] = nil
		ent.side = 0
		if len(sh.freeSides)+1 == len(sh.sides) {
			sh.sides, sh.freeSides = nil, nil
			return
		}
		sh.freeSides = append(sh.freeSides, at)
	}
}

// setPublished records that ent's cell slot i was handed to the publisher at count n.
func (s *store) setPublished(sh *shard, ent *entry, i int, n uint64) {
	if n == sh.published(ent, i) {
		return
	}
	s.sideOf(sh, ent).cells[i].published = n
}

// raise merges a foreign region's count into ent's cell slot i with max (the cell's
// imported count is the sum of its components). It reports whether the count changed.
func (s *store) raise(sh *shard, ent *entry, i int, region uint16, count uint64) bool {
	count = capCount(count)
	fs := sh.foreign(ent, i)
	for j := range fs {
		if fs[j].region == region {
			if count <= fs[j].count {
				return false
			}
			fs[j].count = count
			return true
		}
	}
	if count == 0 {
		return false
	}
	cs := &s.sideOf(sh, ent).cells[i]
	before := cap(cs.foreign)
	cs.foreign = append(cs.foreign, component{region: region, count: count})
	s.bytes.Add(int64(cap(cs.foreign)-before) * componentBytes)
	ent.meta |= importsBit << i
	return true
}

// slot returns the index of ent's slot for seq, given the current sequence now of the
// tuple's window, or -1 when seq cannot be kept. A new seq takes an empty slot or one whose
// cell can no longer matter (older than now-1). Live cells (now-1, now) are never pushed
// out, with one exception: a cell from the future (a peer or an edge whose clock runs a
// little ahead) gives way to the current one. A late or future seq that finds no such slot
// is refused. Taking an empty slot counts one more cell in the store. w is the tuple's
// window: a new cell's death, (seq+2)*w, may make the shard due for a sweep sooner
// (shard.sweepDue).
//
// The two cells of an entry are at most 2^27 windows apart (entry): when seq is further
// from the other cell, that cell gives way if it is dead or from the future (and seq is
// not), else seq is refused.
func (s *store) slot(sh *shard, ent *entry, seq, now, w int64) int {
	if i := ent.find(seq); i >= 0 {
		return i
	}
	if seq < now-1 {
		sh.emptied(ent)
		return -1 // dead on arrival
	}
	victim := -1
	for i := range entryCells {
		if sq := ent.seqOf(i); sq == emptySeq || sq < now-1 {
			if victim < 0 || sq < ent.seqOf(victim) {
				victim = i
			}
		}
	}
	if victim < 0 && seq <= now {
		for i := range entryCells {
			if sq := ent.seqOf(i); sq > now && (victim < 0 || sq > ent.seqOf(victim)) {
				victim = i
			}
		}
	}
	if victim < 0 {
		sh.emptied(ent)
		return -1
	}
	if other := 1 - victim; !ent.fits(victim, seq) {
		if o := ent.seqOf(other); o >= now-1 && (o <= now || seq > now) {
			sh.emptied(ent)
			return -1
		}
		s.clearCell(sh, ent, other)
		sh.cells.Add(-1)
	}
	if ent.seqOf(victim) == emptySeq {
		sh.cells.Add(1)
	}
	s.clearCell(sh, ent, victim)
	ent.setSeq(victim, seq) // it fits (above)
	sh.sweepDue = min(sh.sweepDue, deathMs(seq, w))
	return victim
}

// deathMs is when a cell of sequence seq of window w can no longer matter, and the sweep
// drops it (entry.live): (seq+2)*w, or math.MaxInt64 past it (an edge's replay may carry
// any future sequence).
func deathMs(seq, w int64) int64 {
	switch {
	case w <= 0:
		return 0 // no valid window: due now (it holds nothing live)
	case seq > math.MaxInt64-2:
		return math.MaxInt64
	case seq+2 <= 0:
		return 0 // long dead
	}
	// A multiplication that reports its overflow, not a division: slot calls this for
	// every new cell, on the request path.
	hi, lo := bits.Mul64(uint64(seq+2), uint64(w))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// emptied makes sh (locked) due for a sweep when ent holds no cell: a tuple inserted for a
// cell that slot then refused (a replay or a peer's count of a dead cell) is left empty,
// for the sweep to drop.
func (sh *shard) emptied(ent *entry) {
	if ent.held() == 0 {
		sh.sweepDue = 0
	}
}

// fits reports whether cell i can take seq beside the entry's other cell: whether the two
// are at most maxDelta windows apart (or the other is not held).
func (e *entry) fits(i int, seq int64) bool {
	o := e.seqOf(1 - i)
	return o == emptySeq || (o-seq <= maxDelta && seq-o <= maxDelta)
}

// dropBefore empties ent's slots older than seq and returns how many it emptied.
func (s *store) dropBefore(sh *shard, ent *entry, seq int64) int64 {
	var n int64
	for i := range entryCells {
		if sq := ent.seqOf(i); sq != emptySeq && sq < seq {
			s.clearCell(sh, ent, i)
			n++
		}
	}
	return n
}

type store struct {
	shards   [shardCount]shard   // first: 256-byte shards start on cache lines
	seed     uint64              // hashKey's (hash.go)
	hash     func(string) uint32 // a key's hash in its shard (hashInShard)
	maxBytes int64
	// loader is a lazy load's (load.go) until every part is loaded; nil otherwise.
	loader atomic.Pointer[loader]
	// bytes, written by every core that adds a tuple, is on a cache line of its own: on
	// the line of seed and loader, which every request reads, each write took the line
	// from the other cores (with the counts of cells and tuples, now the shards', a
	// seventh of a snapshot's load on two threads).
	_     [64 - 32]byte
	bytes atomic.Int64 // estimated bytes of all entries
	_     [64 - 8]byte
	// tracking says that changed tuples are marked in the shards' dirty sets (dirty.go),
	// set at New.
	tracking bool
	// passes counts the passes of Tuples under way: while one is, the sweep removes no
	// tuple, so slots stay where they are while a pass lets go of a shard's lock.
	passes atomic.Int32
}

func newStore(maxBytes int64) *store {
	s := &store{seed: newShardSeed(), maxBytes: maxBytes}
	s.hash = func(k string) uint32 { return hashInShard(s.seed, k) }
	return s
}

// cellCount returns the number of occupied cell slots (the shards' counts summed).
func (s *store) cellCount() int64 {
	var n int64
	for i := range s.shards {
		n += s.shards[i].cells.Load()
	}
	return n
}

// tupleCount returns the number of tuples (the shards' counts summed).
func (s *store) tupleCount() int64 {
	var n int64
	for i := range s.shards {
		n += s.shards[i].tuples.Load()
	}
	return n
}

// locate returns the shard of key and the hash that places it in the shard's table.
func (s *store) locate(key []byte) (*shard, uint32) {
	i, h := s.locateIndex(key)
	return &s.shards[i], h
}

// locateIndex is locate with the shard as its index in s.shards (the order in which
// Engine.Transact locks shards).
func (s *store) locateIndex(key []byte) (int, uint32) {
	h := hashKey(s.seed, key)
	if l := s.loader.Load(); l != nil {
		l.ensureKey(h, key)
	}
	return int(h % shardCount), uint32(h >> 32)
}

// locateLoaded is locate without waiting for a lazy load (a restore's own lookups).
func (s *store) locateLoaded(key []byte) (*shard, uint32) {
	h := hashKey(s.seed, key)
	return &s.shards[h%shardCount], uint32(h >> 32)
}

// lookup returns the entry of key (locked shard sh, hash h from locate), or nil.
func (sh *shard) lookup(h uint32, key []byte) *entry {
	if i := sh.find(h, key); i >= 0 {
		return &sh.at(i).ent
	}
	return nil
}

// insert adds an empty entry for key (not held) to sh, locked by the caller, or returns
// ErrFull. force skips the bound: a snapshot's live cells are loaded even past it. Every
// *entry of sh taken before the insert is invalid after it.
func (s *store) insert(sh *shard, h uint32, key []byte, force bool) (*entry, error) {
	size := tupleBytes(len(key))
	if n := s.bytes.Add(size); n > s.maxBytes && !force {
		s.bytes.Add(-size)
		return nil, ErrFull
	}
	ent := s.addTuple(sh, h, key)
	if ent == nil { // the shard holds maxSlots: not before the process is out of memory
		s.bytes.Add(-size)
		return nil, ErrFull
	}
	return ent, nil
}

// addTuple is insert without the store's bytes (its caller counts them: Restore), and so
// without the bound: nil only when the shard holds maxSlots.
func (s *store) addTuple(sh *shard, h uint32, key []byte) *entry {
	// While a load goes on, the shards fill a chunk at a time: its pages mapped at once
	// rather than each on a fault of its own (a 10M-tuple load: 214k page faults and 1.80
	// s of CPU before, 15k and 1.70 after), the ones a load leaves untouched given back
	// when it is done (loader.shardStep, finish).
	i := sh.add(s.hash, h, key, s.loader.Load() != nil)
	if i < 0 {
		return nil
	}
	ent := &sh.at(i).ent
	ent.reset()
	sh.tuples.Add(1)
	return ent
}

// eachLive calls fn for every live cell (sequence >= seq-1 of its window at nowMs): slot i
// of ent, with its shard sh locked; fn may change the cell but must not keep ent, nor key:
// key may alias the slot's bytes, so fn copies what it keeps.
// It stops when fn returns false.
func (s *store) eachLive(nowMs int64, fn func(sh *shard, key string, ent *entry, i int) bool) {
	for i := range s.shards {
		s.waitShard(i)
		if !s.liveIn(&s.shards[i], nowMs, fn) {
			return
		}
		// Background passes give way between shards: with few threads (--threads 1) a
		// request would otherwise wait for the whole pass.
		runtime.Gosched()
	}
}

// liveIn is eachLive over one shard. It reports false when fn stopped it.
func (s *store) liveIn(sh *shard, nowMs int64, fn func(sh *shard, key string, ent *entry, i int) bool) bool {
	lockYielding(&sh.mu)
	defer sh.mu.Unlock()
	for j := range sh.n {
		sl := sh.at(j)
		key := sh.keyOf(sl)
		w := windowOfKey(key)
		if w <= 0 {
			continue
		}
		for k := range entryCells {
			if !sl.ent.live(k, w, nowMs) {
				continue
			}
			if !fn(sh, key, &sl.ent, k) {
				return false
			}
		}
	}
	return true
}

// lockYielding takes a shard's lock for a background pass (shardlock.LockYielding).
func lockYielding(mu *sync.Mutex) { shardlock.LockYielding(mu) }

// sweep drops every cell older than seq-1 at nowMs and, with leases, every dead lease, and
// the tuples left with neither. It returns the number of cells dropped.
//
// It skips the shards whose first cell dies later (shard.sweepDue) and, with leases, that
// hold no side struct (where grants are): at 10M tuples of an hour's window, a pass read
// every slot each second to drop nothing, 6% of the process's CPU, holding each shard's
// lock over its 40,000 slots (RL.LIMIT's p99 under redis-benchmark's load, loaded whole:
// with no sweep at all 7.0-7.7 ms against 11.0-11.5, three runs each; with this skip, the
// medians of six runs 6.3-7.7 against 7.5-8.8, three processes each). A shard holding an
// empty tuple is due at once (shard.emptied).
func (s *store) sweep(nowMs int64, leases bool) int64 {
	var dropped int64
	l := s.loader.Load()
	for i := range s.shards {
		if l != nil && !l.shardLoaded(i) {
			// Not swept this time rather than loaded here: the sweep loading whole shards
			// at full speed was a second, unpaced loader beside LoadLazily's, a third of
			// the process's CPU at the start of a load at 10M tuples, taken from the
			// requests. Restore drops what a sweep would have (Engine.Restore), and the
			// slots of the parts loaded already are swept next time.
			continue
		}
		sh := &s.shards[i]
		lockYielding(&sh.mu)
		if sh.sweepDue > nowMs && (!leases || len(sh.sides) == len(sh.freeSides)) {
			sh.mu.Unlock()
			continue
		}
		due, shardDropped := int64(math.MaxInt64), int64(0)
		// Backwards: a delete moves the last slot, already visited, into the hole.
		for j := sh.n - 1; j >= 0; j-- {
			sl := sh.at(j)
			live := int64(math.MaxInt64) // a key without a valid window holds nothing live
			w := windowOfKey(sh.keyOf(sl))
			if w > 0 {
				live = nowMs/w - 1
			}
			if leases {
				s.pruneLeases(sh, &sl.ent, nowMs)
			}
			shardDropped += s.dropBefore(sh, &sl.ent, live)
			if sl.ent.held() == 0 && sl.ent.side == 0 {
				if s.passes.Load() != 0 {
					due = 0 // kept for a pass of Tuples: dropped next time
					continue
				}
				s.bytes.Add(-tupleBytes(sl.keyLen())) // its side went with its cells and leases
				sh.tuples.Add(-1)
				s.movedSlot(sh, j, sh.n-1)
				sh.remove(s.hash, j)
				continue
			}
			for k := range entryCells {
				if sq := sl.ent.seqOf(k); sq != emptySeq {
					due = min(due, deathMs(sq, w))
				}
			}
		}
		sh.cells.Add(-shardDropped) // once a shard, not an atomic add a slot
		dropped += shardDropped
		sh.sweepDue = due
		sh.compact(s.hash)
		sh.mu.Unlock()
		runtime.Gosched() // as in eachLive
	}
	return dropped
}
