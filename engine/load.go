package engine

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Loading a snapshot in the background (LoadLazily): an origin that restarts serves at once,
// while the cells of its snapshot are restored part by part, a part being a sixteenth of a
// shard (the tuples whose hash has the shard's low 8 bits and the part's next 4). A part
// whose cells are not restored yet is restored first by whoever needs it: store.locate,
// which every keyed read and write goes through, waits for the part of its key, and the
// passes over the store (eachLive, Tuples, the sweep) for every part of each shard. So no
// tuple is ever decided from fewer than the snapshot's counts, and a snapshot saved during
// the load holds every cell of the old one. A request on a part not loaded yet waits for
// that part only: 1/4096 of the snapshot.
//
// This needs the snapshot's cells grouped by part, and the same parts: the snapshot records
// the store's hash seed (ShardSeed), which the next process adopts (AdoptShardSeed) before
// it holds anything.

// loadParts is the number of load parts of a shard; Parts that of the store.
const (
	loadParts = 16
	Parts     = shardCount * loadParts
)

// partOf returns the load part of a key of hash h (store.locateIndex's).
func partOf(h uint64) int { return int(h%shardCount)*loadParts + int(h>>8)%loadParts }

// loader is the store's part of a lazy load.
type loader struct {
	pending atomic.Bool // some part is not loaded yet
	loaded  [Parts]atomic.Bool
	mu      [Parts]sync.Mutex // held while a part loads
	load    func(part int)
}

// ensureShard restores every part of shard i (ensure).
func (s *store) ensureShard(i int) {
	for p := i * loadParts; p < (i+1)*loadParts; p++ {
		s.ensure(p)
	}
}

// ensure restores part i's snapshot cells unless they are restored already, waiting for
// another goroutine that is restoring them. The caller holds no shard lock.
func (s *store) ensure(i int) {
	l := s.loader
	if l.loaded[i].Load() {
		return
	}
	l.mu[i].Lock()
	if !l.loaded[i].Load() {
		l.load(i)
		l.loaded[i].Store(true)
	}
	l.mu[i].Unlock()
}

// ShardSeed returns the seed of the store's hash, which a snapshot records for
// AdoptShardSeed.
func (e *Engine) ShardSeed() uint64 { return e.store.seed }

// ErrNotEmpty is AdoptShardSeed's error when the store already holds tuples.
var ErrNotEmpty = errors.New("the store already holds tuples")

// AdoptShardSeed makes seed the seed of the store's hash, so that every tuple falls in the
// shard it had in the process that saved a snapshot with that seed. It must be called
// before the store holds anything (ErrNotEmpty otherwise) or serves anything.
func (e *Engine) AdoptShardSeed(seed uint64) error {
	if e.store.tuples.Load() != 0 {
		return ErrNotEmpty
	}
	e.store.seed = seed
	return nil
}

// LoadLazily restores a snapshot in the background: load(part) is to restore (with Restore)
// the snapshot's cells of that load part (TupleRecord.Part), in a snapshot whose seed this
// engine adopted. Each part is loaded once, in the background in part order or earlier by
// the first request that needs it; LoadLazily returns at once, and the channel it returns
// is closed once every part is loaded. It must be called before the engine serves, at
// most once.
func (e *Engine) LoadLazily(load func(part int)) <-chan struct{} {
	s := e.store
	s.loader = &loader{load: load}
	s.loader.pending.Store(true)
	done := make(chan struct{})
	go func() {
		for i := range Parts {
			s.ensure(i)
		}
		s.loader.pending.Store(false)
		close(done)
	}()
	return done
}

// Loading reports whether a lazy load (LoadLazily) has parts still to load.
func (e *Engine) Loading() bool { return e.store.loading() }

// loading reports whether some part may not be loaded yet.
func (s *store) loading() bool { return s.loader != nil && s.loader.pending.Load() }
