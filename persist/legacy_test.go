package persist

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// v2Key encodes t as format version 2 did: window (8 bytes, big endian) | uvarint
// len(workspace) | workspace | uvarint len(namespace) | namespace | key.
func v2Key(t engine.Tuple) []byte {
	k := binary.BigEndian.AppendUint64(nil, uint64(t.WindowMs))
	k = binary.AppendUvarint(k, uint64(len(t.Workspace)))
	k = append(k, t.Workspace...)
	k = binary.AppendUvarint(k, uint64(len(t.Namespace)))
	k = append(k, t.Namespace...)
	return append(k, t.Key...)
}

// TestLoadVersion2: a snapshot of format version 2 loads, its tuple keys converted to the
// current encoding; a version-2 key that does not decode is passed on as it is.
func TestLoadVersion2(t *testing.T) {
	tuples := []engine.Tuple{
		{Workspace: "default", Namespace: "default", Key: []byte("user:1"), WindowMs: 60_000},
		{Workspace: "acme", Namespace: "", Key: []byte{0, 0xff}, WindowMs: 1},
		{Workspace: "", Namespace: "login", Key: nil, WindowMs: engine.MaxWindowMs},
	}
	dir := t.TempDir()
	bad := []byte{0, 0, 0, 0, 0, 0, 0, 0, 9} // window 0, cut short
	cell := func(k []byte, seq int64, regional uint64) [2][]byte {
		v := binary.BigEndian.AppendUint64(nil, regional)
		v = binary.BigEndian.AppendUint64(v, 0)
		v = append(v, 2, 'e', 'u')
		v = binary.BigEndian.AppendUint64(v, 7)
		return [2][]byte{binary.BigEndian.AppendUint64(k, uint64(seq)), v}
	}
	var cells [][2][]byte
	for i, tp := range tuples {
		cells = append(cells, cell(v2Key(tp), int64(100+i), uint64(i+1)))
	}
	cells = append(cells, cell(bad, 5, 1))
	// The checksum runs over the bucket in key order, as bbolt stores it.
	slices.SortFunc(cells, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
	crc := newChecksum()
	for _, kv := range cells {
		crc.add(kv[0], kv[1])
	}
	writeRaw(t, dir, cells, v2Version, uint64(len(cells)), crc.sum)
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.Load()
	if err != nil {
		t.Fatalf("Load of a version 2 snapshot: %v", err)
	}
	got := map[string]engine.CellRecord{}
	for _, r := range recs {
		got[r.Key] = r
	}
	if len(got) != len(tuples)+1 {
		t.Fatalf("%d records, want %d", len(got), len(tuples)+1)
	}
	for i, tp := range tuples {
		r, ok := got[string(engine.AppendKey(nil, tp))]
		if !ok || r.Seq != int64(100+i) || r.Regional != uint64(i+1) || len(r.Foreign) != 1 || r.Foreign[0] != (engine.RegionCount{Region: "eu", Count: 7}) {
			t.Fatalf("tuple %+v: record %+v (found %v)", tp, r, ok)
		}
	}
	if _, ok := got[string(bad)]; !ok {
		t.Fatalf("the undecodable version 2 key was not passed on")
	}
}
