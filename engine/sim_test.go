package engine

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Deterministic simulation of a region: edges and origins on one goroutine, one
// ManualClock and one seeded PCG, so that a seed replays the same run exactly (issue 12).
// Scenarios that still fail (simScenario.open) run only with RATCHET_SIM=1.
//
// Model. One tuple, window one hour, so a run never leaves its cell. 1-16 edge slots and
// 1-3 origins; the tuple belongs to one origin by rendezvous hashing, the others only get
// heartbeats. The run is a queue of timed events: each request (Limit, cost 1) at a random
// instant of a span of 1 ms to 5 s, on a random edge; each edge's flush of each origin link
// every ReplayInterval, with a heartbeat when the link was idle for heartbeatMs (what Run's
// flusher does; the sim calls flush and heartbeat itself, Run is never started); late
// deliveries; periodic origin snapshots; the scheduled faults. Events of one instant run
// in a random order; an event that fell due while a delayed call held the clock runs at
// the current time, in random order with the events due then (pop). The run ends when the
// last request and scheduled fault have run.
//
// Between each edge and each origin, a call (read, replay, hand-off) may be:
//   - delayed, within the timeout: the clock moves on during the call (before and after the
//     origin serves it);
//   - dropped: the request is lost, the caller gets an error after up to the timeout;
//   - answered too late: the origin applies it, the reply is lost, the caller times out;
//   - delivered late: the caller times out now, the origin applies it at a later event,
//     after calls made since (unless that origin restarted meanwhile: the connection died);
//   - duplicated (reads and replays only: the client never retries a hand-off and TCP does
//     not duplicate a command; an edge's own retry of a batch is the case that matters):
//     applied twice, the copy now or later;
//   - cut by a partition of one origin from one edge or from all, for a while.
//
// Each seed draws an intensity (0 to 2) that scales its scenario's per-call fault rates.
// Origins restart cleanly (a new Engine Restore()d from a snapshot of the old one) or
// lossily (from the last periodic snapshot, as after a crash). Edges are killed: the slot
// gets a new edge with a new NodeRun. After the run, the network heals: late requests
// arrive, timers stop, every edge flushes until nothing is undelivered.
//
// Accounting. Around every call the origin serves, the sim reads the origin's count of the
// cell (Engine.Status): the growth is what that call applied, credited to the calling edge
// run (whatever the protocol: leases or batches). lost is, over killed runs, what they
// admitted and no origin applied; forgotten is what lossy restarts dropped from the count.
// Checks, per seed:
//   - limit (floods): admitted <= floor(1.02 limit) + lost + forgotten (an origin cannot
//     refuse what it never saw or forgot);
//   - under-limit: every one of floor(0.9 limit) requests is admitted;
//   - quiescence (every scenario): after healing no edge holds undelivered cost; each killed
//     run's lost cost is at most its Undelivered() just before the kill, and no origin
//     applied more of its cost than it admitted; and the origins' count is exactly
//     admitted - lost - forgotten, which holds when every live run's admitted cost was
//     applied exactly once (the message lists admitted/applied per run);
//   - restart: a clean restart leaves the count as it was, a lossy one never raises it.
//
// Not simulated: concurrency inside one process (two requests of one edge racing on a tuple,
// a flush racing a request; calls never overlap, so delays stretch the sim's time instead
// of overlapping); clock skew (one clock for all); window rollover and the previous cell;
// several tuples (batches hold one item), costs other than 1, TryLimit, cache eviction
// (the cache is far larger than one tuple); regions and the global layer; the wire
// encoding (package upstream); the origin's persistence code (package persist).
//
// Running: go test -run TestSim ./engine/ runs each scenario that is not open over
// RATCHET_SIM_RUNS seeds (default below), and RATCHET_SIM=1 the open ones too;
// RATCHET_SIM_SEED=n runs seed n only, and with RATCHET_SIM_TRACE=1 logs its every event.

// simDefaultRuns is the number of seeds per scenario of a plain test run (about 9 s for
// the scenarios that are not open, 25 s with RATCHET_SIM=1); the race detector slows the
// edge about eightfold, so a -race run takes simDefaultRunsRace.
const (
	simDefaultRuns     = 300
	simDefaultRunsRace = 50
)

// simRaceEnabled reports whether the test binary was built with -race.
func simRaceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

const (
	simWindowMs  = 3_600_000
	simStartMs   = 1_704_067_200_000 + 1_000 // 1 s into a window
	simReplayMs  = 5
	simTimeoutMs = 100
	simHealMs    = 20_000 // bound on the healing flushes
)

// simFaults are a scenario's faults: per-call probabilities (scaled by each seed's
// intensity, 0 to 2), and the most events of each kind a run draws.
type simFaults struct {
	delay, drop, lostReply, late, dup  float64
	partitions, restarts, lossy, kills int
}

type simScenario struct {
	name           string
	faults         simFaults
	degradedShare  float64
	loadLo, loadHi float64 // requests: limit × U(loadLo, loadHi); loadHi 0: floor(limit × loadLo)
	checkLimit     bool    // admitted <= floor(1.02 limit) + lost + forgotten
	checkAll       bool    // every request admitted
	// open, when set, says why the scenario still fails (issue 12): it runs only with
	// RATCHET_SIM=1.
	open string
}

var simAllFaults = simFaults{delay: 0.2, drop: 0.03, lostReply: 0.03, late: 0.03, dup: 0.03,
	partitions: 3, restarts: 1, lossy: 1, kills: 2}

var simScenarios = []simScenario{
	{name: "flood", faults: simAllFaults, loadLo: 1.5, loadHi: 4, checkLimit: true,
		open: "an edge cut off while its origin restarts spends the lease the restarted origin no longer knows (seed 210: 1.10x); and the quiescence check of quiescence-timeouts"},
	{name: "flood-delays-only", faults: simFaults{delay: 0.2}, loadLo: 1.5, loadHi: 4, checkLimit: true},
	{name: "under-limit", faults: simFaults{delay: 0.2}, degradedShare: 1, loadLo: 0.9, checkAll: true},
	// Faults after which no call was applied unseen: the origins' count converges exactly.
	{name: "quiescence-clean", degradedShare: 1, loadLo: 1.5, loadHi: 4,
		faults: simFaults{delay: 0.2, drop: 0.05, dup: 0.05, partitions: 3, restarts: 2, kills: 2}},
	// Timed-out calls that were applied (lost replies, late deliveries) and lossy restarts.
	{name: "quiescence-timeouts", faults: simAllFaults, degradedShare: 1, loadLo: 1.5, loadHi: 4,
		open: "a hand-off whose reply was lost is counted by the origin though its client was refused (seed 3: 2 units over), and replay marks do not survive an origin restart (a batch re-sent after it is applied again)"},
}

// simParams are one seed's draws.
type simParams struct {
	seed       uint64
	limit      uint64
	edges      int
	origins    int
	requests   int
	spanMs     int64
	intensity  float64
	maxDelayMs int64
	snapMs     int64
}

func (p simParams) String() string {
	return fmt.Sprintf("limit %d, %d edges, %d origins, %d requests over %d ms, faults x%.2f, delays <= %d ms",
		p.limit, p.edges, p.origins, p.requests, p.spanMs, p.intensity, p.maxDelayMs)
}

func logUniform(r *rand.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo)))
}

func drawParams(sc simScenario, seed uint64, r *rand.Rand) simParams {
	p := simParams{seed: seed}
	p.limit = min(max(uint64(logUniform(r, 1, 10_000)), 1), 10_000)
	p.edges = 1 + r.IntN(16)
	p.origins = 1 + r.IntN(3)
	if sc.loadHi == 0 {
		p.requests = int(math.Floor(float64(p.limit)*sc.loadLo + 1e-9)) // floor, whatever the float rounding
	} else {
		p.requests = int(float64(p.limit) * (sc.loadLo + r.Float64()*(sc.loadHi-sc.loadLo)))
	}
	p.spanMs = int64(logUniform(r, 1, 5000))
	p.intensity = 2 * r.Float64()
	p.maxDelayMs = int64(logUniform(r, 1, simTimeoutMs-1))
	p.snapMs = 50 + r.Int64N(950)
	return p
}

// ---- the run ----

type simRun struct {
	sc      simScenario
	p       simParams
	rng     *rand.Rand
	clock   *ManualClock
	tuple   Tuple
	seq     int64
	origins []*simOrigin
	slots   []*simEdge // the edge now running in each slot
	runs    []*simEdge // every edge run, killed ones too
	queue   simQueue
	work    int // requests and scheduled faults still queued
	healed  bool
	parts   []simPartition
	log     *slog.Logger

	admitted, denied uint64
	firstDenial      string
	forgotten        uint64 // count dropped by lossy restarts
	lost             uint64 // what killed runs admitted and no origin applied (set by check)
	stats            simStats
	failures         []string
	trace            func(format string, args ...any)
}

type simStats struct {
	calls, delayed, dropped, lostReplies, late, dups, cut, lateLost int
	lostDecides, lateDecides                                        int
	restarts, lossy, kills, partitions                              int
}

func (st simStats) String() string {
	return fmt.Sprintf("calls %d: delayed %d, dropped %d, lost replies %d (hand-offs %d), late %d (hand-offs %d, lost in restarts %d), dups %d, partitioned %d; partitions %d, restarts %d clean + %d lossy, kills %d",
		st.calls, st.delayed, st.dropped, st.lostReplies, st.lostDecides, st.late, st.lateDecides, st.lateLost, st.dups, st.cut,
		st.partitions, st.restarts, st.lossy, st.kills)
}

// simOrigin is one origin slot: its current process.
type simOrigin struct {
	eng   *Engine
	boot  int          // incarnation: late requests to an earlier one are lost
	saved []CellRecord // the last periodic snapshot, what a crash restarts from
}

// simEdge is one edge run.
type simEdge struct {
	slot              int
	run               string
	edge              *Edge
	admitted, applied uint64 // what it admitted; what origins' counts grew by in its calls
	killed            bool
	undelivered       uint64 // Undelivered() just before the kill
}

type simPartition struct {
	slot, origin int // slot -1: every edge
	until        int64
}

// failf records a failed check; the message starts with the check's name and a colon.
func (s *simRun) failf(format string, args ...any) {
	s.failures = append(s.failures, fmt.Sprintf(format, args...))
}

func (s *simRun) tracef(format string, args ...any) {
	if s.trace != nil {
		s.trace("%d ms: "+format, append([]any{s.clock.NowMs() - simStartMs}, args...)...)
	}
}

// count is an origin's count of the run's cell.
func (s *simRun) count(e *Engine) uint64 {
	st := e.Status(s.tuple)
	if st.Sequence != s.seq {
		s.failf("sim: the run left its cell (sequence %d, want %d)", st.Sequence, s.seq)
	}
	return st.CurrentRegional
}

func newSimRun(sc simScenario, seed uint64, trace func(string, ...any)) *simRun {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s := &simRun{sc: sc, p: drawParams(sc, seed, rng), rng: rng, clock: NewManualClock(simStartMs),
		log: slog.New(slog.DiscardHandler), trace: trace}
	s.tuple = Tuple{Workspace: "default", Namespace: "sim", Key: []byte("flood"), WindowMs: simWindowMs}
	s.seq = simStartMs / simWindowMs
	for range s.p.origins {
		s.origins = append(s.origins, &simOrigin{eng: s.newEngine()})
	}
	for i := range s.p.edges {
		s.slots = append(s.slots, s.startEdge(i))
	}
	return s
}

func (s *simRun) newEngine() *Engine {
	return New(s.clock, Config{MaxMemoryBytes: 1 << 20, Logger: s.log})
}

// startEdge starts an edge run in slot, and says hello to its origins as Run's flushers do.
func (s *simRun) startEdge(slot int) *simEdge {
	boot := 1
	for _, r := range s.runs {
		if r.slot == slot {
			boot++
		}
	}
	se := &simEdge{slot: slot, run: fmt.Sprintf("edge%d/boot%d", slot, boot)}
	cfg := EdgeConfig{NodeRun: se.run, DegradedShare: s.sc.degradedShare,
		ReplayInterval: simReplayMs * time.Millisecond, Freshness: time.Second,
		OriginTimeout: simTimeoutMs * time.Millisecond, MaxMemoryBytes: 64 << 10, Logger: s.log}
	for o := range s.origins {
		cfg.Origins = append(cfg.Origins, &simConn{s: s, from: se, origin: o})
		cfg.OriginIDs = append(cfg.OriginIDs, fmt.Sprintf("origin%d", o))
	}
	e, err := NewEdge(s.clock, cfg)
	if err != nil {
		panic(fmt.Sprintf("sim: NewEdge: %v", err)) // a config bug of the sim, not a finding
	}
	se.edge = e
	s.runs = append(s.runs, se)
	for _, l := range e.links {
		e.heartbeat(l)
	}
	return se
}

// ---- the network ----

var (
	errSimDropped = errors.New("sim: request lost")
	errSimTimeout = errors.New("sim: no reply within the timeout")
)

// simConn is one edge run's connection to one origin slot. It passes requests to the
// origin's Engine whole.
type simConn struct {
	s      *simRun
	from   *simEdge
	origin int
}

func (c *simConn) Read(_ context.Context, items []ReadItem) ([]CellCounts, OriginMeta, error) {
	var cc []CellCounts
	var m OriginMeta
	err := c.s.call(c, "read", func(e *Engine) { cc, m = e.ServeRead(c.from.run, items) })
	return cc, m, err
}

func (c *simConn) Replay(_ context.Context, b ReplayBatch) ([]CellCounts, OriginMeta, error) {
	var cc []CellCounts
	var m OriginMeta
	err := c.s.call(c, "replay", func(e *Engine) { cc, m = e.ServeReplay(b) })
	return cc, m, err
}

func (c *simConn) Decide(_ context.Context, r DecideRequest) (Decision, CellCounts, OriginMeta, error) {
	var d Decision
	var cc CellCounts
	var m OriginMeta
	var serveErr error
	err := c.s.call(c, "decide", func(e *Engine) { d, cc, m, serveErr = e.ServeDecide(c.from.run, r) })
	if err != nil {
		return Decision{}, CellCounts{}, OriginMeta{}, err
	}
	return d, cc, m, serveErr
}

// call carries one call through the network. serve is the origin's work; its results are
// the caller's only when call returns nil.
func (s *simRun) call(c *simConn, kind string, serve func(*Engine)) error {
	o := s.origins[c.origin]
	boot := o.boot
	apply := func() {
		if o.boot != boot { // the origin restarted since: the connection died with it
			s.stats.lateLost++
			return
		}
		before := s.count(o.eng)
		serve(o.eng)
		after := s.count(o.eng)
		if after < before {
			s.failf("origin: origin%d's count fell from %d to %d in a %s from %s", c.origin, before, after, kind, c.from.run)
			return
		}
		c.from.applied += after - before
		s.tracef("origin%d serves a %s from %s: count %d -> %d", c.origin, kind, c.from.run, before, after)
	}
	if s.healed {
		apply()
		return nil
	}
	s.stats.calls++
	now := s.clock.NowMs()
	for _, p := range s.parts {
		if now < p.until && p.origin == c.origin && (p.slot < 0 || p.slot == c.from.slot) {
			s.stats.cut++
			s.clock.Advance(s.rng.Int64N(simTimeoutMs + 1))
			return errSimDropped
		}
	}
	f, pick := s.sc.faults, s.rng.Float64()
	next := func(p float64) bool { pick -= p * s.p.intensity; return pick < 0 }
	switch {
	case next(f.drop):
		s.stats.dropped++
		s.tracef("%s %s -> origin%d: dropped", c.from.run, kind, c.origin)
		s.clock.Advance(s.rng.Int64N(simTimeoutMs + 1))
		return errSimDropped
	case next(f.lostReply):
		s.stats.lostReplies++
		if kind == "decide" {
			s.stats.lostDecides++
		}
		s.tracef("%s %s -> origin%d: applied, reply lost", c.from.run, kind, c.origin)
		apply()
		s.clock.Advance(simTimeoutMs)
		return errSimTimeout
	case next(f.late):
		s.stats.late++
		if kind == "decide" {
			s.stats.lateDecides++
		}
		at := now + 1 + s.rng.Int64N(3*simTimeoutMs)
		s.tracef("%s %s -> origin%d: late, arrives at %d ms", c.from.run, kind, c.origin, at-simStartMs)
		s.push(at, evLate, apply)
		s.clock.Advance(simTimeoutMs)
		return errSimTimeout
	case kind != "decide" && next(f.dup):
		s.stats.dups++
		apply()
		if s.rng.IntN(2) == 0 {
			apply()
		} else {
			s.push(now+1+s.rng.Int64N(3*simTimeoutMs), evLate, apply)
		}
		return nil
	case next(f.delay):
		s.stats.delayed++
		d := 1 + s.rng.Int64N(s.p.maxDelayMs)
		there := s.rng.Int64N(d + 1)
		s.clock.Advance(there)
		apply()
		s.clock.Advance(d - there)
		return nil
	}
	apply()
	return nil
}

// ---- events ----

const (
	evWork  = iota // a request or a scheduled fault: the run lasts while any is queued
	evTimer        // a flush or a snapshot: dropped when the network heals
	evLate         // a request on the wire: delivered when the network heals
)

type simEvent struct {
	at   int64
	tie  uint64 // random order among events of one instant
	kind int
	do   func()
}

type simQueue []*simEvent

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].tie < q[j].tie
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEvent)) }
func (q *simQueue) Pop() any {
	old := *q
	ev := old[len(old)-1]
	*q = old[:len(old)-1]
	return ev
}

func (s *simRun) push(at int64, kind int, do func()) {
	if kind == evWork {
		s.work++
	}
	heap.Push(&s.queue, &simEvent{at: at, tie: s.rng.Uint64(), kind: kind, do: do})
}

func (s *simRun) pop() *simEvent {
	ev := heap.Pop(&s.queue).(*simEvent)
	for now := s.clock.NowMs(); ev.at < now; ev = heap.Pop(&s.queue).(*simEvent) {
		// Late: the calls before it took the time (a delayed call holds the clock). It
		// runs now, in random order with everything else due now, flushers' ticks
		// included, as concurrent work would; otherwise a burst of requests would starve
		// the flushers for as long as its calls' delays add up to.
		ev.at, ev.tie = now, s.rng.Uint64()
		heap.Push(&s.queue, ev)
	}
	if ev.at > s.clock.NowMs() {
		s.clock.Set(ev.at)
	}
	if ev.kind == evWork {
		s.work--
	}
	return ev
}

// schedule queues the run's requests, flushers, snapshots and faults.
func (s *simRun) schedule() {
	start := simStartMs + 1 + s.rng.Int64N(20) // edges said hello a little before
	at := func() int64 { return start + s.rng.Int64N(s.p.spanMs) }
	// Requests are queued one at a time, in order of time, to keep the queue short.
	reqs := make([]simRequest, s.p.requests)
	for i := range reqs {
		reqs[i] = simRequest{at: at(), slot: s.rng.IntN(len(s.slots))}
	}
	slices.SortFunc(reqs, func(a, b simRequest) int { return cmp.Compare(a.at, b.at) })
	s.requests(reqs)
	for slot := range s.slots {
		for li := range s.origins {
			s.flusher(slot, li, simStartMs+s.rng.Int64N(simReplayMs))
		}
	}
	s.snapshots(simStartMs + s.p.snapMs)
	f := s.sc.faults
	for range s.rng.IntN(f.partitions + 1) {
		slot := -1
		if s.rng.IntN(2) == 0 {
			slot = s.rng.IntN(len(s.slots))
		}
		o, d := s.rng.IntN(len(s.origins)), int64(logUniform(s.rng, 10, 2000))
		s.push(at(), evWork, func() {
			s.stats.partitions++
			s.tracef("partition: origin%d from slot %d (-1: all) for %d ms", o, slot, d)
			s.parts = append(s.parts, simPartition{slot: slot, origin: o, until: s.clock.NowMs() + d})
		})
	}
	for _, lossy := range []bool{false, true} {
		n := f.restarts
		if lossy {
			n = f.lossy
		}
		for range s.rng.IntN(n + 1) {
			o := s.rng.IntN(len(s.origins))
			s.push(at(), evWork, func() { s.restart(o, lossy) })
		}
	}
	for range s.rng.IntN(f.kills + 1) {
		slot := s.rng.IntN(len(s.slots))
		s.push(at(), evWork, func() { s.kill(slot) })
	}
}

type simRequest struct {
	at   int64
	slot int
}

// requests queues the first of reqs; when it has run, the next.
func (s *simRun) requests(reqs []simRequest) {
	if len(reqs) == 0 {
		return
	}
	s.push(reqs[0].at, evWork, func() {
		s.request(reqs[0].slot)
		s.requests(reqs[1:])
	})
}

func (s *simRun) request(slot int) {
	se := s.slots[slot]
	d, err := se.edge.Limit(s.tuple, s.p.limit, 1)
	switch {
	case err != nil:
		s.failf("Limit: %s: %v", se.run, err)
	case d.Allowed:
		se.admitted++
		s.admitted++
	default:
		if s.denied == 0 {
			s.firstDenial = fmt.Sprintf("%s at %d ms, admitted so far %d (%+v; stats %+v)",
				se.run, s.clock.NowMs()-simStartMs, s.admitted, d, se.edge.Stats())
		}
		s.denied++
	}
	s.tracef("%s: request: allowed %v (remaining %d)", se.run, d.Allowed, d.Remaining)
}

// flusher is one tick of Run's flusher of link li in slot: flush, heartbeat when idle.
func (s *simRun) flusher(slot, li int, at int64) {
	s.push(at, evTimer, func() {
		e := s.slots[slot].edge
		l := e.links[li]
		e.flush(l, false)
		if s.clock.NowMs()-l.lastOKMs.Load() >= heartbeatMs {
			e.heartbeat(l)
		}
		s.flusher(slot, li, max(at+simReplayMs, s.clock.NowMs()))
	})
}

func (s *simRun) snapshots(at int64) {
	s.push(at, evTimer, func() {
		for _, o := range s.origins {
			o.saved = o.eng.Snapshot()
		}
		s.snapshots(at + s.p.snapMs)
	})
}

// restart replaces origin o's Engine: clean, from a snapshot of the old one; lossy, from
// the last periodic snapshot.
func (s *simRun) restart(o int, lossy bool) {
	so := s.origins[o]
	before := s.count(so.eng)
	recs := so.eng.Snapshot()
	if lossy {
		recs = so.saved
		s.stats.lossy++
	} else {
		s.stats.restarts++
	}
	eng := s.newEngine()
	if _, _, err := eng.Restore(recs); err != nil {
		s.failf("restart: origin%d: Restore: %v", o, err)
	}
	after := s.count(eng)
	switch {
	case after > before:
		s.failf("restart: origin%d (lossy %v): count grew from %d to %d", o, lossy, before, after)
	case !lossy && after != before:
		s.failf("restart: origin%d, clean: count went from %d to %d", o, before, after)
	default:
		s.forgotten += before - after
	}
	s.tracef("origin%d restarts (lossy %v): count %d -> %d", o, lossy, before, after)
	so.eng, so.boot = eng, so.boot+1
}

// kill stops the edge in slot abruptly and starts a new run there.
func (s *simRun) kill(slot int) {
	se := s.slots[slot]
	se.undelivered, _ = se.edge.Undelivered()
	se.killed = true
	se.edge.Close()
	s.stats.kills++
	s.tracef("%s killed: admitted %d, undelivered %d", se.run, se.admitted, se.undelivered)
	s.slots[slot] = s.startEdge(slot)
}

// heal ends the faults: what is on the wire arrives, timers stop, and every edge flushes
// until it holds nothing undelivered.
func (s *simRun) heal() {
	s.healed = true
	for s.queue.Len() > 0 {
		if ev := heap.Pop(&s.queue).(*simEvent); ev.kind == evLate {
			s.clock.Set(max(s.clock.NowMs(), ev.at))
			ev.do()
		}
	}
	deadline := s.clock.NowMs() + simHealMs
	for {
		var left uint64
		for _, se := range s.slots {
			u, _ := se.edge.Undelivered()
			left += u
		}
		if left == 0 {
			return
		}
		if s.clock.NowMs() >= deadline {
			s.failf("quiescence: edges still hold %d undelivered units %d ms after healing", left, simHealMs)
			return
		}
		s.clock.Advance(simReplayMs)
		for _, se := range s.slots {
			for _, l := range se.edge.links {
				se.edge.flush(l, false)
			}
		}
	}
}

// check runs the scenario's checks after healing, and sets s.lost.
func (s *simRun) check() {
	var runs []string
	for _, r := range s.runs {
		runs = append(runs, fmt.Sprintf("%s %d/%d", r.run, r.admitted, r.applied))
		if !r.killed {
			continue
		}
		if r.applied > r.admitted {
			s.failf("quiescence: killed %s: origins applied %d of its cost, it admitted %d", r.run, r.applied, r.admitted)
			continue
		}
		l := r.admitted - r.applied
		if l > r.undelivered {
			s.failf("quiescence: killed %s lost %d units (admitted %d, applied %d), more than its Undelivered() %d",
				r.run, l, r.admitted, r.applied, r.undelivered)
		}
		s.lost += l
	}
	var counted uint64
	for _, o := range s.origins {
		counted += s.count(o.eng)
	}
	if want := int64(s.admitted) - int64(s.lost) - int64(s.forgotten); int64(counted) != want {
		s.failf("quiescence: origins count %d, want %d = admitted %d - lost by kills %d - forgotten by lossy restarts %d (runs admitted/applied: %s)",
			counted, want, s.admitted, s.lost, s.forgotten, strings.Join(runs, ", "))
	}
	if allow := s.p.limit*102/100 + s.lost + s.forgotten; s.sc.checkLimit && s.admitted > allow {
		s.failf("limit: admitted %d > %d = floor(1.02 x %d) + lost by kills %d + forgotten %d (%.2fx the limit)",
			s.admitted, allow, s.p.limit, s.lost, s.forgotten, float64(s.admitted)/float64(s.p.limit))
	}
	if s.sc.checkAll && s.denied > 0 {
		s.failf("under-limit: %d of %d requests denied; first: %s", s.denied, s.p.requests, s.firstDenial)
	}
}

// simResult is what one seed did.
type simResult struct {
	p        simParams
	stats    string  // the faults that happened
	over     float64 // (admitted - lost - forgotten) / limit
	failures []string
	digest   string // everything observable, for the determinism test
}

func runSim(sc simScenario, seed uint64, trace func(string, ...any)) simResult {
	s := newSimRun(sc, seed, trace)
	s.schedule()
	for s.work > 0 {
		s.pop().do()
	}
	s.heal()
	s.check()
	var counted uint64
	for _, o := range s.origins {
		counted += s.count(o.eng)
	}
	for _, r := range s.runs {
		if !r.killed {
			r.edge.Close()
		}
	}
	net := int64(s.admitted) - int64(s.lost) - int64(s.forgotten)
	return simResult{p: s.p, stats: s.stats.String(), over: float64(net) / float64(s.p.limit), failures: s.failures,
		digest: fmt.Sprintf("admitted %d denied %d counted %d end %d lost %d forgotten %d %v",
			s.admitted, s.denied, counted, s.clock.NowMs(), s.lost, s.forgotten, s.stats)}
}

// ---- tests ----

func TestSim(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // a run makes short-lived garbage: a third faster
	runs := uint64(simDefaultRuns)
	if simRaceEnabled() {
		runs = simDefaultRunsRace
	}
	if v := os.Getenv("RATCHET_SIM_RUNS"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			t.Fatalf("RATCHET_SIM_RUNS=%q: want a positive integer", v)
		}
		runs = n
	}
	first, last := uint64(1), runs
	if v := os.Getenv("RATCHET_SIM_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("RATCHET_SIM_SEED=%q: want an integer", v)
		}
		first, last = n, n
	}
	for _, sc := range simScenarios {
		t.Run(sc.name, func(t *testing.T) {
			if sc.open != "" && os.Getenv("RATCHET_SIM") == "" {
				t.Skipf("still open (set RATCHET_SIM=1 to run it): %s", sc.open)
			}
			var trace func(string, ...any)
			if first == last && os.Getenv("RATCHET_SIM_TRACE") != "" {
				trace = t.Logf
			}
			var failed int
			byCheck := map[string]int{}
			worst, worstSeed := 0.0, uint64(0)
			for seed := first; seed <= last; seed++ {
				r := runSim(sc, seed, trace)
				if r.over > worst {
					worst, worstSeed = r.over, seed
				}
				if len(r.failures) == 0 {
					continue
				}
				checks := map[string]bool{}
				for _, f := range r.failures {
					checks[f[:strings.IndexByte(f, ':')]] = true
				}
				for c := range checks {
					byCheck[c]++
				}
				if failed++; failed <= 5 {
					t.Errorf("seed %d (%s; %s):\n\t%s\n\trerun (RATCHET_SIM_TRACE=1 logs every event): RATCHET_SIM=1 RATCHET_SIM_SEED=%d go test -count=1 -run 'TestSim/%s$' ./engine/",
						seed, r.p, r.stats, strings.Join(r.failures, "\n\t"), seed, sc.name)
				}
			}
			summary := fmt.Sprintf("%s: %d of %d seeds failed, by check %v", sc.name, failed, last-first+1, byCheck)
			if sc.checkLimit {
				summary += fmt.Sprintf("; worst (admitted - lost - forgotten)/limit %.3f at seed %d", worst, worstSeed)
			}
			if failed > 5 {
				t.Errorf("%s (first 5 shown)", summary)
			} else {
				t.Log(summary)
			}
		})
	}
}

// TestSimDeterministic: a seed replays the same run, faults and all.
func TestSimDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		for _, sc := range simScenarios[:1] {
			a, b := runSim(sc, seed, nil), runSim(sc, seed, nil)
			if a.digest != b.digest || strings.Join(a.failures, "|") != strings.Join(b.failures, "|") {
				t.Fatalf("%s seed %d ran twice differently:\n%s\n%s", sc.name, seed, a.digest, b.digest)
			}
		}
	}
}
