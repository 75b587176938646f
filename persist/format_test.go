package persist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
	bolt "go.etcd.io/bbolt"
)

// writeBucket writes a snapshot of the current format in dir with one cell, then makes
// chunks (in order; nil: no bucket) the contents of bucket, and count and crc its meta
// values countName and crcName (noMeta: neither).
func writeBucket(t *testing.T, dir, bucket, countName, crcName string, chunks [][2][]byte, count uint64, crc uint32, noMeta bool) {
	t.Helper()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Write(Source{Cells: slices.Values([]engine.CellRecord{{Key: "a", Seq: 1, Regional: 2}})}); err != nil {
		t.Fatal(err)
	}
	rewrite(t, dir, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket([]byte(bucket)); err != nil {
			return err
		}
		if chunks != nil {
			b, err := tx.CreateBucket([]byte(bucket))
			if err != nil {
				return err
			}
			for _, c := range chunks {
				if err := b.Put(c[0], c[1]); err != nil {
					return err
				}
			}
		}
		m := tx.Bucket([]byte(metaBucket))
		if noMeta {
			return errors.Join(m.Delete([]byte(countName)), m.Delete([]byte(crcName)))
		}
		if err := m.Put([]byte(countName), binary.BigEndian.AppendUint64(nil, count)); err != nil {
			return err
		}
		return m.Put([]byte(crcName), binary.BigEndian.AppendUint32(nil, crc))
	})
}

// TestLoadCellsMalformed: files whose cells' checksum matches but whose structure is wrong
// (as a bug or a forged file would make them) are refused, never half-loaded.
func TestLoadCellsMalformed(t *testing.T) {
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
			writeBucket(t, dir, cellsBucket, metaCount, metaCRC, tt.chunks, tt.count, crc, false)
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

// TestLoadKVMalformed: files whose counter keys are damaged in
// structure (checksums matching, as a bug or a forged file would make them) or whose kv
// meta is missing or wrong are refused, never half-loaded.
func TestLoadKVMalformed(t *testing.T) {
	rec := func(ws, key string, exp int64, val string) []byte {
		b, _, n, err := encodeRecords(nil, nil, slices.Values([]keyspace.Record{{Workspace: ws, Key: key, Value: []byte(val), ExpireAtMs: exp}}), appendKV, nil)
		if err != nil || n != 1 {
			t.Fatalf("encoded %d records: %v", n, err)
		}
		return b
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
			var crc uint32
			for _, c := range tt.chunks {
				crc = crc32.Update(crc, castagnoli, c[1])
			}
			writeBucket(t, dir, kvBucket, metaKVCount, metaKVCRC, tt.chunks, tt.count, crc^tt.crcFlip, tt.noMeta)
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

// dropBuckets returns a rewrite that deletes buckets and the meta values names.
func dropBuckets(buckets, names []string) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		for _, b := range buckets {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return err
			}
		}
		m := tx.Bucket([]byte(metaBucket))
		for _, name := range names {
			if err := m.Delete([]byte(name)); err != nil {
				return err
			}
		}
		return nil
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

// TestLoadRunsAndLeasesMalformed: a file that lacks the runs and leases, or whose lease or
// run records are malformed, is refused.
func TestLoadRunsAndLeasesMalformed(t *testing.T) {
	key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Key: []byte("k"), WindowMs: 60_000}))
	src := Source{
		Cells:  slices.Values([]engine.CellRecord{{Key: key, Seq: 1, Regional: 2}}),
		KV:     slices.Values([]keyspace.Record{{Workspace: "default", Key: "c", Value: []byte("1")}}),
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
	drop := dropBuckets([]string{runsBucket, leaseBucket}, []string{metaRunsCount, metaRunsCRC, metaLeaseCount, metaLeaseCRC})
	s, dir := newStore(t)
	rewrite(t, dir, drop)
	if snap, err := s.LoadAll(); !errors.Is(err, ErrCorrupt) || snap.Cells != nil {
		t.Fatalf("LoadAll without runs and leases = %d cells, %v; want ErrCorrupt", len(snap.Cells), err)
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
		KV:     func(func(keyspace.Record) bool) { order = append(order, "kv") },
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

// TestLoadOrSetAsideOtherVersion: a snapshot of another format version (older or newer),
// whole and well formed otherwise, is not read: LoadOrSetAside moves it aside with a log
// line naming the version found and the one wanted, and the store starts empty and saves.
func TestLoadOrSetAsideOtherVersion(t *testing.T) {
	key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Key: []byte("k"), WindowMs: 60_000}))
	src := Source{
		Cells:  slices.Values([]engine.CellRecord{{Key: key, Seq: 1, Regional: 2}}),
		KV:     slices.Values([]keyspace.Record{{Workspace: "default", Key: "c", Value: []byte("1")}}),
		Runs:   slices.Values([]engine.RunRecord{{Run: "e1/a", Applied: 3}}),
		Leases: slices.Values([]engine.LeaseRecord{{Key: key, Run: "e1/a", G: 5, Seq: 9, UntilMs: 1}}),
	}
	for _, version := range []uint64{2, formatVersion - 1, formatVersion + 1} {
		t.Run(fmt.Sprint(version), func(t *testing.T) {
			dir := t.TempDir()
			var logs bytes.Buffer // LoadOrSetAside logs on the calling goroutine
			s, err := Open(dir, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Write(src); err != nil {
				t.Fatal(err)
			}
			rewrite(t, dir, func(tx *bolt.Tx) error {
				return tx.Bucket([]byte(metaBucket)).Put([]byte(metaVersion), binary.BigEndian.AppendUint64(nil, version))
			})
			path := filepath.Join(dir, fileName)
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}

			snap, err := s.LoadOrSetAside()
			if err != nil || snap.Cells != nil || snap.KV != nil || snap.Runs != nil || snap.Leases != nil {
				t.Fatalf("LoadOrSetAside = %+v, %v; want nothing, nil", snap, err)
			}
			moved, err := filepath.Glob(filepath.Join(dir, corruptPrefix+"*"))
			if err != nil || len(moved) != 1 {
				t.Fatalf("moved aside: %v, %v; want one file", moved, err)
			}
			if got, err := os.ReadFile(moved[0]); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("moved file: %d bytes, %v; want the snapshot unchanged", len(got), err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s still there: %v", path, err)
			}
			out := logs.String()
			for _, w := range []string{"level=ERROR", "another format version", "moved aside, starting empty",
				fmt.Sprintf("found_version=%d want_version=%d", version, formatVersion), moved[0]} {
				if !strings.Contains(out, w) {
					t.Errorf("log lacks %q:\n%s", w, out)
				}
			}

			// The store starts empty and its next save loads.
			if err := s.Write(src); err != nil {
				t.Fatal(err)
			}
			if snap, err := s.LoadAll(); err != nil || len(snap.Cells) != 1 || len(snap.KV) != 1 || len(snap.Runs) != 1 || len(snap.Leases) != 1 {
				t.Fatalf("LoadAll after the next save = %+v, %v", snap, err)
			}
		})
	}
}
