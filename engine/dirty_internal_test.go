package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// dirtyKeys returns the keys a pass of Dirty yields, sorted.
func dirtyKeys(e *Engine) []string {
	var out []string
	for r := range e.Dirty {
		out = append(out, strings.Clone(r.Key))
	}
	slices.Sort(out)
	return out
}

// TestDirtyFollowsMovedSlots: Dirty yields the tuples changed since its last pass, and a
// tuple's mark moves with it when a sweep moves it into the slot of a tuple it dropped.
func TestDirtyFollowsMovedSlots(t *testing.T) {
	const t0 = 1_704_067_200_000
	clock := NewManualClock(t0)
	e := New(clock, Config{Snapshots: true})
	// Tuples of one shard: a short-lived one first, so that a sweep drops its slot (0) and
	// moves the shard's last slot there.
	var short, long []Tuple
	target := -1
	for i := 0; len(long) < 5; i++ {
		tp := Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "k%d", i), WindowMs: 3_600_000}
		if target < 0 {
			tp.WindowMs = 1000
			target, _ = e.store.locateIndex(AppendKey(nil, tp))
			short = append(short, tp)
			continue
		}
		shard, _ := e.store.locateIndex(AppendKey(nil, tp))
		if shard == target {
			long = append(long, tp)
		}
	}
	for _, tp := range append(slices.Clone(short), long...) {
		if _, err := e.Limit(tp, 100, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := dirtyKeys(e); len(got) != 6 {
		t.Fatalf("first pass: %d tuples, want 6", len(got))
	}
	if got := dirtyKeys(e); len(got) != 0 {
		t.Fatalf("second pass: %v, want none", got)
	}
	last := long[len(long)-1] // in the shard's last slot
	if _, err := e.Limit(last, 100, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(3000)
	if n := e.Sweep(); n != 1 {
		t.Fatalf("sweep dropped %d cells, want the short tuple's", n)
	}
	if got, want := dirtyKeys(e), []string{string(AppendKey(nil, last))}; !slices.Equal(got, want) {
		t.Fatalf("after the sweep moved it: %q, want %q", got, want)
	}
	// An engine without snapshots marks nothing.
	e2 := New(clock, Config{})
	if _, err := e2.Limit(last, 100, 1); err != nil {
		t.Fatal(err)
	}
	if got := dirtyKeys(e2); len(got) != 0 {
		t.Fatalf("without snapshots: %q, want none", got)
	}
}

// TestDirtyMarksTheSlotCounted: each request path marks the tuple it counted, from the slot
// its own lookup or insert found (markSlot), not a neighbour's: in a shard already holding
// tuples, a request on an existing tuple or on new ones (several made in one shard by one
// multi-limit request) leaves exactly those marked.
func TestDirtyMarksTheSlotCounted(t *testing.T) {
	const t0 = 1_704_067_200_000
	seq := int64(t0 / 60_000)
	// sameShard returns n tuples whose keys fall in one shard, of window w.
	sameShard := func(e *Engine, n int, prefix string, w int64) []Tuple {
		var out []Tuple
		target := -1
		for i := 0; len(out) < n; i++ {
			tp := Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "%s%d", prefix, i), WindowMs: w}
			shard, _ := e.store.locateIndex(AppendKey(nil, tp))
			if target < 0 {
				target = shard
			}
			if shard == target {
				out = append(out, tp)
			}
		}
		return out
	}
	keysOf := func(ts ...Tuple) []string {
		var out []string
		for _, tp := range ts {
			out = append(out, string(AppendKey(nil, tp)))
		}
		slices.Sort(out)
		return out
	}
	cases := []struct {
		name string
		// do counts on e, whose shard holds old (counted, marks cleared) and whose
		// fresh tuples of that shard are not held yet; it returns the tuples it counted.
		do func(t *testing.T, e *Engine, old, fresh []Tuple) []Tuple
	}{
		{"limit existing", func(t *testing.T, e *Engine, old, _ []Tuple) []Tuple {
			count(t, e, old[2])
			return old[2:3]
		}},
		{"limit new", func(t *testing.T, e *Engine, _, fresh []Tuple) []Tuple {
			count(t, e, fresh[0])
			return fresh[:1]
		}},
		{"multi existing", func(t *testing.T, e *Engine, old, _ []Tuple) []Tuple {
			multi(t, e, old[1], old[3])
			return []Tuple{old[1], old[3]}
		}},
		{"multi new and existing", func(t *testing.T, e *Engine, old, fresh []Tuple) []Tuple {
			multi(t, e, old[4], fresh[0], fresh[1])
			return []Tuple{old[4], fresh[0], fresh[1]}
		}},
		{"replay", func(t *testing.T, e *Engine, old, fresh []Tuple) []Tuple {
			e.ServeReplay(ReplayBatch{Node: "e1/a", ID: 1, Items: []ReplayItem{
				{Key: AppendKey(nil, old[3]), Seq: seq, Cost: 1, Limit: 100},
				{Key: AppendKey(nil, fresh[1]), Seq: seq, Cost: 1, Limit: 100},
				{Key: AppendKey(nil, fresh[1]), Seq: seq - 1, Cost: 1, Limit: 100},
				{Key: AppendKey(nil, fresh[0]), Seq: seq, Cost: 1, Limit: 100},
			}})
			return []Tuple{old[3], fresh[0], fresh[1]}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := New(NewManualClock(t0), Config{Snapshots: true})
			ts := sameShard(e, 8, "k", 60_000)
			old, fresh := ts[:5], ts[5:]
			for _, tp := range old {
				count(t, e, tp)
			}
			dirtyKeys(e) // clears the marks
			want := keysOf(c.do(t, e, old, fresh)...)
			if got := dirtyKeys(e); !slices.Equal(got, want) {
				t.Fatalf("marked %q, want %q", got, want)
			}
		})
	}
}

// count counts one request against a limit of 100 of tp, at t0 of its test.
func count(t *testing.T, e *Engine, tp Tuple) {
	t.Helper()
	if d, err := e.LimitAt(tp, 100, 1, 1_704_067_200_000); err != nil || !d.Allowed {
		t.Fatalf("decision %+v, %v: want allowed", d, err)
	}
}

// multi counts one request against a limit of 100 of each of ts, at t0 of its test.
func multi(t *testing.T, e *Engine, ts ...Tuple) {
	t.Helper()
	ops := make([]LimitOp, len(ts))
	for i, tp := range ts {
		ops[i] = LimitOp{Tuple: tp, Limit: 100}
	}
	out := make([]Decision, len(ts))
	if _, err := e.LimitMulti(ops, 1, 1_704_067_200_000, out); err != nil || !AllAllowed(out) {
		t.Fatalf("multi-limit request: %+v, %v", out, err)
	}
}

// TestCaptureReserve: a capture's buffers, reserved before a shard's lock for its tuples,
// do not grow while it reads them under the lock (an allocation there may assist the
// garbage collector with the lock held), once a shard's capture showed how many cells and
// key bytes a tuple has: the first, reserved for one cell and 48 bytes a tuple, grows only
// those buffers for tuples of two cells and keys of 70 bytes and more; a fresh capture that
// learnt from it grows none.
func TestCaptureReserve(t *testing.T) {
	const t0 = 1_704_067_200_000
	const window = 3_600_000
	clock := NewManualClock(t0)
	e := New(clock, Config{Snapshots: true})
	var tuples []Tuple
	target := -1
	for i := 0; len(tuples) < 300; i++ {
		tp := Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "%070d", i), WindowMs: window}
		shard, _ := e.store.locateIndex(AppendKey(nil, tp))
		if target < 0 {
			target = shard
		}
		if shard == target {
			tuples = append(tuples, tp)
		}
	}
	for range 2 { // a cell in this window and one in the next: two live cells a tuple
		for _, tp := range tuples {
			if _, err := e.Limit(tp, 100, 1); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(window)
	}
	now := clock.NowMs() - window
	sh := &e.store.shards[target]
	var c tupleCapture
	for pass := range 2 {
		c.reset()
		if pass == 1 {
			c = tupleCapture{last: c.last} // empty buffers, what the first pass held
		}
		c.reserve(sh.n)
		before := [...]int{cap(c.tuples), cap(c.cells), cap(c.fAt), cap(c.keys)}
		sh.mu.Lock()
		c.begin(e)
		for j := range sh.n {
			c.add(e, sh, j, now, true)
		}
		sh.mu.Unlock()
		after := [...]int{cap(c.tuples), cap(c.cells), cap(c.fAt), cap(c.keys)}
		if len(c.tuples) != sh.n || len(c.cells) != 2*sh.n {
			t.Fatalf("pass %d: %d tuples and %d cells captured, want %d and twice that", pass, len(c.tuples), len(c.cells), sh.n)
		}
		grew := before != after
		if pass == 0 { // room for one cell and 48 bytes a tuple
			grew = before[0] != after[0] || before[1] == after[1] || before[2] == after[2] || before[3] == after[3]
		}
		if grew {
			t.Fatalf("pass %d: capacities (tuples, cells, foreign spans, key bytes) %v before the lock, %v after", pass, before, after)
		}
	}
}
