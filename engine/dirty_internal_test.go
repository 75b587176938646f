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
