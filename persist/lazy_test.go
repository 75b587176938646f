package persist

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
	bolt "go.etcd.io/bbolt"
)

// lazyEngine returns an engine of n tuples (one cell each, the first 20 with a lease of an
// edge run) and the part of each tuple's key, as Tuples reports them.
func lazyEngine(t *testing.T, n int) (*engine.Engine, map[string]int) {
	t.Helper()
	const t0 = 1_704_067_200_000
	e := engine.New(engine.NewManualClock(t0), engine.Config{Standalone: true})
	for i := range n {
		k := engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "k%d", i), WindowMs: 60_000})
		want := uint64(0)
		if i < 20 {
			want = 4
		}
		e.ServeRead("e1/a", []engine.ReadItem{{Key: k, Seq: t0 / 60_000, Limit: 1 << 40, Want: want}})
		e.ServeReplay(engine.ReplayBatch{Node: "e1/a", ID: uint64(i + 1),
			Items: []engine.ReplayItem{{Key: k, Seq: t0 / 60_000, Cost: uint64(i%7 + 1), Limit: 1 << 40, Want: want}}})
	}
	partOf := map[string]int{}
	for tr := range e.Tuples {
		partOf[strings.Clone(tr.Key)] = tr.Part
	}
	return e, partOf
}

func lazyStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, dir
}

// TestOpenLazyPartTable: a snapshot of an engine's Tuples records the engine's seed and
// where each part's cells are; OpenOrSetAside reads the leases, runs and seed and leaves
// the cells, and Part(i) returns exactly the cells of part i.
func TestOpenLazyPartTable(t *testing.T) {
	e, partOf := lazyEngine(t, 3000)
	s, _ := lazyStore(t)
	if err := s.Write(Source{Tuples: e.Tuples, Runs: e.Runs, ShardSeed: e.ShardSeed()}); err != nil {
		t.Fatal(err)
	}
	o, err := s.OpenOrSetAside()
	if err != nil || !o.Lazy() {
		t.Fatalf("OpenOrSetAside: %v, lazy %v", err, o.Lazy())
	}
	defer o.Close()
	if o.Seed != e.ShardSeed() || o.Cells != nil || len(o.Leases) != 20 || len(o.Runs) != 1 {
		t.Fatalf("seed %d (want %d), %d cells, %d leases, %d runs", o.Seed, e.ShardSeed(), len(o.Cells), len(o.Leases), len(o.Runs))
	}
	for _, l := range o.Leases {
		if _, ok := partOf[l.Key]; !ok {
			t.Fatalf("lease of unknown key %q", l.Key)
		}
	}
	seen := readParts(t, o, partOf)
	want := map[string]uint64{}
	for r := range e.Records {
		want[strings.Clone(r.Key)] = r.Regional
	}
	if !maps.Equal(seen, want) {
		t.Fatalf("parts hold %d cells, want %d", len(seen), len(want))
	}
	// A snapshot of records (no Tuples) has no table: everything is read at once.
	if err := s.Save(slices.Collect(func(yield func(engine.CellRecord) bool) {
		for r := range e.Records {
			r.Key = strings.Clone(r.Key)
			if !yield(r) {
				return
			}
		}
	})); err != nil {
		t.Fatal(err)
	}
	o2, err := s.OpenOrSetAside()
	if err != nil || o2.Lazy() || len(o2.Cells) != len(want) {
		t.Fatalf("records snapshot: %v, lazy %v, %d cells", err, o2.Lazy(), len(o2.Cells))
	}
}

// TestOpenLazyDamaged: a damaged cell chunk (caught by the CRC before any part is read) or
// part table makes OpenOrSetAside move the file aside and start empty.
func TestOpenLazyDamaged(t *testing.T) {
	for name, damage := range map[string]func(tx *bolt.Tx) error{
		"chunk byte": func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(cellsBucket))
			k, v := b.Cursor().First()
			v = slices.Clone(v)
			v[len(v)/2] ^= 0x40
			return b.Put(slices.Clone(k), v)
		},
		"table byte": func(tx *bolt.Tx) error { // its CRC-32C no longer matches
			m := tx.Bucket([]byte(metaBucket))
			table := slices.Clone(m.Get([]byte(metaParts)))
			table[len(table)/2] ^= 1
			return m.Put([]byte(metaParts), table)
		},
		"table order": func(tx *bolt.Tx) error { // a consistent CRC-32C, two parts at one position
			table := binary.AppendUvarint(nil, 2)
			for _, step := range []uint64{2, 1} {
				table = binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(table, step), 0), 0)
			}
			return putTable(tx, binary.AppendUvarint(binary.AppendUvarint(table, 0), 100))
		},
		"table length": func(tx *bolt.Tx) error { // a consistent CRC-32C, the end cut off
			table := tx.Bucket([]byte(metaBucket)).Get([]byte(metaParts))
			return putTable(tx, slices.Clone(table[:len(table)-1]))
		},
	} {
		t.Run(name, func(t *testing.T) {
			e, _ := lazyEngine(t, 500)
			s, dir := lazyStore(t)
			if err := s.Write(Source{Tuples: e.Tuples, ShardSeed: e.ShardSeed()}); err != nil {
				t.Fatal(err)
			}
			rewrite(t, dir, damage)
			o, err := s.OpenOrSetAside()
			if err != nil || o.Lazy() || o.Cells != nil || o.Leases != nil {
				t.Fatalf("damaged: %v, lazy %v, %d cells", err, o.Lazy(), len(o.Cells))
			}
			if m, _ := filepathGlob(dir); len(m) != 1 {
				t.Fatalf("moved aside: %v", m)
			}
		})
	}
}

// filepathGlob lists the snapshots moved aside in dir.
func filepathGlob(dir string) ([]string, error) {
	return filepath.Glob(filepath.Join(dir, corruptPrefix+"*"))
}

// TestSaveSpills: a save of Tuples writes its cells to the file as it encodes them, holding
// no more than spillBytes and a chunk of them, and the file reads back whole, part by part
// and at once.
func TestSaveSpills(t *testing.T) {
	defer func(n int) { spillBytes = n }(spillBytes)
	spillBytes = 4096
	e, partOf := lazyEngine(t, 5000)
	s, _ := lazyStore(t)
	for range 2 { // the second save reuses the first's buffer
		if err := s.Write(Source{Tuples: e.Tuples, Runs: e.Runs, ShardSeed: e.ShardSeed()}); err != nil {
			t.Fatal(err)
		}
		if len(s.cbuf) >= spillBytes+chunkSize {
			t.Fatalf("the save held %d bytes of cells", len(s.cbuf))
		}
	}
	want := map[string]uint64{}
	for r := range e.Records {
		want[strings.Clone(r.Key)] = r.Regional
	}
	o, err := s.OpenOrSetAside()
	if err != nil || !o.Lazy() {
		t.Fatalf("OpenOrSetAside: %v, lazy %v", err, o.Lazy())
	}
	got := readParts(t, o, partOf)
	_ = o.Close()
	all, err := s.LoadAll()
	if err != nil || !maps.Equal(got, want) || len(all.Cells) != len(want) || len(all.Leases) != 20 {
		t.Fatalf("read back %d cells by part, %d at once (%v), %d leases; want %d", len(got), len(all.Cells), err, len(all.Leases), len(want))
	}
}

// readParts reads every part of o, checking that each key is in the part partOf says, and
// returns the regional count of each key.
func readParts(t *testing.T, o *Opened, partOf map[string]int) map[string]uint64 {
	t.Helper()
	got := map[string]uint64{}
	for i := range engine.Parts {
		_, err := o.Parts(i, i+1, nil, nil, 0, func(recs []engine.CellRecord) {
			for _, r := range recs {
				if partOf[r.Key] != i {
					t.Errorf("part %d holds %q of part %d", i, r.Key, partOf[r.Key])
				}
				got[strings.Clone(r.Key)] = r.Regional // lent for the call only
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// putTable makes table the part table of the snapshot, with its CRC-32C.
func putTable(tx *bolt.Tx, table []byte) error {
	m := tx.Bucket([]byte(metaBucket))
	if err := m.Put([]byte(metaPartsCRC), binary.BigEndian.AppendUint32(nil, crc32.Checksum(table, castagnoli))); err != nil {
		return err
	}
	return m.Put([]byte(metaParts), table)
}

// TestOpenLazyResetsOverrides: a snapshot opened for a lazy load has the reset records,
// the change version and the overrides, as LoadAll reads them: an origin restores them
// before its first part loads.
func TestOpenLazyResetsOverrides(t *testing.T) {
	e, _ := lazyEngine(t, 300)
	tp := func(i int) engine.Tuple {
		return engine.Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "k%d", i), WindowMs: 60_000}
	}
	if n, err := e.Reset([]engine.Tuple{tp(3), tp(250)}); n != 2 || err != nil {
		t.Fatalf("reset: %d, %v", n, err)
	}
	if err := e.Overrides().Set(tp(7), false, 5); err != nil {
		t.Fatal(err)
	}
	s, _ := lazyStore(t)
	if err := s.Write(Source{Tuples: e.Tuples, Runs: e.Runs, ShardSeed: e.ShardSeed(), Resets: e.Resets,
		Changes: e.ChangeVersion, Overrides: e.Overrides().Records, OverridesHorizon: e.Overrides().Horizon}); err != nil {
		t.Fatal(err)
	}
	all, err := s.LoadAll()
	if err != nil || len(all.Resets) != 2 || all.Changes == 0 || len(all.Overrides) != 1 {
		t.Fatalf("LoadAll: %d resets, changes %d, %d overrides, %v", len(all.Resets), all.Changes, len(all.Overrides), err)
	}
	o, err := s.OpenOrSetAside()
	if err != nil || !o.Lazy() {
		t.Fatalf("OpenOrSetAside: %v, lazy %v", err, o.Lazy())
	}
	defer o.Close()
	if !reflect.DeepEqual(o.Resets, all.Resets) || o.Changes != all.Changes || !reflect.DeepEqual(o.Overrides, all.Overrides) ||
		o.OverridesHorizon != all.OverridesHorizon {
		t.Fatalf("opened lazily: resets %+v, changes %d, overrides %+v; LoadAll: %+v, %d, %+v",
			o.Resets, o.Changes, o.Overrides, all.Resets, all.Changes, all.Overrides)
	}
}
