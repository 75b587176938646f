package persist

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/ratchet/ratchet/engine"
	bolt "go.etcd.io/bbolt"
)

// TestOverridesRoundTrip: the overrides (a prefix and a tombstone among them) come back
// as they were written; a file without the overrides bucket (written before it existed)
// loads with its cells and no overrides; a damaged overrides chunk fails the load.
func TestOverridesRoundTrip(t *testing.T) {
	k := func(key string) []byte {
		return engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "api", Key: []byte(key), WindowMs: 60_000})
	}
	want := []engine.OverrideRecord{
		{Key: k("user:42"), Limit: 5, Stamp: 1 << 40, Region: "a"},
		{Key: k("user:"), Prefix: true, Limit: 100, Stamp: 1<<40 + 1, Region: "b"},
		{Key: k("gone"), Limit: 0, Stamp: 1<<40 + 2, Region: "a"},
	}
	cells := []engine.CellRecord{{Key: "a", Seq: 1, Regional: 2}}
	cases := []struct {
		name    string
		damage  func(tx *bolt.Tx) error // nil: none
		want    []engine.OverrideRecord
		wantErr error
	}{
		{name: "as written", want: want},
		{name: "a file from before overrides", damage: func(tx *bolt.Tx) error {
			m := tx.Bucket([]byte(metaBucket))
			return errors.Join(tx.DeleteBucket([]byte(overridesBucket)), m.Delete([]byte(metaOverridesCount)),
				m.Delete([]byte(metaOverridesCRC)))
		}},
		{name: "a damaged chunk", damage: func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(overridesBucket))
			v := bytes.Clone(b.Get([]byte{0, 0, 0, 0}))
			v[len(v)-1] ^= 0xff
			return b.Put([]byte{0, 0, 0, 0}, v)
		}, wantErr: ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Write(Source{Cells: slices.Values(cells), Overrides: slices.Values(want)}); err != nil {
				t.Fatal(err)
			}
			if tc.damage != nil {
				rewrite(t, dir, tc.damage)
			}
			snap, err := s.LoadAll()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("LoadAll: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if len(snap.Cells) != 1 {
				t.Errorf("cells = %+v", snap.Cells)
			}
			if len(snap.Overrides) != len(tc.want) {
				t.Fatalf("overrides = %+v, want %+v", snap.Overrides, tc.want)
			}
			for i, r := range snap.Overrides {
				w := tc.want[i]
				if !bytes.Equal(r.Key, w.Key) || r.Prefix != w.Prefix || r.Limit != w.Limit || r.Stamp != w.Stamp || r.Region != w.Region {
					t.Errorf("override %d = %+v, want %+v", i, r, w)
				}
			}
		})
	}
}
