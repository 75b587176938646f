package engine

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// checkShard verifies a shard against a reference map: every key is found at a slot
// holding its value, the index has exactly one bucket per slot, and no absent key is
// found.
func checkShard(t *testing.T, sh *shard, hash func(string) uint32, ref map[string]int64) {
	t.Helper()
	if sh.n != len(ref) {
		t.Fatalf("%d slots, want %d", sh.n, len(ref))
	}
	used := 0
	for _, b := range sh.index {
		if b != 0 {
			used++
			i := int(b&slotMask) - 1
			if i < 0 || i >= sh.n || bucket(hash(sh.keyOf(sh.at(i))), i) != b {
				t.Fatalf("bad bucket %x", b)
			}
		}
	}
	if used != len(ref) {
		t.Fatalf("%d buckets, want %d", used, len(ref))
	}
	if len(ref) > 0 && used*maxLoadDen > len(sh.index)*maxLoadNum {
		t.Fatalf("load %d/%d above the bound", used, len(sh.index))
	}
	for k, v := range ref {
		i := sh.find(hash(k), []byte(k))
		if i < 0 || sh.keyOf(sh.at(i)) != k || sh.at(i).ent.regional[0] != uint64(v) {
			t.Fatalf("key %q: slot %d", k, i)
		}
	}
	for j := 0; j < 20; j++ {
		k := fmt.Sprintf("absent-%d", j)
		if sh.find(hash(k), []byte(k)) >= 0 {
			t.Fatalf("found absent key %q", k)
		}
	}
}

// TestTableAgainstMap: random inserts, lookups and deletes against a Go map, with hash
// functions from the real one to a few values (long probe runs, equal tags that only the
// key bytes tell apart, wrap-around at the end of the index).
func TestTableAgainstMap(t *testing.T) {
	seed := newShardSeed()
	hashes := map[string]func(string) uint32{
		"maphash":   func(k string) uint32 { return hashInShard(seed, k) },
		"16 values": func(k string) uint32 { return hashInShard(seed, k) % 16 },
		"2 values":  func(k string) uint32 { return hashInShard(seed, k)%2 + 0xfffffffe },
		"top bits":  func(k string) uint32 { return hashInShard(seed, k) | 0xfffffff0 },
	}
	for name, hash := range hashes {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			var sh shard
			ref := map[string]int64{}
			keys := 300
			if name == "maphash" {
				keys = 5000
			}
			steps := 40_000
			if raceOn || testing.Short() {
				steps = 10_000
			}
			for step := 0; step < steps; step++ {
				k := fmt.Sprintf("k%d", rng.IntN(keys))
				if n := rng.IntN(8); n > 0 { // lengths around keyInline: inline, long, and both sides of the edge
					k = fmt.Sprintf("%0*d", keyInline-5+n, 0) + k
				}
				switch op := rng.IntN(10); {
				case op < 5: // insert or update
					h := hash(k)
					i := sh.find(h, []byte(k))
					if i < 0 {
						i = sh.add(hash, h, []byte(k), step%3 == 0) // chunks populated at once or not
						if sh.at(i).ent != (entry{}) {
							t.Fatalf("step %d: slot %d of a new key is not zero", step, i)
						}
						sh.at(i).ent.reset()
					}
					sh.at(i).ent.regional[0] = uint64(step)
					ref[k] = int64(step)
				case op < 8: // delete
					i := sh.find(hash(k), []byte(k))
					if _, ok := ref[k]; ok != (i >= 0) {
						t.Fatalf("step %d: find(%q) = %d, in ref %v", step, k, i, ok)
					}
					if i >= 0 {
						sh.remove(hash, i)
						delete(ref, k)
					}
				case op < 9:
					sh.compact(hash)
					sh.trimChunks() // gives back pages past the slots in use: they must read as zero again
				default: // bulk delete of a third, as a sweep does
					if rng.IntN(50) == 0 {
						for j := sh.n - 1; j >= 0; j-- {
							if k := strings.Clone(sh.keyOf(sh.at(j))); rng.IntN(3) == 0 { // remove rewrites the slot
								sh.remove(hash, j)
								delete(ref, k)
							}
						}
						sh.compact(hash)
					}
				}
				if step%997 == 0 {
					checkShard(t, &sh, hash, ref)
				}
			}
			checkShard(t, &sh, hash, ref)
			for k := range ref { // empty it
				sh.remove(hash, sh.find(hash(k), []byte(k)))
				delete(ref, k)
			}
			checkShard(t, &sh, hash, ref)
			sh.compact(hash)
			if sh.index != nil || sh.chunks != nil || sh.longs != nil {
				t.Fatalf("an empty shard keeps its arrays")
			}
		})
	}
}

// TestSideLayout: a side struct is sideBytes (one 128-byte size class), and a tuple's
// lease slice header and inline grant fill its first 64-byte cache line.
func TestSideLayout(t *testing.T) {
	var sd entrySide
	if n := unsafe.Sizeof(sd); n != sideBytes {
		t.Fatalf("side struct is %d bytes, sideBytes %d", n, sideBytes)
	}
	if end := unsafe.Offsetof(sd.leases) + unsafe.Sizeof(sd.leases); unsafe.Offsetof(sd.leases) != 0 || end != 64 {
		t.Fatalf("leases at %d to %d, want 0 to 64", unsafe.Offsetof(sd.leases), end)
	}
}

// TestSlotLayout: a slot is 80 bytes, its cells (meta to minLimit) and its inline key
// adjacent, and keys of every length round-trip through it, a long one through the
// shard's longs.
func TestSlotLayout(t *testing.T) {
	var sl slot
	if n := unsafe.Sizeof(sl); n != 80 {
		t.Fatalf("slot is %d bytes", n)
	}
	if c, k := unsafe.Offsetof(sl.ent)+unsafe.Offsetof(sl.ent.minLimit)+unsafe.Sizeof(sl.ent.minLimit), unsafe.Offsetof(sl.klen); k != c || unsafe.Offsetof(sl.ent.meta) != 12 || unsafe.Offsetof(sl.ent.seq) != 16 {
		t.Fatalf("cells at %d to %d, key length at %d", unsafe.Offsetof(sl.ent.meta), c, k)
	}
	if n := unsafe.Sizeof(shard{}); n != 256 {
		t.Fatalf("shard is %d bytes", n)
	}
	var st store
	if line := func(off uintptr) uintptr { return off / 64 }; line(unsafe.Offsetof(st.bytes)) == line(unsafe.Offsetof(st.seed)) ||
		line(unsafe.Offsetof(st.bytes)) == line(unsafe.Offsetof(st.loader)) || line(unsafe.Offsetof(st.bytes)) == line(unsafe.Offsetof(st.tracking)) {
		t.Fatalf("store.bytes at %d shares a cache line with what requests read (seed at %d, loader at %d)",
			unsafe.Offsetof(st.bytes), unsafe.Offsetof(st.seed), unsafe.Offsetof(st.loader))
	}
	var sh shard
	for n := 0; n < 3*keyInline; n++ {
		key := []byte(strings.Repeat("x", n))
		var sl slot
		sh.setKey(&sl, key)
		if sh.keyOf(&sl) != string(key) || sl.keyLen() != n || !sh.is(&sl, key) || (n > 0 && sh.is(&sl, key[1:])) {
			t.Fatalf("key of %d bytes: %q", n, sh.keyOf(&sl))
		}
		if (len(sh.longs) != 0) != (n > keyInline) {
			t.Fatalf("key of %d bytes: %d long keys", n, len(sh.longs))
		}
		sh.freeKey(&sl)
	}
}

// TestTableCases: table-driven edge cases of the index.
func TestTableCases(t *testing.T) {
	hash := func(k string) uint32 { return uint32(k[0]) } // the first byte is the hash
	cases := []struct {
		name   string
		insert []string
		remove []string
	}{
		{"empty", nil, nil},
		{"one then gone", []string{"a1"}, []string{"a1"}},
		{"same home run, head removed", []string{"a1", "a2", "a3", "b1"}, []string{"a1"}},
		{"same home run, middle removed", []string{"a1", "a2", "a3", "b1"}, []string{"a2"}},
		{"wrap around the end", []string{"\x0f1", "\x0f2", "\x0f3", "\x001"}, []string{"\x0f1"}},
		{"remove the last slot", []string{"a1", "b1", "c1"}, []string{"c1"}},
		{"remove all in order", []string{"a1", "a2", "b1", "b2"}, []string{"a1", "a2", "b1", "b2"}},
		{"wrap around a non-power-of-two end", []string{"/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h", "/i", "/j", "/k", "/l", "/m", "/n", "/o",
			"/p", "/q", "/r", "/s", "/t", "/u", "/v", "/w", "/x", "/y", "/z", "/0", "/1", "/2", "/3", ".0"}, []string{"/a", "/z", ".0", "/3", "/b"}}, // '/' is 47: home 47 of 48 buckets
		{"grow past 16", []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "b1", "b2", "b3", "b4", "b5", "b6", "c1", "c2", "c3"}, []string{"a5", "b1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var sh shard
			ref := map[string]int64{}
			for n, k := range tc.insert {
				i := sh.add(hash, hash(k), []byte(k), false)
				sh.at(i).ent.regional[0] = uint64(n)
				ref[k] = int64(n)
			}
			checkShard(t, &sh, hash, ref)
			for _, k := range tc.remove {
				sh.remove(hash, sh.find(hash(k), []byte(k)))
				delete(ref, k)
				checkShard(t, &sh, hash, ref)
			}
		})
	}
}

// TestStoreSideStruct: the side struct exists only while a cell has replication state, and
// the byte gauge returns to its start when the tuple is swept.
func TestStoreSideStruct(t *testing.T) {
	clock := NewManualClock(60_000 * 1000)
	e := New(clock, Config{})
	tp := Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 60_000}
	if _, err := e.Limit(tp, 10, 1); err != nil {
		t.Fatal(err)
	}
	key := AppendKey(nil, tp)
	sideOf := func() *entrySide {
		sh, h := e.store.locate(key)
		sh.mu.Lock()
		defer sh.mu.Unlock()
		return sh.side(sh.lookup(h, key))
	}
	if sideOf() != nil {
		t.Fatalf("a standalone decision allocated a side struct")
	}
	base := e.store.bytes.Load()
	seq := clock.NowMs() / 60_000
	if n := e.MergeComponents([]Component{{Key: key, Seq: seq, Region: "eu", Count: 5}}); n != 1 {
		t.Fatalf("merge changed %d", n)
	}
	if sideOf() == nil || e.store.bytes.Load() <= base {
		t.Fatalf("an import kept no side struct, or did not count its bytes")
	}
	if st := e.Status(tp); st.CurrentImported != 5 || st.CurrentRegional != 1 {
		t.Fatalf("status %+v", st)
	}
	clock.Advance(60_000)
	if _, err := e.Limit(tp, 10, 1); err != nil { // takes the second slot; the first stays
		t.Fatal(err)
	}
	clock.Advance(60_000)
	if _, err := e.Limit(tp, 10, 1); err != nil { // replaces the imported cell
		t.Fatal(err)
	}
	if sideOf() != nil || e.store.bytes.Load() != base {
		t.Fatalf("replacing the imported cell kept its side struct (bytes %d, want %d)", e.store.bytes.Load(), base)
	}
	clock.Advance(3 * 60_000)
	if n := e.Sweep(); n != 2 {
		t.Fatalf("swept %d cells", n)
	}
	if e.store.bytes.Load() != 0 || e.store.tupleCount() != 0 || e.store.cellCount() != 0 {
		t.Fatalf("after the sweep: bytes %d tuples %d cells %d", e.store.bytes.Load(), e.store.tupleCount(), e.store.cellCount())
	}
}

// TestRestoreStandaloneNoSide: a standalone origin's restore marks nothing published, so a
// restored tuple costs its slot and no side struct; one with peers keeps marking restored
// cells published (its side struct).
func TestRestoreStandaloneNoSide(t *testing.T) {
	clock := NewManualClock(60_000 * 1000)
	seq := clock.NowMs() / 60_000
	var recs []CellRecord
	for i := range 100 {
		tp := Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "k%d", i), WindowMs: 60_000}
		recs = append(recs, CellRecord{Key: string(AppendKey(nil, tp)), Seq: seq, Regional: 5})
	}
	for _, standalone := range []bool{true, false} {
		e := New(clock, Config{Standalone: standalone})
		if loaded, _, err := e.Restore(recs); err != nil || loaded != len(recs) {
			t.Fatalf("standalone %v: loaded %d: %v", standalone, loaded, err)
		}
		sides, held := 0, 0
		for i := range e.store.shards {
			sh := &e.store.shards[i]
			for j := range sh.n {
				if sh.side(&sh.at(j).ent) != nil {
					sides++
				}
			}
			held += len(sh.sides) - len(sh.freeSides)
		}
		if want := map[bool]int{true: 0, false: len(recs)}[standalone]; sides != want || held != want {
			t.Fatalf("standalone %v: %d side structs (%d in the shards), want %d", standalone, sides, held, want)
		}
		if got := e.Status(Tuple{Workspace: "default", Namespace: "default", Key: []byte("k7"), WindowMs: 60_000}); got.CurrentRegional != 5 {
			t.Fatalf("standalone %v: status %+v", standalone, got)
		}
	}
}

// TestHomeOf: homeOf is h modulo the index's size, for sizes of the growth sequence and
// others, and hashes at the edges.
func TestHomeOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 1))
	sizes := []int{minIndex, 17, 1000, 1 << 20, 1<<25 + 1}
	for size := minIndex; size < 1<<25; size = grownIndex(size) {
		sizes = append(sizes, size)
	}
	for _, size := range sizes {
		sh := shard{index: make([]uint32, size), indexM: ^uint64(0)/uint64(size) + 1}
		hs := []uint32{0, 1, uint32(size - 1), uint32(size), uint32(size + 1), 1<<32 - 1, 1<<32 - 2}
		for range 1000 {
			hs = append(hs, rng.Uint32())
		}
		for _, h := range hs {
			if got := sh.homeOf(h); got != h%uint32(size) {
				t.Fatalf("size %d: homeOf(%d) = %d, want %d", size, h, got, h%uint32(size))
			}
		}
	}
}

// TestReserveTuples: after ReserveTuples(n), restoring n tuples grows no shard's index
// (each growth hashes the shard's keys again under its lock, where requests wait).
func TestReserveTuples(t *testing.T) {
	const tuples = 200_000
	e := New(NewManualClock(1_000_000), Config{Standalone: true})
	e.ReserveTuples(tuples)
	var sizes [shardCount]int
	for i := range e.store.shards {
		sizes[i] = len(e.store.shards[i].index)
	}
	recs := make([]CellRecord, tuples)
	for i := range recs {
		recs[i] = CellRecord{Key: string(AppendKey(nil, Tuple{Key: []byte(fmt.Sprint("k", i)), WindowMs: 60_000})), Seq: 1_000_000 / 60_000, Regional: 1}
	}
	if loaded, _, err := e.Restore(recs); loaded != tuples || err != nil {
		t.Fatalf("restored %d of %d: %v", loaded, tuples, err)
	}
	for i := range e.store.shards {
		if n := len(e.store.shards[i].index); n != sizes[i] {
			t.Fatalf("shard %d: index of %d buckets grew to %d for %d tuples", i, sizes[i], n, e.store.shards[i].n)
		}
	}
}
