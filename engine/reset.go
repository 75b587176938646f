package engine

import (
	"cmp"
	"context"
	"errors"
	"sync/atomic"
)

// Resets (RL.RESET): zeroing a tuple without breaking the G-Counter's grow-only merge.
//
// A cell's component of a region only grows, everywhere. A reset does not lower it: it
// records, per live cell and region, the value of the component it cancels, and every count
// this origin keeps or decides with is the component minus what is cancelled (never below
// zero). Cancelled values are merged with max too, so a reset is a grow-only fact like a
// count: a replica that has not seen it keeps deciding with the full components, and
// converges when it does, whatever the order of components and resets.
//
//   - Locally the store holds effective counts (cells and foreign components minus what is
//     cancelled), so a decision reads nothing more than before: the reset state stays out of
//     the hot path and out of the inline entry.
//   - Between regions components travel raw (effective plus cancelled), and the cancelled
//     values travel as reset rows beside them (Component.Reset), in publications and in
//     anti-entropy. A component received is taken minus what is cancelled; an import from
//     before the reset is at most what the reset cancelled, so it brings nothing back.
//   - Edges: a reset is a change of the feed (changes.go) with its version; the edges drop
//     their views, leases and unacknowledged cost of the tuple. A replay batch carries the
//     change version its edge had applied (ReplayBatch.Changes); its items of a tuple reset
//     after that version are cost accepted before the edge heard of the reset, and are not
//     applied.
//   - A reset of another region lowers this origin's counts by what it cancels beyond what
//     was cancelled here; the edges are told to re-read the tuple (ChangeRefresh), keeping
//     their unacknowledged cost, which that reset did not know of.
//
// The records live beside the store, in the map of their tuple's shard, until every cell they
// cancel has died, holding the values of live cells only; snapshots save them (Resets,
// RestoreResets). A reset of a tuple that holds no live count and no lease keeps nothing
// (no record, no change): resets of tuples never used fill neither the table nor the feed.
// Cost an edge accepted without a lease (a cold allowance, an origin it could not reach)
// and had not sent is then not cancelled: it counts when it arrives, the strict side.
//
// Concurrency: a shard's lock guards its map of records and the records, as it guards
// its cells: a reset changes the cells and the record in one step, and the paths that read
// a record (a decision's replay, an import, a publication, a snapshot) hold that lock
// already; a pass over every record takes the shards' locks in turn. Lock order: a shard's
// lock, then the change log's. resetTable's count and maxVersion are read without a lock by
// the paths that skip the records when there are none or when a batch knows every reset.

// ErrTooManyResets is returned by Reset when the table of recent resets is full.
var ErrTooManyResets = errors.New("too many resets in the last two windows")

// maxResets bounds the reset records: one per tuple reset within its last two windows.
const maxResets = 1 << 20

// resetBytes estimates one reset record with one cell's cancelled values, for the
// --max-memory count.
const resetBytes = 160

// resetCancel is what a reset cancelled of one region's component of one cell.
type resetCancel struct {
	seq    int64
	region string
	count  uint64
}

// tupleReset is one tuple's reset record.
type tupleReset struct {
	// version is the change version of the last reset made here: a replay batch made
	// before its edge applied it does not count (0: none made here).
	version uint64
	cancels []resetCancel
	// untilMs: once past it no cancelled cell, and no replay of one, matters.
	untilMs int64
	// unpublished: a reset made here whose rows no publication carried yet.
	unpublished bool
}

// cancelled returns what r cancelled of region's component of cell seq (nil r: nothing).
func (r *tupleReset) cancelled(seq int64, region string) uint64 {
	if r == nil {
		return 0
	}
	for _, c := range r.cancels {
		if c.seq == seq && c.region == region {
			return c.count
		}
	}
	return 0
}

// prune drops what r cancelled of cells no longer live at now (window w): a record of a
// tuple reset every window keeps two cells' values, not one per window it lived.
func (r *tupleReset) prune(now, w int64) {
	keep := r.cancels[:0]
	for _, c := range r.cancels {
		if c.seq >= now/w-1 {
			keep = append(keep, c)
		}
	}
	clear(r.cancels[len(keep):])
	r.cancels = keep
}

// raise merges n as what r cancels of region's component of cell seq, with max, and
// returns the value before.
func (r *tupleReset) raise(seq int64, region string, n uint64) (old uint64) {
	for i := range r.cancels {
		if c := &r.cancels[i]; c.seq == seq && c.region == region {
			old = c.count
			c.count = max(c.count, n)
			return old
		}
	}
	if n > 0 {
		r.cancels = append(r.cancels, resetCancel{seq: seq, region: region, count: n})
	}
	return 0
}

// resetTable counts the reset records of an origin, which live in the store's shards
// (shard.resets).
type resetTable struct {
	count      atomic.Int64  // records in every shard
	maxVersion atomic.Uint64 // the highest version of a reset made here
	limit      atomic.Int64  // the most records: maxResets (tests lower it)
}

// record returns key's reset record in sh, key's shard (sh.mu held), making it; nil when
// the table is full, counted and logged (resetsRefused).
func (e *Engine) record(sh *shard, key []byte) *tupleReset {
	if r := sh.resets[string(key)]; r != nil {
		return r
	}
	if e.resets.count.Load() >= cmp.Or(e.resets.limit.Load(), maxResets) {
		e.resetsRefused(1)
		return nil
	}
	if sh.resets == nil {
		sh.resets = make(map[string]*tupleReset)
	}
	r := &tupleReset{}
	sh.resets[string(key)] = r
	e.resets.count.Add(1)
	e.store.bytes.Add(resetBytes)
	return r
}

// resetOf returns key's reset record, or nil (0 records: no lookup). The caller holds
// key's shard lock, which guards the record (and its part of a lazy load is loaded, or
// being restored by the caller: no wait here).
func (e *Engine) resetOf(key string) *tupleReset {
	if e.resets.count.Load() == 0 {
		return nil
	}
	sh, _ := e.store.locateLoaded([]byte(key))
	return sh.resets[key]
}

// cancelledOf returns what the resets cancelled of region's component of key's cell seq.
// The caller holds key's shard lock.
func (e *Engine) cancelledOf(key []byte, seq int64, region string) uint64 {
	return e.resetOf(string(key)).cancelled(seq, region)
}

// resetAfter reports whether key was reset here after change version v: a replay made by
// an edge that had applied only v carries cost that reset cancelled. The caller holds
// key's shard lock.
func (e *Engine) resetAfter(key []byte, v uint64) bool {
	r := e.resetOf(string(key))
	return r != nil && r.version > v
}

// Reset zeroes each tuple of ts (RL.RESET) and returns how many of them held usage (a
// live cell with a count). Afterwards the tuples count from zero here; edges and other
// regions follow (see above). The only error is ErrTooManyResets; the tuples before the
// one that found the table full are reset.
func (e *Engine) Reset(ts []Tuple) (int, error) {
	keys := make([][]byte, len(ts))
	for i, t := range ts {
		keys[i] = AppendKey(nil, t)
	}
	return e.ResetKeys(keys)
}

// ResetKeys is Reset of tuple keys made by AppendKey (an edge's RL.INTERNAL.RESET). A key
// that does not parse is skipped.
func (e *Engine) ResetKeys(keys [][]byte) (int, error) {
	n := 0
	for _, k := range keys {
		w := windowOfKey(string(k))
		if w <= 0 {
			continue
		}
		held, err := e.resetKey(k, w)
		if err != nil {
			return n, err
		}
		if held {
			n++
		}
	}
	return n, nil
}

// resetKey resets the tuple key of window w and reports whether it held usage.
func (e *Engine) resetKey(key []byte, w int64) (bool, error) {
	sh, h := e.store.locate(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := e.clock.NowMs()
	ent := sh.lookup(h, key)
	if !inUse(sh, ent, w, now) {
		// Nothing to zero: no record, no change. A caller allowed RL.LIMIT cannot fill the
		// table or the feed with resets of tuples never used.
		return false, nil
	}
	r := e.record(sh, key)
	if r == nil {
		return false, ErrTooManyResets
	}
	r.prune(now, w)
	held := false
	if ent != nil {
		held = e.cancelCells(sh, ent, r, w, now)
		sh.settle(ent)
		if sd := sh.side(ent); sd != nil {
			// The leases reserved budget of the usage cancelled: they hold nothing more
			// (the edges drop them when they apply the reset).
			for i := range sd.leases.grants {
				g := &sd.leases.grants[i]
				g.g = min(g.g, g.spent)
			}
		}
	}
	// The version is handed out under the shard's lock: a reply whose meta shows it holds
	// counts read after the reset, and a replay that does not know it finds the record.
	r.version = e.changes.add(ChangeReset, key, nil)
	e.resets.raiseMaxVersion(r.version)
	r.untilMs = max(r.untilMs, (now/w+2)*w)
	r.unpublished = true
	e.markDirty()
	e.store.markTuple(sh, h, key)
	return held, nil
}

// inUse reports whether ent (in sh, locked; nil: none) holds something a reset zeroes: a
// live cell with a count, or a lease that reserves budget (an edge may hold cost under
// it). A tuple without either may still have cost on its way from an edge (a cold
// allowance, an edge that could not reach the origin): not cancelled, it counts when it
// arrives, which errs on the strict side.
func inUse(sh *shard, ent *entry, w, now int64) bool {
	if ent == nil {
		return false
	}
	for i := range entryCells {
		if ent.live(i, w, now) && sh.cell(ent, i).total() > 0 {
			return true
		}
	}
	if ent.side == 0 {
		return false
	}
	sh.settle(ent)
	sd := sh.side(ent)
	for i := range sd.leases.grants {
		if sd.leases.grants[i].held(now) > 0 {
			return true
		}
	}
	return false
}

// resetsRefused counts n reset records the full table refused (a reset of this origin, or
// a peer's reset row), with a warning at most every 10 s.
func (e *Engine) resetsRefused(n uint64) {
	total := e.resetsFull.Add(n)
	now := e.clock.NowMs()
	last := e.lastResetsLog.Load()
	if now-last >= 10_000 && e.lastResetsLog.CompareAndSwap(last, now) {
		e.log.Warn("reset table is full: refusing resets, and peers' reset rows of tuples not in it", "max_resets", maxResets,
			"refused_total", total)
	}
}

// cancelCells zeroes ent's live cells (in sh, locked), recording in r what
// each region's component held (raw: its effective count plus what was cancelled before),
// and reports whether any held a count.
func (e *Engine) cancelCells(sh *shard, ent *entry, r *tupleReset, w, now int64) bool {
	held := false
	for i := range entryCells {
		if !ent.live(i, w, now) {
			continue
		}
		c := sh.cell(ent, i)
		held = held || c.total() > 0
		r.raise(c.seq, e.region, satAdd(r.cancelled(c.seq, e.region), c.regional))
		ent.regional[i] = 0 // and the foreign components below: imported is their sum
		if ent.side == 0 {
			continue
		}
		cs := &sh.side(ent).cells[i]
		cs.published = 0
		for j := range cs.foreign {
			f := &cs.foreign[j]
			if name := e.regions.name(f.region); name != "" {
				r.raise(c.seq, name, satAdd(r.cancelled(c.seq, name), f.count))
			}
			f.count = 0
		}
	}
	return held
}

// mergeReset merges a reset row of another region (c.Reset): what it cancelled of
// c.Region's component of cell c.Seq. It lowers the cell by what it cancels beyond what
// was cancelled here, and reports whether it raised the record (raised) and whether it
// lowered a count this origin holds (lowered: the edges' views of the tuple are stale).
func (e *Engine) mergeReset(c Component, w, now int64) (raised, lowered bool) {
	sh, h := e.store.locate(c.Key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r := e.record(sh, c.Key)
	if r == nil {
		return false, false
	}
	r.prune(now, w)
	old := r.raise(c.Seq, c.Region, capCount(c.Count))
	r.untilMs = max(r.untilMs, (c.Seq+2)*w)
	if capCount(c.Count) <= old {
		return false, false
	}
	delta := capCount(c.Count) - old
	ent := sh.lookup(h, c.Key)
	if ent == nil {
		return true, false
	}
	i := ent.find(c.Seq)
	if i < 0 {
		return true, false
	}
	e.store.markTuple(sh, h, c.Key) // what a save holds of it is raw, but may grow: see Tuples
	if c.Region == e.region {
		d := min(ent.regional[i], delta)
		ent.regional[i] -= d
		if sd := sh.side(ent); sd != nil {
			sd.cells[i].published -= min(sd.cells[i].published, delta)
		}
		return true, d > 0
	}
	id, err := e.regions.id(c.Region)
	if err != nil || ent.side == 0 {
		return true, false
	}
	for j := range sh.side(ent).cells[i].foreign {
		if f := &sh.side(ent).cells[i].foreign[j]; f.region == id {
			d := min(f.count, delta)
			f.count -= d // imported, their sum, with it
			lowered = lowered || d > 0
		}
	}
	return true, lowered
}

// resetRows appends to out the reset rows of the records of live cells at now: all of
// them, or (unpublished) those of resets made here since the last call, which it marks
// published.
func (e *Engine) resetRows(out []Component, now int64, unpublished bool) []Component {
	e.eachResetShard(func(sh *shard) {
		for k, r := range sh.resets {
			if unpublished {
				if !r.unpublished {
					continue
				}
				r.unpublished = false
			}
			w := windowOfKey(k)
			for _, c := range r.cancels {
				if w > 0 && c.seq >= now/w-1 && c.count > 0 {
					out = append(out, Component{Key: []byte(k), Seq: c.seq, Region: c.region, Count: c.count, Reset: true})
				}
			}
		}
	})
	return out
}

// eachResetShard calls fn with each shard that holds reset records, its lock held,
// giving way between shards as the store's passes do.
func (e *Engine) eachResetShard(fn func(sh *shard)) {
	for i := range e.store.shards {
		if e.resets.count.Load() == 0 {
			return
		}
		sh := &e.store.shards[i]
		lockYielding(&sh.mu)
		if len(sh.resets) > 0 {
			fn(sh)
		}
		sh.mu.Unlock()
	}
}

// pruneResets drops the records whose cells have all died, and what the others cancelled
// of dead cells.
func (e *Engine) pruneResets(now int64) {
	e.eachResetShard(func(sh *shard) {
		for k, r := range sh.resets {
			if now >= r.untilMs {
				delete(sh.resets, k)
				e.resets.count.Add(-1)
				e.store.bytes.Add(-resetBytes)
			} else if w := windowOfKey(k); w > 0 {
				r.prune(now, w)
			}
		}
		if len(sh.resets) == 0 {
			sh.resets = nil // a map does not shrink
		}
	})
}

// ResetOrigin is an Origin that resets tuples for an edge's client (RL.INTERNAL.RESET):
// upstream.Client, LocalOrigin. It returns how many of the tuples held usage.
type ResetOrigin interface {
	Reset(ctx context.Context, keys [][]byte) (int, error)
}

// Reset implements ResetOrigin.
func (o LocalOrigin) Reset(_ context.Context, keys [][]byte) (int, error) {
	return o.Engine.ResetKeys(keys)
}

// ResetRecord is one tuple's reset record as a snapshot saves it: the change version of
// the last reset made here (0: none), when the record ends (origin ms), and what was
// cancelled of each region's component of each cell.
type ResetRecord struct {
	Key     string
	Version uint64
	UntilMs int64
	Cancels []ResetCancel
}

// ResetCancel is what a reset cancelled of one region's component of one cell.
type ResetCancel struct {
	Seq    int64
	Region string
	Count  uint64
}

// Resets yields the reset records that have not ended, with what they cancelled of live
// cells only. A record is valid only during the call.
func (e *Engine) Resets(yield func(ResetRecord) bool) {
	now := e.clock.NowMs()
	var recs []ResetRecord
	e.eachResetShard(func(sh *shard) {
		for k, r := range sh.resets {
			if now >= r.untilMs {
				continue
			}
			rec := ResetRecord{Key: k, Version: r.version, UntilMs: r.untilMs}
			w := windowOfKey(k)
			for _, c := range r.cancels {
				if w <= 0 || c.seq < now/w-1 {
					continue
				}
				rec.Cancels = append(rec.Cancels, ResetCancel{Seq: c.seq, Region: c.region, Count: c.count})
			}
			recs = append(recs, rec)
		}
	})
	for _, r := range recs {
		if !yield(r) {
			return
		}
	}
}

// RestoreResets loads reset records saved by a snapshot, merging with what the table
// holds; call it before Restore, so that the cells restored are taken as they were saved
// (effective) and what peers send back of them is taken minus what was cancelled. It
// returns how many it loaded.
func (e *Engine) RestoreResets(recs []ResetRecord) int {
	now := e.clock.NowMs()
	n := 0
	for _, rec := range recs {
		w := windowOfKey(rec.Key)
		if now >= rec.UntilMs || w <= 0 {
			continue
		}
		sh, _ := e.store.locate([]byte(rec.Key))
		sh.mu.Lock()
		r := e.record(sh, []byte(rec.Key))
		if r == nil {
			sh.mu.Unlock()
			break
		}
		r.version = max(r.version, rec.Version)
		r.untilMs = max(r.untilMs, rec.UntilMs)
		for _, c := range rec.Cancels {
			if c.Seq >= now/w-1 {
				r.raise(c.Seq, c.Region, capCount(c.Count))
			}
		}
		e.resets.raiseMaxVersion(r.version)
		sh.mu.Unlock()
		n++
	}
	return n
}

// RestoreChanges starts this run's change feed after version v, the one its snapshot
// saved (ChangeVersion at the save): edges that applied less resync.
func (e *Engine) RestoreChanges(v uint64) { e.changes.init(v, 0) }

// raiseMaxVersion raises maxVersion to v. Resets on different shards run at once: a load
// then a store could put back a lower version over a higher one, and a replay batch from
// before the higher reset would then skip its check (origin.go).
func (t *resetTable) raiseMaxVersion(v uint64) {
	for {
		cur := t.maxVersion.Load()
		if cur >= v || t.maxVersion.CompareAndSwap(cur, v) {
			return
		}
	}
}
