package persist

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"unsafe"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/prefetch"
	"github.com/ratchet/ratchet/keyspace"
	bolt "go.etcd.io/bbolt"
)

// Opened is a snapshot held open so that its cells are read a part at a time, for
// engine.LoadLazily: an origin that restarts serves before it has read them all. Its
// Snapshot has the counter keys, runs and leases; its Cells too when the file has no part
// table (a snapshot not of an engine's Tuples: Lazy reports false, and there is nothing
// more to read). Close it once every part is read (Parts).
type Opened struct {
	Snapshot
	// Seed is the store's hash seed the snapshot was saved with (when Lazy).
	Seed uint64
	// CellCount is the number of the file's cell records (when Lazy; the delta log's are not
	// counted): at least its tuples' number, for engine.ReserveTuples.
	CellCount int64
	db        *bolt.DB
	// table is the part table: part i's records are from position table[i].pos to
	// table[i+1].pos (chunk<<32 | offset), its key tags (keytags.go) from entry
	// table[i].tag to table[i+1].tag.
	table []partRange
	// chunks are the cells' chunks, and tags the key tags', each aliasing the file's
	// mapping (checked when the file opened), so that Parts reads a part without a bbolt
	// transaction or a B+tree seek: the file is open read-only, so its mapping stays where
	// it is until Close.
	chunks [][]byte
	tags   [][]byte
	size   int64
	log    *logSet // the delta log's frames (log.go), whose cells Parts adds to the file's
	// logFolded says that table[i].log is log.partAt[i] (foldLog).
	logFolded bool
	// tagsErr is why the file's key tags are not used (damaged or inconsistent: readTags),
	// nil when they are or it has none; Store.open logs it.
	tagsErr error
}

// Lazy reports whether the cells are to be read with Parts, part by part.
func (o *Opened) Lazy() bool { return o.table != nil }

// OpenOrSetAside is LoadOrSetAside that leaves the cells of a snapshot with a part table
// in the file, for Parts to read a few parts at a time. Every chunk is checked against the
// CRC-32C of its bucket before it returns, as LoadAll checks them, so a damaged file is
// moved aside (and the process starts empty) rather than half-loaded; but for its key
// tags (keytags.go), derived from the cells: damaged, the file opens without them, every
// part's records stepped over, and a warning says why. With no snapshot, it returns an
// Opened with nothing in it.
func (s *Store) OpenOrSetAside() (*Opened, error) {
	o, err := s.open()
	if err == nil {
		return o, nil
	}
	return &Opened{}, s.aside(err)
}

// open opens the snapshot for OpenOrSetAside.
func (s *Store) open() (*Opened, error) {
	path := filepath.Join(s.dir, fileName)
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Opened{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load snapshot %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("load snapshot %s: not a regular file", path)
	}
	if info.Size() == 0 {
		return nil, fmt.Errorf("load snapshot %s: %w: empty file", path, ErrCorrupt)
	}
	o, err := openLazy(path, info.Size())
	if err == nil {
		if err = s.applyLogs(&o.Snapshot, info.Size(), o, true); err != nil {
			_ = o.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("load snapshot %s: %w", path, err)
	}
	if o.tagsErr != nil {
		s.log.Warn("snapshot key tags not used (damaged or inconsistent): keyed restores step over each part's records",
			"path", path, "error", o.tagsErr)
	}
	s.trimResets(path, o.Resets)
	s.sizeHint.Store(info.Size())
	return o, nil
}

// openLazy opens the snapshot at path, of size bytes, and checks it; it reads everything
// but the cells of a file with a part table. As load, it turns a fault or a panic of
// bbolt on a damaged file into an error.
func openLazy(path string, size int64) (o *Opened, err error) {
	var file *os.File
	var db *bolt.DB
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			} else if file != nil {
				_ = file.Close()
			}
			o, err = nil, fmt.Errorf("%w: bbolt: %v", ErrCorrupt, r)
		}
	}()
	if db, err = openReadOnly(path, &file); err != nil {
		return nil, err
	}
	o = &Opened{db: db, size: size}
	err = db.View(func(tx *bolt.Tx) error {
		if tx.Size() > size {
			return fmt.Errorf("%w: truncated: %d bytes of %d", ErrCorrupt, size, tx.Size())
		}
		meta := tx.Bucket([]byte(metaBucket))
		if meta == nil || meta.Get([]byte(metaParts)) == nil {
			var err error
			o.Snapshot, err = readSnapshot(tx, size, false) // no table: everything now
			return err
		}
		return o.readLazy(tx, meta)
	})
	if err != nil || o.table == nil {
		_ = db.Close()
		o.db = nil
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// readLazy checks a file with a part table: its version, the CRC-32C of the cells'
// chunks, of the table and of the key tags (if any: damaged, they are left out, tagsErr
// saying why), and reads its counter keys, runs, leases, reset records, change version
// and overrides (all but the cells, as readSnapshot reads them).
func (o *Opened) readLazy(tx *bolt.Tx, meta *bolt.Bucket) error {
	version, err := metaUint(meta, metaVersion, 8)
	if err != nil {
		return err
	}
	if version != formatVersion {
		return fmt.Errorf("%w: %w", ErrCorrupt, &versionError{found: version, want: formatVersion})
	}
	if o.Seed, err = metaUint(meta, metaShardSeed, 8); err != nil {
		return err
	}
	count, err := metaUint(meta, metaCount, 8)
	if err != nil {
		return err
	}
	o.CellCount = int64(min(count, 1<<62))
	table := meta.Get([]byte(metaParts))
	if want, err := metaUint(meta, metaPartsCRC, 4); err != nil {
		return err
	} else if got := crc32.Checksum(table, castagnoli); uint64(got) != want {
		return fmt.Errorf("%w: part table checksum %08x, meta says %08x", ErrCorrupt, got, want)
	}
	cells := tx.Bucket([]byte(cellsBucket))
	if cells == nil {
		return fmt.Errorf("%w: missing %q bucket", ErrCorrupt, cellsBucket)
	}
	wantCRC, err := metaUint(meta, metaCRC, 4)
	if err != nil {
		return err
	}
	var lens []uint64 // each chunk's length
	var chunks [][]byte
	if err := walkChunks(cells, cellsBucket, func(v []byte) error {
		lens, chunks = append(lens, uint64(len(v))), append(chunks, v)
		return nil
	}); err != nil {
		return err
	}
	crc, err := checksum(cellsBucket, chunks) // on every thread: nothing loads before it is checked
	if err != nil {
		return err
	}
	if uint64(crc) != wantCRC {
		return fmt.Errorf("%w: checksum %08x, meta says %08x", ErrCorrupt, crc, wantCRC)
	}
	parts, err := decodeParts(table, lens)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	kv := chunked[keyspace.Record]{bucket: kvBucket, countName: metaKVCount, crcName: metaKVCRC, minLen: 5, byteValues: true, decode: decodeKV}
	if o.KV, err = kv.read(tx, meta, o.size); err != nil {
		return err
	}
	runs := chunked[engine.RunRecord]{bucket: runsBucket, countName: metaRunsCount, crcName: metaRunsCRC, minLen: 5, decode: decodeRun}
	if o.Runs, err = runs.read(tx, meta, o.size); err != nil {
		return err
	}
	leases := chunked[engine.LeaseRecord]{bucket: leaseBucket, countName: metaLeaseCount, crcName: metaLeaseCRC, minLen: 6,
		chunkDecoder: leaseDecoder(o.Runs, nil)} // their keys are spelled out
	if o.Leases, err = leases.read(tx, meta, o.size); err != nil {
		return err
	}
	if err := o.readResets(tx, meta, o.size); err != nil {
		return err
	}
	if o.tags, o.table, err = readTags(tx, meta, parts); err != nil {
		// The tags are derived from the cells, checked above: without them every part is
		// stepped over, as in a file written before them, rather than the file set aside.
		o.tags, o.table, o.tagsErr = nil, untagged(parts), err
	}
	o.chunks = chunks
	return nil
}

// Parts decodes the cell records of the parts from to to-1 (0 <= from <= to <=
// engine.Parts) of a Lazy snapshot into recs[:0], in file order, those whose key keep
// keeps unless keep is nil (engine.LoadLazily's), calls use with them, and
// returns them for the next call to reuse. keyHash, unless 0, is the hash of the one key
// keep keeps (engine.KeyHash under Seed, LoadLazily's keyHash): the records of other keys
// are then mostly not read, the file's found by its key tags (keytags.go), the delta
// log's by theirs. Their keys are the file's bytes, valid only during use (engine.Restore
// copies what it keeps); their foreign regions' names are copies. The file was checked
// when it opened; a fault reading it still is an error, not a crash, and use is then not
// called.
//
// It is safe to call from several goroutines, but not concurrently with Close, which
// unmaps the file: Close once no Parts is under way or can start (engine.LoadLazily's
// channel closed: every part loaded, the keyed restores that were under way returned,
// as each holds its part's lock, which the background load takes before it marks the part
// loaded); a Parts after Close is an error. Parts takes no lock: one shared by every
// thread's keyed restores (an RWMutex's read lock, as it had) moves its cache line from
// core to core on each.
func (o *Opened) Parts(from, to int, recs []engine.CellRecord, keep func(key string) bool, keyHash uint64, use func([]engine.CellRecord)) (_ []engine.CellRecord, err error) {
	if o.table == nil || from < 0 || from > to || to > engine.Parts {
		return recs, fmt.Errorf("no parts %d to %d to read", from, to)
	}
	if o.db == nil {
		return recs, fmt.Errorf("parts %d to %d: snapshot closed", from, to)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			recs, err = nil, fmt.Errorf("%w: parts %d to %d: bbolt: %v", ErrCorrupt, from, to, r)
		}
	}()
	recs = recs[:0]
	tagged := keep != nil && keyHash != 0 && o.tags != nil
	tag := keyTag16(keyHash)
	if tagged && to == from+1 && prefetch.Enabled { // a request's: ask for the lines it reads, in three rounds
		o.ahead(from, tag, keyTag(keyHash))
	}
	for p := from; p < to; {
		if tagged {
			var ok bool
			if recs, ok = o.keyed(p, tag, recs, keep); ok {
				p++
				continue
			}
		}
		// Step over the records: of the parts from p on, or of p alone when tagged (the
		// next ones may have tags).
		q := to
		if tagged {
			q = p + 1
		}
		if recs, err = o.step(p, q, recs, keep); err != nil {
			return recs, err
		}
		p = q
	}
	if ls := o.log; ls != nil && ls.frames > 0 {
		lo, hi := o.logRecords(from, to)
		recs = ls.appendRecords(lo, hi, recs, keep, keyHash)
	}
	use(recs)
	return recs, nil
}

// logRecords returns the range of the delta log's records (logSet.offs) of parts from to
// to-1: from the part table when the log's starts are folded into it (foldLog), else from
// the log's own. The log must have frames.
func (o *Opened) logRecords(from, to int) (lo, hi int) {
	if o.logFolded {
		return int(o.table[from].log), int(o.table[to].log)
	}
	return o.log.partAt[from], o.log.partAt[to]
}

// step appends to recs the cell records of the parts from to to-1, those whose key keep
// keeps unless keep is nil, stepping over the others.
func (o *Opened) step(from, to int, recs []engine.CellRecord, keep func(key string) bool) ([]engine.CellRecord, error) {
	first, last := o.table[from].pos, o.table[to].pos
	for n := first >> 32; n <= last>>32 && first != last; n++ {
		if n >= uint64(len(o.chunks)) { // the end of the last chunk: checked by decodeParts
			break
		}
		v := o.chunks[n]
		lo, hi := 0, len(v)
		if n == first>>32 {
			lo = int(first & 0xffffffff)
		}
		if n == last>>32 {
			hi = int(last & 0xffffffff)
		}
		v = v[:hi]
		str := unsafe.String(unsafe.SliceData(v), len(v)) // no copy: used before Close
		for d := (decoder{b: v, p: lo}); d.p < len(v); {
			if keep != nil && !keepCell(&d, str, keep) {
				continue
			}
			r, err := decodeCell(&d, str, nil)
			if err == nil {
				err = d.err
			}
			if err != nil {
				return recs, fmt.Errorf("%w: %s chunk %d: record %d: %w", ErrCorrupt, cellsBucket, n, len(recs), err)
			}
			for j := range r.Foreign { // a region's name is kept by the engine
				r.Foreign[j].Region = strings.Clone(r.Foreign[j].Region)
			}
			recs = append(recs, r)
		}
	}
	return recs, nil
}

// keepCell reads the key of the cell record at d (decodeCell's) and reports whether keep
// keeps it, d left at the record; if not, d is moved past the record, which is not decoded
// (a keyed load reads a part's records for one key: the others cost their varints only).
// A record that does not decode is kept, for decodeCell to report.
func keepCell(d *decoder, str string, keep func(key string) bool) bool {
	at := d.p
	lo, hi := d.span("key")
	if d.err != nil || hi-lo > maxKeyLen || keep(str[lo:hi]) {
		d.p, d.err = at, nil
		return true
	}
	d.varint()  // seq
	d.uvarint() // regional
	d.uvarint() // imported
	nf := d.uvarint()
	if nf > uint64(len(d.b)-d.p)/2 {
		d.p, d.err = at, nil
		return true
	}
	for range nf {
		d.span("region")
		d.uvarint()
	}
	if d.err != nil {
		d.p, d.err = at, nil
		return true
	}
	return false
}

// Close releases the file of a Lazy snapshot: once no Parts is under way or can start
// (Parts).
func (o *Opened) Close() error {
	o.log.release()
	o.log, o.chunks, o.tags = nil, nil, nil
	if o.db == nil {
		return nil
	}
	err := o.db.Close()
	o.db = nil
	return err
}
