package engine

import (
	"bytes"
	"context"
	"errors"
)

// This file decides several limits of one key at once (RL.LIMIT key limit window [limit
// window ...]): all at one instant, the cost counted in every window when every limit
// allows it, in none otherwise.

// MaxLimits is the most (limit, window) pairs one request may carry.
const MaxLimits = 8

// LimitOp is one limit of a multi-limit request: a tuple and the limit it is held to.
// The tuples of one request differ (the same key in distinct windows).
type LimitOp struct {
	Tuple Tuple
	Limit uint64
}

// Binding returns the index of the decision that answers for ds, the decisions of one
// multi-limit request: when any denies, the denying one with the largest RetryAfterMs (-1,
// never, being the largest); else the one with the least Remaining. The first wins a tie.
func Binding(ds []Decision) int {
	best := 0
	for i := 1; i < len(ds); i++ {
		if bindsMore(ds[i], ds[best]) {
			best = i
		}
	}
	return best
}

// bindsMore reports whether a binds more than b.
func bindsMore(a, b Decision) bool {
	switch {
	case a.Allowed != b.Allowed:
		return !a.Allowed
	case !a.Allowed:
		return retryRank(a.RetryAfterMs) > retryRank(b.RetryAfterMs)
	default:
		return a.Remaining < b.Remaining
	}
}

// retryRank orders retry_after_ms values with -1 (never) above every other.
func retryRank(ms int64) uint64 {
	if ms < 0 {
		return 1<<64 - 1
	}
	return uint64(ms)
}

// AllAllowed reports whether every decision of ds allows.
func AllAllowed(ds []Decision) bool {
	for i := range ds {
		if !ds[i].Allowed {
			return false
		}
	}
	return true
}

// located is a tuple key with its window, shard and hash, found before the shards are
// locked.
type located struct {
	sh  *shard
	idx int // sh's index in store.shards
	h   uint32
	w   int64
	key []byte
}

// locate returns key, of window w, located. (It returns the value rather than fill a
// pointer, so that a caller's key buffer can stay on its stack.)
func (e *Engine) locate(key []byte, w int64) located {
	idx, h := e.store.locateIndex(key)
	return located{sh: &e.store.shards[idx], idx: idx, h: h, w: w, key: key}
}

// lockShards locks the shards marked in want in index order (the order Transact uses);
// unlockShards unlocks them.
func (e *Engine) lockShards(want *[shardCount]bool) {
	for i := range want {
		if want[i] {
			e.store.shards[i].mu.Lock()
		}
	}
}

func (e *Engine) unlockShards(want *[shardCount]bool) {
	for i := len(want) - 1; i >= 0; i-- {
		if want[i] {
			e.store.shards[i].mu.Unlock()
		}
	}
}

// shardSet is the distinct shards of a few located tuples, in index order: locking them
// in that order is Transact's order, without a pass over every shard.
type shardSet struct {
	idx [MaxLimits]int
	n   int
}

// add puts shard index i in s, unless it is there.
func (s *shardSet) add(i int) {
	j := 0
	for j < s.n && s.idx[j] < i {
		j++
	}
	if j < s.n && s.idx[j] == i {
		return
	}
	copy(s.idx[j+1:s.n+1], s.idx[j:s.n])
	s.idx[j] = i
	s.n++
}

func (e *Engine) lockSet(s *shardSet) {
	for _, i := range s.idx[:s.n] {
		e.store.shards[i].mu.Lock()
	}
}

func (e *Engine) unlockSet(s *shardSet) {
	for k := s.n - 1; k >= 0; k-- {
		e.store.shards[s.idx[k]].mu.Unlock()
	}
}

// LimitMulti decides one request of cost against every limit of ops (at most MaxLimits,
// distinct tuples) at the instant nowMs, and counts cost in every tuple when all allow,
// in none otherwise. out[i] receives the decision of ops[i] (len(out) >= len(ops)); the
// result is Binding's index. The only error is ErrFull, with nothing counted.
func (e *Engine) LimitMulti(ops []LimitOp, cost uint64, nowMs int64, out []Decision) (int, error) {
	var at [MaxLimits]located
	var limits [MaxLimits]uint64
	var buf [MaxLimits * 64]byte
	var set shardSet
	n := len(ops)
	keys := buf[:0]
	for i, op := range ops {
		start := len(keys)
		keys = AppendKey(keys, op.Tuple)
		// Capped: a later append that grows keys copies it, never overwrites this one.
		at[i] = e.locate(keys[start:len(keys):len(keys)], op.Tuple.WindowMs)
		set.add(at[i].idx)
		limits[i] = op.Limit
	}
	e.lockSet(&set)
	_, err := e.decideAllLocked(at[:n], limits[:n], cost, nil, nowMs, out)
	e.unlockSet(&set)
	if err != nil {
		e.refusedFull()
		return 0, err
	}
	b := Binding(out[:n])
	e.decisions.Add(uint64(at[b].h), out[b].Allowed)
	return b, nil
}

// decideAllLocked decides cost against every limit of the tuples at (their shards locked
// by the caller) at one instant, with extra[i] (nil: none) counted as used but not added
// in tuple i, and adds cost to every tuple when all allow. out[i] receives tuple i's
// decision. On ErrFull nothing is counted (a tuple entry made for the cost may remain,
// empty, until a sweep). It returns the instant it decided at.
func (e *Engine) decideAllLocked(at []located, limits []uint64, cost uint64, extra []uint64, nowMs int64, out []Decision) (int64, error) {
	// One instant for all: when a tuple already holds a window after nowMs's (a batch's
	// instant read before another request's), decide all at the clock's reading instead,
	// as decideLocked does for one.
	var ents [MaxLimits]*entry
	var slots [MaxLimits]int // ents' slot indexes, for markSlot
	ahead := false
	for i := range at {
		ents[i], slots[i] = at[i].sh.lookupSlot(at[i].h, at[i].key)
		if ents[i] != nil && !ahead {
			if seq, _ := position(nowMs, at[i].w); ents[i].newest() > seq {
				nowMs, ahead = max(nowMs, e.clock.NowMs()), true
			}
		}
	}
	for i := range at {
		w := at[i].w
		seq, elapsed := position(nowMs, w)
		var c Counts
		if ent := ents[i]; ent != nil {
			cur, prev := at[i].sh.counts(ent, seq)
			c = Counts{Current: cur.total(), Previous: prev.total()}
		}
		if extra != nil {
			c.Current = satAdd(c.Current, extra[i])
		}
		out[i] = Decide(c, limits[i], cost, w, elapsed)
	}
	if cost == 0 || !AllAllowed(out[:len(at)]) {
		return nowMs, nil
	}
	// Make every entry first, so that a full store counts in none. An insert may move the
	// shard's other entries in memory (table.go: a *entry is valid until the next add), but
	// not their slots (only a remove does): after one, each entry is taken again from its
	// slot before it is counted.
	inserted := false
	for i := range at {
		if ents[i] == nil {
			var err error
			if _, slots[i], err = e.store.insertSlot(at[i].sh, at[i].h, at[i].key, false); err != nil {
				// The tuples inserted before stay empty: the sweep drops them.
				for k := range i {
					if ents[k] == nil {
						at[k].sh.sweepDue = 0
					}
				}
				return nowMs, err
			}
			inserted = true
		}
	}
	for i := range at {
		ent := ents[i]
		if inserted {
			ent = &at[i].sh.at(slots[i]).ent
		}
		seq, _ := position(nowMs, at[i].w)
		if j := e.store.slot(at[i].sh, ent, seq, seq, at[i].w); j >= 0 {
			ent.add(j, cost)
			ent.seeLimit(j, limits[i])
			e.store.markSlot(at[i].sh, slots[i])
		}
	}
	e.markDirty()
	return nowMs, nil
}

// DecideItem is one tuple of a multi-limit hand-off: its key (made by AppendKey), limit,
// and the edge's state of it, as in DecideRequest.
type DecideItem struct {
	Key      []byte
	Limit    uint64
	Pending  uint64
	Inflight uint64
	Want     uint64
	Return   uint64
}

// DecideMultiRequest hands one multi-limit decision to the origin, which decides it
// against every item at one instant and counts Cost in every item's tuple when all allow,
// in none otherwise. Items (1 to MaxLimits, distinct keys) are treated each as a
// DecideRequest's tuple: pending and unapplied in-flight cost counted as used, lease
// return and request. InflightBatch and Deadline are the edge's, as in DecideRequest.
type DecideMultiRequest struct {
	Items         []DecideItem
	Cost          uint64
	InflightBatch uint64
	Deadline      int64
}

// MultiOrigin is an Origin that also decides multi-limit hand-offs. DecideMulti answers
// every item's decision and counts, in the order of the request's items.
type MultiOrigin interface {
	Origin
	DecideMulti(ctx context.Context, r DecideMultiRequest) ([]Decision, []CellCounts, OriginMeta, error)
}

// errMultiItems is the error of a multi-limit hand-off without items, with too many, or
// with a key twice.
var errMultiItems = errors.New("a multi-limit decision needs 1 to 8 distinct keys")

// ServeDecideMulti is ServeDecide for a multi-limit hand-off: under the run's apply lock
// (so that the applied mark and the counts agree, as for one tuple) and every item's
// shard lock, taken in shard order as Transact does, it decides at one instant and counts
// in all items or none. Each item's lease return and request are applied as a single
// hand-off's; leases are granted only when the decision was made at the origin's clock.
func (e *Engine) ServeDecideMulti(node string, r DecideMultiRequest) ([]Decision, []CellCounts, OriginMeta, error) {
	meta, run := e.heard(node)
	n := len(r.Items)
	if n == 0 || n > MaxLimits {
		return nil, nil, meta, errMultiItems
	}
	var at [MaxLimits]located
	var limits, extras [MaxLimits]uint64
	var set shardSet
	for i, it := range r.Items {
		t, err := ParseKey(it.Key)
		if err != nil {
			return nil, nil, meta, err
		}
		for _, other := range r.Items[:i] {
			if bytes.Equal(other.Key, it.Key) {
				return nil, nil, meta, errMultiItems
			}
		}
		at[i] = e.locate(it.Key, t.WindowMs)
		set.add(at[i].idx)
		limits[i] = it.Limit
	}
	run.apply.Lock()
	defer run.apply.Unlock()
	e.marks(&meta, run)
	now := e.clock.NowMs()
	e.lockSet(&set)
	for i, it := range r.Items {
		extra := it.Pending
		if r.InflightBatch > meta.Applied {
			extra = satAdd(extra, it.Inflight) // that batch has not arrived: its cost is on its way
		}
		extras[i] = e.handedReserve(at[i].sh, at[i].h, it.Key, run, it.Return, it.Limit, extra, now)
	}
	ds := make([]Decision, n)
	ccs := make([]CellCounts, n)
	if r.Deadline > 0 && now >= r.Deadline { // the edge gives up at its deadline's instant
		e.unlockSet(&set)
		for i := range ds {
			seq, elapsed := position(now, at[i].w)
			ds[i] = Decision{Limit: limits[i], RetryAfterMs: 1, ResetAfterMs: at[i].w - elapsed}
			ccs[i] = CellCounts{Seq: seq}
		}
		return ds, ccs, meta, nil
	}
	at2, err := e.decideAllLocked(at[:n], limits[:n], r.Cost, extras[:n], now, ds)
	if err == nil {
		for i, it := range r.Items {
			a := &at[i]
			seq, _ := position(at2, a.w)
			ccs[i] = CellCounts{Seq: seq}
			if ent := a.sh.lookup(a.h, a.key); ent != nil {
				ccs[i] = a.sh.cellCounts(ent, seq)
			}
			if at2 == now {
				ccs[i].LeaseLeft, ccs[i].LeaseSeq = e.lease(a.sh, a.h, a.key, a.sh.lookup(a.h, a.key), run,
					LeaseRequest{Limit: it.Limit, Want: it.Want}, a.w, now, meta.Edges)
			}
		}
	}
	e.unlockSet(&set)
	if err != nil {
		e.refusedFull()
		return nil, nil, meta, err
	}
	meta.Hand = run.hands.Add(1) // under apply: a save reads it before the cells (Runs)
	b := Binding(ds)
	e.decisions.Add(uint64(at[b].h), ds[b].Allowed)
	return ds, ccs, meta, nil
}

// decideMoreLocked decides Transact's multi-limit op, whose tuples are at (op.Tuple's
// first; their shards locked), at now, and returns the binding decision.
func (e *Engine) decideMoreLocked(at []located, op TxOp, now int64) (Decision, error) {
	var limits [MaxLimits]uint64
	var out [MaxLimits]Decision
	n := min(len(at), MaxLimits)
	limits[0] = op.Limit
	for i, m := range op.More[:n-1] {
		limits[i+1] = m.Limit
	}
	if _, err := e.decideAllLocked(at[:n], limits[:n], op.Cost, nil, now, out[:n]); err != nil {
		return Decision{}, err
	}
	return out[Binding(out[:n])], nil
}
