package engine

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// TestOverrideMergeLetsLookupsIn: a merge of many records (a peer's anti-entropy, an
// edge's full read) does not hold the write lock throughout: a reader (a decision's
// lookup) gets the read lock while the merge is under way.
func TestOverrideMergeLetsLookupsIn(t *testing.T) {
	const total = 100 * scanChunk
	o := NewOverrides(NewManualClock(1000), "a", total)
	recs := make([]OverrideRecord, total)
	for i := range recs {
		tu := Tuple{Workspace: "default", Namespace: "default", Key: []byte(fmt.Sprintf("k%06d", i)), WindowMs: 1000}
		recs[i] = OverrideRecord{Key: AppendKey(nil, tu), Limit: 5, Stamp: uint64(i + 1), Region: "b"}
	}
	var changes atomic.Int64
	var merged atomic.Bool
	readerIn := make(chan int64, 1) // the changes made when a reader got in; total: only after the merge
	o.onChange = func(*override) {
		if changes.Add(1) != 1 {
			return
		}
		go func() { // from the first change on, try the read lock until the merge is over
			for {
				done := merged.Load()
				if o.mu.TryRLock() {
					n := changes.Load() // the merge cannot move while the read lock is held
					o.mu.RUnlock()
					if n < total || done {
						readerIn <- n
						return
					}
				}
				runtime.Gosched()
			}
		}()
	}
	if n := o.Merge(recs); n != total {
		t.Fatalf("merged %d, want %d", n, total)
	}
	merged.Store(true)
	if got := <-readerIn; got >= total {
		t.Errorf("a reader got the read lock only after the %d changes of the merge: it held the write lock throughout", got)
	}
}
