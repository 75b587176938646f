package engine

import (
	"errors"
	"sync"
	"sync/atomic"
)

// Loading a snapshot in the background (LoadLazily): an origin that restarts serves at once,
// while the cells of its snapshot are restored shard by shard. A shard whose cells are not
// restored yet is restored first by whoever needs it: store.locate, which every keyed
// read and write goes through, and the passes over the store (eachLive, Tuples, the
// sweep), wait for it. So no tuple is ever decided from fewer than the snapshot's counts,
// and a snapshot saved during the load holds every cell of the old one.
//
// This needs the snapshot's cells grouped by the shard they were saved from, and the same
// shards: the snapshot records the store's hash seed (ShardSeed), which the next process
// adopts (AdoptShardSeed) before it holds anything.

// loader is the store's part of a lazy load.
type loader struct {
	pending atomic.Bool // some shard is not loaded yet
	loaded  [shardCount]atomic.Bool
	mu      [shardCount]sync.Mutex // held while a shard loads
	load    func(shard int)
}

// ensure restores shard i's snapshot cells unless they are restored already, waiting for
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

// LoadLazily restores a snapshot in the background: load(shard) is to restore (with
// Restore or RestoreSeq) the snapshot's cells of that shard of the store, in a snapshot
// whose seed this engine adopted. Each shard is loaded once, in the background in shard
// order or earlier by the first request that needs it; LoadLazily returns at once, and
// the channel it returns is closed once every shard is loaded. It must be called before
// the engine serves, at most once.
func (e *Engine) LoadLazily(load func(shard int)) <-chan struct{} {
	s := e.store
	s.loader = &loader{load: load}
	s.loader.pending.Store(true)
	done := make(chan struct{})
	go func() {
		for i := range shardCount {
			s.ensure(i)
		}
		s.loader.pending.Store(false)
		close(done)
	}()
	return done
}

// Loading reports whether a lazy load (LoadLazily) has shards still to load.
func (e *Engine) Loading() bool { return e.store.loading() }

// loading reports whether some shard may not be loaded yet.
func (s *store) loading() bool { return s.loader != nil && s.loader.pending.Load() }
