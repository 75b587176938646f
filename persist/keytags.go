package persist

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"unsafe"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/prefetch"
	bolt "go.etcd.io/bbolt"
)

// The key tags of a snapshot of Tuples: beside each part's cell records, a tag of each
// tuple's key and where the tuple's records begin, so that a keyed restore (Opened.Parts
// given keyHash: a request on a part not loaded yet) looks at its part's tags and decodes
// only its own tuple's records, rather than stepping over every record of the part (at
// 10M tuples a part holds about 40 tuples; stepping over them was a quarter of a keyed
// restore's CPU). Optional: a file without them (written before them) reads as before,
// each part's records stepped over; the format version is the same.
//
//	keytags: chunks keyed as the cells' (0, 1, 2, ...), each of tagChunkEntries entries
//	       but the last (not empty), in part order (file order within a part), one entry
//	       per tuple with cell records: a uint32, little endian, whose low 16 bits are the
//	       tuple key's tag (keyTag16 of engine.KeyHash under "shard_seed") and high 16 bits
//	       where the tuple's first record begins, in bytes from its part's start (the
//	       cells' chunks read one after the other).
//	meta "keytags_count" = the number of entries (8 bytes, big endian), "keytags_crc32c"
//	       = the CRC-32C of the chunks in order (4 bytes, big endian), "keytags_parts" =
//	       for each part listed in the part table (parts.go), in its order, uvarint the
//	       number of its entries, 0 for a part not indexed (one with a tuple that begins
//	       past maxTagOffset: its records are stepped over), and "keytags_parts_crc32c" =
//	       the CRC-32C of "keytags_parts".
//
// A tag is 16 bits, not the delta log's 32 (logSet.tags): the part already fixes the
// hash's low 18 bits, and with 40 tuples in a part a key's tag is another tuple's once
// in 1,600 restores (a record decoded and its key compared for nothing), for 2 bytes an
// entry less (20 MB at 10M tuples). A damaged chunk or table fails its CRC-32C (or the
// table's checks) when the file opens; the tags being derived from the cells (which have
// their own CRC-32C), the file then opens without them, as one written before them, and a
// warning says why (Store.open): it is not set aside. Entries that agree with their CRC-32C
// but not with the records (a file written wrong: an entry off its tuple's first record,
// counts shifted between parts) make Parts step over the part instead (Opened.keyed). A
// tag written wrong is not caught: it is what a keyed restore goes by.
const (
	tagsBucket      = "keytags"
	metaTagsCount   = "keytags_count"
	metaTagsCRC     = "keytags_crc32c"
	metaTagParts    = "keytags_parts"
	metaTagPartsCRC = "keytags_parts_crc32c"
	tagEntryLen     = 4
	// tagChunkEntries fills 16 pages of bbolt's exactly (a page's header, and an
	// element's of 16 bytes and its 4-byte key, before each value): a chunk of 64 KiB took
	// a 17th page.
	tagChunkEntries = (16*4096 - 16 - 16 - chunkKeyLen) / tagEntryLen
	tagChunkBytes   = tagChunkEntries * tagEntryLen
	maxTagOffset    = 1<<16 - 1
)

// tagOffsetLimit is maxTagOffset, where a save stops indexing a part. A variable for tests,
// which make parts not indexed beside parts indexed.
var tagOffsetLimit int64 = maxTagOffset

// keyTag16 is the tag of a key of hash h (engine.KeyHash) in the key tags: its top 16
// bits, above the part's (engine.PartOfHash). A variable for tests, which make tags
// collide.
var keyTag16 = func(h uint64) uint16 { return uint16(h >> 48) }

// keyTagger builds the key tags of a save of Tuples as tupleEncoder encodes the cells:
// part (a part begins), tuple (a tuple with cells begins), then done. Its entries are
// written as tupleEncoder writes the cells (spill), those of whole chunks of parts ended.
type keyTagger struct {
	seed    uint64
	buf     []byte // the entries not written yet
	at      int    // where the current part's entries begin in buf
	start   int64  // where the current part begins, in bytes of the cells
	over    bool   // the current part has a tuple past maxTagOffset: not indexed
	table   []byte // keytags_parts so far
	written uint32 // the chunks written
	crc     uint32 // their CRC-32C
	n       uint64 // the entries
}

// endPart ends the current part: its count goes to the table if it has records.
func (k *keyTagger) endPart() {
	switch {
	case k.over:
		k.buf = k.buf[:k.at]
		k.table = append(k.table, 0)
	case len(k.buf) > k.at:
		n := (len(k.buf) - k.at) / tagEntryLen
		k.n += uint64(n)
		k.table = binary.AppendUvarint(k.table, uint64(n))
	}
	k.at, k.over = len(k.buf), false
}

// part ends the current part and begins one at byte at of the cells.
func (k *keyTagger) part(at int64) {
	k.endPart()
	k.start = at
}

// tuple adds the entry of a tuple of key key whose records begin at byte at of the cells.
func (k *keyTagger) tuple(key string, at int64) {
	if k.over {
		return
	}
	off := at - k.start
	if off > tagOffsetLimit {
		k.over = true
		return
	}
	e := uint32(keyTag16(engine.KeyHash(k.seed, key))) | uint32(off)<<16
	k.buf = binary.LittleEndian.AppendUint32(k.buf, e)
}

// spill puts the whole chunks of the parts ended into b (the tags bucket), and keeps the
// rest.
func (k *keyTagger) spill(b *bolt.Bucket) error {
	n := k.at / tagChunkBytes
	for i := range n {
		key := binary.BigEndian.AppendUint32(nil, k.written) // bbolt refers to it until the commit
		v := k.buf[i*tagChunkBytes : (i+1)*tagChunkBytes]
		k.crc = crc32.Update(k.crc, castagnoli, v)
		if err := b.Put(key, v); err != nil {
			return fmt.Errorf("put %s chunk %d: %w", tagsBucket, k.written, err)
		}
		k.written++
	}
	return nil
}

// spilled drops the entries spill put (once its transaction committed).
func (k *keyTagger) spilled() {
	n := k.at / tagChunkBytes * tagChunkBytes
	k.buf = k.buf[:copy(k.buf, k.buf[n:])]
	k.at -= n
}

// section ends the last part and returns the section of the entries not written yet, and
// the meta values of the table.
func (k *keyTagger) section() (section, []metaValue) {
	k.endPart()
	sec := section{bucket: tagsBucket, buf: k.buf, count: k.n, countName: metaTagsCount, crcName: metaTagsCRC,
		keyBase: k.written, crc0: k.crc}
	for end := tagChunkBytes; ; end += tagChunkBytes {
		if end >= len(k.buf) {
			if len(k.buf) > end-tagChunkBytes {
				sec.ends = append(sec.ends, len(k.buf))
			}
			break
		}
		sec.ends = append(sec.ends, end)
	}
	return sec, []metaValue{{metaTagParts, k.table}, {metaTagPartsCRC, binary.BigEndian.AppendUint32(nil, crc32.Checksum(k.table, castagnoli))}}
}

// partRange is a part's place in a Lazy snapshot: where its records begin in the cells'
// chunks (chunk index << 32 | offset), and the index of its first key tag among the
// entries. Part i's records end where part i+1's begin, and its tags likewise: side by
// side, a keyed restore finds both in one cache line.
type partRange struct {
	pos uint64
	tag uint32
	// log is where the part's records of the delta log begin among them (logSet.partAt),
	// when logFolded.
	log uint32
}

// foldLog copies where each part's records of the delta log begin (logSet.partAt) into the
// part table, beside the file's (a keyed restore then finds both in one cache line, where
// a lookup of partAt was another miss), if their number fits.
func (o *Opened) foldLog() {
	ls := o.log
	if ls == nil || ls.frames == 0 || len(ls.offs) >= 1<<32 {
		return
	}
	for i, at := range ls.partAt {
		o.table[i].log = uint32(at)
	}
	o.logFolded = true
}

// untagged returns the range of each part of a file with a part table (parts,
// decodeParts's), with no key tags: its records are stepped over.
func untagged(parts []uint64) []partRange {
	table := make([]partRange, len(parts))
	for i, p := range parts {
		table[i].pos = p
	}
	return table
}

// readTags checks the key tags of a file with a part table (parts, decodeParts's) and
// returns their chunks and each part's range; with no tags (a file written before them),
// no chunks, and every part with no tags (its records stepped over). Tags damaged or
// inconsistent are an error wrapping ErrCorrupt, on which the caller opens the file
// untagged (readLazy).
func readTags(tx *bolt.Tx, meta *bolt.Bucket, parts []uint64) ([][]byte, []partRange, error) {
	table := untagged(parts)
	b := tx.Bucket([]byte(tagsBucket))
	if b == nil {
		return nil, table, nil
	}
	count, err := metaUint(meta, metaTagsCount, 8)
	if err != nil {
		return nil, nil, err
	}
	wantCRC, err := metaUint(meta, metaTagsCRC, 4)
	if err != nil {
		return nil, nil, err
	}
	counts := meta.Get([]byte(metaTagParts))
	if want, err := metaUint(meta, metaTagPartsCRC, 4); err != nil {
		return nil, nil, err
	} else if got := crc32.Checksum(counts, castagnoli); uint64(got) != want {
		return nil, nil, fmt.Errorf("%w: %s checksum %08x, meta says %08x", ErrCorrupt, metaTagParts, got, want)
	}
	var chunks [][]byte
	var entries uint64
	last := false
	if err := walkChunks(b, tagsBucket, func(v []byte) error {
		if last || len(v) > tagChunkBytes || len(v)%tagEntryLen != 0 {
			return fmt.Errorf("%d bytes", len(v))
		}
		last = len(v) < tagChunkBytes
		chunks = append(chunks, v)
		entries += uint64(len(v) / tagEntryLen)
		return nil
	}); err != nil {
		return nil, nil, err
	}
	crc, err := checksum(tagsBucket, chunks)
	if err != nil {
		return nil, nil, err
	}
	if uint64(crc) != wantCRC {
		return nil, nil, fmt.Errorf("%w: %s checksum %08x, meta says %08x", ErrCorrupt, tagsBucket, crc, wantCRC)
	}
	if entries != count || entries >= 1<<32 {
		return nil, nil, fmt.Errorf("%w: %d %s entries, meta says %d", ErrCorrupt, entries, tagsBucket, count)
	}
	d := decoder{b: counts}
	var at uint64
	for i := range engine.Parts {
		table[i].tag = uint32(at)
		if parts[i] == parts[i+1] {
			continue
		}
		n := d.uvarint()
		// A tuple's records take minRecordLen bytes or more, and its entry is within the
		// first maxTagOffset+1 bytes of its part.
		if d.err != nil || n > maxTagOffset/minRecordLen+1 || at+n > entries {
			return nil, nil, fmt.Errorf("%w: %s: part %d: %d entries (%d before, of %d)", ErrCorrupt, metaTagParts, i, n, at, entries)
		}
		at += n
	}
	table[engine.Parts].tag = uint32(at)
	if d.p != len(counts) || at != entries {
		return nil, nil, fmt.Errorf("%w: %s: %d entries of %d, %d bytes left", ErrCorrupt, metaTagParts, at, entries, len(counts)-d.p)
	}
	return chunks, table, nil
}

// tagEntry returns entry e of the key tags.
func (o *Opened) tagEntry(e uint32) uint32 {
	return binary.LittleEndian.Uint32(o.tags[e/tagChunkEntries][e%tagChunkEntries*tagEntryLen:])
}

// keyed appends to recs the cell records of part p whose key keep keeps, found by their
// tags (the part's entries whose tag is tag, each tuple's records decoded up to the next
// tuple's), and reports whether it could: false when the part has no tags, or when its
// entries do not agree with its records (a file written wrong: the CRC-32C of a damaged
// one failed when it opened), recs then as they were, for the caller to step over the
// part. The entries must begin at the part's start, in order, within it; the last one's
// records, to the part's end, must be of one key (else a tuple after it has no entry: the
// counts of keytags_parts shifted); and a tuple whose tag is tag must be whole records,
// the record before them (walked from the entry before) and the one after them of another
// key (else the entry is inside a tuple, and the records before it would be missed).
// Those walks read keys only, and a tuple or two: the last entry's on every read, the
// one before a matching entry.
func (o *Opened) keyed(p int, tag uint16, recs []engine.CellRecord, keep func(key string) bool) ([]engine.CellRecord, bool) {
	first, next := o.table[p], o.table[p+1]
	if first.tag == next.tag {
		return recs, first.pos == next.pos // no records, or no tags
	}
	size := o.span(first.pos, next.pos) // the part's bytes
	n0 := len(recs)
	prev := -1
	for e := first.tag; e < next.tag; e++ {
		v := o.tagEntry(e)
		off := int(v >> 16)
		if off <= prev || off >= size || (prev < 0 && off != 0) {
			return recs[:n0], false
		}
		before := prev
		prev = off
		if e+1 == next.tag && !o.oneKey(first.pos, off, size) { // once a read
			return recs[:n0], false
		}
		if uint16(v) != tag {
			continue
		}
		if before >= 0 && !o.follows(first.pos, before, off, size) {
			return recs[:n0], false
		}
		end := size
		if e+1 < next.tag {
			end = int(o.tagEntry(e+1) >> 16)
		}
		var ok bool
		if recs, ok = o.tuple(first.pos, off, end, size, recs, keep); !ok {
			return recs[:n0], false
		}
	}
	return recs, true
}

// span returns the bytes of the cells from position from to position to (chunk << 32 |
// offset, to not before from).
func (o *Opened) span(from, to uint64) int {
	n := int(to&0xffffffff) - int(from&0xffffffff)
	for c := from >> 32; c < to>>32; c++ {
		n += len(o.chunks[c])
	}
	return n
}

// at returns a decoder at byte at of the part that begins at position start, bounded by
// the chunk and by max bytes, and the chunk as a string; false past the last chunk.
func (o *Opened) at(start uint64, at, max int) (decoder, string, bool) {
	c, off := o.chunkOf(start, at)
	if c >= len(o.chunks) {
		return decoder{}, "", false
	}
	v := o.chunks[c]
	v = v[:min(len(v), off+max)]
	return decoder{b: v, p: off}, unsafe.String(unsafe.SliceData(v), len(v)), true
}

// chunkOf returns the chunk and the offset in it of byte at of the part that begins at
// position start; the chunk is len(o.chunks) past the last.
func (o *Opened) chunkOf(start uint64, at int) (int, int) {
	c, off := int(start>>32), int(start&0xffffffff)+at
	for c < len(o.chunks) && off >= len(o.chunks[c]) {
		off -= len(o.chunks[c])
		c++
	}
	return c, off
}

// tuple appends to recs the records, whose key keep keeps, of the tuple from byte from to
// byte to of the part that begins at position start, of size bytes, and reports whether
// they are whole records, followed by a record of another key than the first's, or the
// part's end (else the entry after is not the next tuple's: recs misses records).
func (o *Opened) tuple(start uint64, from, to, size int, recs []engine.CellRecord, keep func(key string) bool) ([]engine.CellRecord, bool) {
	var key string
	for at := from; at < to; {
		d, str, ok := o.at(start, at, to-at)
		if !ok {
			return recs, false
		}
		begin := d.p
		if at == from {
			lo, hi := d.span("key")
			if d.err != nil {
				return recs, false
			}
			key, d.p = str[lo:hi], begin
		}
		if keepCell(&d, str, keep) {
			r, err := decodeCell(&d, str, nil)
			if err != nil || d.err != nil {
				return recs, false
			}
			for j := range r.Foreign { // a region's name is kept by the engine
				r.Foreign[j].Region = strings.Clone(r.Foreign[j].Region)
			}
			recs = append(recs, r)
		}
		at += d.p - begin
	}
	if to < size {
		d, str, ok := o.at(start, to, size-to)
		lo, hi := d.span("key")
		if !ok || d.err != nil || str[lo:hi] == key {
			return recs, false
		}
	}
	return recs, true
}

// record returns the key of the record at byte at of the part that begins at position
// start, and the byte after the record; false unless it is a whole record before byte end.
func (o *Opened) record(start uint64, at, end int) (string, int, bool) {
	d, str, ok := o.at(start, at, end-at)
	if !ok {
		return "", 0, false
	}
	begin := d.p
	lo, hi := d.span("key")
	if d.err != nil {
		return "", 0, false
	}
	d.p = begin
	if keepCell(&d, str, keepNone) { // it does not decode
		return "", 0, false
	}
	return str[lo:hi], at + d.p - begin, true
}

// keepNone keeps no record (keepCell then steps over a record that decodes).
func keepNone(string) bool { return false }

// follows reports whether the records from byte from (a record's start) of the part that
// begins at position start (of size bytes) end exactly at byte to, the last of them of
// another key than the record at to.
func (o *Opened) follows(start uint64, from, to, size int) bool {
	var last string
	for at := from; at < to; {
		var ok bool
		if last, at, ok = o.record(start, at, to); !ok {
			return false
		}
	}
	key, _, ok := o.record(start, to, size)
	return ok && key != last
}

// oneKey reports whether the records from byte from (a record's start) to the end of the
// part that begins at position start (of size bytes) are whole records of one key.
func (o *Opened) oneKey(start uint64, from, size int) bool {
	key, at, ok := o.record(start, from, size)
	for ok && at < size {
		var next string
		next, at, ok = o.record(start, at, size)
		ok = ok && next == key
	}
	return ok
}

// ahead asks for the lines that a keyed read of part p (Parts: keyed, and appendRecords
// for the delta log) reads, so that misses of the same round overlap, where the reads
// take them one after another:
//
//  1. the part's range in the part table (with the log's, folded beside it);
//  2. the part's tag entries, and the log's tags and offsets of the part;
//  3. the records of the entries of tag tag and of the entries before them (follows), the
//     last entry's record (oneKey), and the log's records of tag logTag.
//
// Each round waits for the lines of the one before; keyed and appendRecords then find
// the third round's lines in the caches or on their way (a keyed read of a 10M-tuple
// snapshot with 78 MB of logs: 1.53 µs before, 1.16 after). It reads only where keyed
// reads, and a prefetch of an address it got wrong (a damaged file) does nothing; nor
// does one of a page not in memory (a cold page cache), which keyed then faults in.
func (o *Opened) ahead(p int, tag uint16, logTag uint32) {
	ls := o.log
	logged := ls != nil && ls.frames > 0 && ls.tags != nil
	if logged && !o.logFolded {
		prefetch.Line(unsafe.Pointer(&ls.partAt[p])) // beside the table's line
	}
	first, next := o.table[p], o.table[p+1]
	lo, hi := 0, 0
	if logged {
		if lo, hi = o.logRecords(p, p+1); lo < hi && hi <= len(ls.tags) && hi <= len(ls.offs) {
			prefetch.Line(unsafe.Pointer(&ls.tags[lo]))
			prefetch.Line(unsafe.Pointer(&ls.offs[lo]))
		} else {
			hi = lo
		}
	}
	entries := first.tag < next.tag
	if entries {
		for e := int64(first.tag); e < int64(next.tag); e += 64 / tagEntryLen {
			prefetch.Line(o.tagAddr(uint32(e)))
		}
		prefetch.Line(o.tagAddr(next.tag - 1))
	}
	for i := lo; i < hi; i++ {
		if ls.tags[i] == logTag {
			at := ls.offs[i]
			if b, off := ls.logs[at>>logAtBits], at&(1<<logAtBits-1); off < len(b) {
				prefetch.Line(unsafe.Pointer(&b[off]))
			}
		}
	}
	if !entries {
		return
	}
	var prev uint32 // the entry before e
	for e := first.tag; e < next.tag; e++ {
		v := o.tagEntry(e)
		if uint16(v) == tag {
			prefetch.Line(o.recordAddr(first.pos, int(prev>>16)))
			prefetch.Line(o.recordAddr(first.pos, int(v>>16)))
		}
		prev = v
	}
	prefetch.Line(o.recordAddr(first.pos, int(prev>>16)))
}

// tagAddr returns the address of tag entry e, nil past the last.
func (o *Opened) tagAddr(e uint32) unsafe.Pointer {
	c, i := e/tagChunkEntries, e%tagChunkEntries*tagEntryLen
	if int(c) >= len(o.tags) || int(i) >= len(o.tags[c]) {
		return nil
	}
	return unsafe.Pointer(&o.tags[c][i])
}

// recordAddr returns the address of byte at of the part that begins at position start
// (as at), nil past the last chunk.
func (o *Opened) recordAddr(start uint64, at int) unsafe.Pointer {
	c, off := o.chunkOf(start, at)
	if c >= len(o.chunks) || off < 0 {
		return nil
	}
	return unsafe.Pointer(&o.chunks[c][off])
}
