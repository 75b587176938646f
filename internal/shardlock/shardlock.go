// Package shardlock takes a shard's mutex for a background pass (a sweep, a snapshot)
// without queueing on it while requests use the shard.
package shardlock

import (
	"runtime"
	"sync"
	"time"
)

// YieldingFor bounds LockYielding's tries: far longer than a request holds a shard.
const YieldingFor = 100 * time.Microsecond

// LockYielding locks mu for a background pass: a pass that queued for over a millisecond
// would switch the mutex to starvation mode, where every unlock by a request hands the
// lock over and gives up the request's turn on its thread (seen as scheduling delay in an
// event loop's trace). After YieldingFor of tries it queues, so the pass still ends and
// spins no longer.
func LockYielding(mu *sync.Mutex) {
	if !mu.TryLock() && !TryLockFor(mu, YieldingFor) { // no clock read when free
		mu.Lock()
	}
}

// TryLockFor tries to lock mu for about d, giving way between tries, and reports whether
// it did.
func TryLockFor(mu *sync.Mutex, d time.Duration) bool {
	for start := time.Now(); ; {
		if mu.TryLock() {
			return true
		}
		if time.Since(start) >= d {
			return false
		}
		runtime.Gosched()
	}
}
