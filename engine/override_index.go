package engine

import (
	"hash/maphash"
	"maps"
	"slices"
)

// The lookup index: what Overrides.Lookup reads, without a lock. It is immutable once
// published (Overrides.idx, an atomic pointer); a write builds the next one under the
// table's write lock, copying only the parts it changes: the scopes' map, the scope (one
// (window, workspace, namespace)) and the shards of that scope holding the changed keys.
// A shard holds about 1/idxShards of a scope's overrides, so a SET in a scope of 100k
// overrides copies some 1.6k entries; a merge of 1024 records copies each shard it
// touches once.

// idxShards is the number of shards of a scope's exact overrides, and of its prefixes.
const idxShards = 64

// lookupIndex is the live overrides by scope (a tuple key's header: window, workspace,
// namespace). Never modified once published.
type lookupIndex struct {
	scopes map[string]*idxScope
}

// idxScope is one scope's live overrides: exact ones and prefixes by tuple key (a
// prefix's: the key of the tuple whose key is the prefix), sharded by hash of that key,
// and the distinct lengths of its prefixes, longest first.
type idxScope struct {
	exact, prefix [idxShards]map[string]uint64
	lens          []int
}

// idxShard returns the shard of a tuple key.
func (o *Overrides) idxShard(key []byte) int {
	return int(maphash.Bytes(o.idxSeed, key) % idxShards)
}

// lookupIndexed returns the limit of the tuple whose key is k (hdr: the length of its
// header) in the published index: its exact override's, else its longest prefix's.
func (o *Overrides) lookupIndexed(k []byte, hdr int) (uint64, bool) {
	sc := o.idx.Load().scopes[string(k[:hdr])]
	if sc == nil {
		return 0, false
	}
	if l, ok := sc.exact[o.idxShard(k)][string(k)]; ok {
		return l, true
	}
	for _, n := range sc.lens {
		if hdr+n > len(k) {
			continue
		}
		p := k[:hdr+n]
		if l, ok := sc.prefix[o.idxShard(p)][string(p)]; ok {
			return l, true
		}
	}
	return 0, false
}

// unlock publishes the index with the records changed under the write lock (pending),
// then releases the lock.
func (o *Overrides) unlock() {
	if len(o.pending) > 0 {
		o.publish()
	}
	o.mu.Unlock()
}

// publish builds and stores the next index from the current one and the pending records
// (o.mu held for writing): each scope and shard they touch is copied once.
func (o *Overrides) publish() {
	old := o.idx.Load()
	next := &lookupIndex{scopes: make(map[string]*idxScope, len(old.scopes)+1)}
	for h, sc := range old.scopes {
		next.scopes[h] = sc
	}
	fresh := map[string]*idxScope{}             // by header: the scopes copied for next
	freshShard := map[*map[string]uint64]bool{} // the shards copied for next
	for _, r := range o.pending {
		h := r.key[:r.hdr]
		sc := fresh[h]
		if sc == nil {
			sc = &idxScope{}
			if old := next.scopes[h]; old != nil {
				*sc = *old
			}
			next.scopes[h], fresh[h] = sc, sc
		}
		shards := &sc.exact
		if r.prefix {
			shards = &sc.prefix
		}
		m := &shards[maphash.String(o.idxSeed, r.key)%idxShards]
		if !freshShard[m] {
			*m = maps.Clone(*m)
			if *m == nil {
				*m = map[string]uint64{}
			}
			freshShard[m] = true
		}
		if r.limit > 0 && o.table(r.prefix)[r.key] == r {
			(*m)[r.key] = r.limit
		} else {
			delete(*m, r.key)
		}
	}
	for h, sc := range fresh {
		sc.lens = nil
		if ps := o.scopes[h]; ps != nil {
			sc.lens = slices.Clone(ps.lens) // scopeAdd rewrites its own in place
		}
		if len(sc.lens) == 0 && scopeEmpty(&sc.exact) {
			delete(next.scopes, h)
		}
	}
	clear(o.pending)
	o.pending = o.pending[:0]
	o.idx.Store(next)
}

// scopeEmpty reports whether every shard of shards is empty.
func scopeEmpty(shards *[idxShards]map[string]uint64) bool {
	for _, m := range shards {
		if len(m) > 0 {
			return false
		}
	}
	return true
}
