package engine_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// This file holds a reference model of SPEC section 2, written from the SPEC and not from
// window.go: `used` is an exact rational (math/big), retry_after_ms and reset_after_ms are
// found by stepping the clock forward one millisecond at a time (or, for windows too long
// to step through, by bisection on the same step function).

// refState is what a decision reads: the totals of cells seq and seq-1, the window and
// the position in it. Counts are big so that no size can overflow.
type refState struct {
	cur, prev *big.Int
	w, e      int64
}

func newRefState(cur, prev uint64, w, e int64) refState {
	return refState{cur: new(big.Int).SetUint64(cur), prev: new(big.Int).SetUint64(prev), w: w, e: e}
}

// used = current + previous * (W - elapsed) / W, exactly.
func (s refState) used() *big.Rat {
	u := new(big.Rat).SetFrac(new(big.Int).Mul(s.prev, big.NewInt(s.w-s.e)), big.NewInt(s.w))
	return u.Add(u, new(big.Rat).SetInt(s.cur))
}

// after returns the state t ms later when no other traffic arrives: the clock rolls
// forward, the current cell becomes the previous one, then both are empty.
func (s refState) after(t int64) refState {
	p := s.e + t
	k := p / s.w
	n := refState{w: s.w, e: p % s.w}
	switch k {
	case 0:
		n.cur, n.prev = s.cur, s.prev
	case 1:
		n.cur, n.prev = new(big.Int), s.cur
	default:
		n.cur, n.prev = new(big.Int), new(big.Int)
	}
	return n
}

// room returns L - c, the most that may be used for a request of cost c to pass.
func room(limit, cost uint64) *big.Rat {
	r := new(big.Int).Sub(new(big.Int).SetUint64(limit), new(big.Int).SetUint64(cost))
	return new(big.Rat).SetInt(r)
}

// admits reports used + c <= L, given room = L - c.
func (s refState) admits(room *big.Rat) bool { return s.used().Cmp(room) <= 0 }

// refDecision is the model's answer, in the units of engine.Decision.
type refDecision struct {
	Allowed      bool
	Remaining    uint64
	RetryAfterMs int64
	ResetAfterMs int64
}

func (d refDecision) String() string {
	return fmt.Sprintf("{allowed=%v remaining=%d retry=%d reset=%d}", d.Allowed, d.Remaining, d.RetryAfterMs, d.ResetAfterMs)
}

func fromDecision(d engine.Decision) refDecision {
	return refDecision{Allowed: d.Allowed, Remaining: d.Remaining, RetryAfterMs: d.RetryAfterMs, ResetAfterMs: d.ResetAfterMs}
}

// firstTrue returns the smallest t in [lo, hi] with f(t), or -1. When bisect is false it
// steps t = lo, lo+1, ...; otherwise it bisects, which is valid because used never grows
// with time when no traffic arrives (the exhaustive test checks that both agree).
func firstTrue(lo, hi int64, bisect bool, f func(int64) bool) int64 {
	if !bisect {
		for t := lo; t <= hi; t++ {
			if f(t) {
				return t
			}
		}
		return -1
	}
	if !f(hi) {
		return -1
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if f(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// refDecide is SPEC section 2 for one request on state s.
func refDecide(s refState, limit, cost uint64, bisect bool) refDecision {
	var d refDecision
	lc := room(limit, cost)
	d.Allowed = s.admits(lc)

	// remaining = max(0, floor(L - used - (allowed ? c : 0)))
	rem := new(big.Rat).Sub(new(big.Rat).SetInt(new(big.Int).SetUint64(limit)), s.used())
	if d.Allowed {
		rem.Sub(rem, new(big.Rat).SetInt(new(big.Int).SetUint64(cost)))
	}
	if rem.Sign() > 0 {
		d.Remaining = new(big.Int).Quo(rem.Num(), rem.Denom()).Uint64()
	}

	// Two whole windows from now, both cells are empty: every horizon is within 2W.
	horizon := 2 * s.w
	switch {
	case d.Allowed:
		d.RetryAfterMs = 0
	case cost > limit:
		d.RetryAfterMs = -1
	default:
		d.RetryAfterMs = firstTrue(1, horizon, bisect, func(t int64) bool { return s.after(t).admits(lc) })
		if d.RetryAfterMs < 0 {
			panic("model: a request with cost <= limit never passes")
		}
	}

	// reset: ms until used reaches 0, from the counts after this request.
	post := s
	if d.Allowed {
		post.cur = new(big.Int).Add(s.cur, new(big.Int).SetUint64(cost))
	}
	d.ResetAfterMs = firstTrue(0, horizon, bisect, func(t int64) bool { return post.after(t).used().Sign() == 0 })
	return d
}

// refUsedFloor is floor(used).
func refUsedFloor(s refState) uint64 {
	u := s.used()
	return new(big.Int).Quo(u.Num(), u.Denom()).Uint64()
}

// TestDecideExhaustiveSmall compares engine.Decide with the brute-force model on every
// combination of small windows, positions, counts, limits and costs.
func TestDecideExhaustiveSmall(t *testing.T) {
	stride := 1 // check every case; under -race (slow) or -short, every 5th
	if raceEnabled || testing.Short() {
		stride = 5
	}
	n, checked := 0, 0
	for w := int64(1); w <= 6; w++ {
		for e := int64(0); e < w; e++ {
			for cur := uint64(0); cur <= 7; cur++ {
				for prev := uint64(0); prev <= 7; prev++ {
					s := newRefState(cur, prev, w, e)
					for limit := uint64(1); limit <= 6; limit++ {
						for cost := uint64(0); cost <= 8; cost++ {
							n++
							if n%stride != 0 {
								continue
							}
							checked++
							want := refDecide(s, limit, cost, false)
							got := engine.Decide(engine.Counts{Current: cur, Previous: prev}, limit, cost, w, e)
							if fromDecision(got) != want || got.Limit != limit {
								t.Fatalf("Decide(cur=%d prev=%d L=%d c=%d W=%d e=%d) = %+v, model %v",
									cur, prev, limit, cost, w, e, got, want)
							}
							// The bisection used for long windows must agree with stepping.
							if checked%7 == 0 {
								if b := refDecide(s, limit, cost, true); b != want {
									t.Fatalf("model: bisection %v != stepping %v", b, want)
								}
							}
						}
					}
					if u, want := engine.Used(engine.Counts{Current: cur, Previous: prev}, w, e), refUsedFloor(s); u != want {
						t.Fatalf("Used(cur=%d prev=%d W=%d e=%d) = %d, model %d", cur, prev, w, e, u, want)
					}
				}
			}
		}
	}
	t.Logf("%d of %d cases checked", checked, n)
}

// TestDecideRandomLarge compares engine.Decide with the model on random values up to the
// contract's bounds (limit and cost up to 2^50, windows up to 31 days, counts around and
// beyond 2^50), where float arithmetic would round.
func TestDecideRandomLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	pick := func(max uint64) uint64 {
		switch rng.IntN(6) {
		case 0:
			return 0
		case 1:
			return max
		case 2:
			return max - min(max, uint64(rng.IntN(3)))
		case 3:
			return uint64(rng.IntN(100))
		default:
			return rng.Uint64N(max + 1)
		}
	}
	windows := []int64{1, 2, 3, 7, 1000, 60_000, 86_400_000, engine.MaxWindowMs - 1, engine.MaxWindowMs}
	for i := 0; i < 3000; i++ {
		w := windows[rng.IntN(len(windows))]
		if rng.IntN(3) == 0 {
			w = 1 + rng.Int64N(engine.MaxWindowMs)
		}
		var e int64
		switch rng.IntN(4) {
		case 0:
			e = 0
		case 1:
			e = w - 1
		default:
			e = rng.Int64N(w)
		}
		limit := max(1, pick(engine.MaxLimit))
		var cost uint64
		switch rng.IntN(4) {
		case 0:
			cost = limit
		case 1:
			cost = min(limit+1, engine.MaxLimit)
		default:
			cost = pick(engine.MaxLimit)
		}
		countMax := engine.MaxLimit * 4
		if rng.IntN(2) == 0 {
			countMax = limit
		}
		cur, prev := pick(countMax), pick(countMax)
		s := newRefState(cur, prev, w, e)
		want := refDecide(s, limit, cost, true)
		got := engine.Decide(engine.Counts{Current: cur, Previous: prev}, limit, cost, w, e)
		if fromDecision(got) != want || got.Limit != limit {
			t.Fatalf("Decide(cur=%d prev=%d L=%d c=%d W=%d e=%d) = %+v, model %v",
				cur, prev, limit, cost, w, e, got, want)
		}
		if u, want := engine.Used(engine.Counts{Current: cur, Previous: prev}, w, e), refUsedFloor(s); u != want {
			t.Fatalf("Used(cur=%d prev=%d W=%d e=%d) = %d, model %d", cur, prev, w, e, u, want)
		}
	}
}

// refTuple is one tuple of the property test and the model's own counts of its cells.
type refTuple struct {
	t     engine.Tuple
	cells map[int64]uint64 // seq -> accepted cost
}

func (r *refTuple) state(now int64) (s refState, seq int64) {
	w := r.t.WindowMs
	seq = now / w
	return newRefState(r.cells[seq], r.cells[seq-1], w, now-seq*w), seq
}

// TestLimitMatchesModel drives engine.Limit with random histories on a few tuples and a
// manual clock, and checks every decision, and Status, against the model. Sweeps and a
// snapshot/restore into a fresh engine are mixed in: neither may change any answer.
func TestLimitMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 1))
	iterations := 300
	if raceEnabled || testing.Short() {
		iterations = 50
	}
	var requests, allowed, denied int
	for it := 0; it < iterations; it++ {
		clock := engine.NewManualClock(1_700_000_000_000 + rng.Int64N(1_000_000))
		eng := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})

		var tuples []*refTuple
		keys := [][]byte{[]byte("user:1"), []byte("user:2"), {0, 1, 2}}
		nss := []string{"default", "login"}
		for i := 0; i < 2+rng.IntN(4); i++ {
			tuples = append(tuples, &refTuple{
				t: engine.Tuple{
					Workspace: "default",
					Namespace: nss[rng.IntN(len(nss))],
					Key:       keys[rng.IntN(len(keys))],
					WindowMs:  1 + rng.Int64N(50),
				},
				cells: map[int64]uint64{},
			})
		}
		// Identical tuples share one count: merge duplicates in the model too.
		for i, a := range tuples {
			for j := 0; j < i; j++ {
				b := tuples[j]
				if a.t.Namespace == b.t.Namespace && string(a.t.Key) == string(b.t.Key) && a.t.WindowMs == b.t.WindowMs {
					tuples[i] = b
					break
				}
			}
		}

		for step := 0; step < 150; step++ {
			rt := tuples[rng.IntN(len(tuples))]
			w := rt.t.WindowMs
			switch r := rng.IntN(10); {
			case r < 3:
				clock.Advance(rng.Int64N(3*w + 1))
			case r < 6:
				clock.Advance(rng.Int64N(3))
			}
			switch rng.IntN(40) {
			case 0:
				eng.Sweep()
			case 1:
				fresh := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})
				if _, _, err := fresh.Restore(eng.Snapshot()); err != nil {
					t.Fatalf("restore: %v", err)
				}
				eng = fresh
			}

			now := clock.NowMs()
			limit := 1 + rng.Uint64N(20)
			cost := rng.Uint64N(26)
			s, seq := rt.state(now)
			want := refDecide(s, limit, cost, false)

			got, err := eng.Limit(rt.t, limit, cost)
			if err != nil {
				t.Fatalf("Limit: %v", err)
			}
			if fromDecision(got) != want || got.Limit != limit {
				t.Fatalf("iteration %d step %d: tuple %+v now=%d (seq %d, elapsed %d) cur=%d prev=%d L=%d c=%d:\n engine %+v\n model  %v",
					it, step, rt.t, now, seq, s.e, s.cur, s.prev, limit, cost, got, want)
			}
			requests++
			if want.Allowed {
				allowed++
				rt.cells[seq] += cost
			} else {
				denied++
			}

			// Status of every tuple agrees with the model's counts.
			for _, o := range tuples {
				os, oseq := o.state(now)
				st := eng.Status(o.t)
				if st.Sequence != oseq || st.ElapsedMs != os.e || st.WindowMs != o.t.WindowMs ||
					st.CurrentRegional != o.cells[oseq] || st.PreviousRegional != o.cells[oseq-1] ||
					st.CurrentImported != 0 || st.PreviousImported != 0 {
					t.Fatalf("Status(%+v) = %+v; model seq=%d elapsed=%d cur=%d prev=%d",
						o.t, st, oseq, os.e, o.cells[oseq], o.cells[oseq-1])
				}
				if u, want := st.Used(), refUsedFloor(os); u != want {
					t.Fatalf("Status(%+v).Used() = %d, model %d", o.t, u, want)
				}
			}
		}
	}
	if allowed == 0 || denied == 0 {
		t.Fatalf("history did not exercise both outcomes: %d allowed, %d denied", allowed, denied)
	}
	t.Logf("%d requests: %d allowed, %d denied", requests, allowed, denied)
}
