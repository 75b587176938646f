package engine

// Leases: how an origin lets edges decide locally and stay exact (the origin side; the
// edge side is in edge/edge.go).
//
// A lease is a slice of one tuple's budget that the origin reserved for one edge run. The
// origin keeps, per (tuple, run), the cumulative cost it granted (g) and the cumulative
// cost of the run's replays it applied to the tuple's cells since (spent). The run's
// reservation is g - spent while the lease is alive: it covers what the edge may still
// accept, and what it accepted but has not replayed yet. The origin grants only while
//
//	used + reservations of all runs <= limit
//
// (used: the sliding-window count of SPEC section 2, in the current cell), and it decides
// a hand-off with the other runs' reservations counted as used. An edge accepts locally
// only while its own cumulative spent stays within g: so the region never admits more
// than the limit, however the edges' requests interleave.
//
// A lease outlives the cell it was granted in: what is left of it at a window's end is
// spent in the next one, so a busy key crosses window boundaries without a round trip.
// That stays within the limit because the invariant above survives a rollover: at the
// start of cell s+1, used is cell s's count at full weight, which is what it was at the
// end of cell s (the weight of cell s-1 only fell since the grants). Each unit moves from
// a reservation into one cell's count when its replay is applied, whichever cell that is,
// so the sum never grows; and the previous cell's weight only falls as the window goes on.
//
// Sizing: a run asks for what it expects to use over a few replay intervals (want); the
// origin grants at most 1/(2 x active edges) of the unreserved room, so near the limit
// leases shrink to nothing and decisions go to the origin, which decides and counts
// atomically. At the fixed point the edges together hold under half of the room, so a
// hand-off that fits the limit is admitted.
//
// Lifetime: a grant carries a lease sequence (monotonic across origin restarts: it starts
// from the boot time, and a restored snapshot's grants raise it) and lives for the origin's
// LeaseTTL. The edge stops spending it
// LeaseTTL after it sent the request that got it (its own clock); the origin forgets it
// leaseGraceMs later still, so that cost accepted under it just before the edge's expiry
// has time to arrive. Replays renew a lease (extend it, grow it with demand); an edge
// returns an idle lease when it is a large part of what is left (edge/replay.go). Grants only
// grow within a lease sequence chain: a return applies only if no newer grant was made, so
// a lease is never shrunk under an edge that may be spending it.
//
// Restarts: the snapshot holds the live grants and the runs' replay marks (marks.go),
// so an origin restarted cleanly keeps counting the grants it made as held until they end
// by the usual rules (their until is the same wall clock's). Edges drop their copy of a
// lease once they hear the origin's new Boot, which is conservative. An origin restarted
// from an older snapshot (kill -9) may not know the latest grants: it honours those it
// has, and grants anew from what replays report.

import (
	"time"
)

// DefaultLeaseTTL is how long a lease lives when Config.LeaseTTL is 0.
const DefaultLeaseTTL = time.Minute

// leaseGraceMs is how much longer than the edge the origin keeps a lease.
const leaseGraceMs = 1000

// leaseGrantBytes estimates the bytes of one grant. A tuple's grants live in its entry's
// side struct (store.go), so they count against --max-memory like the tuple's cells, and a
// lease costs no lookup of its own: the replay that spends it has found the entry already.
const leaseGrantBytes = 40

// leaseGrant is one edge run's lease on one tuple.
type leaseGrant struct {
	run   *runMarks
	g     uint64 // cumulative cost the run may accept in the tuple's cells
	spent uint64 // cumulative cost of the run's replays applied to the tuple since the grant began
	seq   uint64 // lease sequence of the last grant
	until int64  // origin ms after which the lease is dead
}

// held returns what the grant reserves at now. A lease past its end still holds what the
// run may have accepted under it and not replayed, until the run replays again or is
// gone: silent since the lease ended, or superseded by a later run of its node.
func (g *leaseGrant) held(now int64) uint64 {
	if g.g <= g.spent || g.run.gone(now) {
		return 0
	}
	if now >= g.until && (g.run.replayMs.Load() > g.until || g.run.heardMs.Load() < g.until) {
		return 0
	}
	return g.g - g.spent
}

// gone reports whether run was superseded by a later run of its node long enough ago
// (leaseGraceMs) that what it sent before it ended has arrived: its leases and cold
// allowance hold nothing. Until then they do: a replay of the killed run arriving late must
// not find its budget given to the new run.
func (m *runMarks) gone(now int64) bool {
	return m.superseded.Load() && now >= m.supersededMs.Load()+leaseGraceMs
}

// dead reports whether the grant has ended and holds nothing: its slot may be reused.
func (g *leaseGrant) dead(now int64) bool { return now >= g.until && g.held(now) == 0 }

// leaseSet holds the leases of one tuple. Its first grant is stored inline (grants
// starts as inline[:0:1]): a replay spending it then touches no memory beyond the side
// struct. A leaseSet is never copied.
type leaseSet struct {
	grants []leaseGrant
	inline [1]leaseGrant
}

// heapBytes returns the bytes of ls's grants outside the inline one: none while they fit
// in it, all of them once they moved to the heap.
func (ls *leaseSet) heapBytes() int64 {
	if cap(ls.grants) == 0 || &ls.grants[:1][0] == &ls.inline[0] {
		return 0
	}
	return int64(cap(ls.grants)) * leaseGrantBytes
}

// maxGrantsPerTuple bounds one tuple's leases (one per edge run).
const maxGrantsPerTuple = 64

// LeaseRequest is what an edge asks of a tuple's lease alongside a read or a replay item:
// Want more units within Limit (0: none).
type LeaseRequest struct {
	Limit uint64
	Want  uint64
	// Return, when non-zero, gives back the lease of that sequence: the edge will accept
	// no more under it. It is ignored when a newer grant was made since.
	Return uint64
}

// leases returns the lease set of key (sh.mu held, h its hash from locate; ent is key's
// entry, or nil), or nil when it has none. With create it makes one, inserting an entry
// for key when there is none and --max-memory allows. The set lives in the entry's side
// struct, which stays put when the shard's slots move, so the result survives an insert.
func (e *Engine) leases(sh *shard, h uint32, key []byte, ent *entry, create bool) *leaseSet {
	if ent != nil && ent.side != 0 {
		return &sh.side(ent).leases
	}
	if !create {
		return nil
	}
	if ent == nil {
		var err error
		if ent, err = e.store.insert(sh, h, key, false); err != nil {
			return nil // full: no lease, the edge hands its requests over
		}
	}
	return &e.store.sideOf(sh, ent).leases
}

// reserved returns what the leases of ls hold at now: the other runs' and run's own.
func (ls *leaseSet) reserved(run *runMarks, now int64) (others, own uint64) {
	if ls == nil {
		return 0, 0
	}
	for i := range ls.grants {
		if ls.grants[i].run == run {
			own = ls.grants[i].held(now)
		} else {
			others = satAdd(others, ls.grants[i].held(now))
		}
	}
	return others, own
}

// grantOf returns run's grant in ls, creating it when create is set (and there is room),
// or nil. Dead grants are reused first.
func (ls *leaseSet) grantOf(run *runMarks, now int64, create bool) *leaseGrant {
	if ls == nil {
		return nil
	}
	free := -1
	for i := range ls.grants {
		if ls.grants[i].run == run {
			return &ls.grants[i]
		}
		if free < 0 && ls.grants[i].dead(now) {
			free = i
		}
	}
	if !create {
		return nil
	}
	if free < 0 {
		if len(ls.grants) >= maxGrantsPerTuple {
			return nil
		}
		if ls.grants == nil {
			ls.grants = ls.inline[:0:1]
		}
		ls.grants = append(ls.grants, leaseGrant{})
		if len(ls.grants) == 2 {
			clear(ls.inline[:]) // moved to the heap: keep no run alive from the old copy
		}
		free = len(ls.grants) - 1
	}
	ls.grants[free] = leaseGrant{run: run}
	return &ls.grants[free]
}

// lease applies r to run's lease of key (sh.mu held, h its hash; ent, key's entry, may be
// nil) and returns the lease as the edge should see it: what it holds beyond the run's
// applied replays, and its sequence (0, 0 when it has none). edges is the number of
// active edges.
func (e *Engine) lease(sh *shard, h uint32, key []byte, ent *entry, run *runMarks, r LeaseRequest, windowMs, now int64, edges int) (left, seq uint64) {
	cellSeq, elapsed := position(now, windowMs)
	if ent != nil {
		sh.settle(ent) // before any grant is read, made or reset
	}
	want := r.Want > 0 && r.Limit > 0 && run != nil
	ls := e.leases(sh, h, key, ent, want)
	gr := e.store.grantOf(ls, run, now, want)
	if gr == nil {
		return 0, 0
	}
	if r.Return != 0 && r.Return == gr.seq {
		// The edge accepts no more under this lease: what it spent is all it holds.
		gr.g, gr.seq = gr.spent, e.nextLeaseSeq()
		e.markDirty() // leases are saved too
		e.store.markTuple(sh, h, key)
	}
	if want {
		var cur, prev cell
		if ent != nil {
			cur, prev = sh.counts(ent, cellSeq)
		}
		// The room is what a peek would find remaining with the other runs' leases counted
		// as used: the units that fit beside all of them.
		others, _ := ls.reserved(run, now)
		others = satAdd(others, e.coldReserve(r.Limit))
		room := Decide(Counts{Current: satAdd(cur.total(), others), Previous: prev.total()}, r.Limit, 0, windowMs, elapsed).Remaining
		if target := min(r.Want, room/uint64(2*max(edges, 1))); target > 0 {
			// Grow (never shrink: the edge may be spending it) and extend. A lease that
			// holds nothing starts again from what the run's replays brought.
			if gr.held(now) == 0 {
				gr.g = gr.spent
			}
			gr.g = max(gr.g, satAdd(gr.spent, target))
			gr.seq = e.nextLeaseSeq()
			gr.until = now + e.leaseTTLMs + leaseGraceMs
			e.markDirty()
			e.store.markTuple(sh, h, key)
		}
	}
	return gr.held(now), gr.seq
}

// grantOf is ls.grantOf that counts the bytes a new grant may take in the store.
func (s *store) grantOf(ls *leaseSet, run *runMarks, now int64, create bool) *leaseGrant {
	if ls == nil || !create {
		return ls.grantOf(run, now, false)
	}
	before := ls.heapBytes()
	gr := ls.grantOf(run, now, true)
	s.bytes.Add(ls.heapBytes() - before)
	return gr
}

// settle moves the cost ent owes its owedRun's grant into that grant (ent in sh, locked):
// the grant's spent then counts every replay of the run applied to the tuple. Cost owed to
// a run without a grant is dropped: it was applied before the grant began. Owed cost only
// makes a grant look fuller than it is (more reserved, less room for the others) until it
// is settled, and every reader of the grants settles first.
func (sh *shard) settle(ent *entry) {
	if sd := sh.side(ent); ent.owed > 0 && sd != nil {
		for i := range sd.leases.grants {
			if gr := &sd.leases.grants[i]; gr.run.id == ent.owedRun {
				gr.spent = satAdd(gr.spent, uint64(ent.owed))
				break
			}
		}
	}
	ent.owed, ent.owedRun = 0, 0
}

// nextLeaseSeq returns a new lease sequence number.
func (e *Engine) nextLeaseSeq() uint64 { return e.leaseSeq.Add(1) }

// pruneLeases drops ent's dead grants (ent in sh, locked), and frees its side struct when
// that leaves it empty; the store's sweep calls it on every tuple before deciding whether
// the tuple still holds anything.
func (s *store) pruneLeases(sh *shard, ent *entry, now int64) {
	sh.settle(ent)
	sd := sh.side(ent)
	if sd == nil || len(sd.leases.grants) == 0 {
		return
	}
	ls := &sd.leases
	kept := ls.grants[:0]
	for _, g := range ls.grants {
		if !g.dead(now) {
			kept = append(kept, g)
		}
	}
	clear(ls.grants[len(kept):]) // no run pointers kept alive
	ls.grants = kept
	if len(kept) == 0 {
		s.bytes.Add(-ls.heapBytes())
		ls.grants = nil
		s.freeSideIfEmpty(sh, ent)
	}
}
