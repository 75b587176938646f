package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// This file decides several limits of one key at once (RL.LIMIT key limit window [limit
// window ...]): allowed only when every limit allows, and then counted in every tuple.
//
// A multi-limit request is decided locally only when every tuple's lease covers its cost
// (a local denial by any limit is right as for one tuple: the local view never holds more
// than the origin's). Otherwise it is handed to the origin in one call carrying all the
// tuples (engine.DecideMultiRequest), which decides and counts them atomically. The
// tuples of one key live on one origin when the edge has one; with several, rendezvous
// hashing may place them on different origins, which no one call decides atomically: the
// edge then asks each for leases, and a request they do not cover is refused without
// counting (it never admits beyond a limit; near the limits it admits less).
//
// The entries of a request are locked together, in key order: no other path holds two
// entry locks, so multi-limit requests cannot deadlock among themselves or with others.
// No cold allowance is spent on a multi-limit request: a tuple without lease or fresh
// counts is read first.
//
// A request looks its first tuple's entry up in the cache and reaches the others from it
// (siblingSet): each lookup is a few cache misses (ristretto's map, its admission
// counters, the entry), and on many keys they were most of the cost of a second window.

// multiTuple is one tuple of a multi-limit request at the edge.
type multiTuple struct {
	key   []byte
	limit uint64
	w     int64
	l     *originLink
	le    *localEntry
}

// LimitAll decides one request of cost against every limit of ops (distinct tuples of one
// key, at most engine.MaxLimits) and counts it in every tuple when all allow, in none
// otherwise; out[i] receives ops[i]'s decision and the result is engine.Binding's index.
// ctx bounds the origin calls, as Limit's.
func (e *Edge) LimitAll(ctx context.Context, ops []engine.LimitOp, cost uint64, out []engine.Decision) (int, error) {
	b, _, err := e.limitAll(ctx, ops, cost, true, e.clock.NowMs(), out)
	return b, err
}

// TryLimitAll is LimitAll at the instant nowMs when local memory decides it without
// waiting on an origin; otherwise ok is false and nothing changed, as TryLimit.
func (e *Edge) TryLimitAll(ops []engine.LimitOp, cost uint64, nowMs int64, out []engine.Decision) (int, bool, error) {
	return e.limitAll(context.Background(), ops, cost, false, nowMs, out)
}

var errTooManyLimits = fmt.Errorf("edge: more than %d limits in one request", engine.MaxLimits)

// limitAll decides at now; a request that waited on an origin reads the clock again.
func (e *Edge) limitAll(ctx context.Context, ops []engine.LimitOp, cost uint64, mayWait bool, now int64, out []engine.Decision) (int, bool, error) {
	n := len(ops)
	if n == 0 || n > engine.MaxLimits {
		return 0, true, errTooManyLimits
	}
	m := multiPool.Get().(*multi)
	defer m.release()
	m.e, m.cost = e, cost
	keys := m.keyBuf[:0]
	for i, op := range ops {
		start := len(keys)
		keys = engine.AppendKey(keys, op.Tuple)
		key := keys[start:len(keys):len(keys)] // capped: a later append copies, never overwrites
		m.tsBuf[i] = multiTuple{key: key, limit: op.Limit, w: op.Tuple.WindowMs, l: e.link(key)}
		m.orderBuf[i] = i
	}
	m.ts, m.order = m.tsBuf[:n], m.orderBuf[:n]
	slices.SortFunc(m.order, func(a, b int) int { return bytes.Compare(m.ts[a].key, m.ts[b].key) })
	for attempt := 0; ; attempt++ {
		if ok, err := m.entries(ctx, mayWait); !ok || err != nil {
			return 0, err != nil, err
		}
		m.lock()
		stale := m.stale(now)
		if stale == 0 {
			break
		}
		m.unlock()
		if !mayWait {
			return 0, false, nil
		}
		if attempt > 0 { // read once: then decide on what is known, as for one tuple
			m.lock()
			break
		}
		m.refresh(ctx, stale, now)
		now = e.clock.NowMs()
	}
	return m.decide(ctx, mayWait, now, out)
}

// multi is one multi-limit request being decided. They are pooled: a request's arrays
// would escape to the heap through the methods anyway.
type multi struct {
	e     *Edge
	ts    []multiTuple // tsBuf[:n]
	order []int        // lock order (by key): orderBuf[:n]
	cost  uint64
	uses  uint32 // requests this pooled value decided: siblingTouch's count

	tsBuf    [engine.MaxLimits]multiTuple
	orderBuf [engine.MaxLimits]int
	keyBuf   [engine.MaxLimits * 64]byte // the tuples' keys, when they fit
}

var multiPool = sync.Pool{New: func() any { return new(multi) }}

// release returns m to the pool, holding no entry, origin or key of the request.
func (m *multi) release() {
	clear(m.ts)
	m.e, m.ts, m.order = nil, nil, nil
	multiPool.Put(m)
}

// entries finds the entry of every tuple that has none yet (a read gave the others
// theirs, as Limit decides on the entry its read returned); without mayWait, a missing
// one ends the request (false). With it, a missing one is made (cold: stale, so it is
// read next), in the key's flight (entryOf); err is ctx's when it ended meanwhile.
//
// The first tuple's entry is looked up in the cache; the others are its siblings when
// it knows them (siblingSet), and looked up and made its siblings otherwise.
func (m *multi) entries(ctx context.Context, mayWait bool) (ok bool, err error) {
	m.uses++
	for i := range m.ts {
		t := &m.ts[i]
		if t.le != nil {
			continue
		}
		first := m.ts[0].le
		if i > 0 && first != nil && m.uses%siblingTouch != 0 {
			if t.le = first.sibling(t.w, t.l); t.le != nil {
				continue
			}
		}
		if t.le = m.e.lookup(t.l, t.key); t.le == nil {
			if !mayWait {
				return false, nil
			}
			if t.le, err = m.e.entryOf(ctx, t.l, t.key, t.w); err != nil {
				return false, err
			}
		}
		if i > 0 && first != nil {
			first.addSibling(t.le)
		}
	}
	return true, nil
}

// siblingTouch: one multi-limit request in siblingTouch looks every window up in the
// cache, siblings too, so that the cache's admission policy, which counts lookups, sees
// the other windows of a busy key used (a fraction as often as its first): else it
// would take them for unused, and evict them first.
const siblingTouch = 8

// siblingSet holds the entries of one key's other windows, at most one per window, from
// its start; the rest are nil. A set is never changed: addSibling stores a new one.
type siblingSet [engine.MaxLimits - 1]*localEntry

// sibling returns le's sibling of window on l when the cache holds it still (then a
// lookup of its tuple would find it: see localEntry.cached), else nil.
func (le *localEntry) sibling(window int64, l *originLink) *localEntry {
	set := le.siblings.Load()
	if set == nil {
		return nil
	}
	for _, s := range set {
		if s == nil {
			break
		}
		if s.window == window {
			if s.link != l || !s.cached.Load() {
				return nil
			}
			return s
		}
	}
	return nil
}

// addSibling makes s le's sibling of its window, in place of one le had, when it is
// another window of le's key, no other entry names it (requests listing the key's windows
// in another order look that window up), and both are cached. Concurrent calls may lose
// one's update: that costs a lookup later, never a wrong entry (sibling checks cached).
//
// The set holds only entries the cache holds: leftCache takes an entry out of the set of
// its sibOf, and drops the set of its own. Each side writes before it reads the other's
// flag (cached, the set): a leftCache of le or s that ran while the set was being made
// either sees the set stored or is seen here, and the set is undone. (Two calls on le at
// once, one putting back an entry the other drops, may leave it in the set with no sibOf:
// then it stays named after the cache lets it go, until le's next multi-limit request that
// misses a sibling makes the set anew without it, or the cache lets le go.)
func (le *localEntry) addSibling(s *localEntry) {
	if s == le || s.window == le.window || !le.cached.Load() || !sameKey(le, s) {
		return
	}
	if set := le.siblings.Load(); set != nil && slices.Contains(set[:], s) {
		return // already le's sibling (a request's siblingTouch lookup): s's memory unread
	}
	if o := s.sibOf.Load(); o != le && (o != nil || !s.sibOf.CompareAndSwap(nil, le)) {
		return
	}
	for {
		old := le.siblings.Load()
		var set siblingSet
		n := 0
		if old != nil {
			for _, o := range old {
				if o == s {
					return // already le's sibling
				}
				if o != nil && o.window != s.window && o.cached.Load() && n < len(set)-1 {
					set[n] = o
					n++
				}
			}
		}
		set[n] = s
		if le.siblings.CompareAndSwap(old, &set) {
			if old != nil {
				for _, o := range old {
					if o != nil && !slices.Contains(set[:], o) {
						o.sibOf.CompareAndSwap(le, nil)
					}
				}
			}
			break
		}
	}
	if !le.cached.Load() {
		le.dropSiblings()
	} else if !s.cached.Load() {
		le.dropSibling(s)
	}
}

// dropSiblings empties le's sibling set (the cache let le go): its entries are nobody's
// siblings any more.
func (le *localEntry) dropSiblings() {
	if set := le.siblings.Swap(nil); set != nil {
		for _, s := range set {
			if s != nil {
				s.sibOf.CompareAndSwap(le, nil)
			}
		}
	}
}

// dropSibling takes s out of le's sibling set (the cache let s go).
func (le *localEntry) dropSibling(s *localEntry) {
	for {
		old := le.siblings.Load()
		if old == nil || !slices.Contains(old[:], s) {
			break
		}
		var set siblingSet
		n := 0
		for _, o := range old {
			if o != nil && o != s {
				set[n] = o
				n++
			}
		}
		next := &set
		if n == 0 {
			next = nil
		}
		if le.siblings.CompareAndSwap(old, next) {
			break
		}
	}
	s.sibOf.CompareAndSwap(le, nil)
}

// sameKey reports whether a and b are tuples of one key (workspace, namespace, key) in
// two windows: their tuple keys past the window (engine.AppendKey) are equal.
func sameKey(a, b *localEntry) bool {
	return bytes.Equal(a.key[uvarintLen(a.window):], b.key[uvarintLen(b.window):])
}

// uvarintLen is the length of v's uvarint encoding.
func uvarintLen(v int64) int {
	n := 1
	for u := uint64(v); u >= 0x80; u >>= 7 {
		n++
	}
	return n
}

// entryOf returns the entry of key, making it when there is none, in the key's flight
// (as refresh's read): two requests that find no entry at the same moment get one entry,
// not one each. Two entries of a key would each take in the run's one lease of the tuple
// from their reads and each spend it, admitting beyond the limit (the origin reserves
// the lease once). The result is nil only with ctx's error.
func (e *Edge) entryOf(ctx context.Context, l *originLink, key []byte, window int64) (*localEntry, error) {
	le, err := e.flight.do(ctx, string(key), func() (*localEntry, error) {
		if le := e.lookup(l, key); le != nil {
			return le, nil
		}
		return e.create(l, string(key), window), nil
	})
	if le == nil {
		return nil, fmt.Errorf("edge: waiting for the entry of a tuple: %w", err)
	}
	return le, nil // err is a shared read's failure: the entry it returns is the key's all the same
}

func (m *multi) lock() {
	for _, i := range m.order {
		m.ts[i].le.lock()
	}
}

func (m *multi) unlock() {
	for _, i := range m.order {
		m.ts[i].le.mu.Unlock()
	}
}

// stale returns the bit set of the tuples that need a read before a decision (entries
// locked): neither fresh and not strict nor covered by a lease; and, when the tuples
// are on several origins (no hand-off can decide them), those the lease does not cover.
func (m *multi) stale(now int64) uint32 {
	var bits uint32
	split := m.split()
	for i := range m.ts {
		t := &m.ts[i]
		le := t.le // synced by m.lock
		covered := m.cost > 0 && le.leaseLeft(now, t.l.boot.Load()) >= m.cost
		fresh := now < le.freshUntil && now >= le.strictUntil
		if !covered && (!fresh || split) {
			bits |= 1 << i
		}
	}
	return bits
}

// split reports whether the tuples are on more than one origin.
func (m *multi) split() bool {
	for i := range m.ts {
		if m.ts[i].l != m.ts[0].l {
			return true
		}
	}
	return false
}

// refresh reads the tuples of the bit set stale, asking for leases that cover the cost:
// in one call per origin, so that a cold request waits one round trip, not one per
// window. (A tuple read alone shares its read with concurrent requests, as Limit's.)
func (m *multi) refresh(ctx context.Context, stale uint32, now int64) {
	want := uint64(0)
	if m.cost > 0 {
		want = leaseWant(m.cost)
	}
	var done uint32
	for i := range m.ts {
		if stale&(1<<i) == 0 || done&(1<<i) != 0 {
			continue
		}
		l := m.ts[i].l
		var group uint32 // the stale tuples of l
		for j := i; j < len(m.ts); j++ {
			if stale&(1<<j) != 0 && m.ts[j].l == l {
				group |= 1 << j
			}
		}
		done |= group
		if group == 1<<i {
			t := &m.ts[i]
			seq, _ := engine.Position(now, t.w)
			t.le, _ = m.e.refresh(ctx, l, string(t.key), t.w, seq, now, t.limit, want)
			continue
		}
		m.readGroup(ctx, l, group, now, want)
	}
}

// readGroup reads the tuples of the bit set group, all of origin l and all with an entry,
// in one call, asking for want units of lease on each. When l is in backoff or the read
// fails, the entries stay as they were: the request is decided on the local view, as
// after a failed read of one tuple.
func (m *multi) readGroup(ctx context.Context, l *originLink, group uint32, now int64, want uint64) {
	e := m.e
	if !l.usable(now) {
		return
	}
	var items [engine.MaxLimits]engine.ReadItem
	var of [engine.MaxLimits]*localEntry
	n := 0
	for i := range m.ts {
		if group&(1<<i) != 0 {
			t := &m.ts[i]
			seq, _ := engine.Position(now, t.w)
			items[n], of[n] = engine.ReadItem{Key: t.le.key, Seq: seq, Limit: t.limit, Want: want}, t.le
			n++
		}
	}
	call, cancel := context.WithTimeout(ctx, e.callTimeout(l))
	defer cancel()
	start := time.Now()
	sent := e.clock.NowMs()
	counts, meta, err := l.client.Read(call, items[:n])
	e.observe(l, "read", err, start)
	e.reads.Add(1)
	now = e.clock.NowMs()
	if err == nil && len(counts) != n {
		err = fmt.Errorf("origin %s: read answered %d cells for %d", l.id, len(counts), n)
	}
	if err != nil {
		l.failedUnder(ctx, now, err)
		return
	}
	l.succeeded(sent, now, meta)
	for k, le := range of[:n] {
		le.lock()
		e.mergeAnswer(l, le, counts[k], meta, sent, now)
		le.mu.Unlock()
	}
}

// decide decides with every entry locked, and unlocks them.
func (m *multi) decide(ctx context.Context, mayWait bool, now int64, out []engine.Decision) (int, bool, error) {
	e, cost := m.e, m.cost
	var counts [engine.MaxLimits]engine.Counts
	for i := range m.ts {
		t := &m.ts[i]
		seq, elapsed := engine.Position(now, t.w)
		if !mayWait && max(t.le.cells[0].seq, t.le.cells[1].seq) > seq {
			m.unlock() // the batch's instant precedes a window held: decide at the clock's
			return 0, false, nil
		}
		counts[i] = t.le.counts(seq)
		out[i] = engine.Decide(counts[i], t.limit, cost, t.w, elapsed)
	}
	n := len(m.ts)
	if !engine.AllAllowed(out[:n]) || cost == 0 {
		return m.finish(now, out, 0)
	}
	uncovered := false
	for i := range m.ts {
		if m.ts[i].le.leaseLeft(now, m.ts[i].l.boot.Load()) < cost {
			uncovered = true
		}
	}
	l := m.ts[0].l
	mo, canHand := l.client.(engine.MultiOrigin)
	switch {
	case !uncovered:
	case m.split():
		for i := range m.ts {
			if m.ts[i].le.leaseLeft(now, m.ts[i].l.boot.Load()) < cost {
				// No one call decides tuples of several origins: refuse, counting nothing,
				// until leases cover the request.
				out[i] = engine.Decision{Limit: m.ts[i].limit, RetryAfterMs: max(e.cfg.ReplayInterval.Milliseconds(), 1), ResetAfterMs: out[i].ResetAfterMs}
			}
		}
		return m.finish(now, out, allTuples)
	case l.reachable.Load() && canHand:
		if !mayWait {
			m.unlock()
			return 0, false, nil
		}
		return m.handOff(ctx, mo, now, out)
	default:
		// The origin is down (or cannot decide several limits): each uncovered tuple is
		// held to limit x share, as a single request.
		share := l.degradedShare(now, e.cfg.DegradedShare)
		if !canHand {
			share = 0
		}
		var notByLimit uint32
		for i := range m.ts {
			t := &m.ts[i]
			if t.le.leaseLeft(now, l.boot.Load()) < cost {
				_, elapsed := engine.Position(now, t.w)
				var byLimit bool
				if out[i], byLimit = e.degraded(l, counts[i], t.limit, cost, t.w, elapsed, now, share); !byLimit {
					notByLimit |= 1 << i
				}
			}
		}
		if !engine.AllAllowed(out[:n]) {
			return m.finish(now, out, notByLimit)
		}
	}
	return m.account(now, out)
}

// account counts cost in every tuple (entries locked; every decision allows), and
// unlocks them. A full replay set refuses the request before anything is counted.
func (m *multi) account(now int64, out []engine.Decision) (int, bool, error) {
	e := m.e
	for i := range m.ts {
		if err := e.pin(m.ts[i].l, m.ts[i].le); err != nil {
			m.unlock()
			e.refused.Add(1)
			return 0, true, err
		}
	}
	for i := range m.ts {
		t := &m.ts[i]
		seq, _ := engine.Position(now, t.w)
		_ = e.account(t.l, t.le, seq, m.cost, t.limit) // pinned above: it cannot fail
	}
	return m.finish(now, out, 0)
}

// allTuples is the bit set of every tuple of a request.
const allTuples = 1<<engine.MaxLimits - 1

// finish ends a decision made here (entries locked): a tuple whose limit denied enters
// strict mode, unless it is in the bit set notByLimit (refused by a reduced limit or for
// want of a lease, not by its limit: a hiccup of the origin must not send the tuple to it
// for two windows), and the entries are unlocked.
func (m *multi) finish(now int64, out []engine.Decision, notByLimit uint32) (int, bool, error) {
	n := len(m.ts)
	b := engine.Binding(out[:n])
	for i := range m.ts {
		t := &m.ts[i]
		if notByLimit&(1<<i) == 0 && !out[i].Allowed && out[i].RetryAfterMs >= 0 {
			seq, _ := engine.Position(now, t.w)
			m.e.enterStrict(t.le, seq, t.w)
		}
	}
	m.unlock()
	m.e.count(m.ts[b].le, out[b].Allowed)
	return b, true, nil
}

// errMultiAnswer is a multi-limit hand-off's answer with a count of items other than the
// request's.
var errMultiAnswer = errors.New("multi-limit decide answered another number of tuples")

// handOff hands the request to the origin of every tuple (entries locked; unlocked on
// return), each tuple's pending, in-flight and lease return as a single hand-off's.
func (m *multi) handOff(ctx context.Context, mo engine.MultiOrigin, now int64, out []engine.Decision) (int, bool, error) {
	e, l := m.e, m.ts[0].l
	req := engine.DecideMultiRequest{Cost: m.cost, Items: make([]engine.DecideItem, len(m.ts))}
	for i := range m.ts {
		t := &m.ts[i]
		r := e.handOffRequest(l, t.le, t.limit, m.cost, now)
		req.Items[i] = engine.DecideItem{Key: r.Key, Limit: r.Limit, Pending: r.Pending, Inflight: r.Inflight, Want: r.Want, Return: r.Return}
		req.Deadline, req.InflightBatch = r.Deadline, max(req.InflightBatch, r.InflightBatch)
	}
	m.unlock()
	call, cancel := context.WithTimeout(ctx, e.callTimeout(l))
	start := time.Now()
	sent := e.clock.NowMs()
	ds, ccs, meta, err := mo.DecideMulti(call, req)
	cancel()
	if err == nil && (len(ds) != len(m.ts) || len(ccs) != len(m.ts)) {
		err = fmt.Errorf("origin %s: %w", l.id, errMultiAnswer)
	}
	e.observe(l, "decide", err, start)
	now = e.clock.NowMs()
	if err != nil {
		l.failedUnder(ctx, now, err)
		// The origin may have counted it all the same, so it is not counted here; the
		// request is refused until the origin answers again.
		m.lock()
		var notByLimit uint32
		for i := range m.ts {
			t := &m.ts[i]
			t.le.handing--
			seq, elapsed := engine.Position(now, t.w)
			var byLimit bool
			if out[i], byLimit = e.degraded(l, t.le.counts(seq), t.limit, m.cost, t.w, elapsed, now, 0); !byLimit {
				notByLimit |= 1 << i
			}
		}
		return m.finish(now, out, notByLimit)
	}
	l.succeeded(sent, now, meta)
	copy(out, ds)
	b := engine.Binding(out[:len(m.ts)])
	if out[b].Allowed {
		e.originAllowed.Add(1)
	} else {
		e.originDenied.Add(1)
	}
	for i := range m.ts {
		t := &m.ts[i]
		t.le.lock()
		t.le.handing--
		e.mergeAnswer(l, t.le, ccs[i], meta, sent, now)
		if !out[i].Allowed && out[i].RetryAfterMs >= 0 {
			e.enterStrict(t.le, ccs[i].Seq, t.w)
		}
		t.le.mu.Unlock()
		if out[b].Allowed {
			e.keepHandOff(l, t.le, ccs[i].Seq, m.cost, t.limit, meta)
		}
	}
	e.count(m.ts[b].le, out[b].Allowed)
	return b, true, nil
}
