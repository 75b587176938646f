package engine

import (
	"cmp"
	"fmt"
	"slices"
)

// What an origin saves beside its cells so that a clean restart keeps its promises to
// edges: each edge run's replay marks (the last batch applied, so a batch whose answer was
// lost is not applied again when it is re-sent) and every live lease grant (so the
// restarted origin keeps counting what a cut-off edge may still spend). Runs and Leases
// capture them; RestoreRuns and RestoreLeases load them into a new Engine before it
// serves edges, runs first.

// RunRecord is one edge run's replay marks as saved and loaded.
type RunRecord struct {
	Run        string // the edge run: node id and boot nonce
	Applied    uint64 // the last replay batch applied for the run
	HeardMs    int64  // when the run was last heard (origin ms)
	ReplayMs   int64  // when a replay batch of the run was last served (origin ms; 0: never)
	Superseded bool   // a later run of the same node was heard: this one's leases hold nothing
	Hands      uint64 // the last hand-off of the run counted (OriginMeta.Hand)
}

// LeaseRecord is one lease grant (lease.go) as saved and loaded: edge run Run's lease on
// the tuple Key (made by AppendKey).
type LeaseRecord struct {
	Key     string
	Run     string
	G       uint64 // cumulative cost the run may accept
	Spent   uint64 // cumulative cost of the run's replays applied since the grant began
	Seq     uint64 // the lease sequence of the last grant
	UntilMs int64  // origin ms after which the lease is dead
}

// MaxRunLen is the longest edge run name RestoreRuns and RestoreLeases take: far beyond
// "node-id/nonce".
const MaxRunLen = 1024

// Runs yields the replay marks of every edge run the origin remembers (at most 4096).
// Each run's applied mark is read under its apply lock, so it never names a batch whose
// items are still being applied. A snapshot captures the runs before the cells (persist):
// its cells may then hold a batch its marks do not claim (re-sent after a restart, it is
// applied again: counted twice), never lack one they claim (it would be lost). Each mark
// read is remembered as the run's capture: RunsSaved, once the save is on disk, makes it
// the run's durable mark, which replay answers report to the edge.
func (e *Engine) Runs(yield func(RunRecord) bool) { e.runs(true, yield) }

// RunMarks is Runs without remembering the marks as captured: for a save whose records
// are not what RunsSaved is told of (a compaction of persist's log, made beside the
// saves that tell it).
func (e *Engine) RunMarks(yield func(RunRecord) bool) { e.runs(false, yield) }

// runs is Runs, remembering the marks read as captured when capture is set.
func (e *Engine) runs(capture bool, yield func(RunRecord) bool) {
	e.nodes.mu.Lock()
	out := make([]RunRecord, 0, len(e.nodes.runs))
	marks := make([]*runMarks, 0, len(e.nodes.runs))
	for name, m := range e.nodes.runs {
		out = append(out, RunRecord{Run: name, HeardMs: m.lastMs, ReplayMs: m.replayMs.Load(), Superseded: m.superseded.Load()})
		marks = append(marks, m)
	}
	e.nodes.mu.Unlock()
	for i, m := range marks {
		m.apply.Lock()
		out[i].Applied, out[i].Hands = m.lastBatch.Load(), m.hands.Load()
		m.apply.Unlock()
		if capture {
			m.captured.Store(out[i].Applied)
			m.capturedHands.Store(out[i].Hands)
		}
	}
	for _, r := range out {
		if !yield(r) {
			return
		}
	}
}

// RunsSaved records that the save that last read Runs is on disk: each run's batches up
// to the mark Runs read are durable, and replay answers say so (OriginMeta.Durable), so
// that edges stop keeping their cost. Call it only after a save that read Runs succeeded,
// before the next call of Runs (persist calls it under its save lock, through
// Source.Saved). It matters only with Config.Snapshots.
func (e *Engine) RunsSaved() {
	e.nodes.mu.Lock()
	defer e.nodes.mu.Unlock()
	for _, m := range e.nodes.runs {
		storeMax(&m.durable, m.captured.Load())
		storeMax(&m.durableHands, m.capturedHands.Load())
	}
}

// Leases yields every lease grant that has not ended, from Tuples: a record's Key is valid
// only during the call.
func (e *Engine) Leases(yield func(LeaseRecord) bool) {
	for t := range e.Tuples {
		for _, l := range t.Leases {
			l.Key = t.Key
			if !yield(l) {
				return
			}
		}
	}
}

// RestoreRuns loads replay marks into the node table, merging with what it holds (the
// larger batch and times). A restored mark is durable: it came from a snapshot on disk,
// and edges re-send what they keep of the batches after it. Times later than now are
// taken as now. The table is bounded: of more than 4096 records, those heard most
// recently are kept. It returns the number of records loaded and dropped (an empty or
// overlong run name, or beyond the bound).
func (e *Engine) RestoreRuns(recs []RunRecord) (loaded, dropped int) {
	now := e.clock.NowMs()
	recs = slices.Clone(recs)
	slices.SortFunc(recs, func(a, b RunRecord) int { return cmp.Compare(b.HeardMs, a.HeardMs) })
	t := &e.nodes
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	for _, r := range recs {
		if r.Run == "" || len(r.Run) > MaxRunLen || loaded >= maxTrackedNodes {
			dropped++
			continue
		}
		heard := min(r.HeardMs, now)
		m := t.runs[r.Run]
		if m == nil {
			m = t.add(r.Run)
		}
		m.lastMs = max(m.lastMs, heard)
		m.heardMs.Store(m.lastMs)
		storeMax(&m.lastBatch, r.Applied)
		storeMax(&m.durable, r.Applied)
		storeMax(&m.hands, r.Hands)
		storeMax(&m.durableHands, r.Hands)
		storeMax(&m.restoredHands, r.Hands)
		storeMax(&m.replayMs, min(r.ReplayMs, now))
		if r.Superseded {
			m.superseded.Store(true)
		}
		if e.coldPPM > 0 {
			// The run before may have granted it the cold allowance when it last heard it.
			m.coldUntil = max(m.coldUntil, heard+e.leaseTTLMs+leaseGraceMs)
		}
		t.see(nodeName(r.Run), heard)
		loaded++
	}
	e.countCold(now)
	return loaded, dropped
}

// RestoreLeases loads lease grants; call RestoreRuns first, so that a grant finds its
// run's marks (a run not among them gets new, empty marks, which it would have after a
// restart anyway). Grants that have ended are dropped; an until later than a new grant's
// would end is taken as that (the snapshot's clock was ahead, or the lease TTL shrank). A
// grant is loaded even beyond --max-memory, as a live cell is: forgetting it could admit
// more than the limit. Of two records of one tuple and run, the later grant (higher
// sequence) wins. The engine's lease sequence is raised past every grant loaded, so newer
// grants compare as newer; a sequence from the far future (its time part, as an origin
// numbers grants from its boot time, more than leaseSeqSlackMs past now) is dropped: it
// is damage, and would wrap the numbering. A grant whose run is not in the node table, when the table is full, gets
// marks of its own outside the table (as a run the table dropped has): adding it would push
// out another run's replay marks. It returns the number of records loaded and dropped; a
// record whose key does not decode is an error and stops nothing else.
func (e *Engine) RestoreLeases(recs []LeaseRecord) (loaded, dropped int, err error) {
	now := e.clock.NowMs()
	detached := make(map[string]*runMarks)
	for i, r := range recs {
		if r.Seq>>20 > uint64(max(now, 0))+leaseSeqSlackMs {
			dropped++
			continue
		}
		if _, perr := ParseKey([]byte(r.Key)); perr != nil {
			err = fmt.Errorf("restore lease %d: %w", i, perr)
			dropped++
			continue
		}
		gr := leaseGrant{g: r.G, spent: r.Spent, seq: r.Seq, until: min(r.UntilMs, now+e.leaseTTLMs+leaseGraceMs)}
		if r.Run == "" || len(r.Run) > MaxRunLen || r.Seq == 0 {
			dropped++
			continue
		}
		e.nodes.mu.Lock()
		e.nodes.init()
		gr.run = e.nodes.runs[r.Run]
		if gr.run == nil && now < gr.until { // new marks would hold nothing past until
			if len(e.nodes.runs) < maxTrackedNodes {
				gr.run = e.nodes.add(r.Run)
			} else if gr.run = detached[r.Run]; gr.run == nil {
				gr.run = e.nodes.newMarks(r.Run)
				detached[r.Run] = gr.run
			}
		}
		e.nodes.mu.Unlock()
		if gr.run == nil || gr.dead(now) || !e.restoreGrant([]byte(r.Key), gr, now) {
			dropped++
			continue
		}
		storeMax(&e.leaseSeq, r.Seq)
		loaded++
	}
	return loaded, dropped, err
}

// leaseSeqSlackMs is how far past now (ms) the time part of a restored lease sequence may
// be: 30 days. The numbering runs ahead of the clock only while an origin grants more than
// 2^20 leases a second, and a wrapping sequence is some 500 years ahead.
const leaseSeqSlackMs = 30 * 24 * 3_600_000

// restoreGrant puts gr into key's lease set, creating the entry when there is none. It
// reports false when the tuple has no room for another grant.
func (e *Engine) restoreGrant(key []byte, gr leaseGrant, now int64) bool {
	sh, h := e.store.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ent := sh.lookup(h, key)
	if ent == nil {
		if ent, _ = e.store.insert(sh, h, key, true); ent == nil {
			return false // the shard holds maxSlots (store.add)
		}
	}
	old := e.store.grantOf(&e.store.sideOf(sh, ent).leases, gr.run, now, true)
	switch {
	case old == nil:
		e.store.freeSideIfEmpty(sh, ent) // the tuple was full: the sweep drops an entry left empty
		return false
	case old.seq < gr.seq: // a new grant has seq 0; otherwise the later grant of the run wins
		*old = gr
	}
	return true
}

// storeMax raises a to v when v is larger.
func storeMax[T int64 | uint64](a interface {
	Load() T
	CompareAndSwap(old, new T) bool
}, v T) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}
