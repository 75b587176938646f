package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ratchet/ratchet/engine"
	bolt "go.etcd.io/bbolt"
)

const (
	fileName = "snapshot.db"
	tmpName  = "snapshot.db.tmp"
	// formatVersion is the format Save writes: records packed into chunks (see package doc).
	formatVersion = 4
	// v3Version is the previous format: one bbolt key per cell. Load still reads it.
	v3Version = 3
	// v2Version is v3's layout with the tuple keys of an older engine.AppendKey (see
	// legacyKey). Load still reads it.
	v2Version = 2

	cellsBucket = "cells"
	metaBucket  = "meta"
	metaVersion = "version"
	metaSavedMs = "saved_ms"
	metaCount   = "count"
	metaCRC     = "crc32c"

	// seqLen and valueLen are the fixed sizes of formats 2 and 3.
	seqLen   = 8
	valueLen = 16

	// chunkSize is the size past which a chunk is closed: the records of a chunk are never
	// split, so a chunk is up to chunkSize plus one record.
	chunkSize = 64 << 10
	// chunkKeyLen is the length of a chunk's key, its index as a big-endian uint32.
	chunkKeyLen = 4
	// batchBytes bounds the chunk bytes of one write transaction: bbolt holds a copy of
	// each dirty page until the commit, so this bounds that copy.
	batchBytes = 16 << 20
	// maxKeyLen is the longest tuple key Save accepts: the longest formats 2 and 3 could
	// hold, far beyond what the engine makes.
	maxKeyLen = bolt.MaxKeySize - seqLen
	// lockTimeout bounds the wait for a bbolt file lock held by another process.
	lockTimeout = 2 * time.Second
)

// castagnoli is the CRC-32C table (hardware accelerated where the CPU has it).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Save writes recs as the new snapshot, replacing the previous one only once the new file
// is complete and synced to disk. recs is not modified and is written in its order;
// records with the same key and sequence are written as they are and merged by Load,
// taking the larger counts. On error the failure is counted in Stats and the snapshot is
// the previous one (or, if only the final directory fsync failed, the new one): never a
// partial file.
func (s *Store) Save(recs []engine.CellRecord) error { return s.SaveSeq(slices.Values(recs)) }

// SaveSeq is Save of the records recs yields, encoded as they come (engine.Records lends
// each record only for the call): the snapshot makes no copy of the cells.
func (s *Store) SaveSeq(recs iter.Seq[engine.CellRecord]) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	start := time.Now()
	n, err := s.save(recs, start)
	if err != nil {
		s.failures.Add(1)
		s.consecutive.Add(1)
		return fmt.Errorf("save snapshot %s: %w", filepath.Join(s.dir, fileName), err)
	}
	s.consecutive.Store(0)
	s.lastDuration.Store(int64(time.Since(start)))
	s.lastCells.Store(n)
	s.lastSuccessMs.Store(uint64(time.Now().UnixMilli()))
	return nil
}

// save encodes recs, writes them to the temporary file, then renames it over the snapshot
// and syncs the directory.
func (s *Store) save(recs iter.Seq[engine.CellRecord], now time.Time) (uint64, error) {
	if hint := s.sizeHint.Swap(0); hint > int64(cap(s.buf)) && hint < 1<<40 {
		// The file holds the chunks and some bbolt pages: room for the records it had.
		s.buf = make([]byte, 0, hint)
		s.ends = make([]int, 0, hint/chunkSize+1)
	}
	buf, ends, n, err := encodeChunks(s.buf[:0], s.ends[:0], recs)
	if err != nil {
		return 0, err
	}
	// Keep the buffers for the next save, whose size is much the same, unless they are
	// mostly unused after the store shrank.
	if cap(buf) <= 2*len(buf)+1<<20 {
		s.buf, s.ends = buf, ends
	} else {
		s.buf, s.ends = nil, nil
	}
	tmp := filepath.Join(s.dir, tmpName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("remove stale %s: %w", tmp, err)
	}
	if err := writeFile(tmp, buf, ends, n, now); err != nil {
		_ = os.Remove(tmp) // best effort: the next Save removes it anyway
		return 0, err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, fileName)); err != nil {
		_ = os.Remove(tmp)
		return 0, fmt.Errorf("rename %s: %w", tmp, err)
	}
	return n, syncDir(s.dir)
}

// encodeChunks appends the records of recs to buf, in their order, and the end offset of
// each chunk to ends. A chunk is closed once it holds chunkSize bytes or more. A record is
//
//	uvarint len(key) | key | varint seq | uvarint regional | uvarint imported |
//	uvarint len(foreign) | per foreign region: uvarint len(region) | region | uvarint count
func encodeChunks(buf []byte, ends []int, recs iter.Seq[engine.CellRecord]) ([]byte, []int, uint64, error) {
	start := 0
	var n uint64
	var err error
	for r := range recs {
		if len(r.Key) > maxKeyLen {
			err = fmt.Errorf("record %d: %d-byte key, the most is %d", n, len(r.Key), maxKeyLen)
			break
		}
		n++
		buf = binary.AppendUvarint(buf, uint64(len(r.Key)))
		buf = append(buf, r.Key...)
		buf = binary.AppendVarint(buf, r.Seq)
		buf = binary.AppendUvarint(buf, r.Regional)
		buf = binary.AppendUvarint(buf, r.Imported)
		buf = binary.AppendUvarint(buf, uint64(len(r.Foreign)))
		for _, f := range r.Foreign {
			buf = binary.AppendUvarint(buf, uint64(len(f.Region)))
			buf = append(buf, f.Region...)
			buf = binary.AppendUvarint(buf, f.Count)
		}
		// No yielding here: engine.Records gives way between shards itself.
		if len(buf)-start >= chunkSize {
			ends = append(ends, len(buf))
			start = len(buf)
		}
	}
	if err != nil {
		return buf, ends, 0, err
	}
	if len(buf) > start {
		ends = append(ends, len(buf))
	}
	return buf, ends, n, nil
}

// writeFile writes the chunks of buf (ending at ends) and the meta bucket to a new bbolt
// file at path and syncs it. Writes are not synced one by one: the file is useless until
// renamed, so a single fsync at the end is enough.
func writeFile(path string, buf []byte, ends []int, count uint64, now time.Time) (err error) {
	db, err := bolt.Open(path, 0o644, &bolt.Options{
		Timeout:    lockTimeout,
		NoSync:     true,
		NoGrowSync: true,
		// Map the expected size up front so the writes do not remap as the file grows:
		// the chunks, a page of slack for each (values take whole pages), plus room for
		// the branch, meta and freelist pages.
		InitialMmapSize: len(buf) + len(ends)*4096 + 1<<20,
	})
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close %s: %w", path, cerr)
		}
	}()

	var crc uint32
	// bbolt keeps references to keys and values until the commit: the values are slices
	// of buf, which does not change during writeFile, and the keys have one array.
	keys := make([]byte, chunkKeyLen*len(ends))
	// One transaction per batch; with no chunks, one that only creates the bucket.
	for lo := 0; lo < len(ends) || lo == 0; {
		hi := lo
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte(cellsBucket))
			if err != nil {
				return fmt.Errorf("create bucket: %w", err)
			}
			b.FillPercent = 1.0 // keys arrive in order: fill pages completely
			from := chunkStart(ends, lo)
			for ; hi < len(ends) && (hi == lo || ends[hi]-from <= batchBytes); hi++ {
				k := keys[hi*chunkKeyLen : (hi+1)*chunkKeyLen : (hi+1)*chunkKeyLen]
				binary.BigEndian.PutUint32(k, uint32(hi))
				v := buf[chunkStart(ends, hi):ends[hi]]
				crc = crc32.Update(crc, castagnoli, v)
				if err := b.Put(k, v); err != nil {
					return fmt.Errorf("put chunk %d: %w", hi, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("write chunks %d..%d: %w", lo, hi, err)
		}
		if hi == len(ends) {
			break
		}
		lo = hi
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
		put(metaCount, binary.BigEndian.AppendUint64(nil, count))
		put(metaCRC, binary.BigEndian.AppendUint32(nil, crc))
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

// chunkStart returns the offset where chunk i begins.
func chunkStart(ends []int, i int) int {
	if i == 0 {
		return 0
	}
	return ends[i-1]
}

// checksum accumulates the CRC-32C of the cells of formats 2 and 3, in key order.
type checksum struct {
	sum uint32
	buf [binary.MaxVarintLen64]byte // scratch for the length, kept here to not allocate per cell
}

func newChecksum() *checksum { return &checksum{} }

// add adds one cell: the key's length, the key and the value.
func (c *checksum) add(key, val []byte) {
	c.sum = crc32.Update(c.sum, castagnoli, binary.AppendUvarint(c.buf[:0], uint64(len(key))))
	c.sum = crc32.Update(c.sum, castagnoli, key)
	c.sum = crc32.Update(c.sum, castagnoli, val)
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
