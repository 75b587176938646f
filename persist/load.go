package persist

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrCorrupt is wrapped by Load's error when the snapshot file is damaged, truncated or not
// a Ratchet snapshot, as opposed to unreadable (permissions, I/O, a lock held elsewhere).
var ErrCorrupt = errors.New("corrupt or foreign snapshot")

// Snapshot is what a snapshot file holds.
type Snapshot struct {
	// Cells are sorted by key, then sequence, with records of one key and sequence merged.
	Cells []engine.CellRecord
	// KV are the counter keyspace's keys in file order (for keyspace.KV.Restore, which drops
	// the expired ones).
	KV []keyspace.Record
	// Runs are the edge runs' replay marks and Leases the lease grants, in file order
	// (for engine.RestoreRuns, then engine.RestoreLeases).
	Runs   []engine.RunRecord
	Leases []engine.LeaseRecord
	// Resets are the reset records (for engine.RestoreResets, before engine.Restore), and
	// Changes the origin's change version when saved (engine.RestoreChanges); none and 0
	// in a file written before resets.
	Resets  []engine.ResetRecord
	Changes uint64
	// Overrides are RL.OVERRIDE's records in file order (for engine.RestoreOverrides),
	// and OverridesHorizon the table's horizon (engine.Overrides.Forget, after them);
	// none and zero in a file written before them.
	Overrides        []engine.OverrideRecord
	OverridesHorizon engine.OverrideHorizon

	gen uint64 // the base's gen (log.go); 0 in a file without one
}

// Load returns the cells of the last snapshot (LoadAll without the counter keys).
func (s *Store) Load() ([]engine.CellRecord, error) {
	snap, err := s.LoadAll()
	return snap.Cells, err
}

// LoadAll returns the last snapshot: its cells, sorted by key (then sequence) with records
// of the same key and sequence merged, and its counter keys; or nothing and no error when
// there is none. A damaged, truncated or foreign file, or one of another format version,
// is an error wrapping ErrCorrupt, never a panic; damage is caught by a CRC-32C of the cells and one of the keys, so LoadAll
// returns every record Save wrote or none. A file locked by another process is an error
// after a short wait.
//
// The frames of the delta log beside the file (log.go) are applied: their cells are among
// the cells, merged as the file's are.
func (s *Store) LoadAll() (Snapshot, error) { return s.loadAll(true, false) }

// loadAll is LoadAll; with sorted false the cells are left in file order, records of one key
// and sequence not merged. With adopt, the Store's saves continue the delta log from what
// it loaded (a process that starts).
func (s *Store) loadAll(sorted, adopt bool) (Snapshot, error) {
	path := filepath.Join(s.dir, fileName)
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Snapshot{}, nil
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("load snapshot %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return Snapshot{}, fmt.Errorf("load snapshot %s: not a regular file", path)
	}
	if info.Size() == 0 {
		// bbolt would try to initialise an empty file, which fails read-only.
		return Snapshot{}, fmt.Errorf("load snapshot %s: %w: empty file", path, ErrCorrupt)
	}
	snap, err := load(path, info.Size(), false)
	if err == nil {
		err = s.applyLogs(&snap, info.Size(), nil, adopt)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("load snapshot %s: %w", path, err)
	}
	if sorted {
		snap.Cells = sortAndMerge(snap.Cells)
	}
	s.trimResets(path, snap.Resets)
	s.sizeHint.Store(info.Size())
	return snap, nil
}

// load reads the snapshot at path, whose size is size bytes, its cells sorted and merged
// when sorted is set.
func load(path string, size int64, sorted bool) (snap Snapshot, err error) {
	// bbolt reads the file through mmap and trusts the page structure it finds: a damaged
	// page can make it panic (index out of range, failed assertion) or touch memory past
	// the end of a truncated file, which is a fault. The file is input from outside this
	// process, so both are turned into an error here: SetPanicOnFault makes the fault a
	// panic on this goroutine, and recover makes the panic an error. This is the one
	// place in Ratchet that recovers. View's and our own deferred Close release the
	// handle; if bolt.Open itself panics, the file it opened is closed here.
	var file *os.File
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				_ = file.Close() // may already be closed by db.Close; that error is moot
			}
			snap, err = Snapshot{}, fmt.Errorf("%w: bbolt: %v", ErrCorrupt, r)
		}
	}()

	db, err := openReadOnly(path, &file)
	if err != nil {
		return Snapshot{}, err
	}
	defer func() { _ = db.Close() }() // read-only: nothing to lose on close
	err = db.View(func(tx *bolt.Tx) error {
		if tx.Size() > size {
			return fmt.Errorf("%w: truncated: %d bytes of %d", ErrCorrupt, size, tx.Size())
		}
		var err error
		snap, err = readSnapshot(tx, size, sorted)
		return err
	})
	return snap, err
}

// openReadOnly opens the snapshot at path for reading, setting *file to the file as soon as
// it is open (for the caller to close should bbolt panic before it returns). A file
// bbolt refuses is an error wrapping ErrCorrupt; one locked elsewhere or unreadable is not.
func openReadOnly(path string, file **os.File) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o444, &bolt.Options{
		ReadOnly: true,
		Timeout:  lockTimeout,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			*file = f
			return f, err
		},
	})
	if err != nil {
		var pathErr *fs.PathError
		if errors.Is(err, berrors.ErrTimeout) || errors.As(err, &pathErr) {
			return nil, fmt.Errorf("open: %w", err) // locked elsewhere, or unreadable
		}
		// Bad magic, version or checksum in both meta pages, or a file too small.
		return nil, fmt.Errorf("%w: open: %w", ErrCorrupt, err)
	}
	return db, nil
}

// readSnapshot checks the meta bucket and returns the cells and counter keys of tx, the
// cells sorted and merged when sorted is set. size bounds what the file can hold, so a
// damaged count cannot make a huge allocation.
func readSnapshot(tx *bolt.Tx, size int64, sorted bool) (Snapshot, error) {
	meta := tx.Bucket([]byte(metaBucket))
	cells := tx.Bucket([]byte(cellsBucket))
	if meta == nil || cells == nil {
		return Snapshot{}, fmt.Errorf("%w: missing %q or %q bucket", ErrCorrupt, metaBucket, cellsBucket)
	}
	version, err := metaUint(meta, metaVersion, 8)
	if err != nil {
		return Snapshot{}, err
	}
	if version != formatVersion {
		return Snapshot{}, fmt.Errorf("%w: %w", ErrCorrupt, &versionError{found: version, want: formatVersion})
	}
	count, err := metaUint(meta, metaCount, 8)
	if err != nil {
		return Snapshot{}, err
	}
	wantCRC, err := metaUint(meta, metaCRC, 4)
	if err != nil {
		return Snapshot{}, err
	}
	recs, sum, err := readChunks(cells, count, size)
	if err != nil {
		return Snapshot{}, err
	}
	if uint64(len(recs)) != count {
		return Snapshot{}, fmt.Errorf("%w: %d cells, meta says %d", ErrCorrupt, len(recs), count)
	}
	if got := uint64(sum); got != wantCRC {
		return Snapshot{}, fmt.Errorf("%w: checksum %08x, meta says %08x", ErrCorrupt, got, wantCRC)
	}
	snap := Snapshot{Cells: recs}
	kv := chunked[keyspace.Record]{bucket: kvBucket, countName: metaKVCount, crcName: metaKVCRC, minLen: 5, byteValues: true, decode: decodeKV}
	if snap.KV, err = kv.read(tx, meta, size); err != nil {
		return Snapshot{}, err
	}
	runs := chunked[engine.RunRecord]{bucket: runsBucket, countName: metaRunsCount, crcName: metaRunsCRC, minLen: 5, decode: decodeRun}
	if snap.Runs, err = runs.read(tx, meta, size); err != nil {
		return Snapshot{}, err
	}
	leases := chunked[engine.LeaseRecord]{bucket: leaseBucket, countName: metaLeaseCount, crcName: metaLeaseCRC, minLen: 6,
		chunkDecoder: leaseDecoder(snap.Runs, snap.Cells)} // the cells in file order
	if snap.Leases, err = leases.read(tx, meta, size); err != nil {
		return Snapshot{}, err
	}
	if err := snap.readResets(tx, meta, size); err != nil {
		return Snapshot{}, err
	}
	if sorted {
		snap.Cells = sortAndMerge(snap.Cells)
	}
	return snap, nil
}

// readResets reads what an origin saves beside its cells, each optional (a file written
// before them has none): the reset records, the change version and the overrides. Both
// loads read them, the eager (readSnapshot) and the lazy one (Opened.readLazy).
func (snap *Snapshot) readResets(tx *bolt.Tx, meta *bolt.Bucket, size int64) error {
	var err error
	if tx.Bucket([]byte(resetsBucket)) != nil {
		resets := chunked[engine.ResetRecord]{bucket: resetsBucket, countName: metaResetCount, crcName: metaResetCRC, minLen: 4, decode: decodeReset}
		if snap.Resets, err = resets.read(tx, meta, size); err != nil {
			return err
		}
	}
	if meta.Get([]byte(metaChanges)) != nil {
		if snap.Changes, err = metaUint(meta, metaChanges, 8); err != nil {
			return err
		}
	}
	if meta.Get([]byte(metaGen)) != nil {
		if snap.gen, err = metaUint(meta, metaGen, 8); err != nil {
			return err
		}
	}
	if snap.Overrides, err = readOverrides(tx, meta, size); err != nil {
		return err
	}
	snap.OverridesHorizon, err = readHorizon(meta)
	return err
}

// maxResetCancels is what one reset record can need to hold: two live cells, each of at
// most the regions a cell can name. A record saved with more (one that kept the values of
// dead cells) is trimmed on load (trimResets), not refused: refusing it would set the
// whole snapshot aside.
const maxResetCancels = 2 * 1025

// decodeReset reads one reset record (save.go's appendReset). The cancelled values are
// bounded by the chunk's bytes, each taking at least three.
func decodeReset(d *decoder, str string, _ []byte) (engine.ResetRecord, error) {
	r := engine.ResetRecord{Key: d.str("key", str), Version: d.uvarint(), UntilMs: d.varint()}
	n := d.uvarint()
	for range n {
		if d.err != nil {
			break
		}
		r.Cancels = append(r.Cancels, engine.ResetCancel{Seq: d.varint(), Region: d.str("region", str), Count: d.uvarint()})
	}
	return r, nil
}

// trimResets is trimResets of the records of the snapshot at path, logging what it trimmed.
func (s *Store) trimResets(path string, recs []engine.ResetRecord) {
	if n := trimResets(recs); n > 0 {
		s.log.Warn("snapshot: reset records held more cancelled values than two live cells need; kept each one's latest cells'",
			"path", path, "records", n, "kept", maxResetCancels)
	}
}

// trimResets trims each record of recs holding more than maxResetCancels cancelled values
// to those of its latest cells (the live ones, when the record is recent), and returns how
// many it trimmed.
func trimResets(recs []engine.ResetRecord) (trimmed int) {
	for i := range recs {
		r := &recs[i]
		if len(r.Cancels) <= maxResetCancels {
			continue
		}
		slices.SortStableFunc(r.Cancels, func(a, b engine.ResetCancel) int { return cmp.Compare(b.Seq, a.Seq) })
		r.Cancels = slices.Clip(r.Cancels[:maxResetCancels])
		trimmed++
	}
	return trimmed
}

// versionError is a snapshot of a format other than formatVersion. The product has had no
// release, so no older format is read: such a file is moved aside as a corrupt one is.
type versionError struct{ found, want uint64 }

func (e *versionError) Error() string {
	return fmt.Sprintf("format version %d, want %d", e.found, e.want)
}

// chunked is a bucket of records (other than the cells, which share decodeChunk only),
// chunked as the cells are, with its count and CRC-32C in the meta
// bucket: minLen is the size of its shortest record, and decode reads one record at d
// (vals: the chunk's bytes, copied when byteValues is set). When chunkDecoder is set, it
// gives each chunk a decode of its own instead, for records that refer to earlier records
// of their chunk.
type chunked[T any] struct {
	bucket, countName, crcName string
	minLen                     uint64
	byteValues                 bool
	decode                     func(d *decoder, str string, vals []byte) (T, error)
	chunkDecoder               func() func(d *decoder, str string, vals []byte) (T, error)
}

// read reads the bucket's records, in file order, and checks them against the meta
// bucket's count and CRC-32C. size bounds what the file can hold.
func (c chunked[T]) read(tx *bolt.Tx, meta *bolt.Bucket, size int64) ([]T, error) {
	b := tx.Bucket([]byte(c.bucket))
	if b == nil {
		return nil, fmt.Errorf("%w: missing %q bucket", ErrCorrupt, c.bucket)
	}
	count, err := metaUint(meta, c.countName, 8)
	if err != nil {
		return nil, err
	}
	wantCRC, err := metaUint(meta, c.crcName, 4)
	if err != nil {
		return nil, err
	}
	if maxRecs := uint64(size) / c.minLen; count > maxRecs {
		return nil, fmt.Errorf("%w: %s count %d does not fit in %d bytes", ErrCorrupt, c.bucket, count, size)
	}
	recs := make([]T, 0, count)
	crc, err := eachChunk(b, c.bucket, func(v []byte) (err error) {
		recs, err = c.decodeChunk(recs, v, count)
		return err
	})
	if err != nil {
		return nil, err
	}
	if uint64(len(recs)) != count {
		return nil, fmt.Errorf("%w: %d %s records, meta says %d", ErrCorrupt, len(recs), c.bucket, count)
	}
	if uint64(crc) != wantCRC {
		return nil, fmt.Errorf("%w: %s checksum %08x, meta says %08x", ErrCorrupt, c.bucket, crc, wantCRC)
	}
	return recs, nil
}

// decodeChunk appends the records of the chunk v to recs, failing if they would be more
// than count. The strings of a chunk share one string, its byte values one slice.
func (c chunked[T]) decodeChunk(recs []T, v []byte, count uint64) ([]T, error) {
	str := string(v) // v is the file's mmap: copy it once for the strings...
	var vals []byte
	if c.byteValues {
		vals = bytes.Clone(v) // ...and once for the byte values
	}
	decode := c.decode
	if c.chunkDecoder != nil {
		decode = c.chunkDecoder()
	}
	d := decoder{b: v}
	for d.p < len(v) {
		if uint64(len(recs)) == count {
			return nil, fmt.Errorf("more than %d records", count)
		}
		r, err := decode(&d, str, vals)
		if err == nil {
			err = d.err
		}
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", len(recs), err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// decodeKV reads one keyspace record (save.go's appendKV).
func decodeKV(d *decoder, str string, vals []byte) (keyspace.Record, error) {
	r := keyspace.Record{Workspace: d.str("workspace", str), Key: d.str("key", str), ExpireAtMs: d.varint()}
	kind := d.uvarint()
	if kind < uint64(keyspace.KindString) || kind > uint64(keyspace.KindZSet) {
		return r, fmt.Errorf("unknown key kind %d", kind)
	}
	r.Kind = keyspace.Kind(kind)
	lo, hi := d.span("value")
	r.Value = vals[lo:hi:hi]
	return r, nil
}

// decodeRun reads one edge run's replay marks (save.go's appendRun).
func decodeRun(d *decoder, str string, _ []byte) (engine.RunRecord, error) {
	r := engine.RunRecord{Run: d.str("run", str), Applied: d.uvarint(), HeardMs: d.varint(), ReplayMs: d.varint()}
	flags := d.uvarint()
	if flags&^(runSuperseded|runHands) != 0 {
		return r, fmt.Errorf("unknown run flags %#x", flags)
	}
	r.Superseded = flags&runSuperseded != 0
	if flags&runHands != 0 {
		r.Hands = d.uvarint()
	}
	if len(r.Run) > engine.MaxRunLen {
		return r, fmt.Errorf("bad run name length %d", len(r.Run))
	}
	return r, nil
}

// leaseDecoder returns, for each chunk of the leases, a decode of one lease grant
// (save.go's appendLease) whose key is that of one of cells, the file's cell records in
// file order, or spelled out, and whose run is one of runs, the file's run records, or
// named.
func leaseDecoder(runs []engine.RunRecord, cells []engine.CellRecord) func() func(d *decoder, str string, _ []byte) (engine.LeaseRecord, error) {
	return func() func(d *decoder, str string, _ []byte) (engine.LeaseRecord, error) {
		var prevSeq uint64
		var prevUntil int64
		return func(d *decoder, str string, _ []byte) (engine.LeaseRecord, error) {
			var r engine.LeaseRecord
			var err error
			if r.Key, err = named(d, str, "cell", cells, func(c engine.CellRecord) string { return c.Key }); err != nil {
				return r, err
			}
			if r.Run, err = named(d, str, "run", runs, func(r engine.RunRecord) string { return r.Run }); err != nil {
				return r, err
			}
			r.G, r.Spent = d.uvarint(), d.uvarint()
			prevSeq += uint64(d.varint())
			prevUntil += d.varint()
			r.Seq, r.UntilMs = prevSeq, prevUntil
			return r, checkLease(r)
		}
	}
}

// named reads a name that a record either refers to, as 1 + the index of one of recs (what
// they are), or spells out after a 0: uvarint ref | [uvarint len(name) | name, when ref
// is 0].
func named[T any](d *decoder, str, what string, recs []T, name func(T) string) (string, error) {
	switch ref := d.uvarint(); {
	case ref == 0:
		return d.str(what, str), nil
	case ref <= uint64(len(recs)):
		return name(recs[ref-1]), nil
	default:
		return "", fmt.Errorf("%s %d of %d", what, ref, len(recs))
	}
}

// checkLease keeps the bounds appendLease keeps: a bad record fails the load here rather
// than in Engine.RestoreLeases.
func checkLease(r engine.LeaseRecord) error {
	if len(r.Key) > maxKeyLen || len(r.Run) > engine.MaxRunLen {
		return fmt.Errorf("bad key or run name length %d, %d", len(r.Key), len(r.Run))
	}
	return nil
}

// minRecordLen is the size of the shortest cell record: five one-byte varints.
const minRecordLen = 5

// readChunks reads the cell records and returns them, in file order, with the
// CRC-32C of the chunks. It stops at the first record past count.
func readChunks(cells *bolt.Bucket, count uint64, size int64) ([]engine.CellRecord, uint32, error) {
	if maxRecs := uint64(size) / minRecordLen; count > maxRecs {
		return nil, 0, fmt.Errorf("%w: count %d does not fit in %d bytes", ErrCorrupt, count, size)
	}
	recs := make([]engine.CellRecord, 0, count)
	c := chunked[engine.CellRecord]{decode: decodeCell}
	crc, err := eachChunk(cells, cellsBucket, func(v []byte) (err error) {
		recs, err = c.decodeChunk(recs, v, count)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return recs, crc, nil
}

// eachChunk calls fn with each chunk of b (the bucket name), in order, after checking that
// the chunks are numbered 0, 1, 2, ... and not empty, and returns their CRC-32C. A check
// or fn failing is an error wrapping ErrCorrupt.
func eachChunk(b *bolt.Bucket, name string, fn func(v []byte) error) (uint32, error) {
	var crc uint32
	err := walkChunks(b, name, func(v []byte) error {
		crc = crc32.Update(crc, castagnoli, v)
		return fn(v)
	})
	return crc, err
}

// walkChunks is eachChunk without the CRC-32C (for a caller that keeps the chunks and
// sums them apart: checksum).
func walkChunks(b *bolt.Bucket, name string, fn func(v []byte) error) error {
	c := b.Cursor()
	i := uint32(0)
	for k, v := c.First(); k != nil; k, v = c.Next() {
		switch {
		case v == nil:
			return fmt.Errorf("%w: nested bucket %x in %s", ErrCorrupt, k, name)
		case len(k) != chunkKeyLen || binary.BigEndian.Uint32(k) != i:
			return fmt.Errorf("%w: %s chunk key %x, want chunk %d", ErrCorrupt, name, k, i)
		case len(v) == 0:
			return fmt.Errorf("%w: %s chunk %d is empty", ErrCorrupt, name, i)
		}
		if err := fn(v); err != nil {
			return fmt.Errorf("%w: %s chunk %d: %w", ErrCorrupt, name, i, err)
		}
		i++
	}
	return nil
}

// decodeCell reads one cell record (save.go's appendCell).
func decodeCell(d *decoder, str string, _ []byte) (r engine.CellRecord, err error) {
	lo, hi := d.span("key")
	if hi-lo > maxKeyLen {
		return r, fmt.Errorf("bad key length %d", hi-lo)
	}
	r.Key = str[lo:hi]
	r.Seq = d.varint()
	r.Regional = d.uvarint()
	r.Imported = d.uvarint()
	// Each foreign component takes two bytes or more.
	if nf := d.uvarint(); nf > 0 && d.err == nil {
		if nf > uint64(len(d.b)-d.p)/2 {
			return r, fmt.Errorf("%d foreign regions", nf)
		}
		r.Foreign = make([]engine.RegionCount, nf)
		for j := range r.Foreign {
			r.Foreign[j] = engine.RegionCount{Region: d.str("region", str), Count: d.uvarint()}
		}
	}
	return r, nil
}

// decoder reads varints from b at p; the first failure is kept in err, and what follows
// it reads zeros.
type decoder struct {
	b   []byte
	p   int
	err error
}

var errVarint = errors.New("truncated or overlong varint")

// span reads a length (uvarint) and skips that many bytes, returning where they lie in b;
// what names the field in the error, which is kept in d.err (span then returns 0, 0).
func (d *decoder) span(what string) (lo, hi int) {
	n := d.uvarint()
	switch {
	case d.err != nil:
		return 0, 0
	case n > uint64(len(d.b)-d.p):
		d.err = fmt.Errorf("bad %s length %d", what, n)
		return 0, 0
	}
	d.p += int(n)
	return d.p - int(n), d.p
}

// str is span as a substring of str, a copy of b.
func (d *decoder) str(what, str string) string {
	lo, hi := d.span(what)
	return str[lo:hi]
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	if d.p < len(d.b) && d.b[d.p] < 0x80 { // the common case: one byte
		d.p++
		return uint64(d.b[d.p-1])
	}
	x, n := binary.Uvarint(d.b[d.p:])
	if n <= 0 {
		d.err = errVarint
		return 0
	}
	d.p += n
	return x
}

func (d *decoder) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

// sortAndMerge sorts recs by key, then sequence, and merges the records of one key and
// sequence by taking the larger counts. It reuses recs.
func sortAndMerge(recs []engine.CellRecord) []engine.CellRecord {
	if len(recs) < 2 {
		return recs
	}
	// Keys mostly share a long prefix (window, workspace, namespace, a key scheme), so
	// comparing them whole is slow. Sort instead by the 8 bytes that follow the prefix
	// common to all keys, as an integer, and compare the rest only on a tie.
	lcp := len(recs[0].Key)
	for i := 1; i < len(recs) && lcp > 0; i++ {
		k := recs[i].Key
		j, n := 0, min(lcp, len(k))
		for j < n && k[j] == recs[0].Key[j] {
			j++
		}
		lcp = j
	}
	order := make([]sortKey, len(recs))
	for i := range recs {
		order[i] = sortKey{head: headAt(recs[i].Key, lcp), i: i}
	}
	slices.SortFunc(order, func(a, b sortKey) int {
		if a.head != b.head {
			return cmp.Compare(a.head, b.head)
		}
		ra, rb := &recs[a.i], &recs[b.i]
		if c := strings.Compare(ra.Key[lcp:], rb.Key[lcp:]); c != 0 {
			return c
		}
		return cmp.Compare(ra.Seq, rb.Seq)
	})

	out := make([]engine.CellRecord, 0, len(recs))
	for _, o := range order {
		r := recs[o.i]
		if n := len(out); n > 0 && out[n-1].Key == r.Key && out[n-1].Seq == r.Seq {
			p := &out[n-1]
			p.Regional = max(p.Regional, r.Regional)
			p.Imported = max(p.Imported, r.Imported)
			p.Foreign = mergeForeign(p.Foreign, r.Foreign)
			continue
		}
		out = append(out, r)
	}
	return out
}

// sortKey is a record's place in the sort: the 8 key bytes after the common prefix, big
// endian and zero padded, and the record's index. Padding keeps the order: a key that ends
// early is a prefix of any key it ties with, or the tie is settled by the full compare.
type sortKey struct {
	head uint64
	i    int
}

// headAt returns key[at:at+8] as a big-endian integer, zero padded past the key's end.
func headAt(key string, at int) uint64 {
	var b [8]byte
	copy(b[:], key[at:])
	return binary.BigEndian.Uint64(b[:])
}

// mergeForeign merges two lists of foreign components by region, with max.
func mergeForeign(a, b []engine.RegionCount) []engine.RegionCount {
	out := append([]engine.RegionCount(nil), a...)
next:
	for _, f := range b {
		for i := range out {
			if out[i].Region == f.Region {
				out[i].Count = max(out[i].Count, f.Count)
				continue next
			}
		}
		out = append(out, f)
	}
	return out
}

// metaUint reads the n-byte (4 or 8) big-endian meta value name.
func metaUint(meta *bolt.Bucket, name string, n int) (uint64, error) {
	v := meta.Get([]byte(name))
	if len(v) != n {
		return 0, fmt.Errorf("%w: meta %q has %d bytes, want %d", ErrCorrupt, name, len(v), n)
	}
	if n == 4 {
		return uint64(binary.BigEndian.Uint32(v)), nil
	}
	return binary.BigEndian.Uint64(v), nil
}
