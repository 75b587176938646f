package engine

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
)

// TestRestoreCounts: Restore counts what it adds as an insert does (the store's bytes,
// the shards' tuples and cells), over runs of records of one shard longer than
// restoreRun (a load part's records come grouped by shard), with records it drops among
// them.
func TestRestoreCounts(t *testing.T) {
	const now, w = 1_704_067_200_000, 60_000
	e := New(NewManualClock(now), Config{MaxMemoryBytes: 1 << 30, Standalone: true})
	var recs []CellRecord
	var bytes int64
	const tuples = 30_000
	for i := range tuples {
		key := string(AppendKey(nil, Tuple{Workspace: "default", Namespace: "default", Key: []byte(fmt.Sprintf("user:%d", i)), WindowMs: w}))
		recs = append(recs, CellRecord{Key: key, Seq: now / w, Regional: 2})
		if i%3 == 0 { // the tuple's second cell
			recs = append(recs, CellRecord{Key: key, Seq: now/w - 1, Regional: 1})
		}
		if i%7 == 0 { // dropped: it can no longer matter
			recs = append(recs, CellRecord{Key: key, Seq: now/w - 5, Regional: 1})
		}
		bytes += tupleBytes(len(key))
	}
	shardOf := func(r CellRecord) uint64 { return hashKey(e.store.seed, r.Key) % shardCount }
	slices.SortStableFunc(recs, func(a, b CellRecord) int { return cmp.Compare(shardOf(a), shardOf(b)) })
	longest, run := 0, 0
	for i := range recs {
		if run++; i > 0 && shardOf(recs[i]) != shardOf(recs[i-1]) {
			run = 1
		}
		longest = max(longest, run)
	}
	if longest <= restoreRun {
		t.Fatalf("the longest run of one shard is %d records: not past restoreRun (%d)", longest, restoreRun)
	}
	wantCells := tuples + (tuples+2)/3
	wantDropped := (tuples + 6) / 7
	loaded, dropped, err := e.Restore(recs)
	if err != nil || loaded != wantCells || dropped != wantDropped {
		t.Fatalf("Restore: %d loaded, %d dropped, %v; want %d and %d", loaded, dropped, err, wantCells, wantDropped)
	}
	st := e.Stats()
	if st.MemoryBytes != bytes || st.Tuples != tuples || st.Cells != int64(wantCells) {
		t.Fatalf("after Restore: %d bytes, %d tuples, %d cells; want %d, %d, %d", st.MemoryBytes, st.Tuples, st.Cells, bytes, tuples, wantCells)
	}
	for i := range e.store.shards {
		if !e.store.shards[i].mu.TryLock() {
			t.Fatalf("shard %d still locked after Restore", i)
		}
		e.store.shards[i].mu.Unlock()
	}
}
