package persist

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ratchet/ratchet/engine"
	bolt "go.etcd.io/bbolt"
)

// tagsEngine returns an engine of 3000 tuples restored from records, and their keys: keys
// short and long (up to 600 bytes), one or two cells, some with foreign components; and
// besides, 600 tuples in 30 parts (20 a part, as at 5M tuples: the others leave most parts
// one tuple or none). Built once: the tests only read it (Tuples).
var tagsEngine = sync.OnceValues(func() (*engine.Engine, []string) {
	const t0, w, n = 1_704_067_200_000, 60_000, 3000
	e := engine.New(engine.NewManualClock(t0), engine.Config{Standalone: true, MaxMemoryBytes: 1 << 30})
	seed := e.ShardSeed()
	rng := rand.New(rand.NewPCG(7, 8))
	xs := strings.Repeat("x", 600)
	var recs []engine.CellRecord
	var keys []string
	var name, key []byte
	for i := 0; len(keys) < n+600; i++ {
		name = strconv.AppendInt(append(name[:0], 'k'), int64(i), 10)
		if i%5 == 0 {
			name = append(name, xs[:rng.IntN(len(xs))]...)
		}
		key = engine.AppendKey(key[:0], engine.Tuple{Workspace: "default", Namespace: "default", Key: name, WindowMs: w})
		if i >= n && engine.PartOf(seed, unsafe.String(unsafe.SliceData(key), len(key))) >= 30 {
			continue
		}
		keys = append(keys, string(key))
		for c := range 1 + i%2 {
			r := engine.CellRecord{Key: keys[len(keys)-1], Seq: t0/w - int64(c), Regional: 1 + rng.Uint64N(1<<20)}
			if i%7 == 0 {
				r.Foreign = []engine.RegionCount{{Region: "eu-west", Count: 1 + rng.Uint64N(99)}, {Region: "us", Count: 3}}
			}
			recs = append(recs, r)
		}
	}
	if loaded, dropped, err := e.Restore(recs); err != nil || dropped != 0 || loaded != len(recs) {
		panic(fmt.Sprintf("restore: %d loaded, %d dropped, %v", loaded, dropped, err))
	}
	return e, keys
})

// recordStrings is each record of recs as a string, foreign components included.
func recordStrings(recs []engine.CellRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, fmt.Sprintf("%q/%d/%d/%d/%v", r.Key, r.Seq, r.Regional, r.Imported, r.Foreign))
	}
	return out
}

// byKey reads every part of o at once, untagged, and returns each key's records in file
// order.
func byKey(t *testing.T, o *Opened) map[string][]string {
	t.Helper()
	full := map[string][]string{}
	if _, err := o.Parts(0, engine.Parts, nil, nil, 0, func(recs []engine.CellRecord) {
		for i := range recs {
			k := strings.Clone(recs[i].Key) // the file's bytes, valid during the call
			full[k] = append(full[k], recordStrings(recs[i:i+1])...)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return full
}

// keyedParts is what a keyed restore of key reads (Opened.Parts of its part, given keyHash,
// 0 for none), as recordStrings.
func keyedParts(t *testing.T, o *Opened, key string, keyHash uint64) []string {
	t.Helper()
	return keyedIn(t, o, engine.PartOf(o.Seed, key), key, keyHash)
}

// keyedIn is keyedParts of part p, whichever key's part it is.
func keyedIn(t *testing.T, o *Opened, p int, key string, keyHash uint64) []string {
	t.Helper()
	var got []string
	if _, err := o.Parts(p, p+1, nil, func(k string) bool { return k == key }, keyHash, func(recs []engine.CellRecord) {
		got = recordStrings(recs)
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// openTagged opens the snapshot of s for a lazy load, failing t unless it is Lazy, and
// closes it after t.
func openTagged(t *testing.T, s *Store) *Opened {
	t.Helper()
	o, err := s.OpenOrSetAside()
	if err != nil || !o.Lazy() {
		t.Fatalf("OpenOrSetAside: %v, lazy %v", err, o.Lazy())
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

// TestKeyTagsMatchStepping: a keyed restore of a file with key tags reads exactly the
// records of its key that a load of every part reads (and that a keyed restore stepping
// over the part reads), in the same order, for every key; with the tags' values colliding
// (half of them, or all), and with parts too large to be indexed beside parts indexed.
// And the tags are what it goes by: tags written under another tag function find nothing
// in an indexed part.
func TestKeyTagsMatchStepping(t *testing.T) {
	e, keys := tagsEngine()
	for _, tc := range []struct {
		name  string
		tag   func(h uint64) uint16
		limit int64 // tagOffsetLimit
	}{
		{"tags", keyTag16, maxTagOffset},
		{"half collide", func(h uint64) uint16 { return uint16(h>>48) & 1 }, maxTagOffset},
		{"all collide", func(uint64) uint16 { return 7 }, maxTagOffset},
		{"some parts not indexed", keyTag16, 700},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(f func(uint64) uint16, n int64) { keyTag16, tagOffsetLimit = f, n }(keyTag16, tagOffsetLimit)
			keyTag16, tagOffsetLimit = tc.tag, tc.limit
			s, _ := lazyStore(t)
			if err := s.Write(Source{Tuples: e.Tuples, ShardSeed: e.ShardSeed()}); err != nil {
				t.Fatal(err)
			}
			o := openTagged(t, s)
			if o.tags == nil {
				t.Fatal("no key tags")
			}
			indexed, unindexed := 0, 0
			for p := range engine.Parts {
				switch a, b := o.table[p], o.table[p+1]; {
				case a.tag < b.tag:
					indexed++
				case a.pos < b.pos:
					unindexed++
				}
			}
			if indexed == 0 || (tc.limit < maxTagOffset) != (unindexed > 0) {
				t.Fatalf("%d parts indexed, %d not", indexed, unindexed)
			}
			full := byKey(t, o)
			if len(full) != len(keys) {
				t.Fatalf("a load of every part read %d keys, want %d", len(full), len(keys))
			}
			for _, key := range keys {
				want := full[key]
				if got := keyedParts(t, o, key, engine.KeyHash(o.Seed, key)); !slices.Equal(got, want) {
					t.Fatalf("keyed restore of %q: %q; a load of every part reads %q", key, got, want)
				}
				if got := keyedParts(t, o, key, 0); !slices.Equal(got, want) {
					t.Fatalf("keyed restore of %q, stepping: %q; a load of every part reads %q", key, got, want)
				}
			}
			for i := range 50 { // keys of no tuple, in parts with tuples or not
				key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "none%d", i), WindowMs: 60_000}))
				if got := keyedParts(t, o, key, engine.KeyHash(o.Seed, key)); len(got) != 0 {
					t.Fatalf("keyed restore of %q, no tuple's: %q", key, got)
				}
			}
			// Read under another tag function: an indexed part finds nothing, one not
			// indexed (stepped over) its records.
			keyTag16 = func(h uint64) uint16 { return tc.tag(h) + 1 }
			for _, key := range keys {
				p := engine.PartOf(o.Seed, key)
				got := keyedParts(t, o, key, engine.KeyHash(o.Seed, key))
				if a, b := o.table[p], o.table[p+1]; a.tag < b.tag && len(got) != 0 || a.tag == b.tag && !slices.Equal(got, full[key]) {
					t.Fatalf("keyed restore of %q (part indexed: %v) under another tag function: %q", key, a.tag < b.tag, got)
				}
			}
		})
	}
}

// TestKeyTagsOptional: a file without key tags (written before them) loads as one with
// them, every part and every key's records (the records stepped over), and at once.
func TestKeyTagsOptional(t *testing.T) {
	e, keys := tagsEngine()
	s, dir := lazyStore(t)
	if err := s.Write(Source{Tuples: e.Tuples, ShardSeed: e.ShardSeed()}); err != nil {
		t.Fatal(err)
	}
	o := openTagged(t, s)
	want := byKey(t, o)
	all, err := s.LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	_ = o.Close()
	rewrite(t, dir, dropBuckets([]string{tagsBucket}, []string{metaTagsCount, metaTagsCRC, metaTagParts, metaTagPartsCRC}))
	o = openTagged(t, s)
	if o.tags != nil {
		t.Fatal("key tags in a file without them")
	}
	if got := byKey(t, o); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("a load of every part of the file without tags read %d keys, with them %d", len(got), len(want))
	}
	for _, key := range keys {
		if got := keyedParts(t, o, key, engine.KeyHash(o.Seed, key)); !slices.Equal(got, want[key]) {
			t.Fatalf("keyed restore of %q without tags: %q, with them %q", key, got, want[key])
		}
	}
	all2, err := s.LoadAll()
	if err != nil || !reflect.DeepEqual(all2.Cells, all.Cells) {
		t.Fatalf("LoadAll without tags: %d cells (%v), with them %d", len(all2.Cells), err, len(all.Cells))
	}
}

// putTags replaces the key tags' chunks by chunks (nil: keep them) and their per-part
// table by table (nil: keep it), with CRC-32Cs that match.
func putTags(tx *bolt.Tx, chunks [][]byte, table []byte) error {
	m := tx.Bucket([]byte(metaBucket))
	if chunks != nil {
		b := tx.Bucket([]byte(tagsBucket))
		var crc uint32
		for i, c := range chunks {
			crc = crc32.Update(crc, castagnoli, c)
			if err := b.Put(binary.BigEndian.AppendUint32(nil, uint32(i)), c); err != nil {
				return err
			}
		}
		if err := m.Put([]byte(metaTagsCRC), binary.BigEndian.AppendUint32(nil, crc)); err != nil {
			return err
		}
	}
	if table != nil {
		if err := m.Put([]byte(metaTagPartsCRC), binary.BigEndian.AppendUint32(nil, crc32.Checksum(table, castagnoli))); err != nil {
			return err
		}
		return m.Put([]byte(metaTagParts), table)
	}
	return nil
}

// tagChunks returns copies of the key tags' chunks.
func tagChunks(tx *bolt.Tx) [][]byte {
	var out [][]byte
	_ = tx.Bucket([]byte(tagsBucket)).ForEach(func(_, v []byte) error {
		out = append(out, slices.Clone(v))
		return nil
	})
	return out
}

// eachEntry rewrites every key tag entry with fn (its index, its value), the CRC-32C
// made to match.
func eachEntry(fn func(i int, v uint32) uint32) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		chunks := tagChunks(tx)
		i := 0
		for _, c := range chunks {
			for at := 0; at < len(c); at += tagEntryLen {
				binary.LittleEndian.PutUint32(c[at:], fn(i, binary.LittleEndian.Uint32(c[at:])))
				i++
			}
		}
		return putTags(tx, chunks, nil)
	}
}

// TestKeyTagsDamaged: damaged key tags, their chunks or their table, are caught by their
// CRC-32C (or their table's checks) when the file opens, and the file opens without them
// (they are derived from the cells, which have their own CRC-32C), with a warning, not set
// aside (it was, and the origin restarted with no counts); tags that agree with their
// CRC-32C but not with the records (a file written wrong: an entry off a record's start,
// on its own tuple's second record, out of order, past its part; counts shifted from a
// part to the next) make a keyed restore step over the part. Either way every keyed
// restore reads what a load of every part reads. (An entry moved forward in its own tuple
// lost the tuple's first record, and shifted counts the part's last tuple, before keyed
// checked the record before a tuple and the last entry's records.)
func TestKeyTagsDamaged(t *testing.T) {
	e, keys := tagsEngine()
	for _, tc := range []struct {
		name     string
		damage   func(tx *bolt.Tx) error
		untagged bool // the file opens without its tags
	}{
		{"chunk byte", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(tagsBucket))
			k, v := b.Cursor().First()
			v = slices.Clone(v)
			v[len(v)/3] ^= 0x10
			return b.Put(slices.Clone(k), v)
		}, true},
		{"table byte", func(tx *bolt.Tx) error {
			m := tx.Bucket([]byte(metaBucket))
			table := slices.Clone(m.Get([]byte(metaTagParts)))
			table[len(table)/2] ^= 1
			return m.Put([]byte(metaTagParts), table)
		}, true},
		{"table short", func(tx *bolt.Tx) error { // a CRC-32C that matches
			table := tx.Bucket([]byte(metaBucket)).Get([]byte(metaTagParts))
			return putTags(tx, nil, slices.Clone(table[:len(table)-1]))
		}, true},
		{"table counts more", func(tx *bolt.Tx) error {
			table := slices.Clone(tx.Bucket([]byte(metaBucket)).Get([]byte(metaTagParts)))
			table[0]++
			return putTags(tx, nil, table)
		}, true},
		{"table counts fewer", func(tx *bolt.Tx) error {
			table := slices.Clone(tx.Bucket([]byte(metaBucket)).Get([]byte(metaTagParts)))
			table[0]--
			return putTags(tx, nil, table)
		}, true},
		{"table long", func(tx *bolt.Tx) error {
			table := tx.Bucket([]byte(metaBucket)).Get([]byte(metaTagParts))
			return putTags(tx, nil, append(slices.Clone(table), 1))
		}, true},
		{"chunk cut", func(tx *bolt.Tx) error {
			chunks := tagChunks(tx)
			chunks[0] = chunks[0][:len(chunks[0])-2]
			return putTags(tx, chunks, nil)
		}, true},
		{"entries fewer", func(tx *bolt.Tx) error { // as the table, not as the count
			chunks := tagChunks(tx)
			chunks[0] = chunks[0][:len(chunks[0])-tagEntryLen]
			return putTags(tx, chunks, nil)
		}, true},
		{"count missing", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(metaBucket)).Delete([]byte(metaTagsCount))
		}, true},
		{"table missing", func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(metaBucket)).Delete([]byte(metaTagPartsCRC))
		}, true},
		{"first entry off its part's start", nil, false}, // below: moveEntries
		{"second entry inside the first tuple", nil, false},
		{"second entry forward in its tuple", nil, false},
		{"entries swapped", nil, false},
		{"table counts shifted", shiftCounts, false},
		{"entries past their part", eachEntry(func(_ int, v uint32) uint32 {
			if v>>16 != 0 {
				v |= 0xffff << 16
			}
			return v
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var logs bytes.Buffer
			s, err := Open(dir, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Write(Source{Tuples: e.Tuples, ShardSeed: e.ShardSeed()}); err != nil {
				t.Fatal(err)
			}
			o := openTagged(t, s)
			want := byKey(t, o)
			damage := tc.damage
			if damage == nil {
				how := map[string]string{"first entry off its part's start": "first inside",
					"second entry inside the first tuple": "second inside", "second entry forward in its tuple": "second forward",
					"entries swapped": "swap"}[tc.name]
				damage = moveEntries(t, o, how)
			}
			_ = o.Close()
			rewrite(t, dir, damage)
			o = openTagged(t, s)
			if m, _ := filepathGlob(dir); len(m) != 0 {
				t.Fatalf("moved aside: %v", m)
			}
			warned := strings.Contains(logs.String(), "key tags not used")
			if (o.tags == nil) != tc.untagged || warned != tc.untagged {
				t.Fatalf("tags used: %v, warned: %v; want the tags left out: %v (%s)", o.tags != nil, warned, tc.untagged, logs.String())
			}
			if got := byKey(t, o); !maps.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("a load of every part read %d keys, before the damage %d", len(got), len(want))
			}
			for _, key := range keys {
				if got := keyedParts(t, o, key, engine.KeyHash(o.Seed, key)); !slices.Equal(got, want[key]) {
					t.Fatalf("keyed restore of %q: %q; a load of every part reads %q", key, got, want[key])
				}
			}
		})
	}
}

// moveEntries returns a damage of the key tags of o's file that keeps the entries on
// records and within their part, in each part where it can: "first inside" moves the
// first entry to the second record of its tuple (one of two cells), "second inside" the
// second entry there, "second forward" the second entry to the second record of its own
// tuple, "swap" swaps the offsets of the second and third entries. A keyed restore must
// see that they do not agree with the records.
func moveEntries(t *testing.T, o *Opened, how string) func(tx *bolt.Tx) error {
	t.Helper()
	moved := map[uint32]uint32{} // entry -> its new offset
	for p := range engine.Parts {
		a, b := o.table[p], o.table[p+1]
		if a.tag == b.tag {
			continue
		}
		d, str, _ := o.at(a.pos, 0, o.span(a.pos, b.pos))
		r1, err := decodeCell(&d, str, nil)
		second := d.p - int(a.pos&0xffffffff)
		r2, err2 := decodeCell(&d, str, nil)
		if err != nil || (err2 != nil && b.tag-a.tag > 1) {
			t.Fatal(err, err2)
		}
		switch {
		case how == "first inside" && r1.Key == r2.Key:
			moved[a.tag] = uint32(second)
		case how == "second inside" && r1.Key == r2.Key && b.tag-a.tag > 1:
			moved[a.tag+1] = uint32(second)
		case how == "second forward" && b.tag-a.tag > 1:
			size := o.span(a.pos, b.pos)
			k1, next, ok1 := o.record(a.pos, int(o.tagEntry(a.tag+1)>>16), size)
			if k2, _, ok2 := o.record(a.pos, next, size); ok1 && ok2 && k1 == k2 {
				moved[a.tag+1] = uint32(next)
			}
		case how == "swap" && b.tag-a.tag > 2:
			moved[a.tag+1], moved[a.tag+2] = o.tagEntry(a.tag+2)>>16, o.tagEntry(a.tag+1)>>16
		}
	}
	if len(moved) < 5 {
		t.Fatalf("%s: %d entries moved", how, len(moved))
	}
	return eachEntry(func(i int, v uint32) uint32 {
		if off, ok := moved[uint32(i)]; ok {
			v = v&0xffff | off<<16
		}
		return v
	})
}

// shiftCounts moves, in keytags_parts, one entry of each part of two entries or more to
// the next part listed, if it has entries, every other pair of parts (the total and the
// CRC-32C kept): the first part's last tuple then has no entry of its own, and the second
// part's first entry is not at its start.
func shiftCounts(tx *bolt.Tx) error {
	d := decoder{b: tx.Bucket([]byte(metaBucket)).Get([]byte(metaTagParts))}
	var counts []uint64
	for d.p < len(d.b) && d.err == nil {
		counts = append(counts, d.uvarint())
	}
	shifted := 0
	for i := 0; i+1 < len(counts); i++ {
		if counts[i] >= 2 && counts[i+1] >= 1 {
			counts[i]--
			counts[i+1]++
			shifted++
			i++
		}
	}
	if d.err != nil || shifted < 5 {
		return fmt.Errorf("%d counts shifted (%v)", shifted, d.err)
	}
	var table []byte
	for _, n := range counts {
		table = binary.AppendUvarint(table, n)
	}
	return putTags(tx, nil, table)
}

// craftedTuples returns the tuples of a snapshot with parts denser than an engine's
// (tagsEngine's hold one or two tuples, but for 30 of 20): parts parts of perPart tuples
// each, of 1 to 6 cells (some with a foreign component), every seventh key long (up to
// 1,500 bytes). Their parts are set, not hashed from their keys: the file and its key
// tags go by the part a tuple is listed in (keyedIn reads it), and no millions of keys
// are hashed to fill a part.
func craftedTuples(parts, perPart int) []engine.TupleRecord {
	long := strings.Repeat("L", 1500)
	var ts []engine.TupleRecord
	for p := range parts {
		for i := range perPart {
			n := p*perPart + i
			key := fmt.Sprintf("c%d", n)
			if n%7 == 0 {
				key += long[:n*37%len(long)]
			}
			var cells []engine.CellRecord
			for c := range 1 + (n+p)%6 {
				r := engine.CellRecord{Key: key, Seq: 1000 - int64(c), Regional: uint64(n*7 + c + 1)}
				if c%3 == 1 {
					r.Foreign = []engine.RegionCount{{Region: "eu", Count: uint64(c + 2)}}
				}
				cells = append(cells, r)
			}
			ts = append(ts, engine.TupleRecord{Key: key, Part: p * (engine.Parts / parts), Cells: cells})
		}
	}
	return ts
}

// TestKeyTagsEntryMoved: an entry of the key tags moved to another offset in its part (a
// file written wrong, its CRC-32C matching) never makes a keyed restore miss a record or
// read another: for every key of the part it reads what stepping over the part reads.
// Each entry is moved to each record start between its neighbours' (the moves the order
// check lets through; among them those to a tuple's second record, which lost the
// tuple's first record before keyed checked the record before a tuple: the review saw
// 1.9% of random moves lose records), then to seeded random offsets, on a record or not.
// And a keyed read through those checks allocates nothing. The entries are changed in
// memory, in copies of the chunks (the file's mapping is read-only).
func TestKeyTagsEntryMoved(t *testing.T) {
	const parts, perPart = 12, 24
	s, _ := lazyStore(t)
	if err := s.Write(Source{Tuples: slices.Values(craftedTuples(parts, perPart)), ShardSeed: 0x9e3779b97f4a7c15}); err != nil {
		t.Fatal(err)
	}
	o := openTagged(t, s)
	tags := make([][]byte, len(o.tags))
	for i, c := range o.tags {
		tags[i] = slices.Clone(c)
	}
	o.tags = tags
	entry := func(e uint32) []byte { return tags[e/tagChunkEntries][e%tagChunkEntries*tagEntryLen:] }
	type part struct {
		p      int
		starts []int               // where its records begin
		want   map[string][]string // each key's records, stepped over
	}
	var ps []part
	for i := range parts {
		pt := part{p: i * (engine.Parts / parts), want: map[string][]string{}}
		a, b := o.table[pt.p], o.table[pt.p+1]
		if b.tag-a.tag != perPart {
			t.Fatalf("part %d: %d entries, want %d", pt.p, b.tag-a.tag, perPart)
		}
		size := o.span(a.pos, b.pos)
		for at, ok := 0, true; at < size; {
			pt.starts = append(pt.starts, at)
			if _, at, ok = o.record(a.pos, at, size); !ok {
				t.Fatalf("part %d: no record at byte %d", pt.p, at)
			}
		}
		if _, err := o.Parts(pt.p, pt.p+1, nil, nil, 0, func(recs []engine.CellRecord) {
			for j := range recs {
				k := strings.Clone(recs[j].Key)
				pt.want[k] = append(pt.want[k], recordStrings(recs[j:j+1])...)
			}
		}); err != nil || len(pt.want) != perPart {
			t.Fatalf("part %d: %d keys, %v", pt.p, len(pt.want), err)
		}
		ps = append(ps, pt)
	}
	// move puts entry e of pt at byte off, checks every key's keyed restore, and puts it
	// back.
	move := func(pt part, e uint32, off int) {
		old := binary.LittleEndian.Uint32(entry(e))
		binary.LittleEndian.PutUint32(entry(e), old&0xffff|uint32(off)<<16)
		defer binary.LittleEndian.PutUint32(entry(e), old)
		for key, want := range pt.want {
			if got := keyedIn(t, o, pt.p, key, engine.KeyHash(o.Seed, key)); !slices.Equal(got, want) {
				t.Fatalf("part %d: entry %d moved from byte %d to %d: keyed restore of %.20q: %q; stepping reads %q",
					pt.p, e, old>>16, off, key, got, want)
			}
		}
	}
	moves := 0
	for _, pt := range ps {
		a, b := o.table[pt.p], o.table[pt.p+1]
		for e := a.tag; e < b.tag; e++ {
			lo, hi := -1, o.span(a.pos, b.pos)
			if e > a.tag {
				lo = int(o.tagEntry(e-1) >> 16)
			}
			if e+1 < b.tag {
				hi = int(o.tagEntry(e+1) >> 16)
			}
			for _, at := range pt.starts {
				if lo < at && at < hi && at != int(o.tagEntry(e)>>16) {
					move(pt, e, at)
					moves++
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(24, 1))
	for range 600 {
		pt := ps[rng.IntN(len(ps))]
		a, b := o.table[pt.p], o.table[pt.p+1]
		move(pt, a.tag+uint32(rng.IntN(perPart)), rng.IntN(min(o.span(a.pos, b.pos), maxTagOffset+1)))
	}
	none, nop := func(string) bool { return false }, func([]engine.CellRecord) {}
	var recs []engine.CellRecord
	for key := range ps[0].want { // each key's tuple found and walked, its records not decoded
		h := engine.KeyHash(o.Seed, key)
		if n := testing.AllocsPerRun(20, func() { recs, _ = o.Parts(ps[0].p, ps[0].p+1, recs, none, h, nop) }); n != 0 {
			t.Fatalf("a keyed read of %.20q allocates %v times", key, n)
		}
	}
	t.Logf("%d moves to a record start between the neighbours' entries, 600 random", moves)
}
