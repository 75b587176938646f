package edge

import (
	"context"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// TestEdgeMergeAfterResetBeforeVersion: a catch-up applies a reset to the tuple's entries
// first and raises the link's applied version after. An answer the origin read before the
// reset, arriving in between, must not be merged: its counts and lease are what the reset
// cancelled (the origin zeroed that lease).
func TestEdgeMergeAfterResetBeforeVersion(t *testing.T) {
	e, origin, clock := newInternalEdge(t)
	tp, key, seq, l := internalTuple(e, clock, "between")
	if d, err := e.Limit(context.Background(), tp, 100, 3); err != nil || !d.Allowed {
		t.Fatalf("warm-up: %+v, %v", d, err)
	}
	for e.FlushOnce() {
	}
	le := e.lookup(l, key)
	if le == nil {
		t.Fatal("no entry")
	}
	// An answer read before the reset: counts 3, and a new lease.
	cc, meta := origin.ServeRead("edge-1/boot", []engine.ReadItem{{Key: key, Seq: seq, Limit: 100, Want: 50}})
	if cc[0].LeaseLeft == 0 || cc[0].CurRegional != 3 {
		t.Fatalf("the read before the reset: %+v", cc[0])
	}
	if _, err := origin.Reset([]engine.Tuple{tp}); err != nil {
		t.Fatal(err)
	}
	v := origin.ChangeVersion()
	// What catchUp does first: the reset applied to the entries; the link's version not yet.
	e.applyChange(l, engine.Change{Version: v, Kind: engine.ChangeReset, Key: key})
	now := clock.NowMs()
	le.mu.Lock()
	defer le.mu.Unlock()
	seqBefore := le.leaseSeq
	le.merge(cc[0], meta, now, now+1000)
	if le.leaseSeq != seqBefore || le.leaseLeft(now, le.leaseBoot) != 0 {
		t.Errorf("the lease read before the reset was taken: seq %d (was %d), left %d", le.leaseSeq, seqBefore, le.leaseLeft(now, le.leaseBoot))
	}
	if c := le.counts(seq); c.Current != 0 {
		t.Errorf("the counts read before the reset were merged: %+v", c)
	}
}
