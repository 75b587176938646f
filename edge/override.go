package edge

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// Overrides (RL.OVERRIDE) at the edge. Each origin's overrides are the limits of the
// tuples it holds: the edge keeps a copy of each origin's table, and a request for a tuple
// decides against the override its origin's copy gives (the origin of a tuple by
// rendezvous hashing, as for its counts), so an edge applies what the origin would.
//
// A copy is read in full (RL.INTERNAL.OVERRIDELIST, engine.OverridesOrigin) when the edge
// starts, when the origin's run changes (a restart restores overrides from its snapshot,
// which may lack the last ones) and when the edge resyncs; then it follows the change feed
// (changes.go: engine.ChangeOverride), within about changesPollMs of a change. Records
// carry the origin's sequence: of each key the copy keeps the record of the greatest, so a
// change read both in full and in the feed is applied once.
//
// Who owns what: catchUp (the link's changes goroutine, and an edge's RL.RESET) writes a
// copy, under linkOverrides.mu, which a full read holds throughout so that no change is
// applied to a copy it is about to replace (changes applied out of order are harmless: the
// greatest sequence wins). Requests read the copy through table, an atomic pointer swapped
// after a full read. With no override in any copy, a request's lookup is one atomic load
// (Edge.overridesAny).

// linkOverrides is an edge's copy of one origin's overrides.
type linkOverrides struct {
	mu     sync.Mutex                       // held by a full read and by a change's application
	table  atomic.Pointer[engine.Overrides] // nil until first read
	loaded atomic.Bool                      // read in full at least once
	boot   atomic.Int64                     // the origin run of the last full read (0: not known then)
}

// overrideRegion names the records of a copy: copies order records by sequence alone.
const overrideRegion = "origin"

// overridesDue reports whether l's copy must be read in full before the feed is followed.
func (l *originLink) overridesDue() bool {
	if !l.ovr.loaded.Load() {
		return true
	}
	b := l.boot.Load()
	return b != 0 && b != l.ovr.boot.Load()
}

// loadOverrides reads l's origin's overrides in full into a new copy, which replaces the
// old one once complete. It reports false when the origin did not answer (its backoff is
// then set; the next catchUp tries again).
func (e *Edge) loadOverrides(ctx context.Context, l *originLink) bool {
	l.ovr.mu.Lock()
	defer l.ovr.mu.Unlock()
	if !l.overridesDue() { // another catchUp read it meanwhile
		return true
	}
	oo, ok := l.client.(engine.OverridesOrigin)
	if !ok {
		l.ovr.loaded.Store(true)
		return true
	}
	boot := l.boot.Load() // before the read: a restart during it reads again
	t := engine.NewOverrides(e.clock, overrideRegion, 0)
	var after uint64
	for {
		call, cancel := context.WithTimeout(ctx, e.callTimeout(l))
		start := time.Now()
		r, err := oo.OverrideList(call, after)
		cancel()
		e.observe(l, "overrides", err, start)
		if err != nil {
			l.failedUnder(ctx, e.clock.NowMs(), err)
			return false
		}
		l.answered()
		t.Merge(overrideRecords(r.Changes))
		if len(r.Changes) < engine.MaxChangesPerReply || r.Version <= after {
			break
		}
		after = r.Version
	}
	l.ovr.table.Store(t)
	l.ovr.boot.Store(boot)
	l.ovr.loaded.Store(true)
	e.overridesCount()
	return true
}

// overrideRecords returns the override records of changes (other kinds skipped).
func overrideRecords(changes []engine.Change) []engine.OverrideRecord {
	out := make([]engine.OverrideRecord, 0, len(changes))
	for _, c := range changes {
		if r, ok := engine.OverrideRecordOf(c); ok {
			out = append(out, r)
		}
	}
	return out
}

// applyOverride applies an override change of l's feed to l's copy.
func (e *Edge) applyOverride(l *originLink, c engine.Change) {
	r, ok := engine.OverrideRecordOf(c)
	l.ovr.mu.Lock()
	defer l.ovr.mu.Unlock()
	t := l.ovr.table.Load()
	if !ok || t == nil {
		return
	}
	t.Merge([]engine.OverrideRecord{r})
	e.overridesCount()
}

// overridesCount recomputes overridesAny after a copy changed.
func (e *Edge) overridesCount() {
	e.ovrMu.Lock()
	defer e.ovrMu.Unlock()
	n := int64(0)
	for _, l := range e.links {
		if t := l.ovr.table.Load(); t != nil {
			n += int64(t.Len())
		}
	}
	e.overridesAny.Store(n)
}

// OverrideLimit returns the limit a request for t decides against at this edge: the
// override of t in its origin's copy, else limit (commands.OverrideLookup).
func (e *Edge) OverrideLimit(t engine.Tuple, limit uint64) uint64 {
	if e.overridesAny.Load() == 0 {
		return limit
	}
	var buf [256]byte
	if ov := e.link(engine.AppendKey(buf[:0], t)).ovr.table.Load(); ov != nil {
		return ov.Limit(t, limit)
	}
	return limit
}

// OverrideList lists the overrides of every origin's copy (as engine.Overrides.List;
// commands.OverrideRouter): a prefix held by several origins is listed once.
func (e *Edge) OverrideList(ws, ns string, match func([]byte) bool, count int) []engine.Override {
	var all []engine.Override
	for _, l := range e.links {
		if t := l.ovr.table.Load(); t != nil {
			all = append(all, t.List(ws, ns, match, 0)...)
		}
	}
	return engine.SortOverrides(all, count)
}

// ForwardTuple has the origin of tupleKey (rendezvous hashing, as its counts) run a
// forwarded command for a client (commands.OverrideRouter), as Forward does for a
// counter key.
func (e *Edge) ForwardTuple(ctx context.Context, ws string, tupleKey []byte, proto int, args [][]byte) ([]byte, error) {
	return e.forwardTo(ctx, e.link(tupleKey), ws, proto, args)
}

// ForwardEach has every origin run a forwarded command for a client, one after the other
// (commands.OverrideRouter), and returns their replies in the order of Config.Origins; it
// stops at the first that fails.
func (e *Edge) ForwardEach(ctx context.Context, ws string, proto int, args [][]byte) ([][]byte, error) {
	out := make([][]byte, 0, len(e.links))
	for _, l := range e.links {
		raw, err := e.forwardTo(ctx, l, ws, proto, args)
		if err != nil {
			return out, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// overridesState is the Edge's part of the overrides: the count of overrides in every
// copy, and the lock of its recount.
type overridesState struct {
	overridesAny atomic.Int64
	ovrMu        sync.Mutex
}
