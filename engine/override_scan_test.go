package engine_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// scanTable returns a table of n exact overrides k0000.., each of limit 5.
func scanTable(t *testing.T, n int) *engine.Overrides {
	t.Helper()
	o := engine.NewOverrides(engine.NewManualClock(1000), "a", 0)
	for i := range n {
		if err := o.Set(ovTuple("default", fmt.Sprintf("k%04d", i), 1000), false, 5); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// writeDuringScan runs, from another goroutine, a change of o and a lookup while a scan
// of o is under way (called from its callback), and fails the test when they do not get
// through: the scan must not hold the table's lock while its caller works.
func writeDuringScan(t *testing.T, o *engine.Overrides) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := o.Set(ovTuple("default", "k0000", 1000), false, 99); err != nil { // seen already: moves to the end
			t.Error(err)
		}
		o.Delete(ovTuple("default", "k2999", 1000), false) // not seen yet
		if err := o.Set(ovTuple("default", "new", 1000), false, 7); err != nil {
			t.Error(err)
		}
		o.Lookup(ovTuple("default", "k0001", 1000)) // a decision
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a SET and a lookup waited for a scan of the table to end: it holds the lock throughout")
	}
}

// TestOverrideListDoesNotBlockWriters: LIST does not hold the table's lock over its whole
// scan (its MATCH runs without it), and lists each override as it is at the end: one
// changed meanwhile once with its new limit, one deleted meanwhile not at all.
func TestOverrideListDoesNotBlockWriters(t *testing.T) {
	o := scanTable(t, 3000)
	first := true
	list := o.List("default", "", func([]byte) bool {
		if first {
			first = false
			writeDuringScan(t, o)
		}
		return true
	}, 0)
	got := map[string]uint64{}
	for _, ov := range list {
		k := string(ov.Tuple.Key)
		if _, dup := got[k]; dup {
			t.Errorf("%s listed twice", k)
		}
		got[k] = ov.Limit
	}
	if len(list) != 3000 || got["k0000"] != 99 || got["new"] != 7 {
		t.Errorf("listed %d overrides, k0000 %d, new %d; want 3000, 99, 7", len(list), got["k0000"], got["new"])
	}
	if _, ok := got["k2999"]; ok {
		t.Error("k2999, deleted during the LIST, is listed")
	}
}

// TestOverrideRecordsDoNotBlockWriters: a snapshot's read of the records (Records) does
// not hold the table's lock while the snapshot encodes them, and a table restored from
// what it read (Merge) equals the table at its end.
func TestOverrideRecordsDoNotBlockWriters(t *testing.T) {
	o := scanTable(t, 3000)
	var recs []engine.OverrideRecord
	for r := range o.Records {
		if len(recs) == 0 {
			writeDuringScan(t, o)
		}
		r.Key = bytes.Clone(r.Key)
		recs = append(recs, r)
	}
	restored := engine.NewOverrides(engine.NewManualClock(1000), "a", 0)
	restored.Merge(recs)
	for _, k := range []string{"k0000", "k0001", "k2999", "new"} {
		tu := ovTuple("default", k, 1000)
		l1, ok1 := o.Get(tu, false)
		l2, ok2 := restored.Get(tu, false)
		if l1 != l2 || ok1 != ok2 {
			t.Errorf("%s: restored %d %v, table %d %v", k, l2, ok2, l1, ok1)
		}
	}
	if restored.Len() != o.Len() {
		t.Errorf("restored %d overrides, the table has %d", restored.Len(), o.Len())
	}
}
