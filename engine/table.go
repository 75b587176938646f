package engine

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"unsafe"
)

// A shard's table: an open-addressing index over a dense array of slots.
//
// slots holds the entries inline, in no particular order, with no holes: an entry costs no
// allocation of its own, and iterating the shard walks one array. A key of up to keyInline
// bytes (nearly every tuple key: AppendKey spends 5 bytes on a default tuple's window and
// names) is kept in the slot too, right after the cells, so a lookup reads the key and the
// cells from the same one or two cache lines and allocates nothing for a new tuple; a
// longer key is a heap string the slot points to.
//
// index is a power-of-two array of buckets, probed linearly; a bucket is
// hash<<32 | (slot index + 1), 0 when empty, where hash is the high 32 bits of the key's
// 64-bit hash (the low bits pick the shard). A lookup compares the bucket's hash before it
// touches the slot, so a probe past another key costs no cache miss in the slots. Growing
// the index needs only the buckets. Deleting uses backward shift (no tombstones) and moves
// the last slot into the hole.
//
// The caller holds mu for every method, and a *entry into slots is valid only until the
// next add or remove (see store.go); so is a string from slot.key, which may alias the
// slot's bytes: a caller that keeps a key past that copies it (eachLive does).

type shard struct {
	mu     sync.Mutex
	index  []uint64
	slots  []slot
	resets map[string]*tupleReset // reset records of the shard's tuples (reset.go); nil: none
	// shards are 64 bytes: two cores on neighbouring shards share no line
}

// keyInline is the longest key a slot holds in its own bytes. With it a slot is 120 bytes:
// the side pointer, the owed lease cost, the cells, the key length and bytes, the long-key
// pointer. A lookup of a key of n <= keyInline bytes reads bytes 16 to 81+n of the slot
// (cells, length, key).
const keyInline = 31

// longKey is slot.klen for a key longer than keyInline.
const longKey = 0xff

type slot struct {
	ent  entry           // side pointer, then the cells
	klen uint8           // length of an inline key, or longKey
	kin  [keyInline]byte // an inline key's bytes; for a long key, its length (uint32, LE)
	long *byte           // a long key's bytes (a heap string's), else nil
}

// setKey stores key in sl: inline, or as a new heap string when it is longer than
// keyInline.
func (sl *slot) setKey(key []byte) {
	if len(key) <= keyInline {
		sl.klen = uint8(len(key))
		copy(sl.kin[:], key)
		return
	}
	sl.klen = longKey
	binary.LittleEndian.PutUint32(sl.kin[:4], uint32(len(key)))
	sl.long = unsafe.StringData(string(key))
}

// keyLen returns the length of sl's key.
func (sl *slot) keyLen() int {
	if sl.klen != longKey {
		return int(sl.klen)
	}
	return int(binary.LittleEndian.Uint32(sl.kin[:4]))
}

// key returns sl's key. An inline key's string aliases the slot: it is valid only while
// the slot is (until the shard's next add or remove, lock held), and is to be copied to be
// kept. A long key's string is an immutable heap string.
func (sl *slot) key() string {
	if sl.klen != longKey {
		return unsafe.String(&sl.kin[0], int(sl.klen))
	}
	return unsafe.String(sl.long, int(binary.LittleEndian.Uint32(sl.kin[:4])))
}

// is reports whether sl's key is key.
func (sl *slot) is(key []byte) bool {
	if len(key) <= keyInline {
		return int(sl.klen) == len(key) && string(sl.kin[:len(key)]) == string(key)
	}
	return sl.klen == longKey && sl.key() == string(key)
}

const (
	minIndex = 16
	// maxLoadNum/maxLoadDen is the index's highest load before it doubles.
	maxLoadNum, maxLoadDen = 4, 5
)

// find returns the slot index of key with hash h, or -1.
func (sh *shard) find(h uint32, key []byte) int {
	if len(sh.index) == 0 {
		return -1
	}
	mask := uint32(len(sh.index) - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		b := sh.index[p]
		if b == 0 {
			return -1
		}
		if uint32(b>>32) == h {
			if i := int(uint32(b)) - 1; sh.slots[i].is(key) {
				return i
			}
		}
	}
}

// add appends a slot for key (not present) with hash h and returns its index. Its entry is
// the zero entry.
func (sh *shard) add(h uint32, key []byte) int {
	n := len(sh.slots)
	if (n+1)*maxLoadDen > len(sh.index)*maxLoadNum {
		sh.rehash(max(2*len(sh.index), minIndex))
	}
	if n == cap(sh.slots) {
		// Grow by an eighth: the dense array is most of the store's memory, so its slack
		// is kept small; the copies this costs are amortised memmoves.
		ns := make([]slot, n, n+n/8+8)
		copy(ns, sh.slots)
		sh.slots = ns
	}
	sh.slots = append(sh.slots, slot{})
	sh.slots[n].setKey(key)
	sh.place(uint64(h)<<32 | uint64(n+1))
	return n
}

// place puts bucket b in the first empty bucket of its probe sequence.
func (sh *shard) place(b uint64) {
	mask := uint32(len(sh.index) - 1)
	p := uint32(b>>32) & mask
	for sh.index[p] != 0 {
		p = (p + 1) & mask
	}
	sh.index[p] = b
}

// rehash rebuilds the index with size buckets (a power of two that holds every slot).
func (sh *shard) rehash(size int) {
	old := sh.index
	sh.index = make([]uint64, size)
	for _, b := range old {
		if b != 0 {
			sh.place(b)
		}
	}
}

// bucketOf returns the position in the index of the bucket of slot i, whose key has hash h.
func (sh *shard) bucketOf(h uint32, i int) uint32 {
	mask := uint32(len(sh.index) - 1)
	want := uint64(h)<<32 | uint64(i+1)
	p := h & mask
	for sh.index[p] != want {
		p = (p + 1) & mask
	}
	return p
}

// remove deletes slot i. The last slot moves into its place. The slots do not keep their
// hashes: hash computes them again from the keys (store.locate's hash).
func (sh *shard) remove(hash func(string) uint32, i int) {
	mask := uint32(len(sh.index) - 1)
	p := sh.bucketOf(hash(sh.slots[i].key()), i)
	// Backward shift: pull later buckets of the run into the hole when the hole lies on
	// their probe path (between their home and their position, cyclically).
	for {
		sh.index[p] = 0
		q, moved := p, false
		for {
			q = (q + 1) & mask
			b := sh.index[q]
			if b == 0 {
				break
			}
			if home := uint32(b>>32) & mask; (q-home)&mask >= (q-p)&mask {
				sh.index[p] = b
				p, moved = q, true
				break
			}
		}
		if !moved {
			break
		}
	}
	last := len(sh.slots) - 1
	if i != last {
		lh := hash(sh.slots[last].key())
		sh.index[sh.bucketOf(lh, last)] = uint64(lh)<<32 | uint64(i+1)
		sh.slots[i] = sh.slots[last]
	}
	sh.slots[last] = slot{}
	sh.slots = sh.slots[:last]
}

// hashInShard is the hash that places key in its shard's index (see store.locate).
func hashInShard(seed maphash.Seed, key string) uint32 {
	return uint32(maphash.String(seed, key) >> 32)
}

// compact gives memory back after deletes: a dense array or an index much larger than
// the slots need is reallocated to fit.
func (sh *shard) compact() {
	n := len(sh.slots)
	if n == 0 {
		sh.slots, sh.index = nil, nil
		return
	}
	if cap(sh.slots) > 2*n+64 {
		ns := make([]slot, n, n+n/8+8)
		copy(ns, sh.slots)
		sh.slots = ns
	}
	size := minIndex
	for n*maxLoadDen > size*maxLoadNum/2 { // aim at half the highest load
		size *= 2
	}
	if len(sh.index) > 2*size {
		sh.rehash(size)
	}
}
