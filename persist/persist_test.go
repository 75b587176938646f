package persist_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/testwait"
	"github.com/ratchet/ratchet/persist"
	bolt "go.etcd.io/bbolt"
)

// key returns the stored key of a tuple.
func key(ws, ns, k string, windowMs int64) string {
	return string(engine.AppendKey(nil, engine.Tuple{Workspace: ws, Namespace: ns, Key: []byte(k), WindowMs: windowMs}))
}

// genRecords returns n distinct records with varied keys, sequences and counts.
func genRecords(n int, seed uint64) []engine.CellRecord {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	recs := make([]engine.CellRecord, n)
	for i := range recs {
		recs[i] = engine.CellRecord{
			Key:      key("ws", "ns", fmt.Sprintf("user:%d", i), 60_000),
			Seq:      int64(29_000_000 + rng.IntN(2)),
			Regional: rng.Uint64N(1 << 40),
			Imported: rng.Uint64N(1 << 40),
		}
	}
	return recs
}

// randomKeyRecords returns n records whose tuple parts are arbitrary bytes.
func randomKeyRecords(n int, seed uint64) []engine.CellRecord {
	rng := rand.New(rand.NewPCG(seed, 1))
	bytesN := func(max int) string {
		b := make([]byte, rng.IntN(max+1))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return string(b)
	}
	recs := make([]engine.CellRecord, n)
	for i := range recs {
		recs[i] = engine.CellRecord{
			Key:      key(bytesN(8), bytesN(8), bytesN(64), 1+rng.Int64N(86_400_000)),
			Seq:      rng.Int64(),
			Regional: rng.Uint64(),
			Imported: rng.Uint64(),
		}
	}
	return recs
}

type cellID struct {
	key string
	seq int64
}

// asMap returns recs by key and sequence, merging duplicates with max as Save does.
func asMap(recs []engine.CellRecord) map[cellID][2]uint64 {
	m := make(map[cellID][2]uint64, len(recs))
	for _, r := range recs {
		id := cellID{r.Key, r.Seq}
		old := m[id]
		m[id] = [2]uint64{max(old[0], r.Regional), max(old[1], r.Imported)}
	}
	return m
}

func sameCells(t *testing.T, got, want []engine.CellRecord) {
	t.Helper()
	g, w := asMap(got), asMap(want)
	if len(got) != len(w) {
		t.Fatalf("got %d records, want %d", len(got), len(w))
	}
	for id, wv := range w {
		if gv, ok := g[id]; !ok || gv != wv {
			t.Fatalf("cell %x/%d: got %v (present %v), want %v", id.key, id.seq, gv, ok, wv)
		}
	}
}

func openStore(t testing.TB) (*persist.Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data", "nested")
	s, err := persist.Open(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, dir
}

func mustSave(t testing.TB, s *persist.Store, recs []engine.CellRecord) {
	t.Helper()
	if err := s.Save(recs); err != nil {
		t.Fatalf("Save: %v", err)
	}
}

func mustLoad(t testing.TB, s *persist.Store) []engine.CellRecord {
	t.Helper()
	return mustLoadAll(t, s).Cells
}

func mustLoadAll(t testing.TB, s *persist.Store) persist.Snapshot {
	t.Helper()
	snap, err := s.LoadAll()
	if err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	return snap
}

func TestRoundTrip(t *testing.T) {
	prefix := key("w", "n", "ab", 1000)
	tests := []struct {
		name string
		recs []engine.CellRecord
	}{
		{"empty", nil},
		{"one", []engine.CellRecord{{Key: key("default", "api", "user:1", 60_000), Seq: 28_000_000, Regional: 7, Imported: 3}}},
		{"extreme values", []engine.CellRecord{
			{Key: key("", "", "", 1), Seq: 0, Regional: 0, Imported: 0},
			{Key: key("", "", "", 1), Seq: math.MaxInt64, Regional: math.MaxUint64, Imported: math.MaxUint64},
			{Key: key("", "", "", 1), Seq: -1, Regional: 1, Imported: 2},
			{Key: key("\x00", "\xff", "\x00\xff\n\r", engine.MaxWindowMs), Seq: 5, Regional: 1, Imported: 1},
		}},
		{"keys that prefix each other", []engine.CellRecord{
			{Key: prefix, Seq: 1, Regional: 1},
			{Key: prefix + "\x00", Seq: 1, Regional: 2},
			{Key: prefix + "\xff", Seq: 0, Regional: 3},
			{Key: prefix + "c", Seq: 2, Regional: 4},
			{Key: prefix[:len(prefix)-1], Seq: 1, Regional: 5},
		}},
		{"duplicates merge with max", []engine.CellRecord{
			{Key: prefix, Seq: 9, Regional: 5, Imported: 1},
			{Key: prefix, Seq: 9, Regional: 3, Imported: 8},
			{Key: prefix, Seq: 10, Regional: 1, Imported: 1},
		}},
		{"arbitrary bytes", randomKeyRecords(5_000, 1)},
		{"200k records, several transactions", genRecords(200_000, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openStore(t)
			mustSave(t, s, tt.recs)
			got := mustLoad(t, s)
			sameCells(t, got, tt.recs)
			// LastCells counts the records written; Load merges duplicates.
			if st := s.Stats(); st.LastCells != uint64(len(tt.recs)) {
				t.Errorf("Stats.LastCells = %d, want %d", st.LastCells, len(tt.recs))
			}
			for i := 1; i < len(got); i++ {
				if a, b := got[i-1], got[i]; a.Key > b.Key || a.Key == b.Key && a.Seq >= b.Seq {
					t.Fatalf("records %d and %d out of order: %x/%d, %x/%d", i-1, i, a.Key, a.Seq, b.Key, b.Seq)
				}
			}
		})
	}
}

func TestSaveDoesNotModifyInput(t *testing.T) {
	s, _ := openStore(t)
	recs := randomKeyRecords(100, 3)
	orig := append([]engine.CellRecord(nil), recs...)
	mustSave(t, s, recs)
	for i := range recs {
		if !reflect.DeepEqual(recs[i], orig[i]) {
			t.Fatalf("record %d changed: %+v, was %+v", i, recs[i], orig[i])
		}
	}
}

func TestSecondSaveReplacesFirst(t *testing.T) {
	s, _ := openStore(t)
	mustSave(t, s, genRecords(1000, 4))
	second := randomKeyRecords(10, 5)
	mustSave(t, s, second)
	sameCells(t, mustLoad(t, s), second)
	mustSave(t, s, nil)
	if got := mustLoad(t, s); len(got) != 0 {
		t.Fatalf("after saving nothing, loaded %d records", len(got))
	}
}

func TestLoadWithoutSnapshot(t *testing.T) {
	s, dir := openStore(t)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("Open did not create %s: %v", dir, err)
	}
	recs, err := s.Load()
	if recs != nil || err != nil {
		t.Fatalf("Load of an empty dir = %v, %v; want nil, nil", recs, err)
	}
}

func TestOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"", file, filepath.Join(file, "sub")} {
		if _, err := persist.Open(dir, nil); err == nil {
			t.Errorf("Open(%q) succeeded", dir)
		}
	}
}

// A crash during Save leaves snapshot.db.tmp behind; it must not be read, and the next
// Save must replace it.
func TestStaleTmpFile(t *testing.T) {
	tests := []struct {
		name  string
		stale func(t *testing.T, path string)
	}{
		{"garbage", func(t *testing.T, path string) {
			if err := os.WriteFile(path, bytes.Repeat([]byte{0xde, 0xad}, 10_000), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"half-written bbolt file", func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o644, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("cells"))
				if err != nil {
					return err
				}
				return b.Put([]byte("0123456789"), make([]byte, 16))
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, dir := openStore(t)
			first := genRecords(100, 6)
			mustSave(t, s, first)
			tmp := filepath.Join(dir, "snapshot.db.tmp")
			tt.stale(t, tmp)

			sameCells(t, mustLoad(t, s), first)

			second := genRecords(50, 7)
			mustSave(t, s, second)
			if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s still there after Save: %v", tmp, err)
			}
			sameCells(t, mustLoad(t, s), second)
		})
	}
}

func TestCorruptSnapshot(t *testing.T) {
	// valid returns the bytes of a good snapshot of recs.
	valid := func(t *testing.T, recs []engine.CellRecord) []byte {
		s, dir := openStore(t)
		mustSave(t, s, recs)
		b, err := os.ReadFile(filepath.Join(dir, "snapshot.db"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	foreign := func(t *testing.T, fill func(tx *bolt.Tx) error) []byte {
		path := filepath.Join(t.TempDir(), "foreign.db")
		db, err := bolt.Open(path, 0o644, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(fill); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	random := func(n int) []byte {
		b := make([]byte, n)
		rng := rand.New(rand.NewPCG(uint64(n), 9))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return b
	}
	big := genRecords(20_000, 8)

	tests := []struct {
		name    string
		content func(t *testing.T) []byte
	}{
		{"empty file", func(*testing.T) []byte { return nil }},
		{"random bytes, short", func(*testing.T) []byte { return random(100) }},
		{"random bytes, long", func(*testing.T) []byte { return random(1 << 20) }},
		{"text file", func(*testing.T) []byte { return []byte("not a snapshot\n") }},
		{"truncated to 100 bytes", func(t *testing.T) []byte { return valid(t, big)[:100] }},
		{"truncated to one page", func(t *testing.T) []byte { return valid(t, big)[:4096] }},
		{"truncated to meta pages", func(t *testing.T) []byte { return valid(t, big)[:8192] }},
		{"truncated to half", func(t *testing.T) []byte { b := valid(t, big); return b[:len(b)/2] }},
		{"truncated by one page", func(t *testing.T) []byte { b := valid(t, big); return b[:len(b)-4096] }},
		{"data page zeroed", func(t *testing.T) []byte {
			b := valid(t, big)
			clear(b[len(b)/2 : len(b)/2+4096])
			return b
		}},
		{"value byte flipped", func(t *testing.T) []byte {
			const regional = 0x1122334455667788
			b := valid(t, []engine.CellRecord{{Key: key("w", "n", "k", 1000), Seq: 1, Regional: regional}})
			i := bytes.Index(b, binary.AppendUvarint(nil, regional))
			if i < 0 {
				t.Fatal("value not found in file")
			}
			b[i] ^= 0x01
			return b
		}},
		{"key byte flipped", func(t *testing.T) []byte {
			b := valid(t, append(genRecords(100, 22), engine.CellRecord{Key: key("w", "n", "flip-me", 1000), Seq: 1, Regional: 3}))
			i := bytes.Index(b, []byte("flip-me"))
			if i < 0 {
				t.Fatal("key not found in file")
			}
			b[i] ^= 0x20
			return b
		}},
		{"foreign bbolt file", func(t *testing.T) []byte {
			return foreign(t, func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("users"))
				if err != nil {
					return err
				}
				return b.Put([]byte("alice"), []byte("x"))
			})
		}},
		{"future format version", func(t *testing.T) []byte {
			return foreign(t, func(tx *bolt.Tx) error {
				if _, err := tx.CreateBucket([]byte("cells")); err != nil {
					return err
				}
				m, err := tx.CreateBucket([]byte("meta"))
				if err != nil {
					return err
				}
				for name, v := range map[string][]byte{
					"version": {0, 0, 0, 0, 0, 0, 0, 9}, "count": make([]byte, 8), "crc32c": make([]byte, 4),
				} {
					if err := m.Put([]byte(name), v); err != nil {
						return err
					}
				}
				return nil
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, dir := openStore(t)
			if err := os.WriteFile(filepath.Join(dir, "snapshot.db"), tt.content(t), 0o644); err != nil {
				t.Fatal(err)
			}
			recs, err := s.Load()
			if err == nil {
				t.Fatalf("Load succeeded with %d records", len(recs))
			}
			if !errors.Is(err, persist.ErrCorrupt) {
				t.Errorf("error %q does not wrap ErrCorrupt", err)
			}
			if recs != nil {
				t.Errorf("Load returned %d records with its error", len(recs))
			}
			// A corrupt snapshot must not stop the next Save.
			mustSave(t, s, big[:10])
			sameCells(t, mustLoad(t, s), big[:10])
		})
	}
}

func TestLoadLockedFile(t *testing.T) {
	s, dir := openStore(t)
	mustSave(t, s, genRecords(10, 21))
	// A writer elsewhere holds the exclusive lock; Load must give up, not hang.
	db, err := bolt.Open(filepath.Join(dir, "snapshot.db"), 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	recs, err := s.Load()
	if err == nil || errors.Is(err, persist.ErrCorrupt) {
		t.Fatalf("Load of a locked file = %d records, %v; want a lock error", len(recs), err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Load took %v", d)
	}
}

// Random damage anywhere in the file gives an error or every cell and counter key, never
// a panic or a partial load.
func TestCorruptionNeverPanics(t *testing.T) {
	s, dir := openStore(t)
	recs := randomKeyRecords(3_000, 10)
	kvs := kvRecords(1_500, 32)
	if err := s.SaveAll(slices.Values(recs), slices.Values(kvs)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "snapshot.db")
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Without GC, os.File finalizers cannot hide a descriptor Load fails to close.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	fdsBefore := openFDs()
	rng := rand.New(rand.NewPCG(11, 12))
	trials := 300
	if testing.Short() {
		trials = 50
	}
	var failed int
	for i := range trials {
		b := bytes.Clone(good)
		switch i % 3 {
		case 0: // flip a few bytes
			for range 1 + rng.IntN(8) {
				b[rng.IntN(len(b))] ^= byte(1 + rng.UintN(255))
			}
		case 1: // overwrite a run with random bytes
			at := rng.IntN(len(b))
			for j := at; j < min(len(b), at+1+rng.IntN(512)); j++ {
				b[j] = byte(rng.UintN(256))
			}
		case 2: // truncate
			b = b[:rng.IntN(len(b))]
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadAll()
		if err != nil {
			failed++
			continue
		}
		sameCells(t, got.Cells, recs)
		sameKV(t, got.KV, kvs)
	}
	t.Logf("%d of %d damaged files refused, the rest loaded whole", failed, trials)
	if fdsBefore >= 0 && openFDs() > fdsBefore+5 {
		t.Errorf("open files grew from %d to %d: Load leaks descriptors", fdsBefore, openFDs())
	}
}

// openFDs returns the number of open file descriptors, or -1 where that is not known.
func openFDs() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(fds)
}

func TestStats(t *testing.T) {
	s, dir := openStore(t)
	if st := s.Stats(); st != (persist.Stats{}) {
		t.Fatalf("Stats before any save = %+v, want zero", st)
	}
	before := uint64(time.Now().UnixMilli())
	mustSave(t, s, genRecords(1234, 13))
	after := uint64(time.Now().UnixMilli())
	st := s.Stats()
	if st.LastCells != 1234 || st.Failures != 0 || st.LastDuration <= 0 ||
		st.LastSuccessMs < before || st.LastSuccessMs > after {
		t.Fatalf("Stats after save = %+v (save between %d and %d)", st, before, after)
	}

	// Failures: a directory where the temporary file goes, and a key bbolt refuses.
	tmp := filepath.Join(dir, "snapshot.db.tmp")
	if err := os.MkdirAll(filepath.Join(tmp, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(genRecords(5, 14)); err == nil {
		t.Fatal("Save succeeded with a directory in place of the temporary file")
	}
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	huge := []engine.CellRecord{{Key: key("w", "n", string(make([]byte, bolt.MaxKeySize)), 1000), Seq: 1}}
	if err := s.Save(huge); err == nil {
		t.Fatal("Save succeeded with an oversized key")
	}
	got := s.Stats()
	if got.Failures != 2 || got.LastCells != st.LastCells || got.LastSuccessMs != st.LastSuccessMs {
		t.Fatalf("Stats after two failures = %+v, want Failures 2 and the rest %+v", got, st)
	}
	// The failed saves left the last good snapshot and no temporary file.
	sameCells(t, mustLoad(t, s), genRecords(1234, 13))
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("failed Save left %s: %v", tmp, err)
	}
}

func TestConcurrentSaveAndLoad(t *testing.T) {
	s, _ := openStore(t)
	sets := [][]engine.CellRecord{genRecords(3000, 15), genRecords(2000, 16)}
	mustSave(t, s, sets[0])
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 5 {
				if err := s.Save(sets[i%2]); err != nil {
					t.Errorf("Save: %v", err)
				}
			}
		})
		wg.Go(func() {
			for range 5 {
				got, err := s.Load()
				if err != nil {
					t.Errorf("Load: %v", err)
					return
				}
				if len(got) != len(sets[0]) && len(got) != len(sets[1]) {
					t.Errorf("Load during Save returned %d records", len(got))
				}
			}
		})
	}
	wg.Wait()
}

// syncBuffer is a bytes.Buffer safe for the logger and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitFor bounds every wait for a condition: generous, since a loaded machine is slow.
const waitFor = 10 * time.Second

// seqOf yields the records f returns, calling f once per pass.
func seqOf(f func() []engine.CellRecord) iter.Seq[engine.CellRecord] {
	return func(yield func(engine.CellRecord) bool) {
		for _, r := range f() {
			if !yield(r) {
				return
			}
		}
	}
}

func TestRun(t *testing.T) {
	t.Run("saves periodically and stops on cancel", func(t *testing.T) {
		s, _ := openStore(t)
		var calls atomic.Int64
		src := func() []engine.CellRecord {
			n := calls.Add(1)
			return genRecords(int(n), 17)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			persist.Run(ctx, s, persist.Source{Cells: seqOf(src)}, nil, 5*time.Millisecond)
		}()
		testwait.UntilTrue(t, waitFor, "three saves", func() bool { return s.Stats().LastCells >= 3 })
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after cancel")
		}
		n := calls.Load()
		time.Sleep(30 * time.Millisecond)
		if calls.Load() != n {
			t.Fatal("Run called src after it returned")
		}
		if got := mustLoad(t, s); len(got) < 3 {
			t.Fatalf("loaded %d records, want the latest save (>= 3)", len(got))
		}
	})

	t.Run("failures are logged, counted and retried", func(t *testing.T) {
		var logs syncBuffer
		dir := t.TempDir()
		s, err := persist.Open(dir, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		// A non-empty directory where the temporary file goes makes every save fail.
		block := filepath.Join(dir, "snapshot.db.tmp", "x")
		if err := os.MkdirAll(block, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			persist.Run(ctx, s, persist.Source{Cells: seqOf(func() []engine.CellRecord { return genRecords(10, 18) })}, nil, 5*time.Millisecond)
		}()
		testwait.UntilTrue(t, waitFor, "two failures", func() bool { return s.Stats().Failures >= 2 })
		if c := s.Stats().ConsecutiveFailures; c < 2 {
			t.Fatalf("ConsecutiveFailures = %d after two failures", c)
		}
		// Empty the directory with one unlink: the saver then removes it itself. (Removing
		// the whole directory here raced with a save that replaced it by a file.)
		if err := os.Remove(block); err != nil {
			t.Fatal(err)
		}
		testwait.UntilTrue(t, waitFor, "a save after the failures", func() bool { return s.Stats().LastCells == 10 })
		cancel()
		<-done
		if c := s.Stats().ConsecutiveFailures; c != 0 {
			t.Fatalf("ConsecutiveFailures = %d after a success", c)
		}
		out := logs.String()
		if !bytes.Contains([]byte(out), []byte("level=ERROR")) || !bytes.Contains([]byte(out), []byte("snapshot.db.tmp")) {
			t.Fatalf("log does not report the failure with its cause:\n%s", out)
		}
	})

	t.Run("unchanged intervals write nothing; a failed save is retried anyway", func(t *testing.T) {
		dir := t.TempDir()
		s, err := persist.Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		block := filepath.Join(dir, "snapshot.db.tmp", "x")
		if err := os.MkdirAll(block, 0o755); err != nil {
			t.Fatal(err)
		}
		var changes, calls atomic.Int64
		changes.Store(1) // one change, then none
		changed := func() bool { return changes.Swap(0) > 0 }
		src := func() []engine.CellRecord { calls.Add(1); return genRecords(10, 18) }
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			persist.Run(ctx, s, persist.Source{Cells: seqOf(src)}, changed, 5*time.Millisecond)
		}()
		testwait.UntilTrue(t, waitFor, "two failed saves of the one change", func() bool { return s.Stats().Failures >= 2 })
		if err := os.Remove(block); err != nil {
			t.Fatal(err)
		}
		testwait.UntilTrue(t, waitFor, "the change saved", func() bool { return s.Stats().LastCells == 10 })
		saved := calls.Load()
		first := s.Stats().LastSuccessMs
		testwait.UntilTrue(t, waitFor, "an unchanged interval counted as current", func() bool { return s.Stats().LastSuccessMs > first })
		cancel()
		<-done
		if got := calls.Load(); got != saved {
			t.Fatalf("src called %d times after the change was saved, want 0", got-saved)
		}
	})

	t.Run("non-positive interval returns at once", func(t *testing.T) {
		s, _ := openStore(t)
		done := make(chan struct{})
		go func() {
			defer close(done)
			persist.Run(context.Background(), s, persist.Source{Cells: func(func(engine.CellRecord) bool) {
				t.Error("src called")
			}}, nil, 0)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run with interval 0 did not return")
		}
	})
}

func BenchmarkLoad(b *testing.B) {
	s, _ := openStore(b)
	const n = 1_000_000
	mustSave(b, s, genRecords(n, 20))
	for b.Loop() {
		if recs := mustLoad(b, s); len(recs) != n {
			b.Fatalf("loaded %d", len(recs))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/load")
}

// TestForeignComponentsRoundTrip: other regions' components are saved and loaded one by one.
func TestForeignComponentsRoundTrip(t *testing.T) {
	s, _ := openStore(t)
	recs := []engine.CellRecord{
		{Key: key("default", "default", "a", 60000), Seq: 7, Regional: 5, Imported: 9,
			Foreign: []engine.RegionCount{{Region: "eu", Count: 4}, {Region: "us-west-2", Count: 5}}},
		{Key: key("default", "default", "b", 60000), Seq: 7, Regional: 1},
	}
	mustSave(t, s, recs)
	got := mustLoad(t, s)
	if len(got) != 2 || !reflect.DeepEqual(got[0].Foreign, recs[0].Foreign) || got[1].Foreign != nil || got[0].Imported != 9 {
		t.Fatalf("loaded %+v", got)
	}
}

// TestWriteSavedHook: Source.Saved is called once a save is on disk, and not after a save
// that failed (an origin's edges then keep the replays the snapshot does not hold).
func TestWriteSavedHook(t *testing.T) {
	s, dir := openStore(t)
	saved := 0
	src := persist.Source{Cells: slices.Values(genRecords(10, 3)), Saved: func() { saved++ }}
	if err := s.Write(src); err != nil || saved != 1 {
		t.Fatalf("Write: %v, Saved called %d times, want 1", err, saved)
	}
	tmp := filepath.Join(dir, "snapshot.db.tmp")
	if err := os.MkdirAll(filepath.Join(tmp, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(src); err == nil || saved != 1 {
		t.Fatalf("failed Write: %v, Saved called %d times, want 1", err, saved)
	}
}
