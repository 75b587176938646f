package engine

import (
	"fmt"
	"runtime"
	"unsafe"
)

// CellRecord is one cell as it is saved and loaded: the tuple key made by AppendKey, the
// sequence, this region's count, the sum of the other regions' counts, and those counts
// one by one. Imported without Foreign (a record made by hand) restores as one component
// of an unnamed region.
type CellRecord struct {
	Key      string
	Seq      int64
	Regional uint64
	Imported uint64
	Foreign  []RegionCount
}

// RegionCount is one foreign region's component of a cell.
type RegionCount struct {
	Region string
	Count  uint64
}

// Snapshot returns every live cell (sequence >= seq-1 of its window). Each shard is copied
// under its lock, so every record is a count that was really held; records of different
// shards may be a few microseconds apart.
func (e *Engine) Snapshot() []CellRecord {
	out := make([]CellRecord, 0, e.store.cells.Load())
	var keys keyArena
	e.store.eachLive(e.clock.NowMs(), func(k string, ent *entry, i int) bool {
		c := &ent.cells[i]
		r := CellRecord{Key: keys.keep(k), Seq: c.seq, Regional: c.regional, Imported: c.imported}
		for _, f := range ent.foreign(i) {
			r.Foreign = append(r.Foreign, RegionCount{Region: e.regions.name(f.region), Count: f.count})
		}
		out = append(out, r)
		return true
	})
	return out
}

// Records yields every live cell, as Snapshot returns them, without copying the store: a
// shard's records are gathered into buffers reused from shard to shard, and yielded after
// its lock is released. A periodic save encodes each record as it comes, so a snapshot of a
// million cells makes no garbage. A record (its key and Foreign) is valid only during the
// call. Shards are visited in turn, giving way between them.
func (e *Engine) Records(yield func(CellRecord) bool) {
	type span struct{ off, n int }
	var (
		recs    []CellRecord
		keys    []byte
		keyAt   []span
		foreign []RegionCount
		fAt     []span
	)
	now := e.clock.NowMs()
	for i := range e.store.shards {
		recs, keys, keyAt, foreign, fAt = recs[:0], keys[:0], keyAt[:0], foreign[:0], fAt[:0]
		e.store.liveIn(&e.store.shards[i], now, func(k string, ent *entry, ci int) bool {
			c := &ent.cells[ci]
			keyAt = append(keyAt, span{len(keys), len(k)})
			keys = append(keys, k...)
			f0 := len(foreign)
			if !e.regions.empty() { // read under the shard's lock
				for _, f := range ent.foreign(ci) {
					foreign = append(foreign, RegionCount{Region: e.regions.name(f.region), Count: f.count})
				}
			}
			fAt = append(fAt, span{f0, len(foreign) - f0})
			recs = append(recs, CellRecord{Seq: c.seq, Regional: c.regional, Imported: c.imported})
			return true
		})
		for j, r := range recs {
			if ks := keyAt[j]; ks.n > 0 {
				r.Key = unsafe.String(&keys[ks.off], ks.n)
			}
			if fs := fAt[j]; fs.n > 0 {
				r.Foreign = foreign[fs.off : fs.off+fs.n : fs.off+fs.n]
			}
			if !yield(r) {
				return
			}
		}
		runtime.Gosched()
	}
}

// Restore merges records into the store with max, keeping only cells that are still live.
// Live cells are loaded even beyond --max-memory (a bound must never forget a live cell);
// new cells are then refused until the sweep frees room. It returns the number of cells
// loaded and dropped; a record whose key does not decode is an error and stops nothing
// else.
func (e *Engine) Restore(recs []CellRecord) (loaded, dropped int, err error) {
	now := e.clock.NowMs()
	for _, r := range recs {
		t, perr := ParseKey([]byte(r.Key))
		if perr != nil {
			err = fmt.Errorf("restore cell: %w", perr)
			dropped++
			continue
		}
		// Only seq-1 and seq can matter; a later sequence means the clock that wrote the
		// snapshot was ahead of ours, and taking it could push out a live cell.
		if r.Seq < now/t.WindowMs-1 || r.Seq > now/t.WindowMs {
			dropped++
			continue
		}
		key := []byte(r.Key)
		sh, h := e.store.locate(key)
		sh.mu.Lock()
		ent := sh.lookup(h, key)
		if ent == nil {
			ent, _ = e.store.insert(sh, h, key, true)
		}
		i := e.store.slot(ent, r.Seq, now/t.WindowMs)
		if i < 0 {
			sh.mu.Unlock()
			dropped++
			continue
		}
		c := &ent.cells[i]
		c.regional = max(c.regional, capCount(r.Regional))
		foreign := r.Foreign
		if len(foreign) == 0 && r.Imported > 0 {
			foreign = []RegionCount{{Count: r.Imported}}
		}
		for _, f := range foreign {
			if f.Region == e.region {
				c.regional = max(c.regional, capCount(f.Count))
			} else if id, err := e.regions.id(f.Region); err == nil {
				e.store.raise(ent, i, id, f.Count)
			}
		}
		e.store.setPublished(ent, i, max(ent.published(i), c.regional)) // published before, or restored from a peer
		sh.mu.Unlock()
		loaded++
	}
	return loaded, dropped, err
}
