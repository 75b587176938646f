package engine_test

import (
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// leaseRig is an origin Engine and a tuple to lease, at a fixed instant in a fresh cell.
type leaseRig struct {
	t     *testing.T
	o     *engine.Engine
	clock *engine.ManualClock
	tp    engine.Tuple
	key   []byte
	seq   int64
}

func newLeaseRig(t *testing.T) *leaseRig {
	const w = 60_000
	clock := engine.NewManualClock(t0 / w * w) // the start of a cell: nothing of the previous one weighs
	o := engine.New(clock, engine.Config{LeaseTTL: time.Second})
	tp := tup("leased", w)
	return &leaseRig{t: t, o: o, clock: clock, tp: tp, key: engine.AppendKey(nil, tp), seq: clock.NowMs() / w}
}

// read asks for a lease of want within limit for run and returns the cell's answer.
func (r *leaseRig) read(run string, limit, want uint64) engine.CellCounts {
	r.t.Helper()
	cc, meta := r.o.ServeRead(run, []engine.ReadItem{{Key: r.key, Seq: r.seq, Limit: limit, Want: want}})
	if meta.LeaseTTLMs != 1000 || meta.Boot == 0 {
		r.t.Fatalf("meta %+v: want the lease TTL and the origin's boot", meta)
	}
	return cc[0]
}

func (r *leaseRig) replay(run string, id uint64, it engine.ReplayItem) engine.CellCounts {
	r.t.Helper()
	it.Key, it.Seq = r.key, r.seq
	cc, _ := r.o.ServeReplay(engine.ReplayBatch{Node: run, ID: id, Items: []engine.ReplayItem{it}})
	return cc[0]
}

func (r *leaseRig) decide(run string, req engine.DecideRequest) engine.Decision {
	r.t.Helper()
	req.Key = r.key
	d, _, _, err := r.o.ServeDecide(run, req)
	if err != nil {
		r.t.Fatalf("ServeDecide: %v", err)
	}
	return d
}

// fitsExactly checks that req's cost is the largest hand-off that fits: one unit more is
// refused (counting nothing), then req is admitted. beside names what it is beside.
func (r *leaseRig) fitsExactly(run string, req engine.DecideRequest, beside string) {
	r.t.Helper()
	over := req
	over.Cost++
	if d := r.decide(run, over); d.Allowed {
		r.t.Fatalf("a hand-off of %d beside %s was allowed: %+v", over.Cost, beside, d)
	}
	if d := r.decide(run, req); !d.Allowed {
		r.t.Fatalf("a hand-off of %d beside %s was refused: %+v", req.Cost, beside, d)
	}
}

// TestLeaseGrantsWithinRoom: each run is granted at most 1/(2 x edges) of the room its
// grant leaves beside the others' leases, never more than it asked for, so that used and
// every lease together stay within the limit; grants only grow, and a hand-off counts the
// other runs' leases as used.
func TestLeaseGrantsWithinRoom(t *testing.T) {
	r := newLeaseRig(t)
	runs := []string{"e1/a", "e2/a", "e3/a"}
	for _, run := range runs { // three active edges
		r.o.Heard(run)
	}
	for i, tc := range []struct {
		run         string
		want, grant uint64
	}{
		{"e1/a", 1000, 16},   // 100 / 6
		{"e2/a", 1000, 14},   // (100-16) / 6
		{"e3/a", 5, 5},       // asked for less than the room allows
		{"e1/a", 1000, 16},   // its own lease is not counted against it: (100-19)/6 = 13 < 16: kept
		{"e3/a", 1000, 11},   // (100-30)/6
		{"e2/a", 10_000, 14}, // (100-27)/6 = 12 < 14: kept
	} {
		cc := r.read(tc.run, 100, tc.want)
		if cc.LeaseLeft != tc.grant || cc.LeaseSeq == 0 {
			t.Fatalf("step %d: %s asked %d: lease %d (seq %d), want %d", i, tc.run, tc.want, cc.LeaseLeft, cc.LeaseSeq, tc.grant)
		}
	}
	// The others hold 14 + 11 = 25: a hand-off of e1's may take 100 - 25 - 16 (its own
	// lease, unspent and not given back) = 59.
	r.fitsExactly("e1/a", engine.DecideRequest{Limit: 100, Cost: 59}, "leases of 16+14+11")
	// Little is left (100 - 59 - 16 - 11 = 14, of which 2 for one of three edges): e2's
	// lease is not shrunk to that.
	if cc := r.read("e2/a", 100, 16); cc.LeaseLeft != 14 {
		t.Fatalf("e2 asked again with little room: lease %d, want its 14 kept", cc.LeaseLeft)
	}
}

// TestLeaseReturnAndSpent: a replay reports what the run spent, which stops holding
// budget; a return gives back the rest, but only when no newer grant was made since.
func TestLeaseReturnAndSpent(t *testing.T) {
	r := newLeaseRig(t)
	first := r.read("e1/a", 1000, 100)
	if first.LeaseLeft != 100 {
		t.Fatalf("lease %d, want 100", first.LeaseLeft)
	}
	// 40 spent and replayed, 30 more wanted: 40 + 30 is less than the lease, which never
	// shrinks: 60 is left.
	cc := r.replay("e1/a", 1, engine.ReplayItem{Cost: 40, Limit: 1000, Want: 30})
	if cc.CurRegional != 40 || cc.LeaseLeft != 60 {
		t.Fatalf("after a replay of 40: %+v, want regional 40 and 60 left of the lease", cc)
	}
	// A return of an older sequence is ignored: the edge may spend the newer grant.
	cc = r.replay("e1/a", 2, engine.ReplayItem{Limit: 1000, Return: first.LeaseSeq})
	if cc.LeaseLeft != 60 {
		t.Fatalf("a stale return shrank the lease: %+v", cc)
	}
	cc = r.replay("e1/a", 3, engine.ReplayItem{Limit: 1000, Return: cc.LeaseSeq})
	if cc.LeaseLeft != 0 {
		t.Fatalf("after the return: %d left, want 0", cc.LeaseLeft)
	}
	// All of the room but 40 is free again for another run, one of two: (1000-40)/4.
	if cc := r.read("e2/a", 1000, 10_000); cc.LeaseLeft != 240 {
		t.Fatalf("another run after the return: lease %d, want 240", cc.LeaseLeft)
	}
}

// TestLeaseSpentWithoutLeaseOps: replay items that neither ask for a lease nor give one
// back still move their run's cost out of its reservation (the origin keeps it in the
// tuple's slot until a grant is next read), also when two runs' replays interleave on one
// tuple, and cost a run replayed before it had a grant does not count against it.
func TestLeaseSpentWithoutLeaseOps(t *testing.T) {
	r := newLeaseRig(t)
	r.o.Heard("e1/a")
	r.o.Heard("e2/a")
	r.replay("e2/a", 1, engine.ReplayItem{Cost: 7, Limit: 1000}) // before e2 has a grant
	if cc := r.read("e1/a", 1000, 100); cc.LeaseLeft != 100 {
		t.Fatalf("e1 lease %d, want 100", cc.LeaseLeft)
	}
	if cc := r.read("e2/a", 1000, 50); cc.LeaseLeft != 50 {
		t.Fatalf("e2 lease %d, want 50", cc.LeaseLeft)
	}
	// Plain items, interleaved: e1 spends 10+5, e2 spends 3+4.
	r.replay("e1/a", 1, engine.ReplayItem{Cost: 10, Limit: 1000})
	r.replay("e2/a", 2, engine.ReplayItem{Cost: 3, Limit: 1000})
	r.replay("e2/a", 3, engine.ReplayItem{Cost: 4, Limit: 1000})
	r.replay("e1/a", 2, engine.ReplayItem{Cost: 5, Limit: 1000})
	if got := r.o.Status(r.tp).CurrentRegional; got != 29 {
		t.Fatalf("regional %d, want 29", got)
	}
	// A request for a lease (one unit: grants never shrink) shows what each still holds.
	if cc := r.replay("e1/a", 3, engine.ReplayItem{Limit: 1000, Want: 1}); cc.LeaseLeft != 85 {
		t.Fatalf("e1 holds %d after spending 15 of 100, want 85", cc.LeaseLeft)
	}
	if cc := r.replay("e2/a", 4, engine.ReplayItem{Limit: 1000, Want: 1}); cc.LeaseLeft != 43 {
		t.Fatalf("e2 holds %d after spending 7 of 50, want 43", cc.LeaseLeft)
	}
	// A hand-off sees the same reservations: used 29, e2 holds 43, e1's own 85 (its
	// pending is 0): 1000-29-43-85 = 843 fit, 844 do not.
	r.fitsExactly("e1/a", engine.DecideRequest{Limit: 1000, Cost: 843}, "29 used and 128 reserved")
}

// TestLeaseSpentLargeCost: a replayed cost too large for the slot's owed count (32 bits)
// reaches the grant at once, and owed cost before and after it is not lost.
func TestLeaseSpentLargeCost(t *testing.T) {
	r := newLeaseRig(t)
	const limit, lease = 1 << 40, 1 << 34
	if cc := r.read("e1/a", limit, lease); cc.LeaseLeft != lease {
		t.Fatalf("lease %d, want %d", cc.LeaseLeft, uint64(lease))
	}
	r.replay("e1/a", 1, engine.ReplayItem{Cost: 2, Limit: limit})
	r.replay("e1/a", 2, engine.ReplayItem{Cost: 1<<33 + 5, Limit: limit})
	r.replay("e1/a", 3, engine.ReplayItem{Cost: 1<<32 - 1, Limit: limit})
	r.replay("e1/a", 4, engine.ReplayItem{Cost: 3, Limit: limit})
	spent := uint64(2 + 1<<33 + 5 + 1<<32 - 1 + 3)
	if cc := r.replay("e1/a", 5, engine.ReplayItem{Limit: limit, Want: 1}); cc.LeaseLeft != lease-spent {
		t.Fatalf("holds %d after spending %d of %d, want %d", cc.LeaseLeft, spent, uint64(lease), lease-spent)
	}
}

// TestLeaseLapsesAndSupersedes: a lease stops holding budget after its TTL and the grace,
// or once a later run of the same node was heard (the edge restarted).
func TestLeaseLapsesAndSupersedes(t *testing.T) {
	r := newLeaseRig(t)
	if cc := r.read("e1/a", 10, 1000); cc.LeaseLeft != 5 {
		t.Fatalf("lease %d, want 5 (half of 10)", cc.LeaseLeft)
	}
	if d := r.decide("e2/a", engine.DecideRequest{Limit: 10, Cost: 6}); d.Allowed {
		t.Fatal("a hand-off took budget leased to another run")
	}
	r.clock.Advance(1000 + 1000) // the TTL and the grace
	if d := r.decide("e2/a", engine.DecideRequest{Limit: 10, Cost: 6}); !d.Allowed {
		t.Fatalf("the lapsed lease still holds budget: %+v", d)
	}

	// A run that is still heard and has not replayed since its lease ended may have
	// accepted under it what it has not replayed: the lease holds until a replay comes.
	r3 := newLeaseRig(t)
	if cc := r3.read("e1/a", 10, 1000); cc.LeaseLeft != 5 {
		t.Fatalf("lease %d, want 5", cc.LeaseLeft)
	}
	r3.clock.Advance(1000 + 1000)
	r3.o.Heard("e1/a")
	if d := r3.decide("e2/a", engine.DecideRequest{Limit: 10, Cost: 6}); d.Allowed {
		t.Fatal("the ended lease of a run heard since, with no replay since, no longer holds budget")
	}
	r3.clock.Advance(1)
	r3.replay("e1/a", 1, engine.ReplayItem{Cost: 1, Limit: 10})
	if d := r3.decide("e2/a", engine.DecideRequest{Limit: 10, Cost: 6}); !d.Allowed {
		t.Fatalf("the ended lease still holds budget after the run replayed: %+v", d)
	}

	r2 := newLeaseRig(t)
	if cc := r2.read("e1/a", 10, 1000); cc.LeaseLeft != 5 {
		t.Fatalf("lease %d, want 5", cc.LeaseLeft)
	}
	r2.o.Heard("e1/b") // e1 restarted
	// For a second (the grace) the ended run's lease still holds: what it sent before it
	// ended may arrive late.
	if d := r2.decide("e2/a", engine.DecideRequest{Limit: 10, Cost: 10}); d.Allowed {
		t.Fatalf("the lease of a run that ended a moment ago no longer holds budget: %+v", d)
	}
	r2.clock.Advance(1000)
	if d := r2.decide("e2/a", engine.DecideRequest{Limit: 10, Cost: 10}); !d.Allowed {
		t.Fatalf("the lease of a run that ended still holds budget: %+v", d)
	}
}

// TestLeaseHandOffGivesBack: a hand-off that gives the rest of the run's lease back is not
// refused by that lease; its unreplayed spent still counts.
func TestLeaseHandOffGivesBack(t *testing.T) {
	r := newLeaseRig(t)
	cc := r.read("e1/a", 10, 1000)
	if cc.LeaseLeft != 5 {
		t.Fatalf("lease %d, want 5", cc.LeaseLeft)
	}
	// 2 spent (not replayed), 3 unspent given back: 2 + 8 = 10 fits; 9 would not.
	r.fitsExactly("e1/a", engine.DecideRequest{Limit: 10, Cost: 8, Pending: 2, Return: cc.LeaseSeq}, "2 unreplayed, the lease given back")
}

// TestLeaseCrossesWindow: a lease is the tuple's: what is left of it when a window ends
// still holds budget in the next window, where the run may spend it, so that the two
// cells' sliding-window count with every lease stays within the limit.
func TestLeaseCrossesWindow(t *testing.T) {
	const w = 10_000
	clock := engine.NewManualClock(t0/w*w + w - 100) // the end of cell s; cell s-1 is empty
	o := engine.New(clock, engine.Config{LeaseTTL: time.Minute})
	key := engine.AppendKey(nil, tup("rolling", w))
	s := clock.NowMs() / w
	o.Heard("e1/a")
	o.Heard("e2/a")
	cc, _ := o.ServeRead("e1/a", []engine.ReadItem{{Key: key, Seq: s, Limit: 100, Want: 1000}})
	if cc[0].LeaseLeft != 25 {
		t.Fatalf("lease %d, want 25 (100 / (2 x 2 edges))", cc[0].LeaseLeft)
	}
	replay := func(id uint64, seq int64, cost uint64) engine.CellCounts {
		t.Helper()
		cc, _ := o.ServeReplay(engine.ReplayBatch{Node: "e1/a", ID: id,
			Items: []engine.ReplayItem{{Key: key, Seq: seq, Cost: cost, Limit: 100, Want: 1}}}) // 1: a lease in the answer, never shrunk
		return cc[0]
	}
	if cc := replay(1, s, 20); cc.LeaseLeft != 5 {
		t.Fatalf("after spending 20 in cell s: %d left, want 5", cc.LeaseLeft)
	}
	decide := func(cost uint64) bool {
		t.Helper()
		d, _, _, err := o.ServeDecide("e2/a", engine.DecideRequest{Key: key, Limit: 100, Cost: cost})
		if err != nil {
			t.Fatalf("ServeDecide: %v", err)
		}
		return d.Allowed
	}
	clock.Set((s + 1) * w) // cell s weighs fully at the start of s+1; e1's 5 still hold
	if decide(76) {
		t.Fatal("a hand-off of 76 in cell s+1 beside 20 in cell s and a lease of 5 was allowed")
	}
	if !decide(75) {
		t.Fatal("a hand-off of 75 in cell s+1 beside 20 in cell s and a lease of 5 was refused")
	}
	// e1 spends its 5 in cell s+1: exactly the limit, and nothing is held any more.
	if cc := replay(2, s+1, 5); cc.LeaseLeft != 0 || cc.CurRegional != 80 || cc.PrevRegional != 20 {
		t.Fatalf("after spending the rest of the lease in cell s+1: %+v; want 0 left, 80 and 20 counted", cc)
	}
	if decide(1) {
		t.Fatal("a hand-off past the limit was allowed")
	}
}

// TestLeaseMemory: a lease on a tuple with no counts keeps an entry (within --max-memory)
// while it lives, past the sweep of its cells, and the sweep frees it all once the lease
// is dead; with the store full, no lease is granted.
func TestLeaseMemory(t *testing.T) {
	const w = 1000
	clock := engine.NewManualClock(t0 / w * w)
	o := engine.New(clock, engine.Config{LeaseTTL: 10 * time.Second})
	key := engine.AppendKey(nil, tup("mem", w))
	empty := o.Stats().MemoryBytes
	cc, _ := o.ServeRead("e1/a", []engine.ReadItem{{Key: key, Seq: clock.NowMs() / w, Limit: 100, Want: 10}})
	if cc[0].LeaseLeft != 10 {
		t.Fatalf("lease %d, want 10", cc[0].LeaseLeft)
	}
	if st := o.Stats(); st.Tuples != 1 || st.MemoryBytes <= empty {
		t.Fatalf("a leased tuple with no counts: %+v; want one tuple, its bytes counted", st)
	}
	clock.Advance(5 * w) // the cells' time is over, the lease's is not
	o.Sweep()
	if d, _, _, _ := o.ServeDecide("e2/a", engine.DecideRequest{Key: key, Limit: 100, Cost: 91}); d.Allowed {
		t.Fatal("the sweep forgot a live lease: a hand-off of 91 beside a lease of 10 was allowed")
	}
	clock.Advance(20 * w)
	o.Sweep()
	if st := o.Stats(); st.Tuples != 0 || st.MemoryBytes != empty {
		t.Fatalf("after the lease died and the sweep: %+v; want no tuple, %d bytes", st, empty)
	}

	full := engine.New(clock, engine.Config{MaxMemoryBytes: 1})
	if cc, _ := full.ServeRead("e1/a", []engine.ReadItem{{Key: key, Seq: clock.NowMs() / w, Limit: 100, Want: 10}}); cc[0].LeaseLeft != 0 {
		t.Fatalf("a full store granted a lease of %d", cc[0].LeaseLeft)
	}
}

// TestDecideDeadline: a hand-off served at or after its deadline (the instant its edge gives
// up on it and refuses the request) is neither decided nor counted; one served before it is.
func TestDecideDeadline(t *testing.T) {
	r := newLeaseRig(t)
	now := r.clock.NowMs()
	if d := r.decide("e1/a", engine.DecideRequest{Limit: 10, Cost: 1, Deadline: now}); d.Allowed {
		t.Fatalf("a hand-off served at its deadline was allowed: %+v", d)
	}
	if n := r.o.Status(r.tp).CurrentRegional; n != 0 {
		t.Fatalf("a hand-off served at its deadline was counted: %d", n)
	}
	if d := r.decide("e1/a", engine.DecideRequest{Limit: 10, Cost: 1, Deadline: now + 1}); !d.Allowed {
		t.Fatalf("a hand-off served before its deadline was refused: %+v", d)
	}
	if n := r.o.Status(r.tp).CurrentRegional; n != 1 {
		t.Fatalf("count %d after a hand-off served before its deadline, want 1", n)
	}
}
