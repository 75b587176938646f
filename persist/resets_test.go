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
