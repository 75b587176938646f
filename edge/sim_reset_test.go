package edge

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ratchet/ratchet/engine"
)

// Resets in the simulation (sim_test.go; issue 22). An operator resets the tuple on its
// origin at random instants; every edge follows the origin's change feed as Run's changes
// loop does (when an answer showed it behind, or when it was not current for
// changesPollMs), over the faulty network.
//
// Accounting. A reset splits the run into segments: segment k is what the region admitted
// after the k-th reset. A hand-off belongs to the segment in which the origin decided it; a
// local admission to the segment of the last reset its edge had applied when it decided
// (an edge that had not applied a reset decided against the usage it cancels: its
// admission counts as made before the reset, and the reset cancels its cost). Checks:
//   - limit: each segment admits at most floor(1.02 limit) + what killed runs held
//     undelivered (an origin cannot refuse what it never saw);
//   - reset: after healing the origins count at most what the last segment admitted,
//     plus the phantom hand-offs (an edge's refusal that its origin counted): no usage from
//     before the last reset comes back, through delayed or duplicated replays, re-sent
//     kept cost or restarts; and at least what it admitted less what killed runs held.

// Changes implements engine.ChangesOrigin: over the faulty network in the reset
// scenarios; straight to the origin, taking no time, in the others, where the feed only
// tells of origin restarts (every call the sim makes stretches its time: idle polls of
// every link by every edge, each maybe delayed or timed out, would push the clock on faster
// than it runs, as concurrent calls never do).
func (c *simConn) Changes(_ context.Context, since uint64) (engine.ChangesReply, error) {
	var r engine.ChangesReply
	if c.s.sc.resets == 0 {
		o := c.s.origins[c.origin]
		return o.eng.ChangesSince(c.from.run, since), nil
	}
	err := c.s.call(c, "changes", func(e *engine.Engine) { r = e.ChangesSince(c.from.run, since) })
	return r, err
}

// followChanges is one turn of Run's changes loop of link l of e: a catch-up when an
// answer showed the edge behind, or (the link of the tuple's origin only: the others
// change nothing of it, and their polls would only stretch the sim's time) when no answer
// showed it current for changesPollMs.
func (s *simRun) followChanges(e *Edge, l *originLink) {
	kicked := false
	select {
	case <-l.changesKick:
		kicked = true
	default:
	}
	idle := l == e.links[s.owner] && s.clock.NowMs()-l.changesCurrentMs.Load() >= changesPollMs
	if kicked || idle {
		e.catchUp(context.Background(), l, l.client.(engine.ChangesOrigin))
	}
}

// scheduleResets queues the run's resets at instants drawn by at.
func (s *simRun) scheduleResets(at func() int64) {
	e := s.slots[0].edge
	s.owner = slices.Index(e.links, e.link(engine.AppendKey(nil, s.tuple)))
	if s.sc.resets == 0 {
		return
	}
	s.segAdmitted = map[int]uint64{}
	for range 1 + s.rng.IntN(s.sc.resets) {
		s.push(at(), evWork, func() {
			o := s.origins[s.owner]
			before := o.eng.ChangeVersion()
			if _, err := o.eng.Reset([]engine.Tuple{s.tuple}); err != nil {
				s.failf("reset: %v", err)
			}
			if o.eng.ChangeVersion() == before {
				// The origin held no usage nor lease of the tuple: the reset kept nothing, and
				// cost on its way from the edges (a cold allowance) counts as after it.
				s.tracef("reset on origin%d: nothing to zero", s.owner)
				return
			}
			s.resetVersions = append(s.resetVersions, o.eng.ChangeVersion())
			s.tracef("reset %d on origin%d: version %d", len(s.resetVersions), s.owner, o.eng.ChangeVersion())
		})
	}
}

// segAdmit counts an admission of se in its segment (handed: the origin decided it).
func (s *simRun) segAdmit(se *simEdge, handed bool) {
	seg := se.decidedSeg
	if !handed {
		applied := se.edge.links[s.owner].changesApplied.Load()
		seg = 0
		for _, v := range s.resetVersions {
			if v <= applied {
				seg++
			}
		}
	}
	s.segAdmitted[seg]++
}

// checkResets is check for the reset scenarios (above). It sets s.lost to what killed runs
// held undelivered.
func (s *simRun) checkResets() {
	for _, r := range s.runs {
		if r.killed {
			s.lost += r.undelivered
		}
	}
	limit := s.p.limit
	var segs []string
	for k := 0; k <= len(s.resetVersions); k++ {
		segs = append(segs, fmt.Sprint(s.segAdmitted[k]))
		if allow := limit*102/100 + s.lost; s.segAdmitted[k] > allow {
			s.failf("limit: segment %d (after %d resets) admitted %d > %d = floor(1.02 x %d) + undelivered by killed runs %d",
				k, k, s.segAdmitted[k], allow, limit, s.lost)
		}
	}
	var counted uint64
	for _, o := range s.origins {
		counted += s.count(o.eng)
	}
	last := s.segAdmitted[len(s.resetVersions)]
	if counted > last+s.phantom {
		s.failf("reset: origins count %d after healing, more than the %d admitted after the last of %d resets + %d phantom hand-offs (admitted per segment: %s)",
			counted, last, len(s.resetVersions), s.phantom, strings.Join(segs, " "))
	}
	if counted+s.lost < last {
		s.failf("reset: origins count %d after healing, less than the %d admitted after the last of %d resets - %d undelivered by killed runs (admitted per segment: %s)",
			counted, last, len(s.resetVersions), s.lost, strings.Join(segs, " "))
	}
}

// simResets is what e's snapshot holds of resets: its records (keys copied) and change
// version.
func simResets(e *engine.Engine) ([]engine.ResetRecord, uint64) {
	var out []engine.ResetRecord
	for r := range e.Resets {
		r.Key = strings.Clone(r.Key)
		out = append(out, r)
	}
	return out, e.ChangeVersion()
}
