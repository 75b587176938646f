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
// as they were written, with the table's horizon; a file without the overrides bucket
// (written before it existed) loads with its cells and no overrides, one without the
// horizon with the zero horizon; a damaged overrides chunk fails the load.
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
	h := engine.OverrideHorizon{Stamp: 1<<40 + 7, Region: "eu"}
	cases := []struct {
		name        string
		damage      func(tx *bolt.Tx) error // nil: none
		want        []engine.OverrideRecord
		wantHorizon engine.OverrideHorizon
		wantErr     error
	}{
		{name: "as written", want: want, wantHorizon: h},
		{name: "a file from before the horizon", want: want, damage: func(tx *bolt.Tx) error {
			m := tx.Bucket([]byte(metaBucket))
			return errors.Join(m.Delete([]byte(metaOverridesHorizon)), m.Delete([]byte(metaOverridesHRegion)))
		}},
		{name: "a file from before overrides", damage: func(tx *bolt.Tx) error {
			m := tx.Bucket([]byte(metaBucket))
			return errors.Join(tx.DeleteBucket([]byte(overridesBucket)), m.Delete([]byte(metaOverridesCount)),
				m.Delete([]byte(metaOverridesCRC)), m.Delete([]byte(metaOverridesHorizon)), m.Delete([]byte(metaOverridesHRegion)))
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
			src := Source{Cells: slices.Values(cells), Overrides: slices.Values(want),
				OverridesHorizon: func() engine.OverrideHorizon { return h }}
			if err := s.Write(src); err != nil {
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
			if snap.OverridesHorizon != tc.wantHorizon {
				t.Errorf("horizon %+v, want %+v", snap.OverridesHorizon, tc.wantHorizon)
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

// TestOverridesLimitOverMax: a record whose limit is over engine.MaxLimit is refused when
// loading, as a peer's is when merging.
func TestOverridesLimitOverMax(t *testing.T) {
	d := decoder{b: mustAppendOverride(t, engine.OverrideRecord{
		Key:   engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 1000}),
		Limit: engine.MaxLimit + 1, Stamp: 1, Region: "a"})}
	if _, err := decodeOverride(&d, string(d.b), nil); err == nil {
		t.Error("a limit over MaxLimit was decoded")
	}
}

func mustAppendOverride(t *testing.T, r engine.OverrideRecord) []byte {
	t.Helper()
	b, err := appendOverride(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
