package edge

import (
	"sync"

	"github.com/ratchet/ratchet/engine"
)

// The cold allowance, the edge's side (engine/cold.go has the origin's): a tuple this edge holds
// no lease for may be admitted once per cell without a round trip, within the allowance its
// origin last granted, while the edge has no cost of the tuple the origin has not
// acknowledged. Its replay asks for a lease, so the tuple's next request is leased.
// coldSeen remembers which tuples used the allowance in their current cell, beyond the
// cache (an evicted entry would otherwise use it again).

// coldGrant is a cold allowance as an origin granted it: ppm millionths of a limit, until
// untilMs (this edge's clock), from origin run boot.
type coldGrant struct {
	ppm     int64
	untilMs int64
	boot    int64
}

// grantCold records the allowance of an answer to a call sent at sentMs.
func (l *originLink) grantCold(sentMs int64, meta engine.OriginMeta) {
	g := &coldGrant{ppm: meta.ColdPPM, untilMs: sentMs + meta.LeaseTTLMs, boot: meta.Boot}
	for {
		old := l.cold.Load()
		if old != nil && old.boot == g.boot && old.ppm == g.ppm && old.untilMs >= g.untilMs {
			return // an answer to an earlier call: nothing new
		}
		if l.cold.CompareAndSwap(old, g) {
			return
		}
	}
}

// coldAllowance returns what the allowance lets this edge admit on a tuple of limit at now.
func (l *originLink) coldAllowance(limit uint64, now int64) uint64 {
	g := l.cold.Load()
	if g == nil || now >= g.untilMs || g.boot != l.boot.Load() {
		return 0
	}
	return engine.ColdAllowance(limit, g.ppm)
}

// coldSeen is the set of tuples (by the hash of their key) that used the cold allowance,
// each until the end of that cell. It is bounded: when full (of cells that have not ended)
// a tuple gets no allowance.
type coldSeen struct {
	shards [16]coldShard
	max    int // per shard
}

type coldShard struct {
	mu      sync.Mutex
	until   map[uint64]int64 // hash -> end of the cell that used the allowance (ms)
	sweptMs int64
}

// coldSeenEntryBytes estimates the bytes of one element of the set.
const coldSeenEntryBytes = 48

func newColdSeen(maxBytes int64) *coldSeen {
	s := &coldSeen{max: int(max(maxBytes/coldSeenEntryBytes/16, 64))}
	for i := range s.shards {
		s.shards[i].until = make(map[uint64]int64)
	}
	return s
}

// take records that the tuple of hash h uses the allowance in the cell ending at endMs,
// and reports false when it already did, or when the set is full.
func (s *coldSeen) take(h uint64, now, endMs int64) bool {
	sh := &s.shards[h%16]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if until, ok := sh.until[h]; ok && now < until {
		return false
	}
	if len(sh.until) >= s.max && now-sh.sweptMs >= 100 {
		sh.sweptMs = now
		for k, until := range sh.until {
			if now >= until {
				delete(sh.until, k)
			}
		}
	}
	if _, ok := sh.until[h]; !ok && len(sh.until) >= s.max {
		return false
	}
	sh.until[h] = endMs
	return true
}

// coldBacklogBatches is how many full batches of replays may wait before new tuples stop
// using the cold allowance.
const coldBacklogBatches = 4

// coldEntry returns the entry of key, locked, when the cold allowance admits a request of
// cost against limit at now (cell seq of window): the tuple holds no live lease, no cost of
// it awaits the origin's acknowledgement, it is not strict, its local counts allow it, and
// it has not used the allowance in this cell, and the replays do not lag. Otherwise nil.
// The caller accounts the cost.
func (e *Edge) coldEntry(l *originLink, key []byte, window, seq, now int64, limit, cost uint64) *localEntry {
	if cost == 0 || cost > l.coldAllowance(limit, now) {
		return nil
	}
	if e.pinned.Load() >= int64(coldBacklogBatches*e.cfg.MaxBatchItems*len(e.links)) {
		// The replays lag (one batch in flight per origin: at 50 ms away about 27k cells
		// a second): new tuples read the origin, which paces them, rather than fill the
		// replay set until requests are refused.
		return nil
	}
	le := e.lookup(l, key)
	if le == nil {
		le = e.create(l, string(key), window)
	}
	le.lock()
	pending, inflight := le.unacked()
	_, elapsed := engine.Position(now, window)
	if pending > 0 || inflight > 0 || le.handing > 0 || now < le.strictUntil ||
		(now < le.leaseUntil && le.leaseBoot == l.boot.Load()) ||
		max(le.cells[0].seq, le.cells[1].seq) > seq ||
		!engine.Decide(le.counts(seq), limit, cost, window, elapsed).Allowed ||
		!e.coldSeen.take(le.hash, now, (seq+1)*window) {
		le.mu.Unlock()
		return nil
	}
	e.coldAdmitted.Add(1)
	return le
}
