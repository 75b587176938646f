package edge

import (
	"context"
	"hash/maphash"
	"math"
	"slices"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// The change feed, the edge's side (engine/changes.go has the origin's). Every origin
// reply carries the origin's change version (OriginMeta.Changes); an edge that sees one
// above what it has applied of that origin asks for the changes since
// (RL.INTERNAL.CHANGES, engine.ChangesOrigin) and applies them: a reset drops the tuple's
// views, its pending cost and its lease. An edge that hears nothing from an origin for
// changesPollMs asks anyway, so that a change reaches an idle edge within about
// changesPollMs plus a round trip.
//
// An answer whose meta shows a version below what the edge has applied was read by the
// origin before a change the edge has applied (it may hold counts a reset cancelled): its
// counts and lease are not merged (localEntry.merge).
//
// A resync (the edge missed changes the origin no longer lists) drops every view and lease
// the edge holds of the origin's tuples: the link's generation grows, and an entry of an
// older generation drops its views when next locked by a decision or an answer
// (localEntry.sync). Pending cost stays: it was accepted, and goes to the origin.
//
// Who owns what: one catch-up of a link at a time fetches and applies (changesMu: the
// changes loop's, or a reset's); changesApplied, changesCurrentMs and gen are atomics read
// by every path.

// changesPollMs is how long an edge goes without seeing an origin's change version before
// it asks for it.
const changesPollMs = 200

// changesMaxRounds bounds the CHANGES calls of one catch-up: 64 x 256 changes, more than
// the origin's log holds.
const changesMaxRounds = 64

// sawChanges takes the change version of an answer (at now): it wakes the changes loop
// when the origin is ahead, and otherwise notes that the edge was current then. The first
// version heard is adopted without asking: an edge that never heard of this origin holds no
// view of it to drop.
func (l *originLink) sawChanges(meta engine.OriginMeta, now int64) {
	applied := l.changesApplied.Load()
	if applied == 0 && meta.Changes > 0 && l.changesApplied.CompareAndSwap(0, meta.Changes) {
		l.changesCurrentMs.Store(now)
		return
	}
	if meta.Changes <= applied {
		l.changesCurrentMs.Store(now)
		return
	}
	select {
	case l.changesKick <- struct{}{}:
	default:
	}
}

// changesLoop fetches and applies l's changes when an answer showed it behind, or when it
// has not been current for changesPollMs, until ctx ends. The origin must serve the feed
// (engine.ChangesOrigin); otherwise it returns at once.
func (e *Edge) changesLoop(ctx context.Context, l *originLink) {
	co, ok := l.client.(engine.ChangesOrigin)
	if !ok {
		return
	}
	t := time.NewTicker(changesPollMs / 4 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.changesKick:
		case <-t.C:
			if e.clock.NowMs()-l.changesCurrentMs.Load() < changesPollMs && !l.overridesDue() {
				continue
			}
		}
		e.catchUp(ctx, l, co)
	}
}

// catchUp asks l's origin for the changes after the applied version until it has them all
// (or changesMaxRounds calls), and applies them. One catch-up of a link runs at a time
// (the changes loop's, or a reset's that waits for its own change).
func (e *Edge) catchUp(ctx context.Context, l *originLink, co engine.ChangesOrigin) {
	l.changesMu.Lock()
	defer l.changesMu.Unlock()
	for range changesMaxRounds {
		now := e.clock.NowMs()
		if !l.usable(now) {
			return
		}
		if l.overridesDue() && !e.loadOverrides(ctx, l) { // override.go
			return
		}
		since := l.changesApplied.Load()
		call, cancel := context.WithTimeout(ctx, e.callTimeout(l))
		start := time.Now()
		r, err := co.Changes(call, since)
		cancel()
		e.observe(l, "changes", err, start)
		if err != nil {
			l.failedUnder(ctx, e.clock.NowMs(), err)
			return
		}
		l.answered()
		if r.Resync {
			// A fresh edge (nothing applied: it holds no view to drop) asking from 0 is told
			// to resync by an origin that restored a version: it starts there, missing nothing.
			e.resync(l, r.Version, since != 0)
			l.changesCurrentMs.Store(now)
			return
		}
		for _, c := range r.Changes {
			if c.Version <= l.changesApplied.Load() {
				continue // applied already (an answer to an older since)
			}
			e.applyChange(l, c)
			l.changesApplied.Store(c.Version)
		}
		l.changesApplied.Store(max(l.changesApplied.Load(), r.Version))
		e.changesApplied.Add(uint64(len(r.Changes)))
		if len(r.Changes) < engine.MaxChangesPerReply {
			l.changesCurrentMs.Store(now)
			return
		}
	}
}

// applyChange applies one change of l's origin. Kinds this edge does not know are skipped.
func (e *Edge) applyChange(l *originLink, c engine.Change) {
	switch c.Kind {
	case engine.ChangeOverride:
		e.applyOverride(l, c)
	case engine.ChangeReset:
		e.forEachEntry(l, c.Key, func(le *localEntry) {
			le.mu.Lock()
			e.resetEntry(le, c.Version)
			le.mu.Unlock()
		})
	case engine.ChangeRefresh:
		e.forEachEntry(l, c.Key, func(le *localEntry) {
			le.mu.Lock()
			for i := range le.cells {
				le.cells[i].regional, le.cells[i].imported = 0, 0
			}
			le.freshUntil = 0
			le.mu.Unlock()
		})
	}
}

// forEachEntry calls fn for every entry of key this edge holds for l: the cached one and
// the pinned ones (an evicted entry may still hold cost), after waiting for the cache: a
// pinned entry it was letting go is in byKey then (see originLink.pins).
func (e *Edge) forEachEntry(l *originLink, key []byte, fn func(*localEntry)) {
	e.cache.Wait()
	var seen []*localEntry
	if le := e.lookup(l, key); le != nil {
		seen = append(seen, le)
	}
	h := maphash.Bytes(e.seed, key)
	l.mu.Lock()
	for le := l.byKey[h]; le != nil; le = le.sameHash {
		if string(le.key) == string(key) && (len(seen) == 0 || seen[0] != le) {
			seen = append(seen, le)
		}
	}
	l.mu.Unlock()
	for _, le := range seen {
		fn(le)
	}
}

// resetEntry applies a reset of version v to le (le.mu held): its views, its lease and the
// cost it holds for the origin go. Cost accepted here before the edge applied the reset
// was decided against usage the reset cancelled: it counts as made before the reset, so
// the reset cancels it too (the origin drops it from the batches that were on their way,
// which carry a change version below v).
func (e *Edge) resetEntry(le *localEntry, v uint64) {
	le.dropViews()
	var dropped uint64
	for i := range le.cells {
		c := &le.cells[i]
		dropped = satAdd(dropped, satAdd(c.pending, c.inflight))
		c.pending, c.inflight = 0, 0
	}
	le.handed, le.strictUntil = 0, 0
	le.resetAt = max(le.resetAt, v)
	le.vouch = math.MaxUint64 // the cost from before is gone: what comes next is from after the reset
	e.resetDropped.Add(dropped)
}

// dropViews forgets what the origin told le (le.mu held): counts, freshness and lease. The
// cost accepted here stays.
func (le *localEntry) dropViews() {
	for i := range le.cells {
		le.cells[i].regional, le.cells[i].imported = 0, 0
	}
	le.freshUntil = 0
	le.leaseG = min(le.leaseG, le.spent) // nothing more under it; its sequence stays, so no older grant comes back
	le.returnDue = false
}

// sync drops le's views when l resynced since they were taken (le.mu held).
// lock takes le's lock and drops its views when a resync outdated them (sync): every
// place that reads or changes the views takes the lock through it.
func (le *localEntry) lock() {
	le.mu.Lock()
	le.sync()
}

func (le *localEntry) sync() {
	if g := le.link.gen.Load(); le.gen != g {
		le.dropViews()
		le.gen = g
	}
}

// resync drops every view and lease this edge holds of l's tuples, and starts from
// version v of l's changes; missed (the edge had applied changes, and missed some since)
// counts and logs it. The pending cost held now was accepted without the changes
// missed: its batches claim only the version applied before (localEntry.vouch), so the
// origin drops it for a tuple reset since.
func (e *Edge) resync(l *originLink, v uint64, missed bool) {
	old := l.changesApplied.Load()
	l.mu.Lock()
	pins := slices.Clone(l.pins)
	l.mu.Unlock()
	for _, le := range pins { // entry locks after the link's: see Edge
		le.mu.Lock()
		le.vouch = min(le.vouch, old)
		le.mu.Unlock()
	}
	// The version first: an answer read before the changes missed, merged once the
	// generation has dropped the views, is refused (localEntry.merge).
	l.changesApplied.Store(v)
	l.gen.Add(1)
	l.ovr.loaded.Store(false) // read the overrides again (override.go)
	if missed {
		e.resyncs.Add(1)
		e.log.Warn("edge resynced with its origin: it missed changes the origin no longer lists", "origin", l.id, "version", v)
	}
}

// ChangesVersion returns the version of the changes this edge has applied of each origin,
// in the order of Config.Origins.
func (e *Edge) ChangesVersion() []uint64 {
	out := make([]uint64, len(e.links))
	for i, l := range e.links {
		out[i] = l.changesApplied.Load()
	}
	return out
}
