package engine

import "sync/atomic"

// DecisionCounters count allowed and denied decisions in stripes picked by the tuple's
// hash: cores deciding different tuples then do not write one shared cache line per
// request. A total is the sum of the stripes; no count is lost.
type DecisionCounters struct {
	stripes [16]struct {
		allowed, denied atomic.Uint64
		_               [48]byte // one stripe per 64-byte line
	}
}

// Add counts one decision of a tuple of hash.
func (c *DecisionCounters) Add(hash uint64, allowed bool) {
	s := &c.stripes[hash%uint64(len(c.stripes))]
	if allowed {
		s.allowed.Add(1)
	} else {
		s.denied.Add(1)
	}
}

// Load returns the totals.
func (c *DecisionCounters) Load() (allowed, denied uint64) {
	for i := range c.stripes {
		allowed += c.stripes[i].allowed.Load()
		denied += c.stripes[i].denied.Load()
	}
	return allowed, denied
}
