package engine

import (
	"errors"
	"sync"
	"sync/atomic"
)

// This file is the engine's side of global convergence (SPEC section 6): G-Counter
// components. A cell's component of this region is its regional count, the only one this
// origin writes; other regions' components are merged with max and summed into imported.
// Package replication moves them between regions.

// Component is one region's share of one cell: (tuple key, sequence, region) -> count.
//
// With Reset, the row is not a count but what a reset of the tuple cancelled of Region's
// component of the cell (reset.go): merged with max like a count, and subtracted from the
// component wherever it is taken.
type Component struct {
	Key    []byte
	Seq    int64
	Region string
	Count  uint64
	Reset  bool
}

// maxRegions bounds the region table.
const maxRegions = 1024

var errTooManyRegions = errors.New("too many regions")

// regionTable maps foreign region names to small indexes kept in cells.
type regionTable struct {
	mu    sync.RWMutex
	names []string
	index map[string]uint16
	named atomic.Bool // a name was entered: read without mu (empty)
}

func (t *regionTable) id(name string) (uint16, error) {
	t.mu.RLock()
	i, ok := t.index[name]
	t.mu.RUnlock()
	if ok {
		return i, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.index[name]; ok {
		return i, nil
	}
	if len(t.names) >= maxRegions {
		return 0, errTooManyRegions
	}
	if t.index == nil {
		t.index = make(map[string]uint16)
	}
	i = uint16(len(t.names))
	t.names = append(t.names, name)
	t.index[name] = i
	t.named.Store(true)
	return i, nil
}

// empty reports whether no foreign region was ever named: then no cell holds a foreign
// component, and a pass over the store need not look for them (each look reads the
// entry's side struct, which a leased tuple has: a cache miss per tuple).
//
// A component is stored (under its shard's lock) only after its region was named, so a
// pass that reads empty under a shard's lock misses no component of that shard.
func (t *regionTable) empty() bool { return !t.named.Load() }

func (t *regionTable) name(i uint16) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int(i) < len(t.names) {
		return t.names[i]
	}
	return ""
}

// Region returns this origin's region.
func (e *Engine) Region() string { return e.region }

// MergeComponents merges components received from another region, with max: a foreign
// component raises that region's share of the cell; this region's own component (a peer's
// copy of what we published) may only raise the regional count, a lower bound after data
// loss. Components of cells that can no longer matter are ignored, and so are foreign
// components of tuples not held here while the store is at --max-memory. It returns how
// many components changed a count.
func (e *Engine) MergeComponents(comps []Component) (changed int) {
	now := e.clock.NowMs()
	var refresh map[string]bool // tuples another region's reset lowered here: their edges re-read them
	for _, c := range comps {
		w := windowOfKey(string(c.Key))
		if w <= 0 || c.Seq < now/w-1 || c.Seq > now/w+1 || c.Count == 0 {
			continue
		}
		if c.Reset {
			raised, lowered := e.mergeReset(c, w, now)
			if raised {
				changed++
			}
			if lowered { // only then: anti-entropy's rows must not flood the change feed
				if refresh == nil {
					refresh = make(map[string]bool)
				}
				refresh[string(c.Key)] = true
			}
			continue
		}
		var region uint16
		own := c.Region == e.region
		if !own {
			var err error
			if region, err = e.regions.id(c.Region); err != nil {
				continue
			}
		}
		sh, h := e.store.locate(c.Key)
		sh.mu.Lock()
		// Taken minus what a reset cancelled of it: an import from before the reset brings
		// nothing back. Read under the shard's lock, under which a reset cancels: a reset
		// is wholly before this merge or wholly after it.
		if cut := e.cancelledOf(c.Key, c.Seq, c.Region); cut > 0 {
			if c.Count <= cut {
				sh.mu.Unlock()
				continue
			}
			c.Count -= cut
		}
		ent := sh.lookup(h, c.Key)
		if ent == nil {
			// Our own row (a copy of what we published, after data loss) is restored even past
			// --max-memory; another region's row for a tuple we do not hold is refused when
			// the store is full, like any new cell.
			var err error
			if ent, err = e.store.insert(sh, h, c.Key, own); err != nil {
				sh.mu.Unlock()
				e.refusedFull()
				continue
			}
		}
		i := e.store.slot(sh, ent, c.Seq, now/w, w)
		if i < 0 {
			sh.mu.Unlock()
			continue
		}
		if own {
			if capCount(c.Count) > ent.regional[i] {
				ent.regional[i] = capCount(c.Count)
				e.store.setPublished(sh, ent, i, max(sh.published(ent, i), ent.regional[i])) // the peers have it already
				changed++
				e.store.markTuple(sh, h, c.Key)
			}
		} else if e.store.raise(sh, ent, i, region, c.Count) {
			changed++
			e.store.markTuple(sh, h, c.Key)
		}
		sh.mu.Unlock()
	}
	for k := range refresh {
		e.AddChange(ChangeRefresh, []byte(k), nil)
	}
	e.imports.Add(uint64(changed))
	if changed > 0 {
		e.markDirty()
	}
	return changed
}

// Publishable returns this region's components that are due for publication, at most
// limit of them, and marks them published: cells whose regional count grew since it was
// last published and that either reached threshold of the lowest limit seen for the cell,
// or have a foreign count already (then every growth is published). A cell used without any
// known limit is published at every growth.
//
// Components are raw: the count plus what resets cancelled of it (reset.go). The rows of
// the resets made here since the last call come first (they are not counted in limit).
func (e *Engine) Publishable(threshold float64, limit int) []Component {
	now := e.clock.NowMs()
	var out []Component
	if e.resets.count.Load() > 0 {
		out = e.resetRows(out, now, true)
	}
	limit += len(out)
	e.store.eachLive(now, func(sh *shard, k string, ent *entry, i int) bool {
		c := sh.cell(ent, i)
		if c.regional <= sh.published(ent, i) ||
			(c.imported == 0 && c.minLimit > 0 && float64(c.regional) < threshold*float64(c.minLimit)) {
			return true
		}
		raw := satAdd(c.regional, e.cancelledOf([]byte(k), c.seq, e.region))
		out = append(out, Component{Key: []byte(k), Seq: c.seq, Region: e.region, Count: raw})
		e.store.setPublished(sh, ent, i, c.regional)
		return len(out) < limit
	})
	e.published.Add(uint64(len(out)))
	return out
}

// Components returns every component held for live cells, this region's and the others':
// what anti-entropy sends to a peer that (re)connects.
//
// The reset rows come first, and components are raw (reset.go).
func (e *Engine) Components() []Component {
	now := e.clock.NowMs()
	var out []Component
	if e.resets.count.Load() > 0 {
		out = e.resetRows(out, now, false)
	}
	e.store.eachLive(now, func(sh *shard, k string, ent *entry, i int) bool {
		c := sh.cell(ent, i)
		if c.regional > 0 {
			raw := satAdd(c.regional, e.cancelledOf([]byte(k), c.seq, e.region))
			out = append(out, Component{Key: []byte(k), Seq: c.seq, Region: e.region, Count: raw})
		}
		for _, f := range sh.foreign(ent, i) {
			if name := e.regions.name(f.region); name != "" && f.count > 0 { // "": restored without a region name
				raw := satAdd(f.count, e.cancelledOf([]byte(k), c.seq, name))
				out = append(out, Component{Key: []byte(k), Seq: c.seq, Region: name, Count: raw})
			}
		}
		return true
	})
	return out
}
