package persist

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/ratchet/ratchet/engine"
	bolt "go.etcd.io/bbolt"
)

// TestResetsRoundTrip: reset records and the change version load back as saved; a file
// written before resets (no resets bucket, no change version) loads with none; a damaged
// resets bucket is refused.
func TestResetsRoundTrip(t *testing.T) {
	key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Key: []byte("login:alice"), WindowMs: 60_000}))
	resets := []engine.ResetRecord{
		{Key: key, Version: 1 << 50, UntilMs: 1_750_000_120_000, Cancels: []engine.ResetCancel{
			{Seq: 29_166_666, Region: "eu", Count: 7}, {Seq: 29_166_665, Region: "us-east", Count: math.MaxUint64}}},
		{Key: "k", Version: 0, UntilMs: math.MinInt64},
	}
	src := Source{Cells: slices.Values([]engine.CellRecord{{Key: key, Seq: 29_166_666, Regional: 9}}),
		Resets: slices.Values(resets), Changes: func() uint64 { return 1<<50 + 3 }}
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Write(src); err != nil {
		t.Fatal(err)
	}
	snap, err := s.LoadAll()
	if err != nil || !reflect.DeepEqual(snap.Resets, resets) || snap.Changes != 1<<50+3 {
		t.Fatalf("loaded %+v, changes %d, %v; want %+v", snap.Resets, snap.Changes, err, resets)
	}

	putChunk(t, dir, resetsBucket, metaResetCRC, []byte{1, 'k', 0, 0, 0xff, 0xff, 0x03}) // 65535 cancelled values
	if _, err := s.LoadAll(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a damaged resets bucket: %v, want ErrCorrupt", err)
	}

	// An older file: no resets bucket, no change version.
	if err := s.Write(src); err != nil {
		t.Fatal(err)
	}
	rewrite(t, dir, func(tx *bolt.Tx) error {
		m := tx.Bucket([]byte(metaBucket))
		return errors.Join(tx.DeleteBucket([]byte(resetsBucket)), m.Delete([]byte(metaResetCount)), m.Delete([]byte(metaResetCRC)),
			m.Delete([]byte(metaChanges)))
	})
	snap, err = s.LoadAll()
	if err != nil || snap.Resets != nil || snap.Changes != 0 || len(snap.Cells) != 1 {
		t.Fatalf("a file from before resets: %d cells, %d resets, changes %d, %v", len(snap.Cells), len(snap.Resets), snap.Changes, err)
	}
}

// TestResetsLongRecordLoads: a reset record saved with more cancelled values than two live
// cells need (a tuple reset every window, by a run that kept dead cells' values) does not
// make the snapshot unloadable, which would set it aside and start the origin empty: it
// loads with the record trimmed to its latest cells' values, and everything else.
func TestResetsLongRecordLoads(t *testing.T) {
	key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Key: []byte("svc"), WindowMs: 1000}))
	long := engine.ResetRecord{Key: key, Version: 7, UntilMs: 1_750_000_002_000}
	for seq := range int64(3000) {
		long.Cancels = append(long.Cancels, engine.ResetCancel{Seq: 1_750_000_000 - 2999 + seq, Region: "a", Count: 1})
	}
	other := engine.ResetRecord{Key: "k", Version: 3, UntilMs: 1_750_000_002_000,
		Cancels: []engine.ResetCancel{{Seq: 1, Region: "a", Count: 2}}}
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src := Source{Cells: slices.Values([]engine.CellRecord{{Key: key, Seq: 1_750_000_000, Regional: 9}}),
		Resets: slices.Values([]engine.ResetRecord{long, other}), Changes: func() uint64 { return 9 }}
	if err := s.Write(src); err != nil {
		t.Fatal(err)
	}
	snap, err := s.LoadAll()
	if err != nil {
		t.Fatalf("the snapshot does not load: %v", err)
	}
	if len(snap.Cells) != 1 || len(snap.Resets) != 2 || snap.Changes != 9 || !reflect.DeepEqual(snap.Resets[1], other) {
		t.Fatalf("loaded %d cells, %d resets, changes %d", len(snap.Cells), len(snap.Resets), snap.Changes)
	}
	got := snap.Resets[0]
	if len(got.Cancels) != maxResetCancels || got.Cancels[0].Seq != 1_750_000_000 || got.Version != 7 {
		t.Fatalf("long record loaded with %d values, first seq %d, version %d; want the %d latest",
			len(got.Cancels), got.Cancels[0].Seq, got.Version, maxResetCancels)
	}
}
