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
	"slices"
	"time"

	"github.com/ratchet/ratchet/engine"
	bolt "go.etcd.io/bbolt"
)

const (
	fileName      = "snapshot.db"
	tmpName       = "snapshot.db.tmp"
	formatVersion = 3
	// v2Version is the previous format: the same layout with the tuple keys of an older
	// engine.AppendKey (see legacyKey). Load still reads it.
	v2Version = 2

	cellsBucket = "cells"
	metaBucket  = "meta"
	metaVersion = "version"
	metaSavedMs = "saved_ms"
	metaCount   = "count"
	metaCRC     = "crc32c"

	seqLen   = 8
	valueLen = 16
	// batchSize is the number of cells per write transaction: large enough that commits are
	// few, small enough that one transaction's dirty nodes stay a few MB.
	batchSize = 50_000
	// lockTimeout bounds the wait for a bbolt file lock held by another process.
	lockTimeout = 2 * time.Second
)

// cell is one record ready to be written: its bbolt key and counts.
type cell struct {
	key                []byte
	regional, imported uint64
	foreign            []engine.RegionCount
}

// Save writes recs as the new snapshot, replacing the previous one only once the new file
// is complete and synced to disk. Records with the same key and sequence are merged by
// taking the larger counts. recs is not modified. On error the failure is counted in Stats
// and the snapshot is the previous one (or, if only the final directory fsync failed, the
// new one): never a partial file.
func (s *Store) Save(recs []engine.CellRecord) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	start := time.Now()
	n, err := s.save(recs, start)
	if err != nil {
		s.failures.Add(1)
		return fmt.Errorf("save snapshot %s: %w", filepath.Join(s.dir, fileName), err)
	}
	s.lastDuration.Store(int64(time.Since(start)))
	s.lastCells.Store(uint64(n))
	s.lastSuccessMs.Store(uint64(time.Now().UnixMilli()))
	return nil
}

// save writes recs to the temporary file, then renames it over the snapshot and syncs the
// directory. It returns the number of cells written.
func (s *Store) save(recs []engine.CellRecord, now time.Time) (int, error) {
	cells, keyBytes := sortedCells(recs)
	tmp := filepath.Join(s.dir, tmpName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("remove stale %s: %w", tmp, err)
	}
	if err := writeFile(tmp, cells, keyBytes, now); err != nil {
		_ = os.Remove(tmp) // best effort: the next Save removes it anyway
		return 0, err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, fileName)); err != nil {
		_ = os.Remove(tmp)
		return 0, fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := syncDir(s.dir); err != nil {
		return 0, err
	}
	return len(cells), nil
}

// sortedCells encodes recs as bbolt keys, sorts them in bbolt's (bytewise) order and
// merges duplicates. The keys share one buffer. It also returns the total key bytes.
func sortedCells(recs []engine.CellRecord) ([]cell, int) {
	total := 0
	for i := range recs {
		total += len(recs[i].Key) + seqLen
	}
	buf := make([]byte, 0, total)
	cells := make([]cell, len(recs))
	for i := range recs {
		r := &recs[i]
		start := len(buf)
		buf = append(buf, r.Key...)
		buf = binary.BigEndian.AppendUint64(buf, uint64(r.Seq))
		// buf never grows past its capacity, so earlier keys stay valid.
		cells[i] = cell{key: buf[start:len(buf):len(buf)], regional: r.Regional, imported: r.Imported, foreign: r.Foreign}
	}

	// Keys mostly share a long prefix (window, workspace, namespace, a key scheme), so
	// comparing them whole is slow. Sort instead by the 8 bytes that follow the prefix
	// common to all keys, as an integer, and compare the rest only on a tie.
	lcp := commonPrefixLen(cells)
	order := make([]sortKey, len(cells))
	for i := range cells {
		order[i] = sortKey{head: headAt(cells[i].key, lcp), i: i}
	}
	slices.SortFunc(order, func(a, b sortKey) int {
		if a.head != b.head {
			return cmp.Compare(a.head, b.head)
		}
		return bytes.Compare(cells[a.i].key[lcp:], cells[b.i].key[lcp:])
	})

	out := make([]cell, 0, len(cells))
	for _, o := range order {
		c := cells[o.i]
		if n := len(out); n > 0 && bytes.Equal(out[n-1].key, c.key) {
			out[n-1].regional = max(out[n-1].regional, c.regional)
			out[n-1].imported = max(out[n-1].imported, c.imported)
			out[n-1].foreign = mergeForeign(out[n-1].foreign, c.foreign)
			continue
		}
		out = append(out, c)
	}
	return out, total
}

// appendValue encodes a cell's value: regional (8 bytes) | imported (8 bytes), then per
// foreign region: len(region) (1 byte) | region | count (8 bytes); all big endian.
func appendValue(b []byte, c cell) []byte {
	b = binary.BigEndian.AppendUint64(b, c.regional)
	b = binary.BigEndian.AppendUint64(b, c.imported)
	for _, f := range c.foreign {
		if len(f.Region) > 255 {
			continue // region names are flags of ours, never this long
		}
		b = append(b, byte(len(f.Region)))
		b = append(b, f.Region...)
		b = binary.BigEndian.AppendUint64(b, f.Count)
	}
	return b
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

// sortKey is a cell's place in the sort: the 8 key bytes after the common prefix, big
// endian and zero padded, and the cell's index. Padding keeps the order: a key that ends
// early is a prefix of any key it ties with, or the tie is settled by the full compare.
type sortKey struct {
	head uint64
	i    int
}

// commonPrefixLen returns the length of the prefix shared by every key of cells.
func commonPrefixLen(cells []cell) int {
	if len(cells) == 0 {
		return 0
	}
	first := cells[0].key
	n := len(first)
	for _, c := range cells[1:] {
		k := c.key[:min(n, len(c.key))]
		i := 0
		for i < len(k) && k[i] == first[i] {
			i++
		}
		n = i
	}
	return n
}

// headAt returns key[at:at+8] as a big-endian integer, zero padded past the key's end.
func headAt(key []byte, at int) uint64 {
	var b [8]byte
	copy(b[:], key[at:])
	return binary.BigEndian.Uint64(b[:])
}

// writeFile writes cells (sorted, unique) and the meta bucket to a new bbolt file at path
// and syncs it. Writes are not synced one by one: the file is useless until renamed, so a
// single fsync at the end is enough.
func writeFile(path string, cells []cell, keyBytes int, now time.Time) (err error) {
	db, err := bolt.Open(path, 0o644, &bolt.Options{
		Timeout:    lockTimeout,
		NoSync:     true,
		NoGrowSync: true,
		// Map the expected size up front so the writes do not remap as the file grows:
		// keys, values and a leaf element header (16 bytes) per cell, plus slack.
		InitialMmapSize: (keyBytes+len(cells)*(valueLen+16))*5/4 + 1<<20,
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
	}()

	crc := newChecksum()
	// bbolt keeps references to keys and values until commit, so each cell of a
	// transaction gets its own value bytes; the buffer is reused after the commit.
	var vals []byte
	// One transaction per batch; with no cells, one that only creates the bucket.
	for lo := 0; lo < len(cells) || lo == 0; lo += batchSize {
		batch := cells[lo:min(lo+batchSize, len(cells))]
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte(cellsBucket))
			if err != nil {
				return fmt.Errorf("create bucket: %w", err)
			}
			b.FillPercent = 1.0 // keys arrive in order: fill pages completely
			vals = vals[:0]
			for _, c := range batch {
				start := len(vals)
				vals = appendValue(vals, c)
				v := vals[start:len(vals):len(vals)]
				crc.add(c.key, v)
				if err := b.Put(c.key, v); err != nil {
					return fmt.Errorf("put cell %x: %w", c.key, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("write cells %d..%d: %w", lo, lo+len(batch), err)
		}
	}

	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte(metaBucket))
		if err != nil {
			return fmt.Errorf("create bucket: %w", err)
		}
		put := func(name string, v []byte) {
			if err == nil {
				err = b.Put([]byte(name), v)
			}
		}
		put(metaVersion, binary.BigEndian.AppendUint64(nil, formatVersion))
		put(metaSavedMs, binary.BigEndian.AppendUint64(nil, uint64(now.UnixMilli())))
		put(metaCount, binary.BigEndian.AppendUint64(nil, uint64(len(cells))))
		put(metaCRC, binary.BigEndian.AppendUint32(nil, crc.sum))
		return err
	})
	if err != nil {
		return fmt.Errorf("write meta: %w", err)
	}
	if err := db.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// checksum accumulates the CRC-32C of cells in key order.
type checksum struct {
	sum uint32
	tab *crc32.Table
	buf [binary.MaxVarintLen64]byte // scratch for the length, kept here to not allocate per cell
}

func newChecksum() *checksum { return &checksum{tab: crc32.MakeTable(crc32.Castagnoli)} }

// add adds one cell: the key's length, the key and the value.
func (c *checksum) add(key, val []byte) {
	c.sum = crc32.Update(c.sum, c.tab, binary.AppendUvarint(c.buf[:0], uint64(len(key))))
	c.sum = crc32.Update(c.sum, c.tab, key)
	c.sum = crc32.Update(c.sum, c.tab, val)
}

// syncDir fsyncs dir so that a rename inside it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for sync: %w", err)
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("sync directory %s: %w", dir, serr)
	}
	if cerr != nil {
		return fmt.Errorf("close directory %s: %w", dir, cerr)
	}
	return nil
}
