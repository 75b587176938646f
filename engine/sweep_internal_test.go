package engine

import (
	"fmt"
	"math"
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
// the same requests (single and multi-limit, windows of 1 s to an hour, in a store that
// fills up, so that a multi-limit request refused for memory leaves the tuples it
// inserted empty) and other regions' counts, the clock moving by random steps, one swept
// as RunSweeper sweeps and one with every shard made due before each pass, hold the same
// cells and tuples after every pass. And once swept, a shard is due no sooner than its
// first cell dies.
func TestSweepSkipsShardsNotDue(t *testing.T) {
	windows := []int64{1000, 7000, 60_000, 3_600_000}
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 1))
		now := int64(1_704_067_200_000) + r.Int64N(3_600_000)
		ca, cb := NewManualClock(now), NewManualClock(now)
		// Room for about 600 tuples of the 900 keys: the store fills up.
		a := New(ca, Config{Standalone: true, MaxMemoryBytes: 600 * tupleBytes(16)})
		b := New(cb, Config{Standalone: true, MaxMemoryBytes: 600 * tupleBytes(16)})
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
				if r.IntN(4) == 0 {
					var ops []LimitOp
					for range 1 + r.IntN(3) {
						ops = append(ops, LimitOp{Tuple: Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "n%d", r.IntN(300)), WindowMs: windows[r.IntN(len(windows))]}, Limit: 1000})
					}
					outA, outB := make([]Decision, len(ops)), make([]Decision, len(ops))
					_, erra := a.LimitMulti(ops, 1, ca.NowMs(), outA)
					_, errb := b.LimitMulti(ops, 1, cb.NowMs(), outB)
					if !slices.Equal(outA, outB) || (erra == nil) != (errb == nil) {
						t.Fatalf("seed %d step %d: multi decisions differ: %+v %v, %+v %v", seed, step, outA, erra, outB, errb)
					}
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
			for i := range b.store.shards {
				b.store.shards[i].sweepDue = 0 // b visits every shard
			}
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

// TestDeathMs: when a cell dies, (seq+2)*w, saturated at math.MaxInt64 (a replay may
// carry any sequence), and 0 (due now) for no valid window or a sequence long past.
func TestDeathMs(t *testing.T) {
	const maxInt = math.MaxInt64
	for _, tc := range []struct {
		seq, w, want int64
	}{
		{0, 1000, 2000},
		{1_704_067_200, 1000, 1_704_067_202_000},
		{28_444_444, 60_000, 1_706_666_760_000},
		{-2, 1000, 0},
		{-1 << 40, 1000, 0},
		{5, 0, 0},
		{5, -3, 0},
		{maxInt/1000 - 2, 1000, (maxInt/1000 - 2 + 2) * 1000}, // the largest that fits
		{maxInt/1000 - 1, 1000, maxInt},
		{maxInt - 2, 1, maxInt},
		{maxInt - 1, 1, maxInt},
		{maxInt, 7, maxInt},
		{1 << 40, 1 << 30, maxInt},
	} {
		if got := deathMs(tc.seq, tc.w); got != tc.want {
			t.Errorf("deathMs(%d, %d) = %d, want %d", tc.seq, tc.w, got, tc.want)
		}
	}
}
