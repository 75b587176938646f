package engine

import (
	"bytes"
	"context"
	"errors"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// Overrides (RL.OVERRIDE): an operator's limit for a tuple, or for every tuple whose key
// starts with a prefix, that replaces the limit a request carries. An origin holds the
// authoritative table of its tuples (Engine.Overrides); an edge holds a copy of each of
// its origins' tables; both look a request's tuple up before deciding.
//
// A tuple's override is its exact one, else the one of the longest prefix of its key in
// the same workspace, namespace and window. The table is bounded (MaxOverrides live ones).
//
// Every write carries a stamp (a Lamport clock over the wall clock's milliseconds) and the
// region that made it: copies (snapshots, peer regions, edges) merge record by record,
// the greater (stamp, region) winning, so a merge is idempotent and commutative and copies
// converge. A deletion is a tombstone (limit 0) that outlives the override so that an
// older copy of it cannot bring it back; at most MaxOverrides tombstones are kept, the
// oldest dropped first (they are a list of their own, in the order they were made). The
// table remembers the greatest (stamp, region) of the tombstones it dropped, its horizon
// (OverrideHorizon, kept in snapshots): Merge refuses a record of a key it does not hold
// that is not above it, so a dropped deletion cannot be undone by an older copy of the
// override; a write older than the horizon that this table never saw is taken as deleted.
//
// Concurrency: an RWMutex guards the maps. Lookups take no lock: they read an immutable
// index behind an atomic pointer, which every write replaces before releasing the lock
// (override_index.go). The count of live overrides is an atomic: with none, a lookup is
// that one load. The scans of the whole
// table (List, Records, Since, OverrideList) copy at most scanChunk records at a time
// under the read lock and do the rest without it, so a writer, and the lookups queued
// behind it, never wait for more than one chunk.

// DefaultMaxOverrides bounds an origin's live overrides when NewOverrides is given 0.
const DefaultMaxOverrides = 100_000

// MaxOverrideKeyLen bounds a record's tuple key, and MaxOverrideRegionLen its region's
// name: Merge refuses longer ones (commands make keys of at most 1024 bytes; a snapshot
// saves keys far longer than this, and regions of up to 255 bytes, as the wire carries).
const (
	MaxOverrideKeyLen    = 4096
	MaxOverrideRegionLen = 255
)

// MaxOverrideStamp bounds a record's stamp: Merge refuses greater ones, so that the
// table's next stamp (one more than the greatest seen) can never wrap.
const MaxOverrideStamp = math.MaxUint64 >> 1

// OverrideHorizon is the greatest (stamp, region) of the tombstones a table dropped: a
// record of a key the table does not hold that is not above it is refused by Merge. The
// zero value refuses nothing.
type OverrideHorizon struct {
	Stamp  uint64
	Region string
}

// ErrOverridesFull is returned by Overrides.Set for a new override beyond the bound.
var ErrOverridesFull = errors.New("override table is full")

// OverrideRecord is one override, or the tombstone of a deleted one, as snapshots, peer
// regions and edges carry it.
type OverrideRecord struct {
	// Key is the tuple key (AppendKey); for a prefix, the key of the tuple whose key is the
	// prefix.
	Key    []byte
	Prefix bool
	Limit  uint64 // 0: a tombstone
	Stamp  uint64
	Region string // the region that wrote it; breaks ties of Stamp
}

// Override is one live override, as RL.OVERRIDE LIST shows it.
type Override struct {
	Tuple  Tuple // Key is the prefix, without its '*', when Prefix
	Prefix bool
	Limit  uint64
}

// override is one record of a table.
type override struct {
	key    string // tuple key
	hdr    int    // length of key's window, workspace and namespace: key[hdr:] is the tuple's key
	prefix bool
	limit  uint64 // 0: tombstone
	stamp  uint64
	region string
	seq    uint64 // the table's change sequence when it last changed

	links       // change order (Overrides.first is the oldest)
	tomb  links // a tombstone's place among the tombstones (Overrides.tombs)
}

// links are a record's neighbours in one of a table's lists.
type links struct{ prev, next *override }

// chain is one of a table's lists of records, oldest first.
type chain struct{ first, last *override }

// byChange and byTomb give a record's links in the change order and among tombstones.
func byChange(r *override) *links { return &r.links }
func byTomb(r *override) *links   { return &r.tomb }

// remove takes r out of c, whose links at gives.
func (c *chain) remove(r *override, at func(*override) *links) {
	l := at(r)
	if l.prev != nil {
		at(l.prev).next = l.next
	} else if c.first == r {
		c.first = l.next
	}
	if l.next != nil {
		at(l.next).prev = l.prev
	} else if c.last == r {
		c.last = l.prev
	}
	l.prev, l.next = nil, nil
}

// push makes r the newest of c, whose links at gives.
func (c *chain) push(r *override, at func(*override) *links) {
	at(r).prev = c.last
	if c.last != nil {
		at(c.last).next = r
	} else {
		c.first = r
	}
	c.last = r
}

// prefixScope counts the live prefixes of one (window, workspace, namespace).
type prefixScope struct {
	lens  []int // distinct prefix lengths, longest first
	count map[int]int
}

// Overrides is a table of overrides. It is safe for concurrent use.
type Overrides struct {
	live atomic.Int64 // live overrides: 0 lets a lookup return at once

	mu       sync.RWMutex
	exact    map[string]*override
	prefix   map[string]*override
	scopes   map[string]*prefixScope // by the tuple key's header: prefixes in use
	chain                            // every record, by change: oldest first
	tombs    chain                   // the tombstones in the order they were made: oldest first
	ntombs   int
	forgot   OverrideHorizon // the greatest dropped tombstone's (stamp, region)
	seq      uint64          // change sequence: the last change's
	stamp    uint64          // the greatest stamp given or seen
	max      int
	region   string
	clock    Clock
	onChange func(r *override) // called on every change, o.mu held (the engine's feed); nil: none

	idx     atomic.Pointer[lookupIndex] // what Lookup reads (override_index.go)
	idxSeed maphash.Seed
	pending []*override // records changed under the write lock, not yet in idx
}

// NewOverrides returns an empty table of at most max live overrides (0:
// DefaultMaxOverrides), whose writes are stamped with clock and region.
func NewOverrides(clock Clock, region string, max int) *Overrides {
	if max <= 0 {
		max = DefaultMaxOverrides
	}
	o := &Overrides{exact: map[string]*override{}, prefix: map[string]*override{}, scopes: map[string]*prefixScope{},
		max: max, region: region, clock: clock, idxSeed: maphash.MakeSeed()}
	o.idx.Store(&lookupIndex{})
	return o
}

// Len returns the number of live overrides.
func (o *Overrides) Len() int { return int(o.live.Load()) }

// Max returns the bound on live overrides.
func (o *Overrides) Max() int { return o.max }

// Limit returns the limit a request for t decides against: t's override's, else limit.
func (o *Overrides) Limit(t Tuple, limit uint64) uint64 {
	if o.live.Load() == 0 {
		return limit
	}
	if l, ok := o.Lookup(t); ok {
		return l
	}
	return limit
}

// Lookup returns the limit of t's override: its exact one, else its longest prefix's. It
// takes no lock: it reads the published index (override_index.go).
func (o *Overrides) Lookup(t Tuple) (uint64, bool) {
	if o.live.Load() == 0 {
		return 0, false
	}
	var buf [256]byte
	k := AppendKey(buf[:0], t)
	return o.lookupIndexed(k, len(k)-len(t.Key))
}

// Get returns the limit of the override set for t exactly (with prefix, for the prefix
// t.Key), not resolving prefixes.
func (o *Overrides) Get(t Tuple, prefix bool) (uint64, bool) {
	var buf [256]byte
	k := AppendKey(buf[:0], t)
	o.mu.RLock()
	defer o.mu.RUnlock()
	if r := o.table(prefix)[string(k)]; r != nil && r.limit > 0 {
		return r.limit, true
	}
	return 0, false
}

// Set makes limit (>= 1) the override of t (with prefix, of every tuple whose key starts
// with t.Key). A new override beyond the bound is refused with ErrOverridesFull.
func (o *Overrides) Set(t Tuple, prefix bool, limit uint64) error {
	if limit == 0 {
		return errors.New("override limit must be at least 1")
	}
	k := AppendKey(nil, t)
	o.mu.Lock()
	defer o.unlock()
	r := o.table(prefix)[string(k)]
	if (r == nil || r.limit == 0) && int(o.live.Load()) >= o.max {
		return ErrOverridesFull
	}
	o.put(string(k), len(k)-len(t.Key), prefix, limit, o.nextStamp(), o.region)
	return nil
}

// Delete removes t's override (with prefix, the prefix t.Key's) and reports whether
// there was one.
func (o *Overrides) Delete(t Tuple, prefix bool) bool {
	k := AppendKey(nil, t)
	o.mu.Lock()
	defer o.unlock()
	r := o.table(prefix)[string(k)]
	if r == nil || r.limit == 0 {
		return false
	}
	o.put(r.key, r.hdr, prefix, 0, o.nextStamp(), o.region)
	return true
}

// Merge takes every record of recs that is newer than this table's of its key (the greater
// (Stamp, Region)), and returns how many it took. Records that are malformed (a key over
// MaxOverrideKeyLen, a region over MaxOverrideRegionLen, a limit over MaxLimit, a stamp
// over MaxOverrideStamp), new live ones beyond the bound, and those of a key the table
// does not hold that are not above its horizon (Horizon) are skipped. recs is not kept.
// It takes the write lock for scanChunk records at a time.
func (o *Overrides) Merge(recs []OverrideRecord) int {
	n := 0
	for len(recs) > 0 { // a chunk at a time: lookups get in between
		part := recs[:min(len(recs), scanChunk)]
		recs = recs[len(part):]
		n += o.merge(part)
	}
	return n
}

// merge is Merge of at most scanChunk records, under the write lock.
func (o *Overrides) merge(recs []OverrideRecord) int {
	var keyLens [scanChunk]int // the length of each record's key within its tuple key; -1: malformed
	for i, rec := range recs {
		keyLens[i] = -1
		if len(rec.Key) > MaxOverrideKeyLen || rec.Limit > MaxLimit || rec.Stamp > MaxOverrideStamp ||
			rec.Region == "" || len(rec.Region) > MaxOverrideRegionLen {
			continue
		}
		if t, err := ParseKey(rec.Key); err == nil {
			keyLens[i] = len(t.Key)
		}
	}
	o.mu.Lock()
	defer o.unlock()
	n := 0
	for i, rec := range recs {
		if keyLens[i] < 0 {
			continue
		}
		r := o.table(rec.Prefix)[string(rec.Key)]
		if r != nil && !newer(rec.Stamp, rec.Region, r.stamp, r.region) {
			continue
		}
		if r == nil && !newer(rec.Stamp, rec.Region, o.forgot.Stamp, o.forgot.Region) {
			continue // its key's tombstone may have been dropped: taken as deleted
		}
		if rec.Limit > 0 && (r == nil || r.limit == 0) && int(o.live.Load()) >= o.max {
			continue
		}
		o.stamp = max(o.stamp, rec.Stamp)
		o.put(string(rec.Key), len(rec.Key)-keyLens[i], rec.Prefix, rec.Limit, rec.Stamp, rec.Region)
		n++
	}
	return n
}

// Horizon returns the greatest (stamp, region) of the tombstones the table dropped (a
// snapshot keeps it, read after the records).
func (o *Overrides) Horizon() OverrideHorizon {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.forgot
}

// Forget raises the table's horizon to h (a snapshot's, restored after its records): the
// table then refuses records of keys it does not hold that are not above h.
func (o *Overrides) Forget(h OverrideHorizon) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if newer(h.Stamp, h.Region, o.forgot.Stamp, o.forgot.Region) {
		o.forgot = h
	}
	o.stamp = max(o.stamp, h.Stamp)
}

// newer reports whether the write (stamp, region) supersedes (than, thanRegion).
func newer(stamp uint64, region string, than uint64, thanRegion string) bool {
	return stamp > than || (stamp == than && region > thanRegion)
}

// Seq returns the table's change sequence: it grows with every change, so a copy that
// read Since(s) up to Seq() has every change up to then.
func (o *Overrides) Seq() uint64 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.seq
}

// Since returns the records (tombstones included) that changed after change sequence seq,
// oldest change first, at most limit of them (0: all), and the change sequence they
// reach: Since(next) returns the rest. A record that changes while Since reads may be
// returned twice, the older first.
func (o *Overrides) Since(seq uint64, limit int) (recs []OverrideRecord, next uint64) {
	next = o.scan(seq, limit, func(chunk []override) bool {
		for i := range chunk {
			recs = append(recs, chunk[i].record())
		}
		return true
	})
	return recs, next
}

// Records yields every record (tombstones included), each lent for the call, in change
// order: an iter.Seq for a snapshot. A record that changes meanwhile may be yielded twice,
// the older first (a restore keeps the newer).
func (o *Overrides) Records(yield func(OverrideRecord) bool) {
	o.scan(0, 0, func(chunk []override) bool {
		for i := range chunk {
			if !yield(chunk[i].record()) {
				return false
			}
		}
		return true
	})
}

// scanChunk bounds the records a scan copies under the read lock at once.
const scanChunk = 1024

// scan calls f with copies of the records that changed after seq, in change order, at
// most limit of them (0: all), in chunks of at most scanChunk copied under the read lock,
// f running without it. A record that changes during the scan is seen again at its new
// place. It stops when f returns false, and returns the change sequence it reached: the
// last copied record's, or the table's once it read to the end.
func (o *Overrides) scan(seq uint64, limit int, f func(chunk []override) bool) uint64 {
	chunk := make([]override, 0, scanChunk)
	var at *override // the last record copied
	for n := 0; ; {
		chunk = chunk[:0]
		o.mu.RLock()
		r := o.after(at, seq)
		for ; r != nil && len(chunk) < scanChunk && (limit <= 0 || n < limit); r = r.next {
			chunk = append(chunk, override{key: r.key, hdr: r.hdr, prefix: r.prefix, limit: r.limit, stamp: r.stamp,
				region: r.region, seq: r.seq})
			at, seq = r, r.seq
			n++
		}
		end := r == nil
		if end {
			seq = o.seq
		}
		o.mu.RUnlock()
		if (len(chunk) > 0 && !f(chunk)) || end || (limit > 0 && n >= limit) {
			return seq
		}
	}
}

// after returns the first record that changed after seq (nil: none), at being the last
// one a scan copied, of sequence seq, when there is one (o.mu held).
func (o *Overrides) after(at *override, seq uint64) *override {
	if at != nil && at.seq == seq && o.table(at.prefix)[at.key] == at {
		return at.next // still in place
	}
	if o.first != nil && o.first.seq > seq {
		return o.first // all of them: no walk back from the newest
	}
	r := o.last
	for r != nil && r.prev != nil && r.prev.seq > seq {
		r = r.prev
	}
	if r == nil || r.seq <= seq {
		return nil
	}
	return r
}

// Reset drops every record: a copy about to be read again in full.
func (o *Overrides) Reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.exact)
	clear(o.prefix)
	clear(o.scopes)
	o.chain, o.tombs, o.ntombs = chain{}, chain{}, 0
	o.forgot = OverrideHorizon{}
	o.live.Store(0)
	o.seq++
	clear(o.pending)
	o.pending = o.pending[:0]
	o.idx.Store(&lookupIndex{})
}

// List returns the live overrides of workspace ws (in namespace ns; "": every namespace)
// whose key (a prefix's with its '*') match accepts (nil: all), sorted by namespace, key
// and window, at most count of them. It reads the table in chunks (scan): an override
// changed meanwhile is listed as it is at the end.
func (o *Overrides) List(ws, ns string, match func(key []byte) bool, count int) []Override {
	found := map[listKey]Override{}
	o.scan(0, 0, func(chunk []override) bool {
		for i := range chunk {
			r := &chunk[i]
			lk := listKey{r.key, r.prefix}
			delete(found, lk) // an older state of it, seen earlier in the scan
			if r.limit == 0 {
				continue
			}
			t, err := ParseKey([]byte(r.key))
			if err != nil || t.Workspace != ws || (ns != "" && t.Namespace != ns) {
				continue
			}
			if match != nil && !match(displayKey(t.Key, r.prefix)) {
				continue
			}
			found[lk] = Override{Tuple: t, Prefix: r.prefix, Limit: r.limit}
		}
		return true
	})
	out := make([]Override, 0, len(found))
	for _, ov := range found {
		out = append(out, ov)
	}
	return SortOverrides(out, count)
}

// listKey names a record of the table: its key, and whether it is a prefix's.
type listKey struct {
	key    string
	prefix bool
}

// SortOverrides sorts list by namespace, key and window, drops repeats of one override
// (the same prefix listed by several origins: the first stays) and keeps at most count
// (0: all).
func SortOverrides(list []Override, count int) []Override {
	slices.SortStableFunc(list, compareOverrides)
	list = slices.CompactFunc(list, func(a, b Override) bool {
		return a.Prefix == b.Prefix && compareOverrides(a, b) == 0 && a.Tuple.Workspace == b.Tuple.Workspace
	})
	if count > 0 && len(list) > count {
		list = list[:count]
	}
	return list
}

// compareOverrides orders overrides by namespace, key (as shown: a prefix with its '*'),
// window.
func compareOverrides(a, b Override) int {
	if c := bytes.Compare([]byte(a.Tuple.Namespace), []byte(b.Tuple.Namespace)); c != 0 {
		return c
	}
	if c := bytes.Compare(displayKey(a.Tuple.Key, a.Prefix), displayKey(b.Tuple.Key, b.Prefix)); c != 0 {
		return c
	}
	return int(a.Tuple.WindowMs - b.Tuple.WindowMs)
}

// displayKey is key as RL.OVERRIDE names it: a prefix ends with '*'.
func displayKey(key []byte, prefix bool) []byte {
	if !prefix {
		return key
	}
	return append(key[:len(key):len(key)], '*')
}

func (o *Overrides) table(prefix bool) map[string]*override {
	if prefix {
		return o.prefix
	}
	return o.exact
}

// nextStamp returns a stamp greater than every one given or seen: the clock's ms in the
// high bits, so that a later write anywhere usually wins, with room for 2^16 writes per ms.
func (o *Overrides) nextStamp() uint64 {
	o.stamp = max(o.stamp+1, uint64(max(o.clock.NowMs(), 0))<<16)
	return o.stamp
}

// put writes the record of key (o.mu held for writing): limit 0 makes it a tombstone.
func (o *Overrides) put(key string, hdr int, prefix bool, limit, stamp uint64, region string) {
	m := o.table(prefix)
	r := m[key]
	wasLive, wasTomb := r != nil && r.limit > 0, r != nil && r.limit == 0
	if r == nil {
		r = &override{key: key, hdr: hdr, prefix: prefix}
		m[key] = r
	} else {
		o.remove(r, byChange)
	}
	r.limit, r.stamp, r.region = limit, stamp, region
	o.seq++
	r.seq = o.seq
	o.pending = append(o.pending, r)
	if o.onChange != nil {
		o.onChange(r)
	}
	o.push(r, byChange)
	switch isLive := limit > 0; {
	case isLive && !wasLive:
		o.live.Add(1)
		if prefix {
			o.scopeAdd(key[:hdr], len(key)-hdr, 1)
		}
	case !isLive && wasLive:
		o.live.Add(-1)
		if prefix {
			o.scopeAdd(key[:hdr], len(key)-hdr, -1)
		}
	}
	if wasTomb {
		o.tombs.remove(r, byTomb) // revived, or a newer tombstone: made again
		o.ntombs--
	}
	if limit == 0 {
		o.tombs.push(r, byTomb)
		o.ntombs++
		o.dropTombstones()
	}
}

// dropTombstones forgets the oldest tombstones beyond the bound, raising the horizon to
// theirs (o.mu held for writing).
func (o *Overrides) dropTombstones() {
	for o.ntombs > o.max && o.tombs.first != nil {
		r := o.tombs.first
		o.tombs.remove(r, byTomb)
		o.ntombs--
		delete(o.table(r.prefix), r.key)
		o.remove(r, byChange)
		if newer(r.stamp, r.region, o.forgot.Stamp, o.forgot.Region) {
			o.forgot = OverrideHorizon{Stamp: r.stamp, Region: r.region}
		}
	}
}

// scopeAdd counts one more (d = 1) or one fewer (d = -1) live prefix of length n in the
// scope hdr.
func (o *Overrides) scopeAdd(hdr string, n, d int) {
	sc := o.scopes[hdr]
	if sc == nil {
		sc = &prefixScope{count: map[int]int{}}
		o.scopes[hdr] = sc
	}
	sc.count[n] += d
	if sc.count[n] <= 0 {
		delete(sc.count, n)
		if len(sc.count) == 0 {
			delete(o.scopes, hdr)
			return
		}
	}
	sc.lens = sc.lens[:0]
	for l := range sc.count {
		sc.lens = append(sc.lens, l)
	}
	slices.SortFunc(sc.lens, func(a, b int) int { return b - a })
}

func (r *override) record() OverrideRecord {
	return OverrideRecord{Key: []byte(r.key), Prefix: r.prefix, Limit: r.limit, Stamp: r.stamp, Region: r.region}
}

// ChangeOverride is the change feed's kind for an override (engine/changes.go): Key is
// the record's tuple key, Fields are [prefix (0 or 1), limit (0: deleted), sequence], the
// sequence growing with every change of the origin's table in this run. An edge keeps, of
// each key, the record of the greatest sequence.
const ChangeOverride ChangeKind = 3

// overrideChange is the feed's change of r (its Version unset).
func overrideChange(r *override) Change {
	prefix := int64(0)
	if r.prefix {
		prefix = 1
	}
	return Change{Kind: ChangeOverride, Key: []byte(r.key), Fields: []int64{prefix, int64(r.limit), int64(r.seq)}}
}

// OverrideRecordOf is the record of an override change (ChangeOverride) as an edge's copy
// of its origin's table keeps it: the origin's sequence as its stamp. ok is false for a
// change of another kind or a malformed one.
func OverrideRecordOf(c Change) (r OverrideRecord, ok bool) {
	if c.Kind != ChangeOverride || len(c.Fields) != 3 || c.Fields[0] < 0 || c.Fields[0] > 1 || c.Fields[1] < 0 ||
		uint64(c.Fields[1]) > MaxLimit || c.Fields[2] <= 0 {
		return r, false
	}
	return OverrideRecord{Key: c.Key, Prefix: c.Fields[0] == 1, Limit: uint64(c.Fields[1]), Stamp: uint64(c.Fields[2]),
		Region: "origin"}, true
}

// OverrideList returns the records of the origin's table (tombstones included) whose
// sequence is above after, as changes of kind ChangeOverride, at most MaxChangesPerReply
// of them in sequence order; Version is the last one's sequence when more remain (the
// asker asks again from it), else the table's. An edge reads its copy of the table so
// when it starts, when the origin's run changes and when it resyncs, then follows the
// change feed.
func (e *Engine) OverrideList(node string, after uint64) ChangesReply {
	if node != "" {
		e.Heard(node)
	}
	var out ChangesReply
	out.Version = e.overrides.scan(after, MaxChangesPerReply, func(chunk []override) bool {
		for i := range chunk {
			c := overrideChange(&chunk[i])
			c.Version = chunk[i].seq
			out.Changes = append(out.Changes, c)
		}
		return true
	})
	return out
}

// OverridesOrigin is an Origin that lists its overrides (upstream.Client, LocalOrigin):
// OverrideList of the origin's engine.
type OverridesOrigin interface {
	OverrideList(ctx context.Context, after uint64) (ChangesReply, error)
}

// OverrideList implements OverridesOrigin.
func (o LocalOrigin) OverrideList(_ context.Context, after uint64) (ChangesReply, error) {
	return o.Engine.OverrideList(o.Node, after), nil
}

// Overrides returns the origin's table of overrides (RL.OVERRIDE).
func (e *Engine) Overrides() *Overrides { return e.overrides }

// OverrideLimit returns the limit a request for t decides against on this origin: t's
// override's, else limit.
func (e *Engine) OverrideLimit(t Tuple, limit uint64) uint64 { return e.overrides.Limit(t, limit) }

// RestoreOverrides merges a snapshot's override records (persist) into the origin's table
// and returns how many it took. They do not enter the change feed: an edge reads a
// restarted origin's overrides in full, and thousands of them would only push the feed's
// ring past what edges applied, making them resync.
func (e *Engine) RestoreOverrides(recs []OverrideRecord) int {
	o := e.overrides
	o.mu.Lock()
	hook := o.onChange
	o.onChange = nil
	o.mu.Unlock()
	n := o.Merge(recs)
	o.mu.Lock()
	o.onChange = hook
	o.mu.Unlock()
	return n
}
