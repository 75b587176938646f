package engine

import "fmt"

// CellRecord is one cell as it is saved and loaded: the tuple key made by AppendKey, the
// sequence, and the cell's regional and imported counts.
type CellRecord struct {
	Key      string
	Seq      int64
	Regional uint64
	Imported uint64
}

// Snapshot returns every live cell (sequence >= seq-1 of its window). Each shard is copied
// under its lock, so every record is a count that was really held; records of different
// shards may be a few microseconds apart.
func (e *Engine) Snapshot() []CellRecord {
	now := e.clock.NowMs()
	out := make([]CellRecord, 0, e.store.cells.Load())
	for i := range e.store.shards {
		sh := &e.store.shards[i]
		sh.mu.Lock()
		for k, ent := range sh.m {
			w := windowOfKey(k)
			if w <= 0 {
				continue
			}
			for _, c := range ent.cells {
				if c.seq != emptySeq && c.seq >= now/w-1 {
					out = append(out, CellRecord{Key: k, Seq: c.seq, Regional: c.regional, Imported: c.imported})
				}
			}
		}
		sh.mu.Unlock()
	}
	return out
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
		sh := e.store.shardOf(key)
		sh.mu.Lock()
		ent := sh.m[r.Key]
		if ent == nil {
			ent, _ = e.store.insert(sh, key, true)
		}
		// A slot for an older sequence than both held is not worth taking.
		if ent.find(r.Seq) == nil && r.Seq < min(ent.cells[0].seq, ent.cells[1].seq) {
			sh.mu.Unlock()
			dropped++
			continue
		}
		c, grew := ent.slot(r.Seq)
		c.regional = max(c.regional, capCount(r.Regional))
		c.imported = max(c.imported, capCount(r.Imported))
		if grew {
			e.store.cells.Add(1)
		}
		sh.mu.Unlock()
		loaded++
	}
	return loaded, dropped, err
}
