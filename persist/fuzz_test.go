package persist

import (
	"reflect"
	"slices"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// FuzzLeaseChunk: a chunk of lease records, however damaged, decodes to
// records or to an error, never a panic; records it decodes encode again (their keys
// spelled out) to a chunk that decodes to the same records.
func FuzzLeaseChunk(f *testing.F) {
	runs := []engine.RunRecord{{Run: "e1/a"}, {Run: "e2/b"}}
	index := map[string]uint64{"e1/a": 1, "e2/b": 2}
	key := string(engine.AppendKey(nil, engine.Tuple{Workspace: "default", Key: []byte("user:1"), WindowMs: 60_000}))
	seed := []engine.LeaseRecord{
		{Key: key, Run: "e2/b", G: 5, Spent: 1, Seq: 1_750_000_000_000 << 20, UntilMs: 1_750_000_061_000},
		{Key: key, Run: "e1/a", G: 7, Seq: 1_750_000_000_000<<20 + 1, UntilMs: 1_750_000_060_500},
		{Key: key, Run: "gone/c", G: 1, Seq: 2, UntilMs: -5},
	}
	cells := []engine.CellRecord{{Key: key, Seq: 1}, {Key: "other", Seq: 2}}
	for i := range seed {
		enc := leaseEncoder{runs: index}
		chunk, _, _, err := encodeRecords(nil, nil, slices.Values(seed[i:]), enc.appendKeyedLease, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(chunk)
		// The same grants naming their key by the first cell record.
		var refs []byte
		enc = leaseEncoder{runs: index}
		for _, r := range seed[i:] {
			if refs, err = enc.appendLease(refs, r, 1); err != nil {
				f.Fatal(err)
			}
		}
		f.Add(refs)
	}
	f.Add([]byte{0, 1, 'k', 3, 0, 0, 0, 0})
	f.Add([]byte{0, 1, 'k', 0, 200, 'x'})
	f.Add([]byte{3, 1, 0, 0, 0, 0})
	dec := chunked[engine.LeaseRecord]{chunkDecoder: leaseDecoder(runs, cells)}
	f.Fuzz(func(t *testing.T, chunk []byte) {
		recs, err := dec.decodeChunk(nil, chunk, uint64(len(chunk)))
		if err != nil {
			return
		}
		enc := leaseEncoder{runs: index}
		again, _, _, err := encodeRecords(nil, nil, slices.Values(recs), enc.appendKeyedLease, nil)
		if err != nil {
			t.Fatalf("decoded records do not encode: %v", err)
		}
		back, err := dec.decodeChunk(nil, again, uint64(len(again)))
		if err != nil || !reflect.DeepEqual(back, recs) {
			t.Fatalf("re-encoded chunk decodes to %+v, %v; want %+v", back, err, recs)
		}
	})
}
