package engine

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"unsafe"
)

// NoSnapshots is the Durable an origin without snapshots reports: its restart keeps
// nothing, so edges keep nothing for it.
const NoSnapshots = math.MaxInt64

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

// Snapshot returns every live cell (sequence >= seq-1 of its window), raw as Tuples
// yields them. Each shard is copied under its lock, so every record is a count that was
// really held; records of different shards may be a few microseconds apart.
func (e *Engine) Snapshot() []CellRecord {
	out := make([]CellRecord, 0, e.store.cells.Load())
	for r := range e.Records {
		r.Key = strings.Clone(r.Key)
		r.Foreign = slices.Clone(r.Foreign)
		out = append(out, r)
	}
	return out
}

// TupleRecord is one tuple as a snapshot captures it: its key, its live cells and its lease
// grants that have not ended, read under one lock. The Key of each of its cells and grants
// is empty: it is the tuple's.
type TupleRecord struct {
	Key    string
	Cells  []CellRecord
	Leases []LeaseRecord
	// Part is the tuple's load part (0 to Parts-1), 1/1024 of its shard: Tuples
	// yields the tuples in part order, for a snapshot that LoadLazily reads back part by
	// part.
	Part int
}

// Tuples yields every tuple that holds a live cell or a lease grant that has not ended,
// without copying the store: a shard's tuples are gathered into buffers reused from shard
// to shard, and yielded after its lock is released, so a periodic save of a million cells
// makes no garbage. A record (its key, cells, grants and their Foreign) is valid only
// during the call. Shards are visited in turn, giving way between them. A snapshot reads
// the cells and the grants in this one pass: each tuple's side struct is read once, and
// a grant's record can refer to its tuple's cell record for the key (persist).
func (e *Engine) Tuples(yield func(TupleRecord) bool) {
	type span struct{ off, n int }
	type tupleAt struct {
		key, cells, leases span
		part               int
	}
	var (
		tuples  []tupleAt
		order   []int // tuples' indexes in part order
		keys    []byte
		cells   []CellRecord
		fAt     []span // per cell, its foreign components in foreign
		foreign []RegionCount
		leases  []LeaseRecord
	)
	now := e.clock.NowMs()
	for i := range e.store.shards {
		e.store.waitShard(i)
		tuples, keys, cells, fAt, foreign, leases = tuples[:0], keys[:0], cells[:0], fAt[:0], foreign[:0], leases[:0]
		sh := &e.store.shards[i]
		lockYielding(&sh.mu)
		// Count the shard's grants first, to size the buffer: a loop of loads that do not
		// depend on each other, so the CPU fetches many side structs at once, where the
		// pass below would wait for each in turn (most are not in cache).
		n := 0
		for _, sd := range sh.sides {
			if sd != nil {
				n += len(sd.leases.grants)
			}
		}
		leases = slices.Grow(leases, n)
		named := !e.regions.empty() // read under the shard's lock
		reset := e.resets.count.Load() > 0
		for j := range sh.n {
			sl := sh.at(j)
			key := sh.keyOf(sl)
			t := tupleAt{cells: span{len(cells), 0}, leases: span{len(leases), 0}}
			if w := windowOfKey(key); w > 0 {
				var r *tupleReset // the cells are saved raw: plus what resets cancelled (reset.go)
				if reset {
					r = sh.resets[key]
				}
				for k := range entryCells {
					if !sl.ent.live(k, w, now) {
						continue
					}
					c := sh.cell(&sl.ent, k)
					f0 := len(foreign)
					imported := c.imported
					if named {
						for _, f := range sh.foreign(&sl.ent, k) {
							name := e.regions.name(f.region)
							n := satAdd(f.count, r.cancelled(c.seq, name))
							imported = satAdd(imported, n-f.count)
							foreign = append(foreign, RegionCount{Region: name, Count: n})
						}
					}
					fAt = append(fAt, span{f0, len(foreign) - f0})
					cells = append(cells, CellRecord{Seq: c.seq, Regional: satAdd(c.regional, r.cancelled(c.seq, e.region)), Imported: imported})
				}
			}
			if sd := sh.side(&sl.ent); sd != nil {
				sh.settle(&sl.ent)
				for _, g := range sd.leases.grants {
					if g.held(now) == 0 {
						continue // it reserves nothing, and never will again without a new grant
					}
					leases = append(leases, LeaseRecord{Run: g.run.name, G: g.g, Spent: g.spent, Seq: g.seq, UntilMs: g.until})
				}
			}
			t.cells.n, t.leases.n = len(cells)-t.cells.off, len(leases)-t.leases.off
			if t.cells.n == 0 && t.leases.n == 0 {
				continue
			}
			t.key = span{len(keys), len(key)}
			keys = append(keys, key...)
			tuples = append(tuples, t)
		}
		sh.mu.Unlock()
		for k, fs := range fAt {
			if fs.n > 0 {
				cells[k].Foreign = foreign[fs.off : fs.off+fs.n : fs.off+fs.n]
			}
		}
		// In part order (a counting sort: the part is the next bits of the hash that picked
		// the shard).
		var at [loadParts + 1]int
		for k := range tuples {
			t := &tuples[k]
			t.part = partOf(hashKey(e.store.seed, keys[t.key.off:t.key.off+t.key.n]))
			at[t.part%loadParts+1]++
		}
		for p := 1; p <= loadParts; p++ {
			at[p] += at[p-1]
		}
		order = slices.Grow(order[:0], len(tuples))[:len(tuples)]
		for k := range tuples {
			p := tuples[k].part % loadParts
			order[at[p]] = k
			at[p]++
		}
		for _, k := range order {
			t := &tuples[k]
			r := TupleRecord{
				Part:   t.part,
				Cells:  cells[t.cells.off : t.cells.off+t.cells.n : t.cells.off+t.cells.n],
				Leases: leases[t.leases.off : t.leases.off+t.leases.n : t.leases.off+t.leases.n],
			}
			if t.key.n > 0 {
				r.Key = unsafe.String(&keys[t.key.off], t.key.n)
			}
			if !yield(r) {
				return
			}
		}
		runtime.Gosched()
	}
}

// Records yields every live cell, as Snapshot returns them, from Tuples: a record (its key
// and Foreign) is valid only during the call.
func (e *Engine) Records(yield func(CellRecord) bool) {
	for t := range e.Tuples {
		for _, c := range t.Cells {
			c.Key = t.Key
			if !yield(c) {
				return
			}
		}
	}
}

// Restore merges records into the store with max, keeping only cells that are still live.
// Records are raw (Tuples): what the resets restored before (RestoreResets) cancelled of
// each component is taken off.
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
		if !e.restoreRecord(r, t, now) {
			dropped++
			continue
		}
		loaded++
	}
	return loaded, dropped, err
}

// restoreRecord merges one record of Restore (t its parsed key) into the store at now,
// and reports whether it was kept.
func (e *Engine) restoreRecord(r CellRecord, t Tuple, now int64) bool {
	key := []byte(r.Key)
	sh, h := e.store.locateLoaded(key) // a lazy load's own restore, or no lazy load
	sh.mu.Lock()
	defer sh.mu.Unlock() // also when a panic (a fault reading the file a lazy load aliases) is recovered above
	ent := sh.lookup(h, key)
	if ent == nil {
		ent, _ = e.store.insert(sh, h, key, true) // nil only when the shard holds maxSlots
	}
	i := -1
	if ent != nil {
		i = e.store.slot(sh, ent, r.Seq, now/t.WindowMs)
	}
	if i < 0 {
		return false
	}
	var rs *tupleReset // what the resets restored before cancelled
	if e.resets.count.Load() > 0 {
		rs = sh.resets[string(key)] // key: a copy, not the file's bytes
	}
	eff := func(region string, n uint64) uint64 {
		return capCount(n) - min(capCount(n), rs.cancelled(r.Seq, region))
	}
	ent.regional[i] = max(ent.regional[i], eff(e.region, r.Regional))
	foreign := r.Foreign
	if len(foreign) == 0 && r.Imported > 0 {
		foreign = []RegionCount{{Count: r.Imported}}
	}
	for _, f := range foreign {
		if f.Region == e.region {
			ent.regional[i] = max(ent.regional[i], eff(e.region, f.Count))
		} else if id, err := e.regions.id(f.Region); err == nil {
			e.store.raise(sh, ent, i, id, eff(f.Region, f.Count))
		}
	}
	if !e.standalone {
		e.store.setPublished(sh, ent, i, max(sh.published(ent, i), ent.regional[i])) // published before, or restored from a peer
	}
	return true
}
