package engine_test

import (
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// TestChangeFeed: changes are listed after the version asked for, oldest first, a page at
// a time; an asker behind what the log still holds, or ahead of the origin, must resync;
// every reply's meta carries the version.
func TestChangeFeed(t *testing.T) {
	e, _ := newEngine(t0)
	base := e.ChangeVersion()
	if base == 0 {
		t.Fatalf("change version 0: a restarted origin would reuse its versions")
	}
	if _, meta := e.ServeRead("edge/1", nil); meta.Changes != base {
		t.Fatalf("meta carries change version %d, want %d", meta.Changes, base)
	}
	k := []byte("k")
	v1 := e.AddChange(engine.ChangeReset, k, nil)
	v2 := e.AddChange(engine.ChangeReset, []byte("j"), []int64{7})
	if v1 != base+1 || v2 != base+2 {
		t.Fatalf("versions %d %d after %d", v1, v2, base)
	}
	if _, meta := e.ServeRead("edge/1", nil); meta.Changes != v2 {
		t.Fatalf("meta carries change version %d, want %d", meta.Changes, v2)
	}
	r := e.ChangesSince("edge/1", v1)
	if r.Resync || r.Version != v2 || len(r.Changes) != 1 || string(r.Changes[0].Key) != "j" || r.Changes[0].Fields[0] != 7 {
		t.Fatalf("changes since %d: %+v", v1, r)
	}
	if r := e.ChangesSince("edge/1", v2); r.Resync || r.Version != v2 || len(r.Changes) != 0 {
		t.Fatalf("changes since the last: %+v", r)
	}
	if r := e.ChangesSince("edge/1", v2+1); !r.Resync || r.Version != v2 {
		t.Fatalf("changes since a version ahead of the origin: %+v, want a resync", r)
	}
	// Pages of MaxChangesPerReply, then the ring forgets the oldest.
	for range 4096 {
		e.AddChange(engine.ChangeReset, k, nil)
	}
	last := e.ChangeVersion()
	r = e.ChangesSince("edge/1", last-300)
	if r.Resync || len(r.Changes) != engine.MaxChangesPerReply || r.Version != last-300+engine.MaxChangesPerReply {
		t.Fatalf("a page: %d changes up to %d, resync %v", len(r.Changes), r.Version, r.Resync)
	}
	for i, c := range r.Changes {
		if c.Version != last-300+uint64(i)+1 {
			t.Fatalf("change %d has version %d", i, c.Version)
		}
	}
	if r := e.ChangesSince("edge/1", base); !r.Resync || r.Version != last {
		t.Fatalf("changes since a version the log no longer holds: resync %v, version %d", r.Resync, r.Version)
	}
	if r := e.ChangesSince("edge/1", last-4096); r.Resync || len(r.Changes) != engine.MaxChangesPerReply {
		t.Fatalf("changes since the oldest held: resync %v, %d changes", r.Resync, len(r.Changes))
	}
}
