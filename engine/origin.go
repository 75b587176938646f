package engine

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
)

// This file is the seam between an edge and its origins: the Origin interface an edge
// calls (implemented over the network by package upstream, in memory by tests), and the
// methods an origin's Engine serves it with (called by the RL.INTERNAL.* commands).

// CellCounts is an origin's view of one tuple around sequence Seq: cells Seq and Seq-1.
type CellCounts struct {
	Seq          int64
	CurRegional  uint64
	CurImported  uint64
	PrevRegional uint64
	PrevImported uint64
	// LeaseLeft and LeaseSeq are the asking edge run's lease on the tuple (lease.go): the
	// cost it may accept, in this cell or later ones, beyond the cost of its replays the
	// origin has applied, under lease sequence LeaseSeq. 0, 0: none.
	LeaseLeft uint64
	LeaseSeq  uint64
}

// OriginMeta travels with every origin reply.
type OriginMeta struct {
	// Edges is the number of edges the origin has heard from recently (at least 1). A
	// lease grant is at most 1/(2 x Edges) of the room beside the other leases (lease.go).
	Edges int
	// Applied is the last replay batch the origin applied for the asking edge run: the
	// counts in the reply include every batch up to it.
	Applied uint64
	// LeaseTTLMs is how long the leases in the reply live, from when the edge sent its
	// request.
	LeaseTTLMs int64
	// Durable is the last replay batch of the asking edge run that a snapshot on disk
	// holds (at most Applied): a kill -9 of this origin loses none of the batches up to
	// it, nor the hand-offs it counted before the next. An edge keeps the cost of the
	// others, to re-send it to the next run of this origin (edge/keep.go). An origin
	// without snapshots reports NoSnapshots: a restart keeps nothing, so edges keep
	// nothing for it.
	Durable uint64
	// Boot names this run of the origin (its start time, ms): an edge drops the leases of
	// an origin that restarted, which knows nothing of them, and re-sends to it the cost
	// the run before counted that its snapshot does not hold.
	Boot int64
	// Now is the origin's clock when it answered (ms): an edge estimates from it the
	// offset of the origin's clock, to give a hand-off a deadline in the origin's time.
	Now int64
	// Hand is, in the answer to a hand-off, the number the origin gave it: the hand-offs
	// of an edge run are numbered 1, 2, ... across the origin's runs (the count is saved
	// with the run's marks). 0 in other answers.
	Hand uint64
	// HandsDurable is the last hand-off of the asking edge run that a snapshot on disk
	// holds (NoSnapshots without snapshots); HandsRestored the last one the snapshot this
	// run of the origin restored holds: a hand-off an earlier run numbered above it is
	// not in this run's counts, and the edge re-sends it (edge/keep.go).
	HandsDurable, HandsRestored uint64
	// ColdPPM is the cold allowance the asking edge run may use (cold.go): on a tuple it
	// holds no lease for, it may admit ColdAllowance(limit, ColdPPM) units without asking,
	// until LeaseTTLMs after it sent the request. 0: none.
	ColdPPM int64
	// Changes is the version of the last change the origin made to what edges cache
	// (changes.go): an edge that has applied less asks for the changes since.
	Changes uint64
}

// ReadItem asks for a tuple's cells Seq and Seq-1. Key is made by AppendKey. Want > 0
// asks for a lease of that many units on the tuple, within Limit.
type ReadItem struct {
	Key   []byte
	Seq   int64
	Limit uint64
	Want  uint64
}

// ReplayItem is accepted cost of one cell, coalesced. Limit is the lowest limit the edge
// saw used against the cell (it sets the cell's publication threshold). Want > 0 renews
// the run's lease with that many units; Return > 0 gives back the lease of that sequence
// (lease.go): the edge accepts no more under it, and this batch carries all it accepted.
// An item may carry no cost (a return).
type ReplayItem struct {
	Key    []byte
	Seq    int64
	Cost   uint64
	Limit  uint64
	Want   uint64
	Return uint64
}

// ReplayBatch is one delivery of replays. (Node, ID) identify it: an origin applies a
// batch once, however often it is delivered, provided a node's IDs only grow. Node names
// one run of one edge process (node id and a boot nonce). Boot, when not 0, is the origin
// run (OriginMeta.Boot) that counted the cost the edge keeps until a snapshot holds it
// (edge/keep.go): an origin of another run applies nothing of the batch and answers it as a
// re-delivery, so that the edge learns the mark that run restored from its snapshot before
// any batch of its lands there, and so which kept batches the snapshot holds.
//
// Changes is the version of the origin's changes (changes.go) the edge had applied when it
// made the batch: every cost in it was accepted after the edge applied them, so a tuple
// reset after that version (which the edge had not heard of) gets none of it: that cost
// counts as made before the reset.
type ReplayBatch struct {
	Node    string
	ID      uint64
	Boot    int64
	Changes uint64
	Items   []ReplayItem
}

// DecideRequest hands one decision to the origin, which decides and counts atomically.
// Pending is the edge's accepted cost for the current cell not yet sent; Inflight is its
// cost in replay batch InflightBatch, sent but not acknowledged. The origin counts Pending,
// and Inflight unless it already applied that batch, as used, without adding them (or the
// edge's lease, when that is more). Want > 0 asks for a lease too. Return gives back the
// unspent part of the edge's lease of that sequence (the lease then holds only Pending and
// the unapplied Inflight): the edge stopped spending it when it handed the decision over,
// so that its own lease does not count against it.
type DecideRequest struct {
	Key           []byte
	Limit         uint64
	Cost          uint64
	Pending       uint64
	Inflight      uint64
	InflightBatch uint64
	Want          uint64
	Return        uint64
	// Deadline, when not 0, is the origin's time (ms) from which the edge no longer waits
	// for the answer: from then on the origin neither decides nor counts the request, so that a
	// client that was refused meanwhile is not counted.
	Deadline int64
}

// Origin is what an edge needs from its region's origin. Every method may fail (the
// origin is down, slow or unreachable); the edge then decides from local memory.
type Origin interface {
	Read(ctx context.Context, items []ReadItem) ([]CellCounts, OriginMeta, error)
	Replay(ctx context.Context, b ReplayBatch) ([]CellCounts, OriginMeta, error)
	Decide(ctx context.Context, r DecideRequest) (Decision, CellCounts, OriginMeta, error)
}

// ---- origin side ----

// edgeWindowMs is how long an edge counts as active after its last request.
const edgeWindowMs = 10_000

// maxTrackedNodes bounds the per-node tables (active edges, replay marks).
const maxTrackedNodes = 4096

// nodeTable remembers which edge processes were heard from recently (by node id), and
// the last replay batch applied for each edge run (node id and boot nonce). Both maps are
// bounded: the least recently heard entry is forgotten first.
type nodeTable struct {
	mu     sync.Mutex
	seen   map[string]int64     // node id -> ms last heard
	runs   map[string]*runMarks // node run -> replay marks
	lastID uint32               // the id of the last marks made
}

// runMarks are one edge run's marks. A batch is applied under apply, and only then is
// lastBatch raised: so every answer that reports Applied = N holds counts read after
// batch N was applied, provided it loads lastBatch before reading the counts. durable is
// the last batch a snapshot on disk holds: captured is the mark the running save read
// (Runs), made durable once that save is on disk (RunsSaved), and a restored mark is
// durable (it came from disk).
type runMarks struct {
	name      string        // the run ("node/nonce"), as saved with its leases (marks.go)
	id        uint32        // names the run in a slot's owed lease cost (entry.owedRun); never 0
	apply     sync.Mutex    // held while one batch of the run is checked and applied
	lastMs    int64         // guarded by nodeTable.mu
	lastBatch atomic.Uint64 // stored under apply
	captured  atomic.Uint64 // lastBatch as the running save read it
	durable   atomic.Uint64 // the last batch a saved snapshot holds (<= lastBatch)
	// hands numbers the run's hand-offs (raised under apply); capturedHands, durableHands
	// and restoredHands are to it what captured and durable are to lastBatch, and the
	// count the snapshot this origin run restored holds.
	hands, capturedHands, durableHands, restoredHands atomic.Uint64
	heardMs                                           atomic.Int64 // lastMs, for readers without nodeTable.mu (leases)
	replayMs                                          atomic.Int64 // when a replay batch of the run was last served
	// superseded: a later run of the same node was heard (at supersededMs), so this run has
	// ended (node ids are unique in a region); its leases hold nothing once what it sent
	// before it ended has had leaseGraceMs to arrive (gone).
	superseded   atomic.Bool
	supersededMs atomic.Int64
	// coldUntil is when the run's cold allowance ends (origin ms; 0: never granted),
	// guarded by nodeTable.mu (cold.go).
	coldUntil int64
}

// init makes t's maps.
func (t *nodeTable) init() {
	if t.runs == nil {
		t.runs, t.seen = make(map[string]*runMarks), make(map[string]int64)
	}
}

// touch records that run was heard at nowMs and returns its replay marks.
func (t *nodeTable) touch(run string, nowMs int64) *runMarks {
	t.init()
	node := nodeName(run)
	t.see(node, nowMs)
	m := t.runs[run]
	if m == nil {
		for other, om := range t.runs { // a new run is rare: an edge (re)started
			if nodeName(other) == node {
				om.supersededMs.Store(nowMs)
				om.superseded.Store(true)
			}
		}
		m = t.add(run)
	}
	m.lastMs = max(m.lastMs, nowMs)
	m.heardMs.Store(m.lastMs)
	return m
}

// see records that the edge process node was heard at nowMs (t's maps made).
func (t *nodeTable) see(node string, nowMs int64) {
	if _, ok := t.seen[node]; !ok && len(t.seen) >= maxTrackedNodes {
		delete(t.seen, oldest(t.seen, func(ms int64) int64 { return ms }))
	}
	t.seen[node] = max(t.seen[node], nowMs)
}

// add enters new replay marks for run, which t does not hold (t's maps made), forgetting
// the least recently heard run when t is full.
func (t *nodeTable) add(run string) *runMarks {
	if len(t.runs) >= maxTrackedNodes {
		delete(t.runs, oldest(t.runs, func(m *runMarks) int64 { return m.lastMs }))
	}
	m := t.newMarks(run)
	t.runs[run] = m
	return m
}

// newMarks makes marks for run with an id of their own (t.mu held). Ids wrap after 2^32
// runs, skipping 0; two live runs sharing one would take 4 billion edge restarts.
func (t *nodeTable) newMarks(run string) *runMarks {
	if t.lastID++; t.lastID == 0 {
		t.lastID = 1
	}
	return &runMarks{name: run, id: t.lastID}
}

func oldest[V any](m map[string]V, ms func(V) int64) string {
	var key string
	best := int64(1<<63 - 1)
	for k, v := range m {
		if t := ms(v); t < best {
			key, best = k, t
		}
	}
	return key
}

// active counts the distinct edge processes heard within edgeWindowMs; at least 1.
func (t *nodeTable) active(nowMs int64) int {
	n := 0
	for _, ms := range t.seen {
		if nowMs-ms <= edgeWindowMs {
			n++
		}
	}
	return max(n, 1)
}

// counts returns the CellCounts of key around seq; the shard is locked by the caller.
func (sh *shard) cellCounts(ent *entry, seq int64) CellCounts {
	cur, prev := sh.counts(ent, seq)
	return CellCounts{Seq: seq, CurRegional: cur.regional, CurImported: cur.imported,
		PrevRegional: prev.regional, PrevImported: prev.imported}
}

// answer is one item's answer to an edge run (sh.mu held, h key's hash; ent is key's
// entry or nil; w its window, 0 when the key has none): key's cells around seq, after
// applying lr to the run's lease (lease.go).
// An item that neither asks for a lease nor gives one back gets none in its answer (0, 0:
// the edge keeps the lease it holds). It returns key's entry too: a lease may make it.
func (e *Engine) answer(sh *shard, h uint32, key []byte, ent *entry, w, seq int64, run *runMarks, lr LeaseRequest, edges int, now int64) (CellCounts, *entry) {
	cc := CellCounts{Seq: seq}
	if ent != nil {
		cc = sh.cellCounts(ent, seq)
	}
	if w > 0 && (lr.Want > 0 || lr.Return > 0) {
		cc.LeaseLeft, cc.LeaseSeq = e.lease(sh, h, key, ent, run, lr, w, now, edges)
		ent = sh.lookup(h, key)
	}
	return cc, ent
}

// ServeRead answers an edge's read of cells. node identifies the edge run. The counts are
// read after the applied mark, so they include every batch up to it (and perhaps more).
func (e *Engine) ServeRead(node string, items []ReadItem) ([]CellCounts, OriginMeta) {
	meta, run := e.heard(node)
	out := make([]CellCounts, len(items))
	now := e.clock.NowMs()
	for i, it := range items {
		sh, h := e.store.locate(it.Key)
		sh.mu.Lock()
		out[i], _ = e.answer(sh, h, it.Key, sh.lookup(h, it.Key), windowOfKey(string(it.Key)), it.Seq, run, LeaseRequest{Limit: it.Limit, Want: it.Want}, meta.Edges, now)
		sh.mu.Unlock()
	}
	return out, meta
}

// Heard records that the edge run node is connected, so that it counts as active.
func (e *Engine) Heard(node string) { _, _ = e.heard(node) }

func (e *Engine) heard(node string) (OriginMeta, *runMarks) {
	now := e.clock.NowMs()
	e.nodes.mu.Lock()
	defer e.nodes.mu.Unlock()
	m := e.nodes.touch(node, now)
	meta := e.meta(now, m)
	e.marks(&meta, m)
	return meta, m
}

// meta is the header of a reply to edge run run (nodes.mu held), which it grants the
// cold allowance (cold.go).
func (e *Engine) meta(now int64, run *runMarks) OriginMeta {
	return OriginMeta{Edges: e.nodes.active(now), LeaseTTLMs: e.leaseTTLMs, Boot: e.boot, Now: now, ColdPPM: e.grantCold(run, now),
		Changes: e.changes.version.Load()}
}

// marks sets meta's Applied and Durable from run's marks: durable first, so that it is
// never above applied.
func (e *Engine) marks(meta *OriginMeta, run *runMarks) {
	durable := run.durable.Load()
	meta.Applied = run.lastBatch.Load()
	durableHands := run.durableHands.Load()
	meta.HandsRestored = run.restoredHands.Load()
	meta.Durable, meta.HandsDurable = NoSnapshots, NoSnapshots
	if e.snapshots {
		meta.Durable = min(durable, meta.Applied)
		meta.HandsDurable = min(durableHands, run.hands.Load())
	}
}

// nodeName strips the boot nonce ("node/nonce") so that a restarted edge counts once.
func nodeName(run string) string {
	for i := len(run) - 1; i >= 0; i-- {
		if run[i] == '/' {
			return run[:i]
		}
	}
	return run
}

// ServeReplay applies a replay batch once and answers each item with its tuple's counts
// after the batch's items of that tuple (an edge sends a tuple's cells side by side, and
// they are served under one lookup). A batch whose ID is not above the last one applied
// for its node is a re-delivery: it changes nothing and gets the current counts.
//
// The batches of one run are applied one at a time, and a batch is marked applied only
// once its items are in: a concurrent read or hand-off that sees Applied = N sees batch
// N's cost, and a re-delivery that arrives while the first delivery is being applied (its
// sender timed out) waits for it, so its answer includes the batch too.
func (e *Engine) ServeReplay(b ReplayBatch) ([]CellCounts, OriginMeta) {
	now := e.clock.NowMs()
	e.nodes.mu.Lock()
	st := e.nodes.touch(b.Node, now)
	meta := e.meta(now, st)
	e.nodes.mu.Unlock()

	st.apply.Lock()
	defer st.apply.Unlock()
	st.replayMs.Store(now)
	// A batch sent for another run of this origin changes nothing, leases included: its
	// answer tells the edge the mark this run restored for it (Applied), so the edge knows
	// what this run's snapshot lacks (edge/keep.go).
	other := b.Boot != 0 && b.Boot != e.boot
	fresh := b.ID > st.lastBatch.Load() && !other
	out := make([]CellCounts, len(b.Items))
	for i := 0; i < len(b.Items); {
		// An edge sends a tuple's cells side by side: one lookup serves them all.
		j := i + 1
		for j < len(b.Items) && string(b.Items[j].Key) == string(b.Items[i].Key) {
			j++
		}
		e.serveItems(b.Items[i:j], out[i:j], st, fresh, !other, meta.Edges, now, b.Changes)
		i = j
	}
	if fresh {
		st.lastBatch.Store(b.ID)
	}
	e.marks(&meta, st)
	e.replayed.Add(uint64(len(b.Items)))
	return out, meta
}

// serveItems applies the replay items of one tuple (when fresh: not a re-delivery) and
// answers each with the tuple's counts after all of them, applying its lease request when
// leases is set (lease requests are applied on every delivery: they are idempotent,
// lease.go). The cost is not applied when the tuple was reset after change version
// changes, which the batch's edge had applied (reset.go).
func (e *Engine) serveItems(items []ReplayItem, out []CellCounts, run *runMarks, fresh, leases bool, edges int, now int64, changes uint64) {
	key := items[0].Key
	w := windowOfKey(string(key))
	sh, h := e.store.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ent, si := sh.lookupSlot(h, key)
	// A batch made before its edge applied a reset may carry cost the reset cancelled: its
	// tuple is looked up in the reset table only then. A reset sets the atomics under the
	// tuple's shard lock, held here: one that lands while the batch is served is seen by
	// the items served after it.
	if fresh && e.resets.count.Load() > 0 && changes < e.resets.maxVersion.Load() && e.resetAfter(key, changes) {
		fresh = false // cost accepted before its edge heard of the reset: cancelled with it
	}
	if fresh && w > 0 {
		for _, it := range items {
			ent, si = e.applyReplay(sh, h, ent, si, it, w, run, now)
		}
	}
	for i, it := range items {
		lr := LeaseRequest{Limit: it.Limit, Want: it.Want, Return: it.Return}
		if !leases {
			lr = LeaseRequest{}
		}
		out[i], ent = e.answer(sh, h, key, ent, w, it.Seq, run, lr, edges, now)
	}
}

// applyReplay adds one replayed cost to its cell of ent, key's entry in slot si (sh.mu
// held; nil, -1: none yet), unless the cell is dead, and returns the entry and its slot
// (an insert may have made or moved it). The cells of a replay are created even beyond --max-memory: the cost was
// already accepted, and forgetting it would be worse.
func (e *Engine) applyReplay(sh *shard, h uint32, ent *entry, si int, it ReplayItem, w int64, run *runMarks, nowMs int64) (*entry, int) {
	if it.Seq < nowMs/w-1 || it.Cost == 0 {
		return ent, si
	}
	if ent == nil {
		if ent, si, _ = e.store.insertSlot(sh, h, it.Key, true); ent == nil {
			return nil, -1 // the shard holds maxSlots (store.add)
		}
	}
	i := e.store.slot(sh, ent, it.Seq, nowMs/w, w)
	if i < 0 {
		return ent, si
	}
	ent.add(i, it.Cost)
	ent.seeLimit(i, it.Limit)
	e.markDirty()
	e.store.markSlot(sh, si)
	if ent.side != 0 && run != nil {
		// The run's cost is counted now: its lease no longer reserves it. The grant hears
		// of it when it is next read (settle), so this item touches only the slot.
		if ent.owedRun != run.id || it.Cost > math.MaxUint32-uint64(ent.owed) {
			sh.settle(ent)
			if it.Cost > math.MaxUint32 { // too large to owe: the grant hears of it now
				if gr := sh.side(ent).leases.grantOf(run, nowMs, false); gr != nil {
					gr.spent = satAdd(gr.spent, it.Cost)
				}
				return ent, si
			}
			ent.owedRun = run.id
		}
		ent.owed += uint32(it.Cost)
	}
	return ent, si
}

// ServeDecide decides a request handed over by an edge, atomically, with the edge's
// not-yet-replayed cost counted as used. It holds the run's apply lock, so no batch of the
// run lands between its reading of the applied mark and of the counts: when the mark
// covers the in-flight batch the counts hold that batch; when it does not, the batch's cost
// is added. (Hand-offs of one edge run wait for its replays, and the other way round.)
func (e *Engine) ServeDecide(node string, r DecideRequest) (Decision, CellCounts, OriginMeta, error) {
	meta, run := e.heard(node)
	t, err := ParseKey(r.Key)
	if err != nil {
		return Decision{}, CellCounts{}, meta, err
	}
	run.apply.Lock()
	defer run.apply.Unlock()
	e.marks(&meta, run)
	extra := r.Pending
	if r.InflightBatch > meta.Applied {
		extra = satAdd(extra, r.Inflight) // that batch has not arrived: its cost is on its way
	}
	now := e.clock.NowMs()
	seq, elapsed := position(now, t.WindowMs)
	sh, h := e.store.locate(r.Key)
	var d Decision
	var cc CellCounts
	sh.mu.Lock()
	extra = e.handedReserve(sh, h, r.Key, run, r.Return, r.Limit, extra, now)
	if r.Deadline > 0 && now >= r.Deadline { // the edge gives up at its deadline's instant
		// The edge gave up on this answer (it has refused the request): count nothing.
		sh.mu.Unlock()
		return Decision{Limit: r.Limit, RetryAfterMs: 1, ResetAfterMs: t.WindowMs - elapsed}, CellCounts{Seq: seq}, meta, nil
	}
	err = e.decideLocked(sh, h, r.Key, t.WindowMs, r.Limit, r.Cost, extra, now, &d, &cc)
	if err == nil && cc.Seq == seq {
		cc.LeaseLeft, cc.LeaseSeq = e.lease(sh, h, r.Key, sh.lookup(h, r.Key), run, LeaseRequest{Limit: r.Limit, Want: r.Want}, t.WindowMs, now, meta.Edges)
	}
	sh.mu.Unlock()
	if err != nil {
		e.refusedFull()
		return Decision{}, CellCounts{}, meta, err
	}
	meta.Hand = run.hands.Add(1) // under apply: a save reads it before the cells (Runs)
	e.decisions.Add(uint64(h), d.Allowed)
	return d, cc, meta, nil
}

// handedReserve applies a hand-off's lease return (ret, the edge's lease sequence; 0:
// none) to key's grant of run (sh.mu held), and returns what a decision of the hand-off
// counts as used but does not add: every lease, since the other runs' may be spent at any
// moment and run's covers its cost not replayed yet (or extra does, the edge's pending
// and unapplied in-flight cost, when more), and the edges' cold allowances (cold.go).
func (e *Engine) handedReserve(sh *shard, h uint32, key []byte, run *runMarks, ret, limit, extra uint64, now int64) uint64 {
	ent := sh.lookup(h, key)
	if ent != nil {
		sh.settle(ent)
	}
	ls := e.leases(sh, h, key, ent, false)
	if gr := ls.grantOf(run, now, false); gr != nil && ret != 0 && ret == gr.seq {
		// What the edge gave back: it holds only what it accepted and has not replayed.
		gr.g = max(gr.spent, min(gr.g, satAdd(gr.spent, extra)))
		e.markDirty() // leases are saved too
		e.store.markTuple(sh, h, key)
	}
	others, own := ls.reserved(run, now)
	return satAdd(satAdd(others, e.coldReserve(limit)), max(own, extra))
}

// LocalOrigin serves an Edge from an Engine in the same process: the in-memory Origin of
// tests and of single-process setups. Node names the edge run.
type LocalOrigin struct {
	Engine *Engine
	Node   string
}

// Read implements Origin.
func (o LocalOrigin) Read(_ context.Context, items []ReadItem) ([]CellCounts, OriginMeta, error) {
	c, m := o.Engine.ServeRead(o.Node, items)
	return c, m, nil
}

// Replay implements Origin.
func (o LocalOrigin) Replay(_ context.Context, b ReplayBatch) ([]CellCounts, OriginMeta, error) {
	c, m := o.Engine.ServeReplay(b)
	return c, m, nil
}

// Decide implements Origin.
func (o LocalOrigin) Decide(_ context.Context, r DecideRequest) (Decision, CellCounts, OriginMeta, error) {
	return o.Engine.ServeDecide(o.Node, r)
}

// DecideMulti implements MultiOrigin.
func (o LocalOrigin) DecideMulti(_ context.Context, r DecideMultiRequest) ([]Decision, []CellCounts, OriginMeta, error) {
	return o.Engine.ServeDecideMulti(o.Node, r)
}
