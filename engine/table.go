package engine

import (
	"encoding/binary"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"
)

// A shard's table: an open-addressing index over slots kept in fixed-size chunks.
//
// The slots hold the entries inline, in no particular order, with no holes: slot i is
// entry i of chunk i/chunkSlots. An entry costs no allocation of its own, and iterating
// the shard walks the chunks in turn. A key of up to keyInline bytes (nearly every tuple
// key: AppendKey spends 5 bytes on a default tuple's window and names) is kept in the slot
// too, right after the cells, so a lookup reads the key and the cells from the same one or
// two cache lines and allocates nothing for a new tuple; a longer key is a string of the
// shard's longs table, whose index the slot keeps.
//
// Chunks and the index are outside the Go heap where the platform allows (offheap_unix.go:
// anonymous mappings), so the garbage collector neither scans them nor counts them in the
// heap it paces on: a store of a million tuples costs its bytes, not twice them at
// GOGC 100. Growing never copies the slots (a new chunk is added), only the index.
//
// No slot points into the Go heap (the collector would not see the pointer): an entry's
// side struct is in the shard's sides, and entry.side is its index there (store.sideOf,
// store.freeSideIfEmpty: nothing else may set entry.side). A slot that moves keeps its
// side struct.
//
// index is an array of 4-byte buckets, probed linearly; a bucket is tag<<24 | (slot index
// + 1), 0 when empty. The key's hash h in the shard is the high 32 bits of its 64-bit hash
// (the low bits pick the shard): h modulo the index's size is the bucket's home (homeOf:
// the size need not be a power of two, so the index grows by half, at a load between 0.57
// and 0.85), its top 8 bits the tag. A lookup compares the bucket's tag before it touches the slot, so
// a probe past another key costs a cache miss in the slots once in 256. The buckets do not
// keep the rest of the hash: growing the index and deleting hash the slots' keys again.
// Deleting uses backward shift (no tombstones) and moves the last slot into the hole. A
// shard holds fewer than 1<<24 slots (4 billion tuples in the store: memory runs out long
// before).
//
// The caller holds mu for every method, and a *entry into the slots is valid only until
// the next add or remove (see store.go); so is a string from keyOf, which may alias the
// slot's bytes: a caller that keeps a key past that copies it (eachLive does).

type shard struct {
	mu     sync.Mutex
	index  []uint32   // see above; mapped when indexMapped
	chunks []chunkRef // slots i*chunkSlots to (i+1)*chunkSlots-1 in chunks[i]
	indexM uint64     // homeOf's multiplier for len(index)
	// Cold fields: the shard's first 64 bytes are what a lookup reads.
	n           int // slots in use
	indexMapped bool
	longs       []string               // long keys, by the index their slots keep ("" when free)
	freeLongs   []uint32               // free indexes in longs
	resets      map[string]*tupleReset // reset records of the shard's tuples (reset.go); nil: none
	sides       []*entrySide           // side structs of the shard's entries, by entry.side-1 (nil when free)
	freeSides   []uint32               // free indexes in sides
	// sweepDue is the first ms at which a cell of the shard dies (store.slot, store.sweep):
	// a sweep before it has nothing to drop there but empty tuples. 0: due now.
	sweepDue int64
	// cells and tuples count the shard's occupied cell slots and tuples: written under mu,
	// read without it (store.cellCount). Counts of the store's, written by every core, took
	// the cache line from the other cores on each new tuple or cell.
	cells, tuples atomic.Int64
	// dirty is the shard's marks of changed tuples (dirty.go), on the line of its counts,
	// which the same changes write: as an array of the store's, two shards' marks shared a
	// cache line, which two event loops marking neighbouring shards took from each other
	// on every decision.
	dirty dirtySet
	_     [16]byte // shards are 256 bytes: two cores on neighbouring shards share no line
}

// chunkRef is one chunk of slots, and whether it is a mapping (unmapped when freed) or a
// Go allocation.
type chunkRef struct {
	p      *chunk
	mapped bool
}

// A chunk is chunkSlots slots (320 KiB): few mappings even at tens of millions of tuples,
// and, being mapped, its pages cost memory only once touched, so a shard's last chunk
// costs no more than the slots it holds (but while a load goes on: a chunk it fills is
// mapped whole, up to a chunk a shard beyond its slots, 80 MiB in all, given back as each
// shard's load ends: store.addTuple).
const (
	chunkShift = 12
	chunkSlots = 1 << chunkShift
	chunkMask  = chunkSlots - 1
)

type chunk [chunkSlots]slot

// keyInline is the longest key a slot holds in its own bytes. With it a slot is 80 bytes:
// the side struct's index, the owed lease cost, the packed cells (store.go: entry), the key
// length and bytes. A lookup of a key of n <= keyInline bytes reads bytes 12 to 49+n of the
// slot (cells, length, key).
const keyInline = 31

// longKey is slot.klen for a key longer than keyInline.
const longKey = 0xff

type slot struct {
	ent  entry           // side pointer, then the cells
	klen uint8           // length of an inline key, or longKey
	kin  [keyInline]byte // an inline key's bytes; for a long key, its length and its index in the shard's longs (uint32 each, LE)
}

// at returns slot i (< sh.n, or the next one add fills).
func (sh *shard) at(i int) *slot { return &sh.chunks[i>>chunkShift].p[i&chunkMask] }

// setKey stores key in sl: inline, or in the shard's longs when it is longer than
// keyInline.
func (sh *shard) setKey(sl *slot, key []byte) {
	if len(key) <= keyInline {
		sl.klen = uint8(len(key))
		copy(sl.kin[:], key)
		return
	}
	var at uint32
	if n := len(sh.freeLongs); n > 0 {
		at = sh.freeLongs[n-1]
		sh.freeLongs = sh.freeLongs[:n-1]
		sh.longs[at] = string(key)
	} else {
		at = uint32(len(sh.longs))
		sh.longs = append(sh.longs, string(key))
	}
	sl.klen = longKey
	binary.LittleEndian.PutUint32(sl.kin[:4], uint32(len(key)))
	binary.LittleEndian.PutUint32(sl.kin[4:8], at)
}

// freeKey releases sl's long key, if it has one.
func (sh *shard) freeKey(sl *slot) {
	if sl.klen != longKey {
		return
	}
	at := binary.LittleEndian.Uint32(sl.kin[4:8])
	sh.longs[at] = ""
	sh.freeLongs = append(sh.freeLongs, at)
	if len(sh.freeLongs) == len(sh.longs) {
		sh.longs, sh.freeLongs = nil, nil
	}
}

// keyLen returns the length of sl's key.
func (sl *slot) keyLen() int {
	if sl.klen != longKey {
		return int(sl.klen)
	}
	return int(binary.LittleEndian.Uint32(sl.kin[:4]))
}

// keyOf returns sl's key. An inline key's string aliases the slot: it is valid only while
// the slot is (until the shard's next add or remove, lock held), and is to be copied to be
// kept. A long key's string is an immutable heap string.
func (sh *shard) keyOf(sl *slot) string {
	if sl.klen != longKey {
		return unsafe.String(&sl.kin[0], int(sl.klen))
	}
	return sh.longs[binary.LittleEndian.Uint32(sl.kin[4:8])]
}

// is reports whether sl's key is key.
func (sh *shard) is(sl *slot, key []byte) bool {
	if len(key) <= keyInline {
		return int(sl.klen) == len(key) && string(sl.kin[:len(key)]) == string(key)
	}
	return sl.klen == longKey && sh.keyOf(sl) == string(key)
}

const (
	minIndex = 16
	// maxLoadNum/maxLoadDen is the index's highest load before it grows (grownIndex).
	maxLoadNum, maxLoadDen = 17, 20
	// slotBits is the bits of a bucket that hold the slot index (+1); the others, the tag.
	slotBits = 24
	slotMask = 1<<slotBits - 1
	// maxSlots is the most slots a shard holds.
	maxSlots = slotMask - 1
)

// bucket returns the bucket of slot i, whose key has hash h.
func bucket(h uint32, i int) uint32 { return h>>slotBits<<slotBits | uint32(i+1) }

// grownIndex returns the index size that follows size: half as large again, in whole cache
// lines of buckets.
func grownIndex(size int) int { return max(minIndex, (size+size/2+15)&^15) }

// homeOf returns the home bucket of hash h: h modulo the index's size, computed with
// multiplications only (Lemire, Kaser and Kurz, "Faster remainder by direct computation",
// 2019: exact for every 32-bit h and size).
func (sh *shard) homeOf(h uint32) uint32 {
	hi, _ := bits.Mul64(sh.indexM*uint64(h), uint64(len(sh.index)))
	return uint32(hi)
}

// next returns the bucket after p in probe order.
func (sh *shard) next(p uint32) uint32 {
	if p++; int(p) == len(sh.index) {
		return 0
	}
	return p
}

// dist returns how many buckets a probe from a takes to reach b.
func (sh *shard) dist(a, b uint32) uint32 {
	if b < a {
		return b + uint32(len(sh.index)) - a
	}
	return b - a
}

// find returns the slot index of key with hash h, or -1.
func (sh *shard) find(h uint32, key []byte) int {
	if len(sh.index) == 0 {
		return -1
	}
	tag := h >> slotBits
	for p := sh.homeOf(h); ; p = sh.next(p) {
		b := sh.index[p]
		if b == 0 {
			return -1
		}
		if b>>slotBits == tag {
			if i := int(b&slotMask) - 1; sh.is(sh.at(i), key) {
				return i
			}
		}
	}
}

// add appends a slot for key (not present) with hash h and returns its index, or -1 when
// the shard holds maxSlots. Its entry is the zero entry. hash is that of find (it hashes
// the keys again when the index grows). populate maps a new chunk's pages at once (a load
// that fills it: trimChunks gives back those it leaves untouched).
func (sh *shard) add(hash func(string) uint32, h uint32, key []byte, populate bool) int {
	n := sh.n
	if n >= maxSlots {
		return -1
	}
	if (n+1)*maxLoadDen > len(sh.index)*maxLoadNum {
		sh.rehash(hash, grownIndex(len(sh.index)))
	}
	if n>>chunkShift == len(sh.chunks) {
		sh.chunks = append(sh.chunks, newChunk(populate))
	}
	// The key first: it may be read from a snapshot's mapping (Restore), where a fault is
	// recovered above; the slot is not counted, nor placed, until it holds it.
	sh.setKey(sh.at(n), key) // the slot is zero: fresh, or cleared by remove
	sh.n++
	sh.place(h, bucket(h, n))
	return n
}

// newChunk returns a zeroed chunk: a mapping, its pages mapped at once when populate is
// set, else (none to be had) a Go allocation.
func newChunk(populate bool) chunkRef {
	if p := mapMemory(int(unsafe.Sizeof(chunk{})), populate); p != nil {
		return chunkRef{p: (*chunk)(p), mapped: true}
	}
	return chunkRef{p: new(chunk)}
}

// trimChunks gives back the pages of the shard's mapped chunks that hold no slot in use
// (they are zero, as add expects a fresh slot: a page given back reads as zero again), so
// that a chunk a load populated (add) costs no more than its slots once the load is done.
// A page the chunk's size does not end on (a system page larger than 4 KiB) is kept. The
// caller holds mu.
func (sh *shard) trimChunks() {
	page := os.Getpagesize() // the system's: releaseMemory's range starts on one
	size := int(unsafe.Sizeof(chunk{}))
	for c := sh.n >> chunkShift; c < len(sh.chunks); c++ {
		ref := sh.chunks[c]
		if !ref.mapped {
			continue
		}
		from := 0
		if c == sh.n>>chunkShift {
			from = ((sh.n&chunkMask)*int(unsafe.Sizeof(slot{})) + page - 1) &^ (page - 1)
		}
		if end := size &^ (page - 1); from < end {
			releaseMemory(unsafe.Add(unsafe.Pointer(ref.p), from), end-from)
		}
	}
}

// freeChunk gives c's memory back.
func freeChunk(c chunkRef) {
	if c.mapped {
		unmapMemory(unsafe.Pointer(c.p), int(unsafe.Sizeof(chunk{})))
	}
}

// mappedIndexMin is the size (bytes) from which an index is a mapping: smaller ones are Go
// allocations, a mapping being whole pages (its last page partly used at most: at most a
// quarter of it from this size).
const mappedIndexMin = 16 << 10

// newIndex returns a zeroed index of size buckets, and whether it is a mapping. A mapped
// index's pages are populated at once: a lookup reads a bucket before an insert writes it,
// and a page first read maps the zero page, which the write then copies, with a TLB flush
// on every core (with the counts' shared cache line, a seventh of a 10M-tuple snapshot's
// load on two threads: 2.7-3.2 s of CPU before these, 2.1-2.5 after, five loads each).
func newIndex(size int) ([]uint32, bool) {
	if size*4 >= mappedIndexMin {
		if p := mapMemory(size*4, true); p != nil {
			return unsafe.Slice((*uint32)(p), size), true
		}
	}
	return make([]uint32, size), false
}

// freeIndex gives the memory of an index from newIndex back.
func freeIndex(index []uint32, mapped bool) {
	if mapped {
		unmapMemory(unsafe.Pointer(unsafe.SliceData(index)), len(index)*4)
	}
}

// place puts bucket b, of a key with hash h, in the first empty bucket of its probe
// sequence.
func (sh *shard) place(h, b uint32) {
	p := sh.homeOf(h)
	for sh.index[p] != 0 {
		p = sh.next(p)
	}
	sh.index[p] = b
}

// rehash rebuilds the index with size buckets (a power of two that holds every slot),
// hashing every key again.
func (sh *shard) rehash(hash func(string) uint32, size int) {
	freeIndex(sh.index, sh.indexMapped)
	sh.index, sh.indexMapped = newIndex(size)
	sh.indexM = ^uint64(0)/uint64(size) + 1
	for i := range sh.n {
		h := hash(sh.keyOf(sh.at(i)))
		sh.place(h, bucket(h, i))
	}
}

// bucketOf returns the position in the index of the bucket of slot i, whose key has hash h.
func (sh *shard) bucketOf(h uint32, i int) uint32 {
	want := bucket(h, i)
	p := sh.homeOf(h)
	for sh.index[p] != want {
		p = sh.next(p)
	}
	return p
}

// remove deletes slot i. The last slot moves into its place. The buckets do not keep the
// keys' homes: hash computes them again from the keys (store.locate's hash).
func (sh *shard) remove(hash func(string) uint32, i int) {
	sl := sh.at(i)
	p := sh.bucketOf(hash(sh.keyOf(sl)), i)
	sh.freeKey(sl)
	// Backward shift: pull later buckets of the run into the hole when the hole lies on
	// their probe path (between their home and their position, cyclically).
	for {
		sh.index[p] = 0
		q, moved := p, false
		for {
			q = sh.next(q)
			b := sh.index[q]
			if b == 0 {
				break
			}
			if home := sh.homeOf(hash(sh.keyOf(sh.at(int(b&slotMask) - 1)))); sh.dist(home, q) >= sh.dist(p, q) {
				sh.index[p] = b
				p, moved = q, true
				break
			}
		}
		if !moved {
			break
		}
	}
	last := sh.n - 1
	ls := sh.at(last)
	if i != last {
		lh := hash(sh.keyOf(ls))
		sh.index[sh.bucketOf(lh, last)] = bucket(lh, i)
		*sl = *ls
	}
	*ls = slot{}
	sh.n = last
}

// hashInShard is the hash that places key in its shard's index (see store.locate).
func hashInShard(seed uint64, key string) uint32 {
	return uint32(hashKey(seed, key) >> 32)
}

// compact gives memory back after deletes: chunks beyond the slots in use (one spare kept)
// are freed, and an index much larger than the slots need is rebuilt to fit (hash is
// add's).
func (sh *shard) compact(hash func(string) uint32) {
	n := sh.n
	if n == 0 {
		for _, c := range sh.chunks {
			freeChunk(c)
		}
		sh.chunks = nil
		freeIndex(sh.index, sh.indexMapped)
		sh.index, sh.indexMapped, sh.indexM = nil, false, 0
		return
	}
	if keep := (n+chunkSlots-1)>>chunkShift + 1; len(sh.chunks) > keep {
		for _, c := range sh.chunks[keep:] {
			freeChunk(c)
		}
		clear(sh.chunks[keep:])
		sh.chunks = sh.chunks[:keep]
	}
	size := minIndex
	for n*maxLoadDen > size*maxLoadNum/2 { // aim at half the highest load
		size = grownIndex(size)
	}
	if len(sh.index) > 2*size {
		sh.rehash(hash, size)
	}
}
