// Package edge is the edge role (SPEC section 5): it decides requests from local memory,
// within the leases its region's origins grant, replays the cost it accepted to them, and
// hands them the decisions its leases do not cover. It consumes the engine's Origin seam
// (upstream.Client across the network; engine.LocalOrigin in tests and the simulation)
// and decides with the engine's window math, so both roles count alike.
//
// edge.go holds the decision and the local memory, replay.go the flusher that delivers
// replays, keep.go the cost kept until the origin saves it, forward.go the commands an
// origin runs for an edge's clients, flight.go the shared reads of one tuple.
package edge

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/ratchet/ratchet/engine"
)

// An Edge decides from local memory and converges with its region's origins (SPEC
// section 5).
//
// Concurrency: each tuple's local state is a localEntry with its own mutex; a decision
// holds that one mutex for the window math and the accounting, never across a network
// call. Entries live in a ristretto cache (bounded, may drop or evict anything) and, while
// they hold cost the origin has not acknowledged, also in their origin's replay set
// (originLink.pins), which nothing evicts: so accepted cost is never lost by the cache.
// Lock order: entry mutex, then originLink.mu; the flusher copies the pin set under
// originLink.mu and then locks entries one by one. The cache's goroutine takes
// originLink.mu when it lets an entry go (leftCache), so nothing waits on the cache
// (Wait) holding originLink.mu.
//
// Leases (engine/lease.go has the origin's side): an edge accepts a request locally only
// within the lease its origin granted it on the tuple, so that the region never admits
// more than the limit. Reads, replays and hand-offs ask for a lease sized by this edge's demand;
// replays renew it; near the limit the origin grants nothing and every decision that may
// be allowed is handed to the origin, which decides and counts atomically.
//
// Origin calls: reads of cold, stale or strict tuples are shared per tuple (flightGroup);
// each origin has one flusher goroutine sending one replay batch at a time; a decision
// that the lease does not cover is handed to the origin. A failed call puts its origin in
// backoff, shared by all requests: while it lasts nothing waits on that origin, and one
// probe at a time tests it afterwards; meanwhile the edge spends its unexpired leases,
// then enforces limit x DegradedShare.
//
// Unsaved cost (keep.go): what an origin counted for this edge (replays, hand-offs)
// and has not saved yet is kept by that origin's flusher until a snapshot holds it, and
// given back to a run of the origin restarted from an older snapshot (kill -9).

// Config configures an Edge.
type Config struct {
	// Origins are the region's origins; tuples are spread over them by rendezvous hashing
	// of IDs (their addresses).
	Origins   []engine.Origin
	OriginIDs []string
	// NodeRun names this process run in replay batches: node id and a boot nonce.
	NodeRun        string
	Freshness      time.Duration // default 1s
	ReplayInterval time.Duration // default 5ms
	OriginTimeout  time.Duration // default 100ms
	DegradedShare  float64       // share of the limit enforced while the origin is unreachable
	MaxMemoryBytes int64         // local cache bound; default DefaultMaxMemory
	MaxPinned      int           // bound on entries awaiting replay; default from MaxMemoryBytes
	MaxBatchItems  int           // cells in one replay batch; default 1000
	Logger         *slog.Logger
	// Observe, when set, receives every origin call: kind (read, replay, decide, forward), outcome
	// and latency. It must be cheap and safe for concurrent use.
	Observe func(kind string, err error, d time.Duration)

	// MaxUnsavedBytes bounds what the cost an edge keeps until its origin's snapshot holds
	// it (keep.go, of all origins) keeps alive beyond the cache's bound: the kept cells,
	// and their entries once the cache has let them go (they outlive their eviction);
	// default an eighth of MaxMemoryBytes. Past it the oldest are dropped, and a kill -9
	// of the origin would lose them.
	MaxUnsavedBytes int64
}

// ErrReplayFull is returned when accepting a request would need a new entry in a full
// replay buffer (the origin is unreachable for long, over many tuples).
var ErrReplayFull = errors.New("replay buffer is full")

// edgeCell is one cell as an edge knows it.
type edgeCell struct {
	seq      int64
	regional uint64 // the origin's regional count, max-merged
	imported uint64
	pending  uint64 // accepted here, not yet sent
	inflight uint64 // accepted here, sent in the unacknowledged batch
	minLimit uint64 // the lowest limit accepted against the cell here (replayed with it)
}

// leaseWantFactor: an edge asks for this many times its recent demand (the cost it took
// or handed off since its last batch), so that the lease lasts a few replay intervals.
const leaseWantFactor = 4

// leaseMinWant is the least an edge asks for: enough for a short burst on a cold tuple.
const leaseMinWant = 16

// leaseWant is what an edge asks for, given its recent demand.
// It is at most MaxLimit, as the origin requires.
func leaseWant(demand uint64) uint64 {
	if demand > engine.MaxLimit/leaseWantFactor {
		return engine.MaxLimit
	}
	return max(leaseWantFactor*demand, leaseMinWant)
}

func (c *edgeCell) total() uint64 {
	return satAdd(satAdd(c.regional, c.imported), satAdd(c.pending, c.inflight))
}

// localEntry is an edge's state of one tuple.
type localEntry struct {
	key    []byte // tuple key (AppendKey); never changed, so replay items share it
	hash   uint64 // maphash of key with the edge's seed: its cache key
	window int64
	link   *originLink
	// inline holds key when it fits: a lookup's check of the key then reads the entry's
	// own memory, which the decision reads next, instead of a cache miss of its own.
	inline [inlineKey]byte

	mu          sync.Mutex // guards the fields below
	cells       [2]edgeCell
	freshUntil  int64       // ms; reads and acknowledged replays extend it
	strictUntil int64       // ms; set by a denial, to the end of the next window
	pinned      bool        // in link.pins (guarded by link.mu, read under mu)
	pinIdx      int         // index in link.pins while pinned (guarded by link.mu)
	indexed     bool        // in link.byKey (guarded by link.mu)
	sameHash    *localEntry // next entry in link.byKey's chain of hash (guarded by link.mu)

	// The lease is the tuple's, not a cell's (engine/lease.go): what is left of it at a
	// window's end is spent in the next window, so a busy key crosses window boundaries
	// without a round trip.
	spent      uint64 // cumulative cost accepted here, in any cell (pending, inflight and acknowledged)
	handed     uint64 // cost handed to the origin since the last batch: demand
	leaseG     uint64 // the lease: spent may grow up to it
	leaseSeq   uint64
	leaseUntil int64 // ms, this edge's clock: the lease ends
	renewAt    int64 // ms, this edge's clock: batches renew the lease from then on (renewDelay)
	leaseBoot  int64 // the origin run that granted it
	returnDue  bool  // give the lease back in the next batch (idle, and a large part of what is left)
	// handing counts hand-offs of the tuple in flight. Their requests tell the origin the
	// tuple's pending cost, which it counts as used; were that cost replayed meanwhile, the
	// origin would count it twice. So pending stays out of batches while one is in flight.
	handing int32
	// kept counts the kept items (keep.go) naming the entry in its low bits (keptMask),
	// changed by the flusher of link; its keptCounted bit says that the entry's bytes are
	// in link.keptEntries (countKept). One word: the entry stays 344 bytes.
	kept atomic.Uint32
	// gen is the link's generation its views were taken in (a resync drops older ones);
	// resetAt the change version of the last reset applied to it (changes.go).
	gen     uint32
	resetAt uint64
	// vouch caps the change version a batch carrying le's pending cost may claim
	// (ReplayBatch.Changes): MaxUint64 (the link's applied version) but for cost kept from
	// before a resync, or re-pended for a restarted origin, which the edge accepted without
	// knowing the changes since (changes.go).
	vouch uint64

	// cached is set before the entry is offered to the cache (remember) and cleared when
	// the cache lets go of it (evicted, rejected, replaced: leftCache): while it is set, a
	// lookup of the tuple finds this entry. siblings are the entries of the same key's
	// other windows that multi-limit requests found beside this one (multi.go), so that
	// such a request looks up one window and reaches the others from it; sibOf is the
	// entry whose siblings name this one, so that the cache letting this one go takes it
	// out of that set (else a cached entry would keep the key's evicted entries alive,
	// beyond the cache's bound).
	cached   atomic.Bool
	siblings atomic.Pointer[siblingSet]
	sibOf    atomic.Pointer[localEntry]
}

func newLocalEntry(key string, hash uint64, window int64, link *originLink) *localEntry {
	le := &localEntry{hash: hash, window: window, link: link,
		cells: [2]edgeCell{{seq: emptySeq}, {seq: emptySeq}}, gen: link.gen.Load(), vouch: math.MaxUint64}
	if len(key) <= len(le.inline) {
		le.key = le.inline[:copy(le.inline[:], key):len(key)]
	} else {
		le.key = []byte(key)
	}
	return le
}

// inlineKey is the longest tuple key an entry holds in itself (the common ones: a
// window, two default names and a key of up to 29 bytes).
const inlineKey = 32

// leaseLeft returns what the lease still lets this edge accept at now from origin run
// boot.
func (le *localEntry) leaseLeft(now, boot int64) uint64 {
	if now >= le.leaseUntil || le.leaseBoot != boot || le.leaseG <= le.spent {
		return 0
	}
	return le.leaseG - le.spent
}

// unacked returns the cost accepted here that the origin has not acknowledged: pending
// and in flight, over both cells.
func (le *localEntry) unacked() (pending, inflight uint64) {
	for _, c := range le.cells {
		if c.seq != emptySeq {
			pending, inflight = satAdd(pending, c.pending), satAdd(inflight, c.inflight)
		}
	}
	return pending, inflight
}

// cell returns the cell for seq, or nil.
func (le *localEntry) cell(seq int64) *edgeCell {
	for i := range le.cells {
		if le.cells[i].seq == seq {
			return &le.cells[i]
		}
	}
	return nil
}

// slot returns the cell for seq, taking a slot as the origin's store does (never the one
// holding seq-1), or nil when seq is older than both cells held.
func (le *localEntry) slot(seq int64) *edgeCell {
	if c := le.cell(seq); c != nil {
		return c
	}
	i := 0
	if le.cells[1].seq < le.cells[0].seq {
		i = 1
	}
	if le.cells[i].seq == seq-1 {
		i = 1 - i
	}
	if le.cells[i].seq != emptySeq && le.cells[i].seq > seq {
		// Never push out a later cell (it may hold unacknowledged cost, e.g. after an
		// origin whose clock is a little ahead answered for the next window).
		return nil
	}
	le.cells[i] = edgeCell{seq: seq}
	return &le.cells[i]
}

func (le *localEntry) counts(seq int64) engine.Counts {
	var c engine.Counts
	if cur := le.cell(seq); cur != nil {
		c.Current = cur.total()
	}
	if prev := le.cell(seq - 1); prev != nil {
		c.Previous = prev.total()
	}
	return c
}

// merge takes an origin's counts with max, and its lease when newer than the one held,
// and marks the entry fresh until freshUntil. sentMs is when the request was sent: the
// lease lives meta.LeaseTTLMs from then.
func (le *localEntry) merge(cc engine.CellCounts, meta engine.OriginMeta, sentMs, freshUntil int64) {
	le.sync()
	// A catch-up applies a reset to the entries before it raises the link's version: the
	// entry's own last reset counts as applied already.
	applied := max(le.link.changesApplied.Load(), le.resetAt)
	if meta.Changes < applied {
		return // read before a change applied here (a reset): it may hold what that cancelled
	}
	for _, part := range [2]struct {
		seq      int64
		reg, imp uint64
	}{{cc.Seq, cc.CurRegional, cc.CurImported}, {cc.Seq - 1, cc.PrevRegional, cc.PrevImported}} {
		if part.reg == 0 && part.imp == 0 && le.cell(part.seq) == nil {
			continue // nothing to learn; keep the slot for a cell that has counts
		}
		if c := le.slot(part.seq); c != nil {
			c.regional = max(c.regional, capCount(part.reg))
			c.imported = max(c.imported, capCount(part.imp))
		}
	}
	// A lease granted after a change this edge has not applied yet (a reset) waits for it:
	// spent before, its cost would count as made before the reset (changes.go).
	if cc.LeaseSeq > le.leaseSeq && meta.Changes <= applied {
		// The origin's left is beyond the replays it applied: what this entry accepted
		// and has not had applied (pending, in flight) comes out of it.
		pending, inflight := le.unacked()
		base := le.spent - min(le.spent, satAdd(pending, inflight))
		le.leaseG, le.leaseSeq, le.leaseBoot = satAdd(base, cc.LeaseLeft), cc.LeaseSeq, meta.Boot
		le.leaseUntil, le.renewAt = sentMs+meta.LeaseTTLMs, sentMs+renewDelay(meta.LeaseTTLMs, freshUntil-sentMs)
	}
	le.freshUntil = max(le.freshUntil, freshUntil)
}

// renewDelay is how long after a grant of ttl ms the tuple's batches start renewing it:
// once its remaining life is shorter than fresh, the freshness a replay gives the entry,
// so that a tuple used at least once per freshness keeps its lease as it keeps its
// freshness (with --freshness 60s and leases of a minute, every batch after the first
// eighth renews); else at half its life. Never sooner than an eighth of its life: a busy
// tuple does not renew at every batch.
func renewDelay(ttl, fresh int64) int64 { return max(ttl/8, min(ttl/2, ttl-fresh)) }

func (le *localEntry) idle() bool {
	pending, inflight := le.unacked()
	return pending == 0 && inflight == 0 && !le.returnDue
}

// originLink is an edge's connection state with one origin: backoff, and the replay set.
type originLink struct {
	id     string
	client engine.Origin

	downUntil atomic.Int64 // ms; calls are skipped before it
	reachable atomic.Bool  // false after a failure, until a success
	probing   atomic.Bool  // one probe at a time once the backoff has passed
	lastOKMs  atomic.Int64
	backoffMs atomic.Int64
	edges     atomic.Int64 // active edges in the region, as the origin last said
	boot      atomic.Int64 // the origin's run, as it last said: leases of another are void
	offset    atomic.Int64 // the origin's clock minus this edge's, as last seen (reply latency included)
	slowSince atomic.Int64 // ms of the first timeout since the last success; 0: none
	hardDown  atomic.Bool  // a call failed otherwise than by timing out since the last success
	srttUs    atomic.Int64 // smoothed latency of successful calls, µs (callTimeout)

	mu sync.Mutex // guards pins, byKey, cursor, batch, batchID, handed
	// pins holds every entry with unacknowledged cost: the replay set (each entry knows
	// its index, so removal is a swap). byKey finds those the cache does not hold (it let
	// them go while pinned, or before they were) by the hash of their tuple key, for a
	// lookup after the cache lost an entry: it holds a chain (through sameHash) of every
	// such entry with that hash, and the lookup checks the key. A pinned entry is in the
	// cache or in byKey, but for the moment between the cache's removal of it and its
	// OnExit (leftCache): a caller that would make a new entry, or act on every entry of
	// a tuple, waits for the cache first (create, forEachEntry). Two entries of one key
	// can exist (the cache evicted one while a request still held it); both stay in pins,
	// and the one the cache does not hold in the chain, so either stays findable while it
	// holds unacknowledged cost. (Every pinned entry was in byKey before: a map insert and
	// delete per replayed entry, two cache misses each with the replay set large.)
	pins    []*localEntry
	byKey   map[uint64]*localEntry
	byPeak  int           // the most keys byKey held since it was last made (shrinkIndex)
	cursor  int           // where the next batch starts taking pins, so all get their turn
	batch   *pendingBatch // the batch being delivered, resent unchanged until answered
	batchID uint64

	kick chan struct{} // asks the flusher to send now (a batch is full)

	cold atomic.Pointer[coldGrant] // the cold allowance last granted (cold.go)

	// keptEntries is what the entries named by kept items (keep.go) and not held by the
	// cache cost (entryBytes): the flusher and the cache's goroutine change it.
	keptEntries atomic.Int64

	// The change feed (changes.go): the version applied, when an answer last showed the
	// edge current, the changes loop's wake-up, and the generation of views (a resync
	// raises it).
	changesMu        sync.Mutex // held by the catch-up that fetches and applies
	changesApplied   atomic.Uint64
	changesCurrentMs atomic.Int64
	changesKick      chan struct{}
	gen              atomic.Uint32

	ovr linkOverrides // the copy of the origin's overrides (override.go)

	keep    keptState     // counted cost the origin has not saved (flusher only; keep.go)
	handed  []keptHand    // counted hand-offs for the flusher to keep (guarded by mu)
	unsaved atomic.Uint64 // units kept, for Stats
}

type pendingBatch struct {
	engine.ReplayBatch
	entries []*localEntry // entries[i] holds Items[i]
}

// usable reports whether a call to the origin may be made now; at most one caller gets
// true while the origin is unreachable and its backoff has passed (the probe).
func (l *originLink) usable(nowMs int64) bool {
	ok, _ := l.use(nowMs)
	return ok
}

// use is usable that also reports whether the caller took the probe slot: it then makes
// its call, whose outcome frees the slot (succeeded, failed), or frees the slot itself.
func (l *originLink) use(nowMs int64) (ok, probe bool) {
	if l.reachable.Load() {
		return true, false
	}
	if nowMs < l.downUntil.Load() || !l.probing.CompareAndSwap(false, true) {
		return false, false
	}
	if nowMs < l.downUntil.Load() { // a probe failed between the two reads
		l.probing.Store(false)
		return false, false
	}
	return true, true
}

// degradedShare returns the share of a limit an edge may admit beyond its leases at now:
// share once the origin is down (a call failed otherwise than by timing out, or calls have
// timed out for slowForMs), 0 before that. An origin that is only slow, e.g. overloaded,
// is not down: if every edge admitted the limit on its own whenever one call timed out, a
// flood that slows the origin would pass several times the limit.
func (l *originLink) degradedShare(nowMs int64, share float64) float64 {
	if since := l.slowSince.Load(); l.hardDown.Load() || (since > 0 && nowMs-since >= slowForMs) {
		return share
	}
	return 0
}

// slowForMs is how long calls to an origin must have timed out before the edge treats
// it as down.
const slowForMs = 1000

// inflightBatch returns the ID of the batch being delivered, or 0.
func (l *originLink) inflightBatch() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.batch == nil {
		return 0
	}
	return l.batch.ID
}

// succeeded records an answer to a call sent at sentMs.
func (l *originLink) succeeded(sentMs, nowMs int64, meta engine.OriginMeta) {
	l.edges.Store(int64(max(meta.Edges, 1)))
	l.boot.Store(meta.Boot)
	if meta.Now > 0 {
		// From the send time: the request's latency makes the origin's clock seem ahead,
		// so deadlines err late (a refused client counted) rather than early (a hand-off
		// the edge still waits for dropped).
		l.offset.Store(meta.Now - sentMs)
	}
	l.grantCold(sentMs, meta)
	l.sawChanges(meta, nowMs)
	l.lastOKMs.Store(nowMs)
	l.answered()
}

// answered records that a call was answered: the origin is reachable (and a probe's slot
// is free again). It leaves lastOKMs, which only answers with a meta set: a change feed's
// answer tells nothing of the origin's edges or marks, so it must not put off the idle
// heartbeat that does.
func (l *originLink) answered() {
	l.backoffMs.Store(0)
	l.slowSince.Store(0)
	l.hardDown.Store(false)
	l.reachable.Store(true)
	l.probing.Store(false)
}

// failedUnder is failed for a call made under ctx: when ctx itself has ended (the
// request's client went away, the edge is stopping), the call says nothing of the origin,
// whose state stays; only the probe slot the call may have held is freed.
func (l *originLink) failedUnder(ctx context.Context, nowMs int64, err error) {
	if ctx.Err() != nil {
		l.probing.Store(false)
		return
	}
	l.failed(nowMs, err)
}

func (l *originLink) failed(nowMs int64, err error) {
	if errors.Is(err, context.DeadlineExceeded) {
		l.slowSince.CompareAndSwap(0, nowMs)
	} else {
		l.hardDown.Store(true)
	}
	b := min(max(2*l.backoffMs.Load(), 10), 1000)
	l.backoffMs.Store(b)
	l.downUntil.Store(nowMs + b)
	l.reachable.Store(false)
	l.probing.Store(false)
}

// Edge is the edge role's Limiter. It is safe for concurrent use.
type Edge struct {
	clock  engine.Clock
	cfg    Config
	log    *slog.Logger
	cache  *ristretto.Cache[uint64, *localEntry] // keyed by maphash of the tuple key
	seed   maphash.Seed
	links  []*originLink
	flight flightGroup
	// coldSeen: the tuples that used the cold allowance in their current cell (edge_cold.go).
	coldSeen *coldSeen

	overridesState // RL.OVERRIDE's copies, counted (override.go)

	entries       atomic.Int64 // entries in the cache
	pinned        atomic.Int64
	decisions     engine.DecisionCounters
	originAllowed atomic.Uint64 // handed-off decisions, by outcome
	originDenied  atomic.Uint64
	strict        atomic.Uint64
	reads         atomic.Uint64
	retried       atomic.Uint64
	expired       atomic.Uint64 // pending cost of cells that died before delivery
	refused       atomic.Uint64
	coldAdmitted  atomic.Uint64 // requests admitted under the cold allowance

	changesApplied atomic.Uint64 // changes of the origins applied (changes.go)
	resetDropped   atomic.Uint64 // cost accepted here that a reset cancelled
	resyncs        atomic.Uint64

	unsavedDropped atomic.Uint64 // kept cost dropped by the MaxUnsavedBytes bound
	resent         atomic.Uint64 // kept cost requeued for a restarted origin
	lastUnsavedLog atomic.Int64  // ms of the last log line about unsaved cost dropped
}

// New returns an Edge over the given origins. Run starts its replay flushers.
func New(clock engine.Clock, cfg Config) (*Edge, error) {
	if len(cfg.Origins) == 0 || len(cfg.Origins) != len(cfg.OriginIDs) {
		return nil, errors.New("edge: need one ID per origin, and at least one origin")
	}
	if cfg.Freshness <= 0 {
		cfg.Freshness = time.Second
	}
	if cfg.ReplayInterval <= 0 {
		cfg.ReplayInterval = 5 * time.Millisecond
	}
	if cfg.OriginTimeout <= 0 {
		cfg.OriginTimeout = 100 * time.Millisecond
	}
	if cfg.MaxMemoryBytes <= 0 {
		cfg.MaxMemoryBytes = engine.DefaultMaxMemory
	}
	if cfg.MaxPinned <= 0 {
		cfg.MaxPinned = int(max(cfg.MaxMemoryBytes/4/edgeEntryCost, 1024))
	}
	if cfg.MaxBatchItems <= 0 {
		cfg.MaxBatchItems = 1000
	}
	if cfg.MaxUnsavedBytes <= 0 {
		cfg.MaxUnsavedBytes = max(cfg.MaxMemoryBytes/8, 1<<16)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The cold set takes a sixteenth of the memory, the cache the rest.
	coldBytes := cfg.MaxMemoryBytes / 16
	e := &Edge{clock: clock, cfg: cfg, log: cfg.Logger, seed: maphash.MakeSeed(), coldSeen: newColdSeen(coldBytes)}
	cache, err := ristretto.NewCache(&ristretto.Config[uint64, *localEntry]{
		// The key is already a hash; entries are checked against their tuple key.
		KeyToHash:   func(h uint64) (uint64, uint64) { return h, 0 },
		NumCounters: max(10*cfg.MaxMemoryBytes/edgeEntryCost, 1000),
		MaxCost:     cfg.MaxMemoryBytes - coldBytes,
		BufferItems: 1024, // Gets reported to the admission policy per batch: fewer wake-ups of its goroutine
		OnEvict:     func(*ristretto.Item[*localEntry]) { e.entries.Add(-1) },
		OnReject:    func(*ristretto.Item[*localEntry]) { e.entries.Add(-1) },
		OnExit: func(le *localEntry) {
			if le != nil { // a Del of nothing exits nil
				e.leftCache(le)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("edge: local cache: %w", err)
	}
	e.cache = cache
	for i, o := range cfg.Origins {
		l := &originLink{id: cfg.OriginIDs[i], client: o, byKey: make(map[uint64]*localEntry), kick: make(chan struct{}, 1),
			changesKick: make(chan struct{}, 1)}
		l.reachable.Store(true)
		l.edges.Store(1)
		e.links = append(e.links, l)
	}
	return e, nil
}

// edgeEntryCost estimates an entry's bytes beyond its key, for the cache bound.
const edgeEntryCost = 200

// entryBytes is what the cache counts for le.
func entryBytes(le *localEntry) int64 { return int64(len(le.key)) + edgeEntryCost }

// link picks the origin of a tuple key by rendezvous hashing: the origin whose hash with
// the key is highest. Adding an origin moves only the keys it now wins.
func (e *Edge) link(key []byte) *originLink {
	if len(e.links) == 1 {
		return e.links[0]
	}
	best, bestScore := e.links[0], uint64(0)
	for _, l := range e.links {
		if s := rendezvousScore(l.id, key); s >= bestScore {
			best, bestScore = l, s
		}
	}
	return best
}

// rendezvousScore is FNV-1a over id and key, finished with a 64-bit mix, so that every
// edge process agrees without sharing a seed.
func rendezvousScore(id string, key []byte) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h = (h ^ uint64(id[i])) * 1099511628211
	}
	h = (h ^ 0xff) * 1099511628211
	for _, b := range key {
		h = (h ^ uint64(b)) * 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// Clock returns the edge's clock.
func (e *Edge) Clock() engine.Clock { return e.clock }

// lookup finds the entry of key: in the cache, else in its origin's replay set. The
// cache is keyed by a hash of the tuple key, so a lookup allocates nothing and key does
// not escape; two keys with one hash share a slot, and the check of le.key turns the
// loser's lookups into misses (a miss is safe: the origin is read again).
func (e *Edge) lookup(l *originLink, key []byte) *localEntry {
	if le, ok := e.cache.Get(maphash.Bytes(e.seed, key)); ok && string(le.key) == string(key) {
		return le
	}
	h := maphash.Bytes(e.seed, key)
	l.mu.Lock()
	le := l.byKey[h]
	for le != nil && string(le.key) != string(key) {
		le = le.sameHash
	}
	l.mu.Unlock()
	if le == nil {
		return nil
	}
	e.remember(le)
	e.cache.Wait() // the next lookup finds it in the cache (rare: an evicted entry still pinned)
	return le
}

func (e *Edge) remember(le *localEntry) {
	e.entries.Add(1)
	le.cached.Store(true) // before: a rejection of this Set clears it again (OnExit)
	// A kept entry the cache let go, back in it (a pinned entry found in byKey), is in the
	// cache's bound again: no longer in the unsaved one (a rejection counts it again).
	le.uncountKept()
	if !e.cache.Set(le.hash, le, entryBytes(le)) {
		e.leftCache(le)
		e.entries.Add(-1)
	}
}

// freshEntry returns the entry of key, locked, when local memory may decide a request of
// cost without the origin: cached, and either fresh and not strict, or holding a lease that
// covers the request (SPEC section 5: the lease keeps the region within the limit, so a
// leased tuple is decided locally whatever its freshness; its replay refreshes it; a peek,
// cost 0, spends no lease and reads a stale or strict tuple first). Otherwise
// nil, and the caller refreshes. Holding the lock from the check to the decision keeps them
// one step.
func (e *Edge) freshEntry(l *originLink, key []byte, cost uint64, now int64) *localEntry {
	le := e.lookup(l, key)
	if le == nil {
		return nil
	}
	le.lock()
	if now < le.freshUntil && now >= le.strictUntil {
		return le
	}
	if cost > 0 && le.leaseLeft(now, l.boot.Load()) >= cost {
		return le
	}
	le.mu.Unlock()
	return nil
}

// refresh returns the entry of key after reading the origin (reads of one tuple are
// shared by concurrent requests), asking for a lease of want units within limit (0, 0:
// none). It never returns nil; when the origin is in backoff or fails, the entry is the
// local view (not fresh). readOK reports whether the origin answered.
func (e *Edge) refresh(ctx context.Context, l *originLink, key string, window, seq, now int64, limit, want uint64) (le *localEntry, readOK bool) {
	if !l.usable(now) {
		if le = e.lookup(l, []byte(key)); le == nil {
			le = e.create(l, key, window)
		}
		return le, false
	}
	got, err := e.flight.do(ctx, key, func() (*localEntry, error) {
		le := e.lookup(l, []byte(key))
		if le == nil {
			le = e.create(l, key, window)
		}
		call, cancel := context.WithTimeout(ctx, e.callTimeout(l))
		defer cancel()
		start := time.Now()
		sent := e.clock.NowMs()
		counts, meta, err := l.client.Read(call, []engine.ReadItem{{Key: []byte(key), Seq: seq, Limit: limit, Want: want}})
		e.observe(l, "read", err, start)
		e.reads.Add(1)
		now := e.clock.NowMs()
		if err == nil && len(counts) != 1 {
			err = fmt.Errorf("origin %s: read answered %d cells for 1", l.id, len(counts))
		}
		if err != nil {
			l.failedUnder(ctx, now, err)
			return le, err
		}
		l.succeeded(sent, now, meta)
		le.lock()
		e.mergeAnswer(l, le, counts[0], meta, sent, now)
		le.mu.Unlock()
		return le, nil
	})
	if got == nil { // ctx ended while this request waited for another's read
		if got = e.lookup(l, []byte(key)); got == nil {
			got = e.create(l, key, window)
		}
	}
	return got, err == nil
}

// create makes a new entry and offers it to the cache; waiting for the cache makes it
// visible to the next lookup unless the cache's admission rejects it (then the next
// request reads the origin again, which loses nothing: an entry with unacknowledged cost
// is pinned).
func (e *Edge) create(l *originLink, key string, window int64) *localEntry {
	// A pinned entry the cache is letting go this moment is in neither the cache nor
	// byKey until its OnExit has run, which the cache's goroutine does before it takes
	// anything queued after now.
	//
	// An eviction that starts after this Wait and overlaps the lookup below can still
	// hide an entry A of key pinned while cached (so not in byKey until leftCache): a
	// second entry is made, and both spend the tuple's lease (no cost is lost: both are
	// pinned). It needs A to have entered the cache after the caller's own lookup (which
	// precedes every create) missed it, and an entry found in byKey stays there until
	// delivered: so A was made by a create of the same key running at the same time.
	// Within the key's flight (entryOf, refresh's read) no two run at once; outside it
	// (coldEntry, refresh in backoff) two creates of one key already make two entries
	// without any eviction. A second Wait on every miss would close this gap at the
	// price of another cache round trip per new key, and leave that wider one.
	e.cache.Wait()
	if le := e.lookup(l, []byte(key)); le != nil {
		return le
	}
	le := newLocalEntry(key, maphash.String(e.seed, key), window, l)
	e.remember(le)
	e.cache.Wait()
	return le
}

// observe records an origin call of l that started at start: its latency feeds l's
// smoothed round trip when it succeeded, and Config.Observe.
func (e *Edge) observe(l *originLink, kind string, err error, start time.Time) {
	d := time.Since(start)
	if err == nil {
		l.sampleRTT(d)
	}
	if e.cfg.Observe != nil {
		e.cfg.Observe(kind, err, d)
	}
}

// callTimeout bounds one call to l: --origin-timeout, or four smoothed round trips of l's
// successful calls when that is longer (an origin 50 ms away would otherwise fail every
// call a little slower than two round trips, and put itself in backoff), at most
// maxCallTimeout.
func (e *Edge) callTimeout(l *originLink) time.Duration {
	return max(e.cfg.OriginTimeout, min(4*time.Duration(l.srttUs.Load())*time.Microsecond, maxCallTimeout))
}

// maxCallTimeout bounds what the smoothed round trip may stretch a call's timeout to.
const maxCallTimeout = 2 * time.Second

// sampleRTT folds the latency d of a successful call into l's smoothed round trip (an
// eighth of each sample, as TCP's).
func (l *originLink) sampleRTT(d time.Duration) {
	us := d.Microseconds()
	if old := l.srttUs.Load(); old > 0 {
		us = old + (us-old)/8
	}
	l.srttUs.Store(us)
}

// Limit decides one request from local memory, reading the origin first when the tuple
// is cold, stale or strict, and handing the decision to the origin when this edge's lease
// does not cover it. ctx bounds the origin calls, each also bounded by callTimeout.
func (e *Edge) Limit(ctx context.Context, t engine.Tuple, limit, cost uint64) (engine.Decision, error) {
	d, _, err := e.limit(ctx, t, limit, cost, true, e.clock.NowMs())
	return d, err
}

// TryLimit is Limit at the instant nowMs (when its request batch was read) when local
// memory can decide without waiting on an origin: the tuple is cached, fresh and not
// strict, and the request needs no hand-off. Otherwise ok is false and nothing changed:
// the caller calls Limit where it may wait (an event loop hands the connection to a
// goroutine first).
func (e *Edge) TryLimit(t engine.Tuple, limit, cost uint64, nowMs int64) (d engine.Decision, ok bool, err error) {
	return e.limit(context.Background(), t, limit, cost, false, nowMs) // not waiting, it calls no origin
}

// limit decides at now; a request that waited on the origin reads the clock again.
func (e *Edge) limit(ctx context.Context, t engine.Tuple, limit, cost uint64, mayWait bool, now int64) (engine.Decision, bool, error) {
	var buf [256]byte
	key := engine.AppendKey(buf[:0], t)
	l := e.link(key)
	le := e.freshEntry(l, key, cost, now) // locked when not nil
	cold := false
	if le == nil {
		seq, _ := engine.Position(now, t.WindowMs)
		le = e.coldEntry(l, key, t.WindowMs, seq, now, limit, cost) // locked when not nil
		cold = le != nil
	}
	if le == nil {
		if !mayWait {
			return engine.Decision{}, false, nil
		}
		seq, _ := engine.Position(now, t.WindowMs)
		le, _ = e.refresh(ctx, l, string(key), t.WindowMs, seq, now, limit, leaseWant(cost))
		now = e.clock.NowMs()
		le.lock()
	}
	seq, elapsed := engine.Position(now, t.WindowMs)

	if !mayWait && max(le.cells[0].seq, le.cells[1].seq) > seq {
		// The batch's instant precedes a window this entry already holds: let Limit
		// decide at the clock's reading.
		le.mu.Unlock()
		return engine.Decision{}, false, nil
	}
	counts := le.counts(seq)
	// The local view never holds more than the origin's, so a local denial is right; an
	// admission is, within the lease.
	d := engine.Decide(counts, limit, cost, t.WindowMs, elapsed)
	// Strict mode follows a denial by the limit. A request the limit allows but that
	// neither the lease nor the origin could admit (a slow origin, a failed hand-off) is
	// refused with the backoff as its retry_after_ms; it puts the tuple in strict mode
	// only if the limit denies it on the counts read afterwards: a brief hiccup of the
	// origin must not send every tuple it touched to the origin for two windows.
	byLimit := !d.Allowed
	if d.Allowed && cost > 0 && !cold && le.leaseLeft(now, l.boot.Load()) < cost {
		if l.reachable.Load() {
			if !mayWait {
				le.mu.Unlock()
				return engine.Decision{}, false, nil
			}
			req := e.handOffRequest(l, le, limit, cost, now)
			le.mu.Unlock()
			hd, ok := e.handOff(ctx, l, le, req)
			le.lock()
			le.handing--
			if ok {
				le.mu.Unlock()
				return hd, true, nil
			}
			// The hand-off failed: the origin may have counted it all the same, so it is
			// not counted here; the request is refused until the origin answers again.
			now = e.clock.NowMs()
			seq, elapsed = engine.Position(now, t.WindowMs)
			d, byLimit = e.degraded(l, le.counts(seq), limit, cost, t.WindowMs, elapsed, now, 0)
		} else {
			d, byLimit = e.degraded(l, counts, limit, cost, t.WindowMs, elapsed, now, l.degradedShare(now, e.cfg.DegradedShare))
		}
	}
	if d.Allowed && cost > 0 {
		if err := e.account(l, le, seq, cost, limit); err != nil {
			le.mu.Unlock()
			e.refused.Add(1)
			return engine.Decision{}, true, err
		}
	}
	if byLimit && d.RetryAfterMs >= 0 { // cost > limit changes nothing, not even strict mode
		e.enterStrict(le, seq, t.WindowMs)
	}
	le.mu.Unlock()
	e.count(le, d.Allowed)
	return d, true, nil
}

// handOffRequest prepares the hand-off of a request of cost against limit of le (le.mu
// held), and marks the entry as handing: the caller undoes that once answered.
func (e *Edge) handOffRequest(l *originLink, le *localEntry, limit, cost uint64, now int64) engine.DecideRequest {
	req := engine.DecideRequest{Key: le.key, Limit: limit, Cost: cost}
	if l.lastOKMs.Load() > 0 {
		// The origin drops the request once this edge has stopped waiting.
		req.Deadline = now + l.offset.Load() + e.callTimeout(l).Milliseconds()
	}
	le.handing++ // its pending stays out of batches until the answer: see localEntry
	req.Pending, req.Inflight = le.unacked()
	if req.Inflight > 0 {
		req.InflightBatch = l.inflightBatch()
	}
	req.Want = leaseWant(satAdd(satAdd(req.Pending, le.handed), cost))
	le.handed = satAdd(le.handed, cost)
	if le.leaseSeq != 0 && le.leaseG > le.spent {
		// Give the rest of the lease back with the hand-off: it would otherwise count
		// against this very request. Nothing more is spent under it.
		req.Return, le.leaseG = le.leaseSeq, le.spent
	}
	return req
}

// degraded decides from counts while the origin cannot be asked and the lease does not
// cover the request: it enforces limit x share, and a request that only the reduced limit
// refuses may retry once the origin's backoff has passed. byLimit reports a refusal that
// the full limit makes too (the one that puts the tuple in strict mode).
func (e *Edge) degraded(l *originLink, counts engine.Counts, limit, cost uint64, windowMs, elapsed, now int64, share float64) (d engine.Decision, byLimit bool) {
	reduced := uint64(float64(limit) * share)
	d = engine.Decide(counts, max(reduced, 1), cost, windowMs, elapsed)
	if reduced == 0 && cost > 0 {
		d.Allowed, d.Remaining = false, 0
	}
	d.Limit = limit
	if !d.Allowed && cost <= limit {
		full := engine.Decide(counts, limit, cost, windowMs, elapsed)
		if full.Allowed || full.RetryAfterMs < 0 {
			// Refused by the reduced limit only: try again when the origin may be back.
			d.RetryAfterMs = max(l.downUntil.Load()-now, 1)
		} else {
			d.RetryAfterMs, byLimit = full.RetryAfterMs, true
		}
	}
	return d, byLimit
}

func (e *Edge) count(le *localEntry, allowed bool) { e.decisions.Add(le.hash, allowed) }

// enterStrict records a denial (le.mu held): until the end of the next window, requests
// for the tuple refresh from the origin first.
func (e *Edge) enterStrict(le *localEntry, seq, window int64) {
	until := (seq + 2) * window
	if le.strictUntil < until {
		if le.strictUntil <= e.clock.NowMs() {
			e.strict.Add(1)
		}
		le.strictUntil = until
	}
}

// account adds accepted cost to the entry (le.mu held) and makes sure the entry is in its
// origin's replay set.
func (e *Edge) account(l *originLink, le *localEntry, seq int64, cost, limit uint64) error {
	if err := e.pin(l, le); err != nil {
		return err
	}
	c := le.slot(seq)
	if c == nil {
		return nil // a cell older than both held (the clock stepped back): nothing to keep
	}
	c.pending = satAdd(c.pending, cost)
	le.spent = satAdd(le.spent, cost)
	if c.minLimit == 0 || limit < c.minLimit {
		c.minLimit = limit
	}
	return nil
}

// pin puts le (le.mu held) in its origin's replay set, unless it is there.
func (e *Edge) pin(l *originLink, le *localEntry) error {
	if le.pinned {
		return nil
	}
	l.mu.Lock()
	if len(l.pins) >= e.cfg.MaxPinned/len(e.links) {
		l.mu.Unlock()
		return ErrReplayFull
	}
	le.pinIdx = len(l.pins)
	l.pins = append(l.pins, le)
	if !le.cached.Load() { // else leftCache indexes it, should the cache let it go
		l.index(le)
	}
	le.pinned = true
	full := len(l.pins) >= e.cfg.MaxBatchItems
	l.mu.Unlock()
	e.pinned.Add(1)
	if full {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// handOff asks the origin to decide and count atomically. ok is false when the origin
// failed; the caller then decides locally.
func (e *Edge) handOff(ctx context.Context, l *originLink, le *localEntry, req engine.DecideRequest) (engine.Decision, bool) {
	call, cancel := context.WithTimeout(ctx, e.callTimeout(l))
	defer cancel()
	start := time.Now()
	sent := e.clock.NowMs()
	d, cc, meta, err := l.client.Decide(call, req)
	e.observe(l, "decide", err, start)
	now := e.clock.NowMs()
	if err != nil {
		l.failedUnder(ctx, now, err)
		return engine.Decision{}, false
	}
	l.succeeded(sent, now, meta)
	if d.Allowed {
		e.originAllowed.Add(1)
	} else {
		e.originDenied.Add(1)
	}
	le.lock()
	e.mergeAnswer(l, le, cc, meta, sent, now)
	if !d.Allowed && d.RetryAfterMs >= 0 { // cost > limit changes nothing, not even strict mode
		e.enterStrict(le, cc.Seq, le.window)
	}
	le.mu.Unlock()
	if d.Allowed {
		e.keepHandOff(l, le, cc.Seq, req.Cost, req.Limit, meta)
	}
	e.count(le, d.Allowed)
	return d, true
}

// mergeAnswer merges an origin's read or decide answer into le (le.mu held); the request
// was sent at sentMs. When the origin says it has applied the batch this edge has in
// flight, the counts include that batch: its cost stops being added on top (it would
// count twice until the replay's own answer arrives).
func (e *Edge) mergeAnswer(l *originLink, le *localEntry, cc engine.CellCounts, meta engine.OriginMeta, sentMs, now int64) {
	if id := l.inflightBatch(); id > 0 && meta.Applied >= id {
		for i := range le.cells {
			le.cells[i].inflight = 0
		}
	}
	le.merge(cc, meta, sentMs, now+e.cfg.Freshness.Milliseconds())
}

// Status reads a tuple, refreshing from the origin first. Source says whether the origin
// answered. ctx bounds the read, also bounded by callTimeout.
func (e *Edge) Status(ctx context.Context, t engine.Tuple) engine.Status {
	key := string(engine.AppendKey(nil, t))
	now := e.clock.NowMs()
	seq, _ := engine.Position(now, t.WindowMs)
	le, fromOrigin := e.refresh(ctx, e.link([]byte(key)), key, t.WindowMs, seq, now, 0, 0)
	now = e.clock.NowMs()
	seq, elapsed := engine.Position(now, t.WindowMs)
	st := engine.Status{Sequence: seq, ElapsedMs: elapsed, WindowMs: t.WindowMs, Source: "local"}
	if fromOrigin {
		st.Source = "origin"
	}
	le.lock()
	defer le.mu.Unlock()
	if c := le.cell(seq); c != nil {
		st.CurrentRegional = satAdd(c.regional, satAdd(c.pending, c.inflight))
		st.CurrentImported = c.imported
	}
	if c := le.cell(seq - 1); c != nil {
		st.PreviousRegional = satAdd(c.regional, satAdd(c.pending, c.inflight))
		st.PreviousImported = c.imported
	}
	st.Fresh = now < le.freshUntil
	st.StrictMs = max(0, le.strictUntil-now)
	return st
}
