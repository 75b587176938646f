package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/ratchet/ratchet/engine"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrCorrupt is wrapped by Load's error when the snapshot file is damaged, truncated or not
// a Ratchet snapshot, as opposed to unreadable (permissions, I/O, a lock held elsewhere).
var ErrCorrupt = errors.New("corrupt or foreign snapshot")

// Load returns the cells of the last snapshot, in key order, or nil and no error when
// there is none. A damaged, truncated or foreign file is an error wrapping ErrCorrupt,
// never a panic; damage to the cells is caught by a CRC-32C, so Load returns every cell
// Save wrote or none. A file locked by another process is an error after a short wait.
func (s *Store) Load() ([]engine.CellRecord, error) {
	path := filepath.Join(s.dir, fileName)
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load snapshot %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("load snapshot %s: not a regular file", path)
	}
	if info.Size() == 0 {
		// bbolt would try to initialise an empty file, which fails read-only.
		return nil, fmt.Errorf("load snapshot %s: %w: empty file", path, ErrCorrupt)
	}
	recs, err := load(path, info.Size())
	if err != nil {
		return nil, fmt.Errorf("load snapshot %s: %w", path, err)
	}
	return recs, nil
}

// load reads the snapshot at path, whose size is size bytes.
func load(path string, size int64) (recs []engine.CellRecord, err error) {
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
			recs, err = nil, fmt.Errorf("%w: bbolt: %v", ErrCorrupt, r)
		}
	}()

	db, err := bolt.Open(path, 0o444, &bolt.Options{
		ReadOnly: true,
		Timeout:  lockTimeout,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
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
	defer func() { _ = db.Close() }() // read-only: nothing to lose on close
	err = db.View(func(tx *bolt.Tx) error {
		if tx.Size() > size {
			return fmt.Errorf("%w: truncated: %d bytes of %d", ErrCorrupt, size, tx.Size())
		}
		var err error
		recs, err = readCells(tx, size)
		return err
	})
	return recs, err
}

// readCells checks the meta bucket and returns the cells of tx. size bounds what the
// file can hold, so a damaged count cannot make a huge allocation.
func readCells(tx *bolt.Tx, size int64) ([]engine.CellRecord, error) {
	meta := tx.Bucket([]byte(metaBucket))
	cells := tx.Bucket([]byte(cellsBucket))
	if meta == nil || cells == nil {
		return nil, fmt.Errorf("%w: missing %q or %q bucket", ErrCorrupt, metaBucket, cellsBucket)
	}
	version, err := metaUint(meta, metaVersion, 8)
	if err != nil {
		return nil, err
	}
	if version != formatVersion && version != v2Version {
		return nil, fmt.Errorf("%w: format version %d, want %d or %d", ErrCorrupt, version, v2Version, formatVersion)
	}
	count, err := metaUint(meta, metaCount, 8)
	if err != nil {
		return nil, err
	}
	wantCRC, err := metaUint(meta, metaCRC, 4)
	if err != nil {
		return nil, err
	}
	if maxCells := uint64(size) / (seqLen + valueLen); count > maxCells {
		return nil, fmt.Errorf("%w: count %d does not fit in %d bytes", ErrCorrupt, count, size)
	}

	crc := newChecksum()
	recs := make([]engine.CellRecord, 0, count)
	c := cells.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		switch {
		case uint64(len(recs)) == count:
			return nil, fmt.Errorf("%w: more than %d cells", ErrCorrupt, count)
		case v == nil:
			return nil, fmt.Errorf("%w: nested bucket %x in cells", ErrCorrupt, k)
		case len(k) < seqLen || len(k) > bolt.MaxKeySize || len(v) < valueLen:
			return nil, fmt.Errorf("%w: cell with %d-byte key and %d-byte value", ErrCorrupt, len(k), len(v))
		}
		crc.add(k, v)
		n := len(k) - seqLen
		foreign, ok := decodeForeign(v[valueLen:])
		if !ok {
			return nil, fmt.Errorf("%w: cell %x has a malformed value", ErrCorrupt, k)
		}
		key := string(k[:n])
		if version == v2Version {
			key = legacyKey(k[:n])
		}
		recs = append(recs, engine.CellRecord{
			Key:      key,
			Seq:      int64(binary.BigEndian.Uint64(k[n:])),
			Regional: binary.BigEndian.Uint64(v[:8]),
			Imported: binary.BigEndian.Uint64(v[8:16]),
			Foreign:  foreign,
		})
	}
	if uint64(len(recs)) != count {
		return nil, fmt.Errorf("%w: %d cells, meta says %d", ErrCorrupt, len(recs), count)
	}
	if got := uint64(crc.sum); got != wantCRC {
		return nil, fmt.Errorf("%w: checksum %08x, meta says %08x", ErrCorrupt, got, wantCRC)
	}
	return recs, nil
}

// legacyKey converts a tuple key of format version 2 to the current engine.AppendKey:
//
//	window (8 bytes, big endian) | uvarint len(workspace) | workspace |
//	uvarint len(namespace) | namespace | key
//
// A key that does not decode is returned as it is (engine.Restore then reports it).
func legacyKey(k []byte) string {
	bad := string(k)
	if len(k) < 8 {
		return bad
	}
	t := engine.Tuple{WindowMs: int64(binary.BigEndian.Uint64(k))}
	rest := k[8:]
	var parts [2]string
	for i := range parts {
		n, used := binary.Uvarint(rest)
		if used <= 0 || n > uint64(len(rest)-used) {
			return bad
		}
		parts[i] = string(rest[used : used+int(n)])
		rest = rest[used+int(n):]
	}
	if t.WindowMs < 1 || t.WindowMs > engine.MaxWindowMs {
		return bad
	}
	t.Workspace, t.Namespace, t.Key = parts[0], parts[1], rest
	return string(engine.AppendKey(nil, t))
}

// decodeForeign reads the foreign components after a value's fixed 16 bytes.
func decodeForeign(b []byte) ([]engine.RegionCount, bool) {
	var out []engine.RegionCount
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n+8 {
			return nil, false
		}
		out = append(out, engine.RegionCount{Region: string(b[1 : 1+n]), Count: binary.BigEndian.Uint64(b[1+n : 1+n+8])})
		b = b[1+n+8:]
	}
	return out, true
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
