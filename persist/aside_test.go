package persist_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/persist"
)

// asideFiles returns the names of the snapshots moved aside in dir.
func asideFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "snapshot.db.corrupt-*"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// TestLoadOrSetAside: a damaged snapshot is moved aside unchanged and logged, the store
// starts empty, and a save after it does not touch the moved file.
func TestLoadOrSetAside(t *testing.T) {
	dir := t.TempDir()
	garbage := bytes.Repeat([]byte("not a snapshot "), 1000)
	if err := os.WriteFile(filepath.Join(dir, "snapshot.db"), garbage, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	s, err := persist.Open(dir, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap, err := s.LoadOrSetAside()
	if snap.Cells != nil || snap.KV != nil || err != nil {
		t.Fatalf("LoadOrSetAside = %d records, %v; want none, nil", len(snap.Cells), err)
	}
	moved := asideFiles(t, dir)
	if len(moved) != 1 {
		t.Fatalf("moved aside: %v, want one file", moved)
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshot.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("snapshot.db still there: %v", err)
	}
	out := logs.String()
	for _, want := range []string{"level=ERROR", "moved aside", filepath.Join(dir, "snapshot.db"), moved[0], "corrupt"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	mustSave(t, s, genRecords(10, 1))
	sameCells(t, mustLoad(t, s), genRecords(10, 1))
	if got, err := os.ReadFile(filepath.Join(dir, moved[0])); err != nil || !bytes.Equal(got, garbage) {
		t.Fatalf("moved file changed: %d bytes, %v", len(got), err)
	}

	// A good snapshot loads and stays.
	snap, err = s.LoadOrSetAside()
	if err != nil || len(snap.Cells) != 10 || len(asideFiles(t, dir)) != 1 {
		t.Fatalf("good snapshot: %d records, %v, aside %v", len(snap.Cells), err, asideFiles(t, dir))
	}
	// No snapshot: nothing to do.
	if err := os.Remove(filepath.Join(dir, "snapshot.db")); err != nil {
		t.Fatal(err)
	}
	if snap, err := s.LoadOrSetAside(); snap.Cells != nil || snap.KV != nil || err != nil {
		t.Fatalf("no snapshot: %d records, %v", len(snap.Cells), err)
	}
}

// TestSetAsideKeepsThree: of the files moved aside, the three newest are kept; a name
// already taken in the same second gets a suffix rather than replacing it.
func TestSetAsideKeepsThree(t *testing.T) {
	dir := t.TempDir()
	for _, sec := range []int{1000, 2000, 3000} {
		name := filepath.Join(dir, "snapshot.db.corrupt-"+strconv.Itoa(sec))
		if err := os.WriteFile(name, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(dir, "snapshot.db.corrupt-notes.txt")
	if err := os.WriteFile(other, []byte("operator's"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := persist.Open(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 2 {
		if err := os.WriteFile(filepath.Join(dir, "snapshot.db"), []byte(fmt.Sprint("garbage ", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadOrSetAside(); err != nil {
			t.Fatal(err)
		}
	}
	got := asideFiles(t, dir)
	want := map[string]bool{"snapshot.db.corrupt-3000": true, "snapshot.db.corrupt-notes.txt": true}
	fresh := 0
	for _, name := range got {
		if want[name] {
			delete(want, name)
			continue
		}
		if name == "snapshot.db.corrupt-1000" || name == "snapshot.db.corrupt-2000" {
			t.Errorf("%s was not deleted", name)
		}
		fresh++
	}
	if fresh != 2 || len(want) != 0 {
		t.Fatalf("aside files %v: want the two new ones, corrupt-3000 and the unrelated file", got)
	}
}

// TestLockDir: a second Open of a directory fails with a message naming the directory and
// the holder's pid; after Close it succeeds.
func TestLockDir(t *testing.T) {
	s, dir := openStore(t)
	pid, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("LOCK holds %q, %v; want this pid", pid, err)
	}
	_, err = persist.Open(dir, nil)
	if !errors.Is(err, persist.ErrLocked) || !strings.Contains(err.Error(), dir) ||
		!strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Open = %v; want ErrLocked naming %s and the pid", err, dir)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := persist.Open(dir, nil)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRemovesLeftoverTmp: the temporary file of an interrupted save is removed at Open,
// and the log says so.
func TestOpenRemovesLeftoverTmp(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "snapshot.db.tmp")
	if err := os.WriteFile(tmp, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	s, err := persist.Open(dir, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s still there: %v", tmp, err)
	}
	if out := logs.String(); !strings.Contains(out, "interrupted snapshot") || !strings.Contains(out, tmp) {
		t.Fatalf("log does not name the removed file:\n%s", out)
	}
}

// TestLoadOrSetAsideFileOrder: a starting process gets the cells in file order, records of
// one key and sequence not merged (engine.Restore merges them), and restoring them gives
// the counts LoadAll's merged records give.
func TestLoadOrSetAsideFileOrder(t *testing.T) {
	s, _ := openStore(t)
	seq := time.Now().UnixMilli() / 60_000
	b, a := key("default", "default", "b", 60_000), key("default", "default", "a", 60_000)
	recs := []engine.CellRecord{{Key: b, Seq: seq, Regional: 2}, {Key: a, Seq: seq, Regional: 7}, {Key: b, Seq: seq, Regional: 5}}
	mustSave(t, s, recs)
	snap, err := s.LoadOrSetAside()
	if err != nil || !reflect.DeepEqual(snap.Cells, recs) {
		t.Fatalf("LoadOrSetAside = %+v, %v; want the records as saved", snap.Cells, err)
	}
	merged, err := s.LoadAll()
	if err != nil || len(merged.Cells) != 2 {
		t.Fatalf("LoadAll = %+v, %v", merged.Cells, err)
	}
	view := func(recs []engine.CellRecord) []engine.CellRecord {
		e := engine.New(engine.NewManualClock(time.Now().UnixMilli()), engine.Config{Standalone: true})
		if _, _, err := e.Restore(recs); err != nil {
			t.Fatal(err)
		}
		out := e.Snapshot()
		slices.SortFunc(out, func(x, y engine.CellRecord) int { return strings.Compare(x.Key, y.Key) })
		return out
	}
	if got, want := view(snap.Cells), view(merged.Cells); !reflect.DeepEqual(got, want) || want[1].Regional != 5 {
		t.Fatalf("restored from file order %+v, from LoadAll %+v", got, want)
	}
}

// TestKeepAside: a snapshot whose cells a lazy load could not all restore is kept aside
// as a copy (the file in place stays, for the parts still loading), and a save after it
// replaces the file in place without touching the copy.
func TestKeepAside(t *testing.T) {
	dir := t.TempDir()
	var logs syncBuffer
	s, err := persist.Open(dir, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustSave(t, s, genRecords(10, 1))
	path := filepath.Join(dir, "snapshot.db")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.KeepAside(errors.New("test: part 7 damaged")); err != nil {
		t.Fatal(err)
	}
	kept := asideFiles(t, dir)
	if len(kept) != 1 {
		t.Fatalf("kept aside: %v, want one file", kept)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, before) {
		t.Fatalf("the snapshot in place changed or went: %v", err)
	}
	mustSave(t, s, genRecords(3, 2))
	if got, err := os.ReadFile(filepath.Join(dir, kept[0])); err != nil || !bytes.Equal(got, before) {
		t.Fatalf("the copy kept aside is not the snapshot that failed to load (err %v)", err)
	}
	if out := logs.String(); !strings.Contains(out, "kept aside") || !strings.Contains(out, "part 7 damaged") {
		t.Errorf("log does not say what was kept and why:\n%s", out)
	}
}
