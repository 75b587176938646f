package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// cellKeys returns what a snapshot of e holds, one string a cell, sorted.
func cellKeys(e *Engine) []string {
	var out []string
	for _, r := range e.Snapshot() {
		out = append(out, fmt.Sprintf("%s/%d=%d", r.Key, r.Seq, r.Regional))
	}
	slices.Sort(out)
	return out
}

// TestSweepSkipsShardsNotDue: a pass that skips the shards whose first cell dies later
// (shard.sweepDue) drops exactly what a pass visiting every shard drops: two engines given
// the same requests and other regions' counts (windows of 1 s to an hour, the clock moving
// by random steps), one swept as RunSweeper sweeps and one visiting every shard each
// time, hold the same cells and tuples after every pass. And
// once swept, a shard is due no sooner than its first cell dies, so that a second pass at
// the same instant skips every shard.
func TestSweepSkipsShardsNotDue(t *testing.T) {
	windows := []int64{1000, 7000, 60_000, 3_600_000}
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 1))
		now := int64(1_704_067_200_000) + r.Int64N(3_600_000)
		ca, cb := NewManualClock(now), NewManualClock(now)
		a := New(ca, Config{Standalone: true})
		b := New(cb, Config{Standalone: true})
		for step := range 400 {
			for range r.IntN(40) {
				w := windows[r.IntN(len(windows))]
				tu := Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "k%d", r.IntN(300)), WindowMs: w}
				cost := uint64(r.IntN(3))
				da, erra := a.Limit(tu, 1000, cost)
				db, errb := b.Limit(tu, 1000, cost)
				if da != db || (erra == nil) != (errb == nil) {
					t.Fatalf("seed %d step %d: decisions differ: %+v %v, %+v %v", seed, step, da, erra, db, errb)
				}
				if r.IntN(8) == 0 {
					// Another region's count of a cell that may be dead already: for a tuple
					// not held, a tuple inserted and left empty (shard.emptied).
					seq := ca.NowMs()/w - int64(r.IntN(4))
					comp := []Component{{Key: AppendKey(nil, Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "m%d", r.IntN(300)), WindowMs: w}), Seq: seq, Region: "far", Count: 2}}
					if ma, mb := a.MergeComponents(comp), b.MergeComponents(comp); ma != mb {
						t.Fatalf("seed %d step %d: merges differ: %d, %d", seed, step, ma, mb)
					}
				}
			}
			d := r.Int64N(4000)
			if r.IntN(10) == 0 {
				d = r.Int64N(4_000_000)
			}
			ca.Advance(d)
			cb.Advance(d)
			na, nb := a.sweep(step%10 == 0), b.sweep(true) // a's as RunSweeper's: leases every tenth
			if na != nb {
				t.Fatalf("seed %d step %d: the pass that skips dropped %d cells, the whole pass %d", seed, step, na, nb)
			}
			if ka, kb := cellKeys(a), cellKeys(b); !slices.Equal(ka, kb) {
				t.Fatalf("seed %d step %d: cells differ:\n%v\n%v", seed, step, ka, kb)
			}
			if sa, sb := a.Stats(), b.Stats(); sa.Cells != sb.Cells || sa.Tuples != sb.Tuples {
				t.Fatalf("seed %d step %d: stats differ: %+v, %+v", seed, step, sa, sb)
			}
			now := ca.NowMs()
			for i := range a.store.shards {
				sh := &a.store.shards[i]
				if sh.n > 0 && sh.sweepDue <= now {
					t.Fatalf("seed %d step %d: shard %d of %d tuples due at %d, swept at %d", seed, step, i, sh.n, sh.sweepDue, now)
				}
			}
		}
	}
}
