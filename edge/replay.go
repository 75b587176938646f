package edge

import (
	"context"
	"math"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// Run flushes each origin's replay set every ReplayInterval (or at once when a batch is
// full), and follows each origin's change feed (changes.go), until ctx ends; then it makes one last attempt to deliver what is pending, within
// OriginTimeout per origin. Its calls to the origins run under ctx until then, and the
// last ones under ctx without its cancellation.
func (e *Edge) Run(ctx context.Context) {
	done := make(chan struct{}, 2*len(e.links))
	for _, l := range e.links {
		go func() {
			e.flushLoop(ctx, l)
			done <- struct{}{}
		}()
		go func() {
			e.changesLoop(ctx, l)
			done <- struct{}{}
		}()
	}
	for range 2 * len(e.links) {
		<-done
	}
}

func (e *Edge) flushLoop(ctx context.Context, l *originLink) {
	t := time.NewTicker(e.cfg.ReplayInterval)
	defer t.Stop()
	e.heartbeat(ctx, l)
	for {
		select {
		case <-ctx.Done():
			// Final flush, e.g. on SIGTERM: a few rounds, each bounded by OriginTimeout.
			last := context.WithoutCancel(ctx)
			for range 3 {
				if !e.flush(last, l, true) {
					break
				}
			}
			e.awaitSaved(last, l)
			return
		case <-t.C:
		case <-l.kick:
		}
		e.flush(ctx, l, false)
		if now := e.clock.NowMs(); now-l.lastOKMs.Load() >= heartbeatMs || (l.unsaved.Load() > 0 && now-l.keep.heard >= heartbeatMs) {
			// also tells the durable mark while cost is kept, hand-offs not yet taken in
			// included (an edge whose traffic is only hand-offs sends no batch)
			e.heartbeat(ctx, l)
		}
	}
}

// closeWaitMs bounds how long (ms, by the edge's clock) an edge that stops waits for each
// origin's snapshot to hold the cost it keeps (keep.go): an origin saves every
// --snapshot-interval (1 s by default), so 5 s covers a few saves, and keeps a shutdown
// short when the origin saves rarely or is away.
const closeWaitMs = 5_000

// awaitSaved is the last thing the flusher of l does when the edge stops: while it keeps
// cost the origin has not saved, it asks for the durable mark (a heartbeat) every
// ReplayInterval (10 to 100 ms), for at most closeWaitMs; what is still kept then is logged at warn (a
// kill -9 of the origin would lose it) and dropped with the edge.
func (e *Edge) awaitSaved(ctx context.Context, l *originLink) {
	deadline := e.clock.NowMs() + closeWaitMs
	for l.unsaved.Load() > 0 && e.clock.NowMs() < deadline {
		e.heartbeat(ctx, l) // takes in the hand-offs not heard yet too
		if l.unsaved.Load() == 0 {
			return
		}
		time.Sleep(min(max(e.cfg.ReplayInterval, 10*time.Millisecond), 100*time.Millisecond))
	}
	if l.unsaved.Load() > 0 {
		e.log.Warn("stopping with cost the origin has not saved yet: a kill -9 of the origin would lose it",
			"origin", l.id, "units", l.unsaved.Load(), "cells", l.keep.items, "waited_ms", closeWaitMs)
	}
}

// heartbeatMs is how often an idle edge tells each origin it is there, so that the
// origin's count of active edges (which sizes every lease it grants) holds the
// edges that are about to send, not just those that did.
const heartbeatMs = 1000

// heartbeat is an empty read: it only refreshes the origin's view of this edge and this
// edge's count of active edges, and tells the flusher the origin's durable mark and run
// (keep.go).
func (e *Edge) heartbeat(ctx context.Context, l *originLink) {
	now := e.clock.NowMs()
	if !l.usable(now) {
		return
	}
	call, cancel := context.WithTimeout(ctx, e.callTimeout(l))
	defer cancel()
	_, meta, err := l.client.Read(call, nil)
	if err != nil {
		l.failedUnder(ctx, e.clock.NowMs(), err)
		return
	}
	l.succeeded(now, e.clock.NowMs(), meta)
	e.heard(l, meta, e.clock.NowMs())
}

// flush delivers the pending batch of l, building one first from the replay set when none
// is pending. It reports whether more may remain. final skips the backoff.
func (e *Edge) flush(ctx context.Context, l *originLink, final bool) (more bool) {
	now := e.clock.NowMs()
	ok, probe := l.use(now)
	if !ok && !final {
		return true
	}
	l.mu.Lock()
	b := l.batch
	l.mu.Unlock()
	if b == nil {
		b = e.buildBatch(l, now)
		if b == nil {
			if probe { // nothing will be sent: free the probe slot this flush took (only)
				l.probing.Store(false)
			}
			return false
		}
	} else {
		e.retried.Add(1)
	}
	b.Boot = l.keep.replayBoot()
	call, cancel := context.WithTimeout(ctx, e.callTimeout(l))
	start := time.Now()
	sent := now
	counts, meta, err := l.client.Replay(call, b.ReplayBatch)
	cancel()
	e.observe(l, "replay", err, start)
	now = e.clock.NowMs()
	if err == nil && len(counts) != len(b.Items) {
		err = errShortReply
	}
	if err != nil {
		l.failedUnder(ctx, now, err)
		return true
	}
	l.succeeded(sent, now, meta)
	if b.Boot != 0 && meta.Boot != b.Boot {
		// A new run of the origin: it applied nothing of b, which is sent again once the
		// cost it lacks is back in the entries (keep.go).
		e.heard(l, meta, now)
		return true
	}
	e.keep(l, b, meta, now)
	fresh := now + e.cfg.Freshness.Milliseconds()
	for i, it := range b.Items {
		le := b.entries[i]
		le.mu.Lock()
		if c := le.cell(it.Seq); c != nil {
			c.inflight -= min(c.inflight, it.Cost)
		}
		le.merge(counts[i], meta, sent, fresh)
		e.markReturn(le, now, l.boot.Load())
		e.unpinIfIdle(l, le)
		le.mu.Unlock()
	}
	l.mu.Lock()
	l.batch = nil
	more = len(l.pins) > 0
	l.mu.Unlock()
	return more
}

type replyError string

func (e replyError) Error() string { return string(e) }

const errShortReply = replyError("origin answered a replay batch with the wrong number of cells")

// buildBatch moves pending cost of up to MaxBatchItems cells into a new batch, which
// stays l.batch until the origin answers it. Pending cost of cells that can no longer
// matter is dropped (and counted).
//
// The batch's change version (ReplayBatch.Changes) is the one its cost vouches for: that of
// the first entry taken (localEntry.claim). An entry whose cost vouches for another one
// waits for a later batch, which starts with it: one entry's cost from before a resync
// does not make the origin drop another tuple's cost accepted after its reset.
func (e *Edge) buildBatch(l *originLink, now int64) *pendingBatch {
	b := &pendingBatch{}
	b.Changes = unclaimed
	l.mu.Lock()
	n := min(len(l.pins), e.cfg.MaxBatchItems)
	entries := make([]*localEntry, 0, n)
	if l.cursor >= len(l.pins) {
		l.cursor = 0
	}
	for i := 0; i < n; i++ {
		entries = append(entries, l.pins[(l.cursor+i)%len(l.pins)])
	}
	l.cursor += n
	l.mu.Unlock()

	b.Items = make([]engine.ReplayItem, 0, len(entries))
	b.entries = make([]*localEntry, 0, len(entries))
	var waiting *localEntry // the first entry left for a later batch
	for _, le := range entries {
		le.mu.Lock()
		if !e.batchEntry(b, le, now, now/le.window, l.boot.Load()) && waiting == nil {
			waiting = le
		}
		e.unpinIfIdle(l, le)
		le.mu.Unlock()
	}
	if b.Changes == unclaimed { // no cost: lease returns only, which vouch for nothing
		b.Changes = l.changesApplied.Load()
	}
	if len(b.Items) == 0 {
		return nil
	}
	l.mu.Lock()
	if waiting != nil && waiting.pinned {
		l.cursor = waiting.pinIdx // the next batch starts with it
	}
	l.batchID++
	b.Node, b.ID = e.cfg.NodeRun, l.batchID
	l.batch = b
	l.mu.Unlock()
	return b
}

// batchEntry moves le's pending cost (le.mu held) into b: an item per cell, the latest
// of which carries the lease request: a renewal at every batch of a busy tuple (its
// demand since the last batch asks for the least lease or more), and for a quiet one
// only when less than half of the least lease is left or half of the lease's life is
// over; or giving it back when markReturn found it idle. Most items of warm tuples far
// from their limit need neither, and cost the origin no lease work. Nothing moves while a
// hand-off of the tuple is in flight (see localEntry.handing). cur is the current cell.
// It reports false when it left le's cost for a later batch: that cost vouches for
// another change version than b's.
func (e *Edge) batchEntry(b *pendingBatch, le *localEntry, now, cur, boot int64) bool {
	if le.handing > 0 {
		return true
	}
	if le.hasPending(cur) {
		switch claim := le.claim(); {
		case b.Changes == unclaimed:
			b.Changes = claim
		case claim != b.Changes:
			return false
		}
	}
	first, demand := len(b.Items), le.handed
	for i := range le.cells {
		c := &le.cells[i]
		if c.seq == emptySeq || c.pending == 0 {
			continue
		}
		if c.seq < cur-1 {
			e.expired.Add(c.pending)
			c.pending = 0
			continue
		}
		demand = satAdd(demand, c.pending)
		b.Items = append(b.Items, engine.ReplayItem{Key: le.key, Seq: c.seq, Cost: c.pending, Limit: c.minLimit})
		b.entries = append(b.entries, le)
		c.inflight = satAdd(c.inflight, c.pending)
		c.pending = 0
	}
	switch {
	case len(b.Items) > first:
		last := &b.Items[first]
		for i := first + 1; i < len(b.Items); i++ {
			if b.Items[i].Seq > last.Seq {
				last = &b.Items[i]
			}
		}
		busy := demand >= leaseMinWant/leaseWantFactor // it asks for the least lease or more
		if busy || le.leaseLeft(now, boot) < leaseMinWant/2 || now >= le.renewAt {
			last.Want = leaseWant(demand)
		}
	case le.returnDue:
		// Give the idle lease back: accept no more under it from now on.
		b.Items = append(b.Items, engine.ReplayItem{Key: le.key, Seq: cur, Limit: le.limitSeen(), Return: le.leaseSeq})
		b.entries = append(b.entries, le)
		le.leaseG = min(le.leaseG, le.spent)
	}
	le.returnDue, le.handed = false, 0
	if len(b.Items) > first {
		le.vouch = math.MaxUint64 // its pending cost went: what comes next, the link's version vouches for
	}
	return true
}

// unclaimed is the change version of a batch no cost has claimed yet.
const unclaimed = math.MaxUint64

// hasPending reports whether le holds pending cost of a cell that still matters (le.mu
// held); cur is the current cell.
func (le *localEntry) hasPending(cur int64) bool {
	for _, c := range le.cells {
		if c.seq != emptySeq && c.pending > 0 && c.seq >= cur-1 {
			return true
		}
	}
	return false
}

// claim returns the change version le's pending cost vouches for (le.mu held): every
// change the edge had applied when the cost was taken, read under le.mu, where a reset of
// the tuple drops the cost before the version says it is applied; at least le's last
// reset (its cost is all from after it); at most le.vouch (cost from before a resync or a
// restart's requeue, accepted without the changes since).
func (le *localEntry) claim() uint64 {
	return min(max(le.link.changesApplied.Load(), le.resetAt), le.vouch)
}

// limitSeen returns the lowest limit accepted against le's cells here, or 0.
func (le *localEntry) limitSeen() uint64 {
	var lim uint64
	for _, c := range le.cells {
		if c.seq != emptySeq && c.minLimit > 0 && (lim == 0 || c.minLimit < lim) {
			lim = c.minLimit
		}
	}
	return lim
}

// markReturn (le.mu held) decides, after a batch was acknowledged, whether the lease is
// to be given back: the tuple is idle here (nothing pending or in flight) while the lease
// is a large part of what is left of the limit, so that budget a quiet edge holds goes
// back to the others. Far from the limit an idle lease is kept: it costs the others
// nothing, and the next request here is decided without the network.
func (e *Edge) markReturn(le *localEntry, now, boot int64) {
	left, limit := le.leaseLeft(now, boot), le.limitSeen()
	if pending, inflight := le.unacked(); left == 0 || pending > 0 || inflight > 0 || limit == 0 {
		return
	}
	seq, elapsed := engine.Position(now, le.window)
	used := engine.Used(le.counts(seq), le.window, elapsed)
	if limit <= used || returnFactor*left >= limit-used {
		le.returnDue = true
	}
}

// returnFactor: an idle lease is given back when it is more than 1/returnFactor of what
// is left of the limit.
const returnFactor = 8

// unpinIfIdle removes le (le.mu held) from the replay set once it holds nothing
// unacknowledged.
func (e *Edge) unpinIfIdle(l *originLink, le *localEntry) {
	if !le.pinned || !le.idle() {
		return
	}
	l.mu.Lock()
	last := l.pins[len(l.pins)-1]
	l.pins[le.pinIdx], last.pinIdx = last, le.pinIdx
	l.pins[len(l.pins)-1] = nil
	l.pins = l.pins[:len(l.pins)-1]
	le.pinned = false
	if le.indexed {
		l.unindex(le)
	}
	if cap(l.pins) >= shrinkAbove && len(l.pins)*shrinkFactor <= cap(l.pins) {
		l.pins = append(make([]*localEntry, 0, 2*len(l.pins)), l.pins...)
	}
	l.mu.Unlock()
	e.pinned.Add(-1)
}

// index puts le in byKey's chain of its hash (l.mu held).
func (l *originLink) index(le *localEntry) {
	le.sameHash = l.byKey[le.hash]
	l.byKey[le.hash] = le
	l.byPeak = max(l.byPeak, len(l.byKey))
	le.indexed = true
}

// unindex takes le out of byKey (l.mu held), and makes byKey anew when it has shrunk
// enough.
func (l *originLink) unindex(le *localEntry) {
	if head := l.byKey[le.hash]; head == le {
		if le.sameHash != nil {
			l.byKey[le.hash] = le.sameHash
		} else {
			delete(l.byKey, le.hash)
		}
	} else {
		// A twin or a hash collision: chains are one or two entries long.
		for p := head; p != nil; p = p.sameHash {
			if p.sameHash == le {
				p.sameHash = le.sameHash
				break
			}
		}
	}
	le.sameHash, le.indexed = nil, false
	if l.byPeak >= shrinkAbove && len(l.byKey)*shrinkFactor <= l.byPeak {
		l.shrinkIndex()
	}
}

// leftCache records that the cache let go of le (its OnExit, run by the cache's
// goroutine, or by the goroutine whose Set replaced le in the cache, or remember's when
// the cache dropped the Set): le leaves the sibling set
// that names it and lets its own go (a set holds only cached entries, so that no cached
// entry keeps the ones the cache let go alive: see addSibling); pinned, it goes into
// byKey.
func (e *Edge) leftCache(le *localEntry) {
	le.cached.Store(false)
	le.keptLeft() // after the store: a hold that read cached as set is seen here
	le.dropSiblings()
	if o := le.sibOf.Swap(nil); o != nil {
		o.dropSibling(le)
	}
	l := le.link
	l.mu.Lock()
	if le.pinned && !le.indexed {
		l.index(le)
	}
	l.mu.Unlock()
}

// A Go map never gives back its table: after a burst pinned many entries (a warm-up, a
// flood of new keys), byKey stayed as large as at its peak, and every pin and unpin of
// the usual few thousand probed a table of hundreds of thousands of slots, a cache miss
// each (with 200k entries pinned once, the edge spent a tenth of its CPU there). When
// byKey has shrunk shrinkFactor times below its peak, it is made anew at its size; pins
// likewise, when it holds shrinkFactor times fewer entries than its capacity (byKey holds
// only the pinned entries the cache let go: a burst of cached ones leaves it small). A
// cost of the entries still pinned, once per such shrink.
const (
	shrinkAbove  = 4096
	shrinkFactor = 8
)

// shrinkIndex makes byKey anew at its current size (l.mu held).
func (l *originLink) shrinkIndex() {
	byKey := make(map[uint64]*localEntry, 2*len(l.byKey))
	for h, head := range l.byKey { // the chain comes with its head
		byKey[h] = head
	}
	l.byKey, l.byPeak = byKey, len(byKey)
}

// OriginStat describes one origin as an edge sees it.
type OriginStat struct {
	ID        string
	Reachable bool
	LastOKMs  int64
	Pinned    int  // entries awaiting replay to it
	Inflight  bool // a batch is being delivered
	Edges     int  // active edges in the region, as the origin last said
	// Unsaved is cost the origin counted (replays, hand-offs) and has not saved yet, kept
	// to re-send should it restart from its snapshot.
	Unsaved uint64
}

// Stats are the edge's counters, read by INFO and /metrics.
type Stats struct {
	Allowed       uint64
	Denied        uint64
	RefusedFull   uint64 // requests refused because the replay set was full (ErrReplayFull)
	OriginAllowed uint64 // of Allowed, decisions handed to the origin
	OriginDenied  uint64 // of Denied, decisions handed to the origin
	OriginReads   uint64
	ReplayPending int64  // entries holding cost not yet acknowledged by their origin
	ReplayRetried uint64 // replay batches sent again after a failure
	ReplayExpired uint64 // cost dropped because its cell died before delivery
	Strict        uint64 // strict-mode activations
	ColdAdmitted  uint64 // requests admitted under the cold allowance, without a round trip
	Origins       []OriginStat
	// Entries are the tuples held in local memory; MaxMemoryBytes bounds them.
	Entries        int64
	MaxMemoryBytes int64

	// ReplayUnsaved is cost the origins acknowledged and have not saved yet, kept to be
	// re-sent should one restart from its snapshot (kill -9); ReplayUnsavedDropped is such
	// cost dropped by the bound (Config.MaxUnsavedBytes); ReplayResent is such cost re-sent
	// to a restarted origin.
	ReplayUnsaved        uint64
	ReplayUnsavedDropped uint64
	ReplayResent         uint64

	// ChangesApplied counts the origins' changes applied (changes.go); ResetDropped is cost
	// accepted here that a reset cancelled before it reached the origin; Resyncs counts the
	// times an origin's feed no longer held what this edge missed.
	ChangesApplied uint64
	ResetDropped   uint64
	Resyncs        uint64
}

// Stats returns the edge's counters.
func (e *Edge) Stats() Stats {
	allowed, denied := e.decisions.Load()
	s := Stats{
		Allowed:        allowed,
		Denied:         denied,
		RefusedFull:    e.refused.Load(),
		Entries:        e.entries.Load(),
		MaxMemoryBytes: e.cfg.MaxMemoryBytes,
		OriginAllowed:  e.originAllowed.Load(),
		OriginDenied:   e.originDenied.Load(),
		OriginReads:    e.reads.Load(),
		ReplayPending:  e.pinned.Load(),
		ReplayRetried:  e.retried.Load(),
		ReplayExpired:  e.expired.Load(),
		Strict:         e.strict.Load(),
		ColdAdmitted:   e.coldAdmitted.Load(),

		ReplayUnsavedDropped: e.unsavedDropped.Load(),
		ReplayResent:         e.resent.Load(),

		ChangesApplied: e.changesApplied.Load(),
		ResetDropped:   e.resetDropped.Load(),
		Resyncs:        e.resyncs.Load(),
	}
	for _, l := range e.links {
		l.mu.Lock()
		st := OriginStat{ID: l.id, Reachable: l.reachable.Load(), LastOKMs: l.lastOKMs.Load(),
			Pinned: len(l.pins), Inflight: l.batch != nil, Edges: int(l.edges.Load()), Unsaved: l.unsaved.Load()}
		l.mu.Unlock()
		s.ReplayUnsaved = satAdd(s.ReplayUnsaved, st.Unsaved)
		s.Origins = append(s.Origins, st)
	}
	return s
}

// Undelivered returns the cost accepted here that no origin has acknowledged: its units,
// and the cells (tuple and window sequence) holding them. Cost sent in a batch still
// unanswered counts, since the origin may not have applied it. An edge exiting with
// units > 0 loses them.
func (e *Edge) Undelivered() (units uint64, cells int) {
	var pins []*localEntry
	for _, l := range e.links {
		// Copy the replay set: an entry's lock is taken before its link's (unpinIfIdle).
		l.mu.Lock()
		pins = append(pins[:0], l.pins...)
		l.mu.Unlock()
		for _, le := range pins {
			le.mu.Lock()
			for _, c := range le.cells {
				if u := satAdd(c.pending, c.inflight); c.seq != emptySeq && u > 0 {
					units = satAdd(units, u)
					cells++
				}
			}
			le.mu.Unlock()
		}
	}
	return units, cells
}

// Close releases the local cache. Call it after Run has returned.
func (e *Edge) Close() { e.cache.Close() }
