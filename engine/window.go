package engine

import "math/bits"

// Bounds of the contract (SPEC section 3).
const (
	// MaxLimit is the largest limit and the largest cost a request may carry (2^50).
	MaxLimit uint64 = 1 << 50
	// MaxWindowMs is the longest window: 31 days.
	MaxWindowMs int64 = 31 * 24 * 3600 * 1000
	// MaxCount caps any stored count so that every product in the window math fits in
	// 128 bits with room to spare. No real traffic reaches it.
	MaxCount uint64 = 1 << 62
)

// Counts are the totals (regional + imported) of the two cells a decision reads.
type Counts struct {
	Current  uint64 // cell seq
	Previous uint64 // cell seq-1
}

// Decision is the outcome of one request, in the units of the RL.LIMIT reply.
type Decision struct {
	Allowed      bool
	Limit        uint64
	Remaining    uint64
	RetryAfterMs int64 // 0 when allowed, -1 when the request can never pass
	ResetAfterMs int64
}

// Decide applies the sliding-window rule of SPEC section 2 to counts c, for a request of
// cost at elapsed ms into a window of windowMs. It is exact: every comparison is done on
// 128-bit products, never on floats. It does not change anything; the caller adds cost to
// the current cell when the decision allows it.
//
// Preconditions (checked by the callers that parse input): 1 <= windowMs <= MaxWindowMs,
// 0 <= elapsed < windowMs, limit >= 1.
func Decide(c Counts, limit, cost uint64, windowMs, elapsed int64) Decision {
	w := uint64(windowMs)
	e := uint64(elapsed)
	cur, prev := capCount(c.Current), capCount(c.Previous)
	d := Decision{Limit: limit}

	// usedW = used * W = cur*W + prev*(W-elapsed), exact in 128 bits.
	used := weightedUsed(cur, prev, w, e)

	if cost <= limit {
		budget := mul(limit-cost, w)
		d.Allowed = !used.greater(budget)
		if d.Allowed {
			d.Remaining = budget.sub(used).div(w)
		}
	}
	if !d.Allowed {
		if full := mul(limit, w); full.greater(used) {
			d.Remaining = full.sub(used).div(w)
		}
		d.RetryAfterMs = retryAfter(cur, prev, limit, cost, w, e)
	}

	after := cur
	if d.Allowed {
		after = satAdd(cur, cost)
	}
	switch {
	case after > 0:
		d.ResetAfterMs = int64(2*w - e)
	case prev > 0:
		d.ResetAfterMs = int64(w - e)
	}
	return d
}

// Used returns floor(used) for counts c at elapsed ms into a window of windowMs.
func Used(c Counts, windowMs, elapsed int64) uint64 {
	w := uint64(windowMs)
	return weightedUsed(capCount(c.Current), capCount(c.Previous), w, uint64(elapsed)).div(w)
}

// Position returns the sequence of the window of windowMs that holds nowMs, and the ms
// elapsed in it: the cell a decision at nowMs counts in.
func Position(nowMs, windowMs int64) (seq, elapsed int64) { return position(nowMs, windowMs) }

// retryAfter is the smallest t >= 1 (ms) at which a denied request of cost would pass with
// no other traffic, or -1 when it never can. used only falls with time: the previous cell
// decays through the current one, then the current cell becomes the previous one.
func retryAfter(cur, prev, limit, cost, w, e uint64) int64 {
	if cost > limit {
		return -1
	}
	budget := limit - cost
	if cur <= budget {
		// Still inside this cell: need prev*(W-e-t) <= (budget-cur)*W. Being denied now
		// means prev > 0 and q < W-e, so t >= 1.
		q := mul(budget-cur, w).div(prev)
		return int64(w - e - q)
	}
	// In the next cell, at elapsed e2: need cur*(W-e2) <= budget*W (here cur > 0).
	// e2 == W is the start of the cell after next, where nothing is used at all.
	q := mul(budget, w).div(cur)
	return int64((w - e) + (w - q))
}

func weightedUsed(cur, prev, w, e uint64) u128 {
	return mul(cur, w).add(mul(prev, w-e))
}

func capCount(n uint64) uint64 { return min(n, MaxCount) }

// satAdd adds without wrapping, capped at MaxCount.
func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 || s > MaxCount {
		return MaxCount
	}
	return s
}

// u128 is an unsigned 128-bit integer, enough for count*window products.
type u128 struct{ hi, lo uint64 }

func mul(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, c)
	return u128{hi, lo}
}

// sub returns x-y; callers ensure x >= y.
func (x u128) sub(y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	hi, _ := bits.Sub64(x.hi, y.hi, b)
	return u128{hi, lo}
}

// mulSmall returns x*k; callers keep the product below 2^128.
func (x u128) mulSmall(k uint64) u128 {
	hi, lo := bits.Mul64(x.lo, k)
	return u128{x.hi*k + hi, lo}
}

func (x u128) greater(y u128) bool {
	return x.hi > y.hi || (x.hi == y.hi && x.lo > y.lo)
}

// div returns floor(x/d), saturating at the largest uint64 instead of panicking when the
// quotient does not fit. d must be non-zero.
func (x u128) div(d uint64) uint64 {
	if x.hi >= d {
		return ^uint64(0)
	}
	q, _ := bits.Div64(x.hi, x.lo, d)
	return q
}
