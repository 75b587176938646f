package engine

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Loading a snapshot in the background (LoadLazily): an origin that restarts serves before
// every cell of its snapshot is restored (what LoadAhead did not load before it listened),
// while the rest are restored part by part, a part being 1/1024 of a
// shard (the tuples whose hash has the shard's low 8 bits and the part's next 10). A part
// whose cells are not restored yet is restored first by whoever needs it: store.locate,
// which every keyed read and write goes through, waits for its key's records of the part
// (ensureKey), and the passes over the store (eachLive, Tuples) for every part of each
// shard; the sweep passes over the shards still loading. So no tuple is ever decided from
// fewer than the snapshot's counts, and a snapshot saved during the load holds every cell
// of the old one. A request on a part not loaded yet restores its own tuple's records of
// that part only, which the part's load then skips: a part is 1/262144 of the snapshot,
// about 40 cells at 10M, and with random keys nearly every request of a load's first
// seconds fell on a part not loaded yet and restored its 40 cells before it decided
// (three quarters of the load's CPU at 10M, taken inside the requests).
//
// This needs the snapshot's cells grouped by part, and the same parts: the snapshot records
// the store's hash seed (ShardSeed), which the next process adopts (AdoptShardSeed) before
// it holds anything.

// loadParts is the number of load parts of a shard; Parts that of the store.
const (
	loadParts = 1024
	Parts     = shardCount * loadParts
)

// partOf returns the load part of a key of hash h (store.locateIndex's).
func partOf(h uint64) int { return int(h%shardCount)*loadParts + int(h>>8)%loadParts }

// loadBatch is the number of parts the background load restores at once (its parts
// locked): 1/16384 of the snapshot, so that a request rarely waits for more than its own
// part, and the reads of the snapshot are few.
const loadBatch = 16

// loadSliceMs is how long the background load runs before it pauses, and the shares
// (1/n) of a thread it takes while requests come: an eighth for loadFirstMs from the
// first pause it takes for them (it pauses 7 times as long as it runs), then half. A
// restart's first seconds are when clients come back, and a request on a part not
// loaded yet restores its own tuple (keytags.go: about as costly as adding a new
// tuple), so the requests come first then; past them the load takes half a thread, so
// that a flood that never stops does not hold it back for long. Runs of 400k requests
// from the first decision after a 10M restart (three in a row, two restarts each; a
// scratch build with the share as a knob) had a p99 of 13.4-18.5 ms with half a thread
// from the start, 8.6-12.0 with an eighth, and 5.7-11.5 on a process that had loaded
// whole before it listened: the load holds a thread, and part locks, for its slices,
// where an event loop waits. An eighth throughout took 15 s for 10M cells under a flood
// that never stopped (1.4 µs a cell), a quarter 12.3 s.
const (
	loadSliceMs    = 2
	loadShareFirst = 8
	loadShare      = 2
	loadFirstMs    = 2000
)

// pacer keeps the background load to its share (loadShareFirst, then loadShare) of the
// time since it started (the wall clock's: the load's own CPU time is not known to Go),
// by the totals rather than slice by slice. Pausing as long as each slice took (at half
// a thread) left the load under a third of the time at 10M tuples under 50 busy
// connections (6.5 s loading, 15.1 s asleep: a sleep overshoots, the timer's goroutine
// waiting for a thread). The time slept beyond what was asked for is now owed to the
// load, and run in the next slices.
//
// The share is for a process that serves: one that served no request since the last
// pause (a restart at a quiet hour, or once a burst is over) has no request to give the
// thread to, and the load runs on without pausing (idle), its count started again.
type pacer struct {
	share    int64 // 1/share of a thread
	until    int64 // when the share becomes loadShare (ms); 0 until requests come
	begin    int64 // when the load began, or the count began again (ms)
	asleep   int64 // the time paused since (ms)
	pausedAt int64 // when the current pause began
	asked    int64 // and how long it was to be
	served   uint64
}

// newPacer returns the pacer of a load that begins at nowMs.
func newPacer(nowMs int64) pacer {
	p := pacer{share: loadShareFirst}
	p.start(nowMs)
	return p
}

// start begins the count of the time run and paused again, at nowMs.
func (p *pacer) start(nowMs int64) { p.begin, p.asleep = nowMs, 0 }

// idle reports, at a pause pause asked for at nowMs, whether the process served no
// request since the last one, served being its count of requests served so far: then
// the load need not pause, and its count starts again from nowMs. The first time it
// served some, the first share's time begins (a restart loads before it listens).
func (p *pacer) idle(nowMs int64, served uint64) bool {
	if served == p.served {
		p.start(nowMs)
		return true
	}
	p.served = served
	if p.until == 0 {
		p.until = nowMs + loadFirstMs
	}
	return false
}

// pacerAheadMs and pacerBehindMs bound the time the load may be ahead of its share (a
// pause longer than that) or behind it: past either, the clock stepped (a wall clock's) or
// the load was held up, and the count starts again. Within them a batch that took long (a
// loaded machine) is paid for: 7 times its time at an eighth of a thread.
const (
	pacerAheadMs  = 1000
	pacerBehindMs = 1000
)

// pause returns how long to pause at nowMs (ms), 0 for none: once the load ran a slice
// beyond its share, as long as brings it back to its share.
func (p *pacer) pause(nowMs int64) int64 {
	if p.share != loadShare && p.until != 0 && (nowMs >= p.until || nowMs < p.until-loadFirstMs) { // or the clock stepped back
		p.share = loadShare
		p.start(nowMs) // the first share's totals would have it run on, unpaused, to catch up
	}
	since := nowMs - p.begin
	ahead := (since-p.asleep)*p.share - since // the pause after which the time run is its share
	if ahead > pacerAheadMs || ahead < -pacerBehindMs {
		p.begin, p.asleep = nowMs-loadSliceMs, 0
		ahead = loadSliceMs * (p.share - 1)
	}
	if ahead >= loadSliceMs*(p.share-1) {
		p.pausedAt, p.asked = nowMs, ahead
		return ahead
	}
	return 0
}

// slept records the end, at nowMs, of the pause pause asked for: however long it took,
// and at least as long as asked (a clock that stood still meanwhile, a test's, would
// otherwise have the load pause after every batch).
func (p *pacer) slept(nowMs int64) { p.asleep += max(nowMs-p.pausedAt, p.asked) }

// loader is a lazy load's state (10 MiB), the store's until every part is loaded.
type loader struct {
	parts [Parts]loadPart
	kept  atomic.Int64 // the bytes of the parts' keys: at most maxKeptBytes
	load  func(from, to int, keep func(key string) bool, keyHash uint64)
	store *store
	// loaded has a bit set for each part loaded: 32 KiB, which the caches keep, where
	// the parts' states are 10 MiB (a keyed access read a part's state before: a cache
	// miss each, 0.27 s of the 4.9 s of CPU of a profile of a load at 10M tuples under
	// random requests).
	loaded [Parts / 64]atomic.Uint64
	// next is the next shard to take (take), by the background load or LoadAhead's
	// workers; finished counts the shards done, and whoever finishes the last one ends
	// the load (finish).
	next     atomic.Int64
	finished atomic.Int64
	done     chan struct{} // closed by finish
}

// finish ends the load: a goroutine that still holds l finds every part loaded.
func (l *loader) finish() {
	l.store.loader.Store(nil)
	for i := range l.store.shards {
		l.store.trimChunks(i) // chunks populated in a shard whose load had ended (a request's new tuple, while others loaded)
	}
	close(l.done)
}

// take takes the next shard to load, and reports false once none is left. A shard is
// loaded by one goroutine, batch by batch (shardStep): goroutines that load side by side
// restore into different shards, rather than into one whose lock they would take in turn
// for every record, and each keeps its shard's index in its core's cache.
func (l *loader) take() (shard int, ok bool) {
	i := int(l.next.Add(1) - 1)
	return i, i < shardCount
}

// shardStep loads batch b (of loadParts/loadBatch) of shard i (those of its parts not
// loaded yet); after the shard's last batch it gives back the pages of its chunks that
// the load populated and left untouched, and it ends the load after the last batch of the
// last shard to finish, reporting whether it did.
func (l *loader) shardStep(i, b int) (over bool) {
	p := i*loadParts + b*loadBatch
	l.ensureBatch(p, p+loadBatch)
	if b < loadParts/loadBatch-1 {
		return false
	}
	l.store.trimChunks(i)
	if l.finished.Add(1) == shardCount {
		l.finish()
		return true
	}
	return false
}

// loadPart is a load part's state, its fields side by side: a keyed access to a part not
// loaded yet reads all three, and in one or two cache lines rather than three (the keyed
// restores are most of a load's CPU).
type loadPart struct {
	mu sync.Mutex // held while the part, or a tuple of it, loads
	// keys holds, for a part not loaded yet, the keys of the tuples restored already on
	// their own (ensureKey), each as its tag (keyTag, 4 bytes), a uvarint length and its
	// bytes; under mu.
	keys []byte
}

// isLoaded reports whether part p is loaded.
func (l *loader) isLoaded(p int) bool { return l.loaded[p/64].Load()&(1<<(p%64)) != 0 }

// markLoaded records part p as loaded.
func (l *loader) markLoaded(p int) { l.loaded[p/64].Or(1 << (p % 64)) }

// keyTag is the tag of a key of hash h among a part's keys restored on their own: bits
// the part does not fix (partOf takes the low 18).
func keyTag(h uint64) uint32 { return uint32(h >> 32) }

// restored reports whether key's tuple (tag keyTag of its hash) of part p was restored on
// its own (p's lock held): the keys of other tags are stepped over, not compared.
func (l *loader) restored(p int, tag uint32, key string) bool {
	for b := l.parts[p].keys; len(b) > 4; {
		t := binary.LittleEndian.Uint32(b)
		n, w := binary.Uvarint(b[4:])
		b = b[4+w:]
		if t == tag && string(b[:n]) == key {
			return true
		}
		b = b[n:]
	}
	return false
}

// loadParts restores the parts of [from, to), their locks held, but for the tuples
// restored on their own, and marks them loaded.
func (l *loader) loadParts(from, to int) {
	var keep func(string) bool
	for p := from; p < to; p++ {
		if len(l.parts[p].keys) > 0 {
			keep = func(key string) bool {
				h := hashKey(l.store.seed, key)
				q := partOf(h) // in [from, to) but in a damaged file: kept then
				return q < from || q >= to || !l.restored(q, keyTag(h), key)
			}
			break
		}
	}
	l.load(from, to, keep, 0)
	for p := from; p < to; p++ {
		l.kept.Add(-int64(len(l.parts[p].keys)))
		l.parts[p].keys = nil
		l.markLoaded(p)
	}
}

// ensureBatch restores the parts of [from, to) not restored yet (the background load's
// step), holding their locks in order.
func (l *loader) ensureBatch(from, to int) {
	for p := from; p < to; p++ {
		l.parts[p].mu.Lock()
	}
	for p := from; p < to; {
		if l.isLoaded(p) {
			p++
			continue
		}
		q := p + 1
		for q < to && !l.isLoaded(q) {
			q++
		}
		l.loadParts(p, q)
		p = q
	}
	for p := from; p < to; p++ {
		l.parts[p].mu.Unlock()
	}
}

// ensureShard restores every part of shard i (ensure).
func (l *loader) ensureShard(i int) {
	for p := i * loadParts; p < (i+1)*loadParts; p++ {
		l.ensure(p)
	}
}

// shardLoaded reports whether every part of shard i is restored.
func (l *loader) shardLoaded(i int) bool {
	for p := i * loadParts; p < (i+1)*loadParts; p++ {
		if !l.isLoaded(p) {
			return false
		}
	}
	return true
}

// ensure restores part i's snapshot cells unless they are restored already, waiting for
// another goroutine that is restoring them. The caller holds no shard lock.
func (l *loader) ensure(i int) {
	if l.isLoaded(i) {
		return
	}
	l.parts[i].mu.Lock()
	if !l.isLoaded(i) {
		l.loadParts(i, i+1)
	}
	l.parts[i].mu.Unlock()
}

// maxKeyedBytes bounds the keys a part not loaded yet keeps of the tuples restored on their
// own (loader.keys), and maxKeptBytes those of all parts: past either, a keyed access loads
// the whole part (many distinct keys of one part, new ones included, before the background
// load reaches it; or a flood of distinct keys, which would otherwise keep up to 5 KiB in
// each of the 262,144 parts outside --max-memory's count).
const (
	maxKeyedBytes = 4 << 10
	maxKeptBytes  = 16 << 20
)

// ensureKey restores the records of key's tuple (of hash h: part partOf(h)) unless its
// part or the tuple is restored already: what a keyed access waits for, the part's other
// tuples left to the background load. The caller holds no shard lock.
func (l *loader) ensureKey(h uint64, key []byte) {
	i := partOf(h)
	if l.isLoaded(i) {
		return
	}
	l.parts[i].mu.Lock()
	switch {
	case l.isLoaded(i) || l.restored(i, keyTag(h), string(key)):
	case len(l.parts[i].keys) >= maxKeyedBytes || l.kept.Load() >= maxKeptBytes:
		l.loadParts(i, i+1)
	default:
		pt := &l.parts[i]
		n := len(pt.keys)
		pt.keys = binary.LittleEndian.AppendUint32(pt.keys, keyTag(h))
		pt.keys = append(binary.AppendUvarint(pt.keys, uint64(len(key))), key...)
		l.kept.Add(int64(len(pt.keys) - n))
		// The copy just kept, not key itself (a request's buffer must not escape); keys
		// does not change until the lock is let go.
		only := unsafe.String(unsafe.SliceData(pt.keys[len(pt.keys)-len(key):]), len(key))
		l.load(i, i+1, func(k string) bool { return k == only }, h)
	}
	l.parts[i].mu.Unlock()
}

// trimChunks gives back the pages of shard i's chunks that the load populated and left
// untouched (shard.trimChunks).
func (s *store) trimChunks(i int) {
	sh := &s.shards[i]
	sh.mu.Lock()
	sh.trimChunks()
	sh.mu.Unlock()
}

// waitShard restores every part of shard i of a lazy load still going on.
func (s *store) waitShard(i int) {
	if l := s.loader.Load(); l != nil {
		l.ensureShard(i)
	}
}

// ShardSeed returns the seed of the store's hash, which a snapshot records for
// AdoptShardSeed.
func (e *Engine) ShardSeed() uint64 { return e.store.seed }

// ErrNotEmpty is AdoptShardSeed's error when the store already holds tuples or reset
// records.
var ErrNotEmpty = errors.New("the store already holds tuples")

// AdoptShardSeed makes seed the seed of the store's hash, so that every tuple falls in the
// shard it had in the process that saved a snapshot with that seed. It must be called
// before the store holds anything, reset records included (RestoreResets: they live in
// their tuple's shard), or serves anything (ErrNotEmpty otherwise).
func (e *Engine) AdoptShardSeed(seed uint64) error {
	if e.store.tupleCount() != 0 || e.resets.count.Load() != 0 {
		return ErrNotEmpty
	}
	e.store.seed = seed
	return nil
}

// LoadLazily restores a snapshot in the background: load(from, to, keep, keyHash) is to
// restore (with Restore) the snapshot's cells of the load parts from to to-1
// (TupleRecord.Part), in a snapshot whose seed this engine adopted, but only those whose
// key keep keeps when keep is not nil (a keyed access restores its tuple alone, and the
// part's load then skips that tuple). When keyHash is not 0, keep keeps one key, of that
// hash (KeyHash under the adopted seed): load may skip, without calling keep, the records
// whose key's hash is another (0 says nothing: a key whose hash is 0 is compared as any).
// The snapshot's reset records must be restored before (RestoreResets): each part's cells
// are taken minus what they cancelled, and a reset or a peer's reset row of a tuple waits
// for its tuple (store.locate) as any keyed access does. Each record is restored once: in
// the background a store shard at a time, its parts in order, loadBatch at a time (by
// LoadLazily's goroutine, or LoadAhead's), or earlier with its part by a pass over the
// store (eachLive, Tuples), or with its tuple alone by the first keyed access to it
// (load(i, i+1, keep, keyHash), keep keeping that key alone). LoadLazily
// returns at once, and the channel it returns is closed once every part is loaded. It
// must be called before the engine serves, at most once.
func (e *Engine) LoadLazily(load func(from, to int, keep func(key string) bool, keyHash uint64)) <-chan struct{} {
	l := &loader{load: load, store: e.store, done: make(chan struct{})}
	e.store.loader.Store(l)
	go func() {
		pace := newPacer(e.clock.NowMs())
		for i, ok := l.take(); ok; i, ok = l.take() {
			for b := range loadParts / loadBatch {
				if l.shardStep(i, b) {
					return
				}
				// Take a share of a thread (pacer), so that a request ready to run waits
				// for a thread no longer than a slice. Not runtime.Gosched after each batch:
				// behind 50 busy connections on 2 threads, the global run queue it goes to
				// left the loader a twentieth of a thread (at 10M tuples: 16 s to load).
				now := e.clock.NowMs()
				if d := pace.pause(now); d > 0 && !pace.idle(now, e.served()) {
					loadPause(time.Duration(d) * time.Millisecond)
					pace.slept(e.clock.NowMs())
				}
			}
		}
	}()
	return l.done
}

// LoadAhead loads a lazy load's parts (LoadLazily) on workers goroutines besides the
// background load, unpaced, a shard at a time, until stop is closed or every part is
// loaded; once no shard is left to take it waits, until stop, for those the background
// load holds. It returns then, its workers' last shards loaded whole, and reports whether
// the load is over: what an origin that restarts does before it listens, when nothing
// asks for the threads yet. (The caller's timer closes stop: a monotonic one, where the
// engine's clock is the wall's.)
func (e *Engine) LoadAhead(stop <-chan struct{}, workers int) bool {
	l := e.store.loader.Load()
	if l == nil {
		return true
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for !stopped() {
				i, ok := l.take()
				if !ok {
					return
				}
				for b := range loadParts / loadBatch {
					l.shardStep(i, b) // the whole shard, past stop: none is left half taken
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-l.done:
	case <-stop:
	}
	return !e.Loading()
}

// loadPause is the background load's pause (time.Sleep; a variable for tests).
var loadPause = time.Sleep

// served returns the count of requests served so far that a background load gives its
// pauses to: decisions and edges' replay items.
func (e *Engine) served() uint64 {
	allowed, denied := e.decisions.Load()
	return allowed + denied + e.replayed.Load()
}

// WaitLoaded returns once a lazy load (LoadLazily) has restored every part, restoring those
// no other goroutine is restoring: what counts every cell (DBSIZE) waits for it.
func (e *Engine) WaitLoaded() {
	if l := e.store.loader.Load(); l != nil {
		for i := range Parts {
			l.ensure(i)
		}
	}
}

// Loading reports whether a lazy load (LoadLazily) has parts still to load.
func (e *Engine) Loading() bool { return e.store.loader.Load() != nil }

// ReserveTuples sizes each shard's index for its share of n tuples (a snapshot's count,
// before LoadLazily), so that the load does not grow the indexes step by step: each
// growth hashes every key of the shard again under its lock, where requests wait (at 10M
// tuples the growths were an eighth of the load's CPU). n is bounded by what the store's
// --max-memory holds; an index larger than its shard's share already stays.
func (e *Engine) ReserveTuples(n int64) {
	s := e.store
	n = min(n, s.maxBytes/entryOverhead)
	per := n/shardCount + n/shardCount/16 // a little over the mean: the shards' counts spread
	// The size at which the index holds per tuples at a load of 3/4 (below the 17/20 at which
	// it grows), in whole cache lines of buckets.
	size := int(min(per*4/3, maxSlots)+15) &^ 15
	if size <= minIndex {
		return
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if len(sh.index) < size {
			sh.rehash(s.hash, size)
		}
		sh.mu.Unlock()
	}
}
