package persist

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
	bolt "go.etcd.io/bbolt"
)

// writeRaw writes a snapshot file in dir with the given cells bucket contents (in order)
// and meta values.
func writeRaw(t *testing.T, dir string, cells [][2][]byte, version, count uint64, crc uint32) {
	t.Helper()
	path := filepath.Join(dir, fileName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte(cellsBucket))
		if err != nil {
			return err
		}
		for _, kv := range cells {
			if err := b.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		m, err := tx.CreateBucket([]byte(metaBucket))
		if err != nil {
			return err
		}
		for name, v := range map[string][]byte{
			metaVersion: binary.BigEndian.AppendUint64(nil, version),
			metaSavedMs: binary.BigEndian.AppendUint64(nil, 1),
			metaCount:   binary.BigEndian.AppendUint64(nil, count),
			metaCRC:     binary.BigEndian.AppendUint32(nil, crc),
		} {
			if err := m.Put([]byte(name), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLoadVersion3: a snapshot of format version 3 (one bbolt key per cell) still loads.
func TestLoadVersion3(t *testing.T) {
	k1 := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("user:1"), WindowMs: 60_000}))
	k2 := string(engine.AppendKey(nil, engine.Tuple{Workspace: "acme", Key: []byte{0, 0xff}, WindowMs: 1}))
	want := []engine.CellRecord{
		{Key: k2, Seq: 5, Regional: 1, Imported: 7, Foreign: []engine.RegionCount{{Region: "eu", Count: 7}}},
		{Key: k1, Seq: 100, Regional: 2},
	}
	if k1 < k2 {
		want[0], want[1] = want[1], want[0]
	}
	var cells [][2][]byte
	crc := newChecksum()
	for _, r := range want {
		k := binary.BigEndian.AppendUint64([]byte(r.Key), uint64(r.Seq))
		v := binary.BigEndian.AppendUint64(nil, r.Regional)
		v = binary.BigEndian.AppendUint64(v, r.Imported)
		for _, f := range r.Foreign {
			v = append(v, byte(len(f.Region)))
			v = append(v, f.Region...)
			v = binary.BigEndian.AppendUint64(v, f.Count)
		}
		crc.add(k, v)
		cells = append(cells, [2][]byte{k, v})
	}
	dir := t.TempDir()
	writeRaw(t, dir, cells, 3, uint64(len(want)), crc.sum)
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Load()
	if err != nil {
		t.Fatalf("Load of a version 3 snapshot: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("loaded %+v, want %+v", got, want)
	}

	// A damaged value is still caught.
	cells[0][1][3] ^= 1
	writeRaw(t, dir, cells, 3, uint64(len(want)), crc.sum)
	if got, err := s.Load(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Load of a damaged version 3 snapshot = %d records, %v", len(got), err)
	}
}

// TestLoadVersion4Malformed: files of format 4 whose checksum matches but whose structure
// is wrong (as a bug or a forged file would make them) are refused, never half-loaded.
func TestLoadVersion4Malformed(t *testing.T) {
	rec := func(key string, seq int64, regional uint64, foreign ...string) []byte {
		b, _, _, err := encodeRecords(nil, nil, slices.Values([]engine.CellRecord{{Key: key, Seq: seq, Regional: regional}}), appendCell, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(foreign) > 0 {
			b = b[:len(b)-1] // drop the foreign count of zero
			b = binary.AppendUvarint(b, uint64(len(foreign)))
			for _, f := range foreign {
				b = binary.AppendUvarint(b, uint64(len(f)))
				b = append(b, f...)
				b = binary.AppendUvarint(b, 1)
			}
		}
		return b
	}
	chunkKey := func(i uint32) []byte { return binary.BigEndian.AppendUint32(nil, i) }
	good := append(rec("a", 1, 2), rec("b", 3, 4, "eu")...)
	tests := []struct {
		name   string
		chunks [][2][]byte
		count  uint64
		ok     bool
	}{
		{"well formed", [][2][]byte{{chunkKey(0), good}}, 2, true},
		{"two chunks", [][2][]byte{{chunkKey(0), rec("a", 1, 2)}, {chunkKey(1), rec("b", 3, 4)}}, 2, true},
		{"count too high", [][2][]byte{{chunkKey(0), good}}, 3, false},
		{"count too low", [][2][]byte{{chunkKey(0), good}}, 1, false},
		{"huge count", [][2][]byte{{chunkKey(0), good}}, 1 << 60, false},
		{"missing chunk", [][2][]byte{{chunkKey(0), rec("a", 1, 2)}, {chunkKey(2), rec("b", 3, 4)}}, 2, false},
		{"chunk key too long", [][2][]byte{{append(chunkKey(0), 0), good}}, 2, false},
		{"empty chunk", [][2][]byte{{chunkKey(0), good}, {chunkKey(1), nil}}, 2, false},
		{"truncated record", [][2][]byte{{chunkKey(0), good[:len(good)-1]}}, 2, false},
		{"key past the end", [][2][]byte{{chunkKey(0), append(good, 100, 'x')}}, 3, false},
		{"overlong varint", [][2][]byte{{chunkKey(0), append(good, 1, 'x', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)}}, 3, false},
		{"too many foreign regions", [][2][]byte{{chunkKey(0), append(rec("a", 1, 2)[:5], 0xff, 0xff, 0x03)}}, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var crc uint32
			for _, c := range tt.chunks {
				crc = crc32.Update(crc, castagnoli, c[1])
			}
			dir := t.TempDir()
			writeRaw(t, dir, tt.chunks, v4Version, tt.count, crc)
			s, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := s.Load()
			if tt.ok {
				if err != nil || uint64(len(recs)) != tt.count {
					t.Fatalf("Load = %d records, %v; want %d", len(recs), err, tt.count)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) || recs != nil {
				t.Fatalf("Load = %d records, %v; want ErrCorrupt", len(recs), err)
			}
		})
	}
}

// TestLoadVersion5KVMalformed: files of format 5 whose counter keys are damaged in
// structure (checksums matching, as a bug or a forged file would make them) or whose kv
// meta is missing or wrong are refused, never half-loaded.
func TestLoadVersion5KVMalformed(t *testing.T) {
	rec := func(ws, key string, exp int64, val string) []byte {
		b, _, n, err := encodeRecords(nil, nil, slices.Values([]engine.KVRecord{{Workspace: ws, Key: key, Value: []byte(val), ExpireAtMs: exp}}), appendKV, nil)
		if err != nil || n != 1 {
			t.Fatalf("encoded %d records: %v", n, err)
		}
		return b
	}
	cellChunk, _, _, err := encodeRecords(nil, nil, slices.Values([]engine.CellRecord{{Key: "a", Seq: 1, Regional: 2}}), appendCell, nil)
	if err != nil {
		t.Fatal(err)
	}
	chunkKey := func(i uint32) []byte { return binary.BigEndian.AppendUint32(nil, i) }
	good := append(rec("default", "k", 0, "12"), rec("acme", "", 1_750_000_000_000, "")...)
	tests := []struct {
		name    string
		chunks  [][2][]byte // nil: no kv bucket
		count   uint64
		crcFlip uint32 // xor-ed into the kv CRC written
		noMeta  bool   // no kv_count and kv_crc32c
		ok      bool
	}{
		{name: "well formed", chunks: [][2][]byte{{chunkKey(0), good}}, count: 2, ok: true},
		{name: "two chunks", chunks: [][2][]byte{{chunkKey(0), rec("", "a", 1, "x")}, {chunkKey(1), rec("", "b", 2, "y")}}, count: 2, ok: true},
		{name: "empty bucket", chunks: [][2][]byte{}, count: 0, ok: true},
		{name: "no kv bucket", chunks: nil, count: 0},
		{name: "no kv meta", chunks: [][2][]byte{{chunkKey(0), good}}, count: 2, noMeta: true},
		{name: "checksum wrong", chunks: [][2][]byte{{chunkKey(0), good}}, count: 2, crcFlip: 1},
		{name: "count too high", chunks: [][2][]byte{{chunkKey(0), good}}, count: 3},
		{name: "count too low", chunks: [][2][]byte{{chunkKey(0), good}}, count: 1},
		{name: "huge count", chunks: [][2][]byte{{chunkKey(0), good}}, count: 1 << 60},
		{name: "missing chunk", chunks: [][2][]byte{{chunkKey(0), rec("", "a", 1, "x")}, {chunkKey(2), rec("", "b", 2, "y")}}, count: 2},
		{name: "empty chunk", chunks: [][2][]byte{{chunkKey(0), good}, {chunkKey(1), nil}}, count: 2},
		{name: "truncated record", chunks: [][2][]byte{{chunkKey(0), good[:len(good)-1]}}, count: 2},
		{name: "value past the end", chunks: [][2][]byte{{chunkKey(0), append(rec("", "a", 0, "")[:4], 9, 'x')}}, count: 1},
		{name: "workspace past the end", chunks: [][2][]byte{{chunkKey(0), []byte{200, 'x'}}}, count: 1},
		{name: "overlong expiry varint", chunks: [][2][]byte{{chunkKey(0), []byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0}}}, count: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeRaw(t, dir, [][2][]byte{{chunkKey(0), cellChunk}}, v5Version, 1, crc32.Checksum(cellChunk, castagnoli))
			var crc uint32
			for _, c := range tt.chunks {
				crc = crc32.Update(crc, castagnoli, c[1])
			}
			db, err := bolt.Open(filepath.Join(dir, fileName), 0o644, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				if tt.chunks != nil {
					b, err := tx.CreateBucket([]byte(kvBucket))
					if err != nil {
						return err
					}
					for _, c := range tt.chunks {
						if err := b.Put(c[0], c[1]); err != nil {
							return err
						}
					}
				}
				if tt.noMeta {
					return nil
				}
				m := tx.Bucket([]byte(metaBucket))
				if err := m.Put([]byte(metaKVCount), binary.BigEndian.AppendUint64(nil, tt.count)); err != nil {
					return err
				}
				return m.Put([]byte(metaKVCRC), binary.BigEndian.AppendUint32(nil, crc^tt.crcFlip))
			})
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := s.LoadAll()
			if tt.ok {
				if err != nil || uint64(len(snap.KV)) != tt.count || len(snap.Cells) != 1 {
					t.Fatalf("LoadAll = %d cells, %d keys, %v; want 1, %d", len(snap.Cells), len(snap.KV), err, tt.count)
				}
				return
			}
			if !errors.Is(err, ErrCorrupt) || snap.Cells != nil || snap.KV != nil {
				t.Fatalf("LoadAll = %d cells, %d keys, %v; want ErrCorrupt", len(snap.Cells), len(snap.KV), err)
			}
		})
	}
}

// rewrite applies fn to the snapshot file in dir.
func rewrite(t *testing.T, dir string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, fileName), 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(fn)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// putChunk makes chunk the only chunk of bucket in the snapshot in dir, with its CRC in
// the meta value crcName: a record the loader must judge by its content alone.
func putChunk(t *testing.T, dir, bucket, crcName string, chunk []byte) {
	t.Helper()
	rewrite(t, dir, func(tx *bolt.Tx) error {
		if err := tx.Bucket([]byte(bucket)).Put(binary.BigEndian.AppendUint32(nil, 0), chunk); err != nil {
			return err
		}
		return tx.Bucket([]byte(metaBucket)).Put([]byte(crcName), binary.BigEndian.AppendUint32(nil, crc32.Checksum(chunk, castagnoli)))
	})
}

// TestLoadVersion5: a snapshot of format 5 (cells and counter keys, no runs or leases)
// still loads, with no runs and no leases; a file that says format 6 but lacks them, or
// whose lease or run records are malformed, is refused.
func TestLoadVersion5(t *testing.T) {
	key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Key: []byte("k"), WindowMs: 60_000}))
	src := Source{
		Cells:  slices.Values([]engine.CellRecord{{Key: key, Seq: 1, Regional: 2}}),
		KV:     slices.Values([]engine.KVRecord{{Workspace: "default", Key: "c", Value: []byte("1")}}),
		Runs:   slices.Values([]engine.RunRecord{{Run: "e1/a", Applied: 3}}),
		Leases: slices.Values([]engine.LeaseRecord{{Key: key, Run: "e1/a", G: 5, Seq: 9, UntilMs: 1}}),
	}
	newStore := func(t *testing.T) (*Store, string) {
		dir := t.TempDir()
		s, err := Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if err := s.Write(src); err != nil {
			t.Fatal(err)
		}
		return s, dir
	}
	drop := func(tx *bolt.Tx) error {
		for _, b := range []string{runsBucket, leaseBucket} {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return err
			}
		}
		m := tx.Bucket([]byte(metaBucket))
		for _, name := range []string{metaRunsCount, metaRunsCRC, metaLeaseCount, metaLeaseCRC} {
			if err := m.Delete([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	}
	setVersion := func(v uint64) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			return tx.Bucket([]byte(metaBucket)).Put([]byte(metaVersion), binary.BigEndian.AppendUint64(nil, v))
		}
	}

	s, dir := newStore(t)
	rewrite(t, dir, drop)
	rewrite(t, dir, setVersion(v5Version))
	snap, err := s.LoadAll()
	if err != nil || len(snap.Cells) != 1 || len(snap.KV) != 1 || snap.Runs != nil || snap.Leases != nil {
		t.Fatalf("LoadAll of format 5 = %d cells, %d keys, %d runs, %d leases, %v; want 1, 1, 0, 0",
			len(snap.Cells), len(snap.KV), len(snap.Runs), len(snap.Leases), err)
	}

	s, dir = newStore(t)
	rewrite(t, dir, drop)
	if snap, err := s.LoadAll(); !errors.Is(err, ErrCorrupt) || snap.Cells != nil {
		t.Fatalf("LoadAll of format 6 without runs and leases = %d cells, %v; want ErrCorrupt", len(snap.Cells), err)
	}

	s, dir = newStore(t)
	putChunk(t, dir, leaseBucket, metaLeaseCRC, []byte{0, 1, 'k', 2, 0, 0, 0, 0}) // run 2 of 1
	if snap, err := s.LoadAll(); !errors.Is(err, ErrCorrupt) || snap.Leases != nil {
		t.Fatalf("LoadAll with a lease of an unknown run = %d leases, %v; want ErrCorrupt", len(snap.Leases), err)
	}

	s, dir = newStore(t)
	putChunk(t, dir, leaseBucket, metaLeaseCRC, []byte{2, 1, 0, 0, 0, 0}) // cell 2 of 1
	if snap, err := s.LoadAll(); !errors.Is(err, ErrCorrupt) || snap.Leases != nil {
		t.Fatalf("LoadAll with a malformed lease = %d leases, %v; want ErrCorrupt", len(snap.Leases), err)
	}

	s, dir = newStore(t)
	putChunk(t, dir, leaseBucket, metaLeaseCRC, []byte{0, 1, 'k', 0, 200, 'x'}) // a run name past the record's end
	if snap, err := s.LoadAll(); !errors.Is(err, ErrCorrupt) || snap.Leases != nil {
		t.Fatalf("LoadAll with a malformed lease = %d leases, %v; want ErrCorrupt", len(snap.Leases), err)
	}

	s, dir = newStore(t)
	putChunk(t, dir, runsBucket, metaRunsCRC, []byte{1, 'r', 0, 0, 0, 2}) // flags with a bit no format has
	if snap, err := s.LoadAll(); !errors.Is(err, ErrCorrupt) || snap.Runs != nil {
		t.Fatalf("LoadAll with unknown run flags = %d runs, %v; want ErrCorrupt", len(snap.Runs), err)
	}

	s, dir = newStore(t)
	rewrite(t, dir, setVersion(formatVersion+1))
	if _, err := s.LoadAll(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("LoadAll of format %d = %v; want ErrCorrupt", formatVersion+1, err)
	}
}

// TestWriteCapturesRunsBeforeCells: a snapshot reads the runs' replay marks and the leases
// before the cells, so that a replay batch applied meanwhile is never claimed by the marks
// and missing from the cells (a re-sent batch would then be lost after a restart).
func TestWriteCapturesRunsBeforeCells(t *testing.T) {
	var order []string
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	err = s.Write(Source{
		Cells:  func(func(engine.CellRecord) bool) { order = append(order, "cells") },
		KV:     func(func(engine.KVRecord) bool) { order = append(order, "kv") },
		Runs:   func(func(engine.RunRecord) bool) { order = append(order, "runs") },
		Leases: func(func(engine.LeaseRecord) bool) { order = append(order, "leases") },
		Tuples: func(func(engine.TupleRecord) bool) { order = append(order, "tuples") },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, " "); got != "runs leases cells tuples kv" {
		t.Fatalf("captured %q, want runs and leases before cells", got)
	}
}

// appendLeaseV6 appends one lease record as format 6 wrote it: the run's name and the
// sequence and end in full.
func appendLeaseV6(buf []byte, r engine.LeaseRecord) ([]byte, error) {
	buf = appendString(buf, r.Key)
	buf = appendString(buf, r.Run)
	buf = binary.AppendUvarint(buf, r.G)
	buf = binary.AppendUvarint(buf, r.Spent)
	buf = binary.AppendUvarint(buf, r.Seq)
	return binary.AppendVarint(buf, r.UntilMs), nil
}

// TestLoadVersion6Leases: a snapshot of format 6, whose lease records name their runs and
// give their sequence and end in full, still loads its leases.
func TestLoadVersion6Leases(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Key: []byte("k"), WindowMs: 60_000}))
	runs := []engine.RunRecord{{Run: "e1/a", Applied: 3}, {Run: "e2/b", Applied: 4}}
	leases := []engine.LeaseRecord{
		{Key: key, Run: "e2/b", G: 5, Spent: 1, Seq: 1_750_000_000_000 << 20, UntilMs: 1_750_000_061_000},
		{Key: key, Run: "e1/a", G: 7, Seq: 1_750_000_000_000<<20 + 1, UntilMs: 1_750_000_060_500},
		{Key: key, Run: "gone/c", G: 1, Seq: 2, UntilMs: -5},
	}
	if err := s.Write(Source{Runs: slices.Values(runs), Leases: slices.Values(leases)}); err != nil {
		t.Fatal(err)
	}
	chunk, _, _, err := encodeRecords(nil, nil, slices.Values(leases), appendLeaseV6, nil)
	if err != nil {
		t.Fatal(err)
	}
	putChunk(t, dir, leaseBucket, metaLeaseCRC, chunk)
	rewrite(t, dir, func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(metaBucket)).Put([]byte(metaVersion), binary.BigEndian.AppendUint64(nil, v6Version))
	})
	snap, err := s.LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap.Leases, leases) || !reflect.DeepEqual(snap.Runs, runs) {
		t.Fatalf("format 6 loaded runs %+v and leases %+v, want %+v and %+v", snap.Runs, snap.Leases, runs, leases)
	}
}
