// Package engine makes rate-limit decisions from this process's memory.
//
// It holds the window math of SPEC section 2 (window.go), the authoritative cell store
// (store.go) and the Engine that ties them to a Clock, and an origin's side of its edges:
// the Origin interface, serving reads, replays and hand-offs (origin.go), leases
// (lease.go). The edge itself is package edge. It knows no sockets: the commands package
// parses requests into Tuples and calls Limit and Status.
package engine

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/keyspace"
)

// Config holds the engine's knobs.
type Config struct {
	// MaxMemoryBytes bounds the estimated bytes of the cell store. A request that needs a
	// new cell beyond it gets ErrFull; existing cells keep working. 0 means
	// DefaultMaxMemory.
	MaxMemoryBytes int64
	// Logger receives the (rate-limited) line about a full store. Nil: slog.Default().
	Logger *slog.Logger
	// Region is this origin's region: the one component of each cell it writes.
	Region string
	// LeaseTTL is how long a lease granted to an edge lives (lease.go); 0 means
	// DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Snapshots says that the origin's cells and its edge runs' replay marks are saved
	// (package persist, which calls RunsSaved after each save): replay answers then report
	// as durable (OriginMeta.Durable) only the batches a save holds, and edges keep the
	// cost of the others to re-send it should this origin restart from its snapshot.
	// Without, answers report NoSnapshots: a restart keeps nothing, so edges keep nothing.
	Snapshots bool
	// Standalone says that no peer origin replicates this engine's counts (no --peers):
	// Restore then marks no restored cell as published, which would give every restored
	// tuple a side struct (its 128 bytes) that only replication reads.
	Standalone bool
	// ColdShare is the share of a limit each edge run may admit on a tuple it holds no
	// lease for, without asking (cold.go); 0: none. At most MaxColdShare.
	ColdShare float64
	// MaxOverrides bounds the live overrides (override.go); 0: DefaultMaxOverrides.
	MaxOverrides int
}

// DefaultMaxMemory is the cell store's bound when Config leaves it 0: 256 MiB.
const DefaultMaxMemory = 256 << 20

// Engine decides requests and keeps their counts. It is safe for concurrent use.
type Engine struct {
	clock Clock
	store *store
	log   *slog.Logger

	nodes   nodeTable // edges heard from, and their last replay batch
	region  string
	regions regionTable // foreign region names <-> component indexes

	decisions   DecisionCounters
	dirty       atomic.Bool   // counts changed since Changed last cleared it
	replayed    atomic.Uint64 // replay items received from edges
	published   atomic.Uint64 // components handed to the publisher
	imports     atomic.Uint64 // components received that changed a count
	refused     atomic.Uint64 // ErrFull replies
	lastFullLog atomic.Int64  // ms of the last "store full" log line

	resetsFull    atomic.Uint64 // reset records the full reset table refused (reset.go)
	lastResetsLog atomic.Int64  // ms of the last "reset table full" log line

	kv *keyspace.KV // the counter keyspace, within the same --max-memory

	overrides *Overrides // RL.OVERRIDE's table (override.go)

	leaseTTLMs    int64
	leaseSeq      atomic.Uint64 // the last lease sequence handed out; starts from the boot time
	boot          int64         // ms at New: names this run of the origin in replies
	snapshots     bool          // Config.Snapshots
	standalone    bool          // Config.Standalone
	coldPPM       int64         // Config.ColdShare in millionths
	coldRuns      atomic.Int64  // edge runs whose cold allowance may be held, as last counted (cold.go)
	coldCountedMs int64         // when countCold last ran (nodes.mu)

	changes changeLog  // the change feed to edges (changes.go)
	resets  resetTable // recent resets (reset.go)
}

// New returns an Engine reading time from clock.
func New(clock Clock, cfg Config) *Engine {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	if cfg.MaxMemoryBytes <= 0 {
		cfg.MaxMemoryBytes = DefaultMaxMemory
	}
	if cfg.Region == "" {
		cfg.Region = "local"
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	e := &Engine{clock: clock, store: newStore(cfg.MaxMemoryBytes), log: log, region: cfg.Region,
		leaseTTLMs: max(cfg.LeaseTTL.Milliseconds(), 1), boot: clock.NowMs(), snapshots: cfg.Snapshots,
		standalone: cfg.Standalone}
	e.store.tracking = cfg.Snapshots // persist saves the tuples changed since its last save
	e.coldPPM = coldPPM(cfg.ColdShare)
	e.overrides = NewOverrides(clock, cfg.Region, cfg.MaxOverrides)
	e.overrides.onChange = func(r *override) { // in the feed (and marked dirty), in the table's order
		c := overrideChange(r)
		e.AddChange(c.Kind, c.Key, c.Fields)
	}
	// Lease sequences grow across restarts as long as fewer than 2^20 are made per ms.
	e.leaseSeq.Store(uint64(max(e.boot, 0)) << 20)
	e.changes.init(0, uint64(max(e.boot, 0))<<20) // change versions too
	e.kv = keyspace.New(keyspace.Config{Clock: clock, Bytes: &e.store.bytes, MaxBytes: cfg.MaxMemoryBytes,
		OnFull: e.refusedFull, OnWrite: e.markDirty})
	return e
}

// KV returns the engine's keyspace (package keyspace), which shares the cell store's
// --max-memory, is swept with it and marks it changed for snapshots.
func (e *Engine) KV() *keyspace.KV { return e.kv }

// Clock returns the engine's clock.
func (e *Engine) Clock() Clock { return e.clock }

// position returns the sequence of now in window w and the ms elapsed in it.
func position(nowMs, w int64) (seq, elapsed int64) {
	seq = nowMs / w
	return seq, nowMs - seq*w
}

// Limit decides one request of cost against limit for tuple t, and counts it when allowed.
// t.WindowMs must be in [1, MaxWindowMs] and limit >= 1. The only error is ErrFull: the
// request was allowed but needs a new cell that does not fit; nothing was counted.
func (e *Engine) Limit(t Tuple, limit, cost uint64) (Decision, error) {
	return e.LimitAt(t, limit, cost, e.clock.NowMs())
}

// LimitAt is Limit at the instant nowMs instead of the clock's reading: a server that read
// a batch of requests at nowMs decides them all at that instant, with one clock read per
// batch instead of one per request.
func (e *Engine) LimitAt(t Tuple, limit, cost uint64, nowMs int64) (Decision, error) {
	var buf [256]byte
	d, _, err := e.decide(AppendKey(buf[:0], t), t.WindowMs, limit, cost, 0, nowMs)
	return d, err
}

// decide is Limit on an encoded key at nowMs, with extra cost counted as used but not
// added (an edge's cost that is on its way here). It returns the cells after the decision.
func (e *Engine) decide(key []byte, windowMs int64, limit, cost, extra uint64, nowMs int64) (Decision, CellCounts, error) {
	sh, h := e.store.locate(key)
	var d Decision
	var cc CellCounts
	sh.mu.Lock()
	err := e.decideLocked(sh, h, key, windowMs, limit, cost, extra, nowMs, &d, &cc)
	sh.mu.Unlock()
	if err != nil {
		e.refusedFull()
		return Decision{}, CellCounts{}, err
	}
	e.decisions.Add(uint64(h), d.Allowed)
	return d, cc, nil
}

// decideLocked is decide with key's shard sh (hash h, from locate) locked by the caller.
// It neither counts the decision nor logs a full store: the caller does, after unlocking.
func (e *Engine) decideLocked(sh *shard, h uint32, key []byte, windowMs int64, limit, cost, extra uint64, nowMs int64, dOut *Decision, ccOut *CellCounts) error {
	seq, elapsed := position(nowMs, windowMs)
	ent, si := sh.lookupSlot(h, key)
	if ent != nil && ent.newest() > seq {
		// The instant (a batch's, from LimitAt) precedes a window that already has counts:
		// decide now instead, never in a past window (and never push a live cell out).
		seq, elapsed = position(max(nowMs, e.clock.NowMs()), windowMs)
	}
	var cur, prev cell
	if ent != nil {
		cur, prev = sh.counts(ent, seq)
	}
	d := Decide(Counts{Current: satAdd(cur.total(), extra), Previous: prev.total()}, limit, cost, windowMs, elapsed)
	if d.Allowed && cost > 0 {
		if ent == nil {
			var err error
			if ent, si, err = e.store.insertSlot(sh, h, key, false); err != nil {
				return err
			}
		}
		if i := e.store.slot(sh, ent, seq, seq, windowMs); i >= 0 {
			ent.add(i, cost)
			ent.seeLimit(i, limit)
			e.markDirty()
			e.store.markSlot(sh, si)
		}
	}
	*dOut = d
	if ent != nil {
		*ccOut = sh.cellCounts(ent, seq)
	} else {
		*ccOut = CellCounts{Seq: seq}
	}
	return nil
}

func (e *Engine) refusedFull() {
	n := e.refused.Add(1)
	now := e.clock.NowMs()
	last := e.lastFullLog.Load()
	if now-last >= 10_000 && e.lastFullLog.CompareAndSwap(last, now) {
		e.log.Warn("store is full (--max-memory); refusing new cells and counter keys", "max_memory_bytes", e.store.maxBytes,
			"tuples", e.store.tupleCount(), "refused_total", n)
	}
}

// Status is a read of one tuple's two live cells, made without counting.
type Status struct {
	Sequence         int64
	ElapsedMs        int64
	WindowMs         int64
	CurrentRegional  uint64
	CurrentImported  uint64
	PreviousRegional uint64
	PreviousImported uint64
	Source           string // "origin": read from an origin's memory; "local": an edge's own view
	Fresh            bool   // the counts are the origin's, or an edge's within --freshness
	StrictMs         int64  // ms left in strict mode; 0 when off
}

// Counts returns the totals that a decision at the same instant would read.
func (s Status) Counts() Counts {
	return Counts{
		Current:  satAdd(s.CurrentRegional, s.CurrentImported),
		Previous: satAdd(s.PreviousRegional, s.PreviousImported),
	}
}

// Used returns floor(used) at the instant of the read.
func (s Status) Used() uint64 { return Used(s.Counts(), s.WindowMs, s.ElapsedMs) }

// Peek returns the decision a request of cost 0 against limit would get: its Remaining
// and ResetAfterMs describe the tuple under that limit.
func (s Status) Peek(limit uint64) Decision {
	return Decide(s.Counts(), limit, 0, s.WindowMs, s.ElapsedMs)
}

// Status reads tuple t without changing it.
func (e *Engine) Status(t Tuple) Status {
	var buf [256]byte
	key := AppendKey(buf[:0], t)
	st := originStatus(e.clock.NowMs(), t.WindowMs)
	sh, h := e.store.locate(key)
	sh.mu.Lock()
	st.read(sh, sh.lookup(h, key))
	sh.mu.Unlock()
	return st
}

// originStatus is an origin's Status at nowMs of a tuple of window windowMs, before its
// cells are read.
func originStatus(nowMs, windowMs int64) Status {
	seq, elapsed := position(nowMs, windowMs)
	return Status{Sequence: seq, ElapsedMs: elapsed, WindowMs: windowMs, Source: "origin", Fresh: true}
}

// read fills st with ent's cells (nil: none held), its shard sh locked by the caller.
func (st *Status) read(sh *shard, ent *entry) {
	if ent != nil {
		cur, prev := sh.counts(ent, st.Sequence)
		st.CurrentRegional, st.CurrentImported = cur.regional, cur.imported
		st.PreviousRegional, st.PreviousImported = prev.regional, prev.imported
	}
}

// markDirty notes that counts changed. It writes the flag only when it is clear, so between
// two snapshots requests on every thread only read its cache line.
func (e *Engine) markDirty() {
	if !e.dirty.Load() {
		e.dirty.Store(true)
	}
}

// Changed reports whether any count, lease grant or replay mark changed since the last
// call (or since New), and clears the mark: a periodic snapshot that finds nothing changed
// need not be written again. (Heard times alone do not mark it.)
func (e *Engine) Changed() bool { return e.dirty.Swap(false) }

// leaseSweepEvery is how many of RunSweeper's sweeps go by between two that drop dead
// leases. Finding them reads every leased tuple's side struct (a cache miss each), and a
// lease is dead only a minute after its last grant: ten seconds later is soon enough.
const leaseSweepEvery = 10

// sweep drops the cells that can no longer matter, and with leases the dead leases, and
// returns how many cells it dropped. It also drops the counter keyspace's expired keys
// (KV.Sweep; counted in Stats.KVExpired, not in the result).
func (e *Engine) sweep(leases bool) int64 {
	e.kv.Sweep()
	now := e.clock.NowMs()
	e.pruneResets(now)
	return e.store.sweep(now, leases)
}

// RunSweeper calls sweep every interval until ctx ends.
func (e *Engine) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.sweep(n%leaseSweepEvery == 0)
		}
	}
}

// Stats are the origin's counters, read by INFO and /metrics (an edge's are edge.Stats).
type Stats struct {
	Allowed        uint64
	Denied         uint64
	RefusedFull    uint64
	ReplayItems    uint64 // replay items received from edges
	Published      uint64 // own components handed to the publisher
	Imported       uint64 // received components that changed a count
	Cells          int64
	Tuples         int64
	MemoryBytes    int64 // the cell store's and the counter keyspace's estimate
	MaxMemoryBytes int64
	KVKeys         int64  // counter keyspace keys (expired ones not yet dropped included)
	KVExpired      uint64 // counter keyspace keys dropped because their TTL passed
	Loading        bool   // a snapshot's cells are still loading in the background (LoadLazily)
	ResetsRefused  uint64 // resets, and peers' reset rows, the full reset table refused
}

// Stats returns a consistent-enough reading of the engine's counters (each is atomic).
func (e *Engine) Stats() Stats {
	allowed, denied := e.decisions.Load()
	return Stats{
		Allowed:        allowed,
		Denied:         denied,
		RefusedFull:    e.refused.Load(),
		ReplayItems:    e.replayed.Load(),
		Published:      e.published.Load(),
		Imported:       e.imports.Load(),
		Cells:          e.store.cellCount(),
		Tuples:         e.store.tupleCount(),
		MemoryBytes:    e.store.bytes.Load(),
		MaxMemoryBytes: e.store.maxBytes,
		KVKeys:         e.kv.Keys(),
		KVExpired:      e.kv.Expired(),
		Loading:        e.Loading(),
		ResetsRefused:  e.resetsFull.Load(),
	}
}

// TxOp is one request of a transaction (MULTI/EXEC): a decision of Cost against Limit, or
// with Read a read of the tuple (RL.STATUS; Limit and Cost unused).
type TxOp struct {
	Tuple Tuple
	Limit uint64
	Cost  uint64
	Read  bool
	// More are the further limits of a multi-limit decision (LimitMulti), decided with
	// Tuple's at the same instant and counted with it in all or none; the result is the
	// binding one's (Binding).
	More []LimitOp
}

// TxResult is the outcome of one TxOp: Decision and Err (as Limit's) for a decision,
// Status for a read.
type TxResult struct {
	Decision Decision
	Status   Status
	Err      error
}

// Transact runs ops in order as one step, at one instant: it locks the shards of every
// tuple in ops in shard order, reads the clock once, decides or reads each op at that
// instant, and unlocks. No other request sees or changes a tuple of ops between two of
// its ops. Locking in one order keeps two transactions from deadlocking; every other
// holder of a shard lock (requests, sweeps, snapshots) holds one at a time. out[i]
// receives the result of ops[i]; len(out) must be at least len(ops).
func (e *Engine) Transact(ops []TxOp, out []TxResult) {
	at := make([]located, len(ops))
	var more [][]located // a multi-limit op's tuples, Tuple's first (made at the first)
	var keys []byte
	var want [shardCount]bool
	for i, op := range ops {
		start := len(keys)
		keys = AppendKey(keys, op.Tuple)
		// Capped: a later append that grows keys copies it, never overwrites this one.
		at[i] = e.locate(keys[start:len(keys):len(keys)], op.Tuple.WindowMs)
		want[at[i].idx] = true
		if len(op.More) > 0 {
			if more == nil {
				more = make([][]located, len(ops))
			}
			more[i] = append(make([]located, 0, 1+len(op.More)), at[i])
			for _, m := range op.More {
				start := len(keys)
				keys = AppendKey(keys, m.Tuple)
				more[i] = append(more[i], e.locate(keys[start:len(keys):len(keys)], m.Tuple.WindowMs))
				want[more[i][len(more[i])-1].idx] = true
			}
		}
	}
	e.lockShards(&want)
	now := e.clock.NowMs()
	for i, op := range ops {
		a := at[i]
		if op.Read {
			out[i] = TxResult{Status: originStatus(now, op.Tuple.WindowMs)}
			out[i].Status.read(a.sh, a.sh.lookup(a.h, a.key))
			continue
		}
		out[i] = TxResult{}
		if len(op.More) > 0 {
			out[i].Decision, out[i].Err = e.decideMoreLocked(more[i], op, now)
			continue
		}
		var cc CellCounts
		out[i].Err = e.decideLocked(a.sh, a.h, a.key, op.Tuple.WindowMs, op.Limit, op.Cost, 0, now, &out[i].Decision, &cc)
	}
	e.unlockShards(&want)
	for i, op := range ops {
		switch {
		case op.Read:
		case out[i].Err != nil:
			e.refusedFull()
		default:
			e.decisions.Add(uint64(at[i].h), out[i].Decision.Allowed)
		}
	}
}
