package engine

import "math"

// The cold allowance: what lets an edge decide a tuple it has never seen without a round
// trip, and keep the region exact (the origin's side; the edge's is in package edge).
//
// Every reply to an edge run grants it an allowance of ppm millionths of a limit, for the
// lease TTL: on a tuple it holds no lease for, the run may admit up to
// ColdAllowance(limit, ppm) units without asking, at most once per tuple and cell, and only
// while it has no unacknowledged cost on the tuple (so at most one such admission of the
// run is ever unreplayed, and a second one in the same cell waits for the first's replay).
// The origin cannot know which tuples a run admitted that way until their replays arrive,
// so it counts, on every tuple, twice each live run's allowance as used beside the leases:
// one for an admission not yet replayed, one for the admission the run may still make in
// the current cell after a decision here. A run's allowance is held as a lease is
// (leaseGrant.held): until it ends, and past that until the run replays or falls silent.
// An origin restarted from a snapshot holds the allowances of the runs it restored, from
// when they were last heard.
//
// The cost: near the limit, 2 x runs x allowance units of each limit stay unused (with the
// default share of 0.001, a tuple of limit 1000 admits 998 through a region of one edge).

// MaxColdShare is the largest Config.ColdShare.
const MaxColdShare = 0.01

// coldPPM returns share in millionths, within [0, MaxColdShare].
func coldPPM(share float64) int64 {
	if !(share > 0) {
		return 0
	}
	return int64(math.Round(min(share, MaxColdShare) * 1e6))
}

// ColdAllowance returns what an edge run granted ppm may admit on a tuple of limit it holds
// no lease for: floor(limit x ppm / 1e6).
func ColdAllowance(limit uint64, ppm int64) uint64 {
	if ppm <= 0 {
		return 0
	}
	p := uint64(ppm)
	return limit/1e6*p + limit%1e6*p/1e6
}

// grantCold grants run the cold allowance until the end of a lease granted now, and
// returns its ppm (nodes.mu held). When run did not hold one, it recounts the runs whose
// allowance may be held before the reply leaves, so every decision made after the run can
// use it counts it; otherwise at most once a second (coldRecountMs), for the runs whose
// allowance ended: a count that lags only holds back more than it must.
func (e *Engine) grantCold(run *runMarks, now int64) int64 {
	if e.coldPPM == 0 || run == nil || run.superseded.Load() {
		return 0
	}
	held := run.coldHeld(now)
	run.coldUntil = max(run.coldUntil, now+e.leaseTTLMs+leaseGraceMs)
	if !held || now-e.coldCountedMs >= coldRecountMs {
		e.countCold(now)
	}
	return e.coldPPM
}

// coldRecountMs is how often a grant to a run that holds its allowance already recounts the
// runs (countCold walks every run the origin remembers).
const coldRecountMs = 1000

// countCold recounts the runs whose cold allowance may be held at now (nodes.mu held).
func (e *Engine) countCold(now int64) {
	n := int64(0)
	for _, m := range e.nodes.runs {
		if m.coldHeld(now) {
			n++
		}
	}
	e.coldRuns.Store(n)
	e.coldCountedMs = now
}

// coldHeld reports whether run's cold allowance may still be spent, or spent and not
// replayed, at now (nodes.mu held): the rule of leaseGrant.held.
func (m *runMarks) coldHeld(now int64) bool {
	if m.coldUntil == 0 || m.gone(now) {
		return false
	}
	return now < m.coldUntil || (m.replayMs.Load() <= m.coldUntil && m.heardMs.Load() >= m.coldUntil)
}

// coldReserve is what the origin counts as used on a tuple of limit for the edges' cold
// allowances.
func (e *Engine) coldReserve(limit uint64) uint64 {
	n := e.coldRuns.Load()
	if n == 0 {
		return 0
	}
	a := ColdAllowance(limit, e.coldPPM)
	if a == 0 {
		return 0
	}
	return satMul(a, uint64(2*n))
}

// satMul returns a x b, or MaxUint64 when that overflows.
func satMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}
