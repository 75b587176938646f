package engine_test

import (
	"bytes"
	"runtime"
	"slices"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// heldKeys returns the keys (without their header) of the records o holds, in change
// order, tombstones included.
func heldKeys(o *engine.Overrides) []string {
	var out []string
	for r := range o.Records {
		t, err := engine.ParseKey(r.Key)
		if err != nil {
			panic(err)
		}
		out = append(out, string(t.Key))
	}
	return out
}

// TestOverrideTombstoneEvictionOrder: the tombstone dropped past the bound is the oldest
// deletion; a key deleted, revived and deleted again counts as its latest deletion.
func TestOverrideTombstoneEvictionOrder(t *testing.T) {
	o := engine.NewOverrides(engine.NewManualClock(1000), "a", 2)
	for _, k := range []string{"k", "y", "k", "z"} {
		if err := o.Set(ovTuple("default", k, 1000), false, 5); err != nil {
			t.Fatal(err)
		}
		o.Delete(ovTuple("default", k, 1000), false)
	}
	if got, want := heldKeys(o), []string{"k", "z"}; !slices.Equal(got, want) {
		t.Errorf("tombstones kept %v, want the two newest deletions %v (y's is the oldest)", got, want)
	}
}

// TestOverrideTombstoneCycleMemory: SET/DEL cycles on one key keep one tombstone, and a
// cycle costs as much memory after thousands of cycles as at the first (no list of every
// deletion ever made, nor a copy of it per DEL).
func TestOverrideTombstoneCycleMemory(t *testing.T) {
	o := engine.NewOverrides(engine.NewManualClock(1000), "a", 10)
	tu := ovTuple("default", "k", 1000)
	perCycle := func(n int) uint64 { // the bytes a cycle allocates, over n cycles
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			if err := o.Set(tu, false, 5); err != nil {
				t.Fatal(err)
			}
			o.Delete(tu, false)
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / uint64(n)
	}
	first := perCycle(500)
	perCycle(5000) // past where a slice of every deletion would be copied on each DEL
	if late := perCycle(2000); late > 2*first+1024 {
		t.Errorf("a SET/DEL cycle allocates %d bytes after 5500 cycles, %d at first", late, first)
	}
	if got := heldKeys(o); !slices.Equal(got, []string{"k"}) {
		t.Errorf("held %v, want k's tombstone alone", got)
	}
}

// TestOverrideEvictedTombstoneNoResurrect: once a deletion's tombstone is dropped (more
// newer ones than the bound), an older live copy of the override from a peer is refused
// by the table that deleted it, while a newer write of the key is taken.
func TestOverrideEvictedTombstoneNoResurrect(t *testing.T) {
	clock := engine.NewManualClock(1000)
	a := engine.NewOverrides(clock, "a", 2)
	b := engine.NewOverrides(clock, "b", 2)
	abuser := ovTuple("default", "abuser", 1000)
	if err := a.Set(abuser, false, 1); err != nil {
		t.Fatal(err)
	}
	recs, _ := a.Since(0, 0)
	b.Merge(recs) // b has the live override; then b is cut off
	clock.Advance(1)
	a.Delete(abuser, false)
	for _, k := range []string{"x1", "x2", "x3"} {
		clock.Advance(1)
		if err := a.Set(ovTuple("default", k, 1000), false, 5); err != nil {
			t.Fatal(err)
		}
		a.Delete(ovTuple("default", k, 1000), false)
	}
	if got := heldKeys(a); slices.Contains(got, "abuser") {
		t.Fatalf("a still holds abuser's tombstone (%v): the test needs it dropped", got)
	}
	// b reconnects: anti-entropy both ways.
	rb, _ := b.Since(0, 0)
	a.Merge(rb)
	if l, ok := a.Get(abuser, false); ok {
		t.Errorf("a: the deleted override came back (limit %d)", l)
	}
	// A write newer than the horizon is a new override.
	clock.Advance(1)
	if err := b.Set(abuser, false, 7); err != nil {
		t.Fatal(err)
	}
	rb, _ = b.Since(0, 0)
	a.Merge(rb)
	if l, _ := a.Get(abuser, false); l != 7 {
		t.Errorf("a: a write after the deletion was refused (limit %d, want 7)", l)
	}
}

// TestOverrideHorizonRestore: a table's horizon, restored with Forget after its records,
// refuses what the table that saved it refused, and keeps live records below it.
func TestOverrideHorizonRestore(t *testing.T) {
	clock := engine.NewManualClock(1000)
	a := engine.NewOverrides(clock, "a", 1)
	old := engine.OverrideRecord{Key: engine.AppendKey(nil, ovTuple("default", "gone", 1000)), Limit: 3, Stamp: 5 << 16, Region: "c"}
	low := engine.OverrideRecord{Key: engine.AppendKey(nil, ovTuple("default", "kept", 1000)), Limit: 4, Stamp: 6 << 16, Region: "c"}
	if n := a.Merge([]engine.OverrideRecord{old}); n != 1 {
		t.Fatalf("merge: %d", n)
	}
	for _, k := range []string{"gone", "x"} {
		clock.Advance(1)
		if k != "gone" {
			if err := a.Set(ovTuple("default", k, 1000), false, 5); err != nil {
				t.Fatal(err)
			}
		}
		a.Delete(ovTuple("default", k, 1000), false)
	}
	h := a.Horizon()
	if h.Region != "a" || h.Stamp == 0 {
		t.Fatalf("horizon %+v, want gone's deletion", h)
	}
	// A record below the horizon of a key held is kept (as a restore replays it).
	restored := engine.NewOverrides(clock, "a", 4)
	recs := []engine.OverrideRecord{low}
	for r := range a.Records {
		recs = append(recs, engine.OverrideRecord{Key: bytes.Clone(r.Key), Prefix: r.Prefix, Limit: r.Limit, Stamp: r.Stamp, Region: r.Region})
	}
	restored.Merge(recs)
	restored.Forget(h)
	if got := restored.Horizon(); got != h {
		t.Errorf("restored horizon %+v, want %+v", got, h)
	}
	if l, _ := restored.Get(ovTuple("default", "kept", 1000), false); l != 4 {
		t.Errorf("kept: limit %d, want 4", l)
	}
	if n := restored.Merge([]engine.OverrideRecord{old}); n != 0 {
		t.Errorf("the restored table took a record below its horizon: %d", n)
	}
	if err := restored.Set(ovTuple("default", "new", 1000), false, 9); err != nil {
		t.Fatal(err)
	}
	if recs, _ := restored.Since(0, 0); recs[len(recs)-1].Stamp <= h.Stamp {
		t.Errorf("a write after the restore has stamp %d, not above the horizon's %d", recs[len(recs)-1].Stamp, h.Stamp)
	}
}

// TestOverrideMergeRefusesMalformed: Merge refuses a limit over MaxLimit, a key over
// MaxOverrideKeyLen or a region over MaxOverrideRegionLen (a snapshot could not save
// them) and a stamp over MaxOverrideStamp (the table's next stamp would wrap).
func TestOverrideMergeRefusesMalformed(t *testing.T) {
	long := ovTuple("default", string(bytes.Repeat([]byte("k"), engine.MaxOverrideKeyLen)), 1000)
	for _, tc := range []struct {
		name string
		rec  engine.OverrideRecord
	}{
		{"limit over MaxLimit", engine.OverrideRecord{Key: engine.AppendKey(nil, ovTuple("default", "k", 1000)), Limit: engine.MaxLimit + 1, Stamp: 1, Region: "b"}},
		{"key too long", engine.OverrideRecord{Key: engine.AppendKey(nil, long), Limit: 5, Stamp: 1, Region: "b"}},
		{"region name too long", engine.OverrideRecord{Key: engine.AppendKey(nil, ovTuple("default", "k", 1000)), Limit: 5, Stamp: 1, Region: string(bytes.Repeat([]byte("r"), engine.MaxOverrideRegionLen+1))}},
		{"stamp over MaxOverrideStamp", engine.OverrideRecord{Key: engine.AppendKey(nil, ovTuple("default", "k", 1000)), Limit: 5, Stamp: engine.MaxOverrideStamp + 1, Region: "b"}},
	} {
		o := engine.NewOverrides(engine.NewManualClock(1000), "a", 0)
		if n := o.Merge([]engine.OverrideRecord{tc.rec}); n != 0 {
			t.Errorf("%s: taken (%d)", tc.name, n)
		}
		if o.Len() != 0 {
			t.Errorf("%s: %d overrides held", tc.name, o.Len())
		}
	}
}
