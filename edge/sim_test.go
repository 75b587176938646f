package edge

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
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

	"github.com/ratchet/ratchet/engine"
)

// Deterministic simulation of a region: edges and origins on one goroutine, one
// ManualClock and one seeded PCG, so that a seed replays the same run exactly (issue 12).
// Scenarios that still fail (simScenario.open) run only with RATCHET_SIM=1.
//
// Model. One tuple, window one hour, so a run never leaves its cell (the rollover scenarios
// below are the exception: short windows, several of them per run). 1-16 edge slots and
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
// Origins restart cleanly (a new Engine Restore()d from a snapshot of the old one, its
// edge runs' replay marks and its leases: RestoreRuns, RestoreLeases) or lossily (from the
// last periodic snapshot, as after a crash). Edges are killed: the slot
// gets a new edge with a new NodeRun. After the run, the network heals: late requests
// arrive, timers stop, every edge flushes until nothing is undelivered.
//
// Accounting. Around every call the origin serves, the sim reads the origin's count of the
// cell (Engine.Status): the growth is what that call applied, credited to the calling edge
// run (whatever the protocol: leases or batches). lost is, over killed runs, what they
// admitted and no origin applied; forgotten is what lossy restarts dropped from the count;
// phantom is what origins counted of hand-offs whose answer never reached their edge (the
// reply was lost, or the request arrived late): the edge refused those requests, so they
// are a denial too many, never an admission (each at most its cost: checked per call).
// Checks, per seed:
//   - limit (floods): admitted <= floor(1.02 limit) + lost + forgotten (an origin cannot
//     refuse what it never saw or forgot);
//   - under-limit: every one of floor(0.9 limit) requests is admitted;
//   - quiescence (every scenario): after healing no edge holds undelivered cost; each killed
//     run's lost cost is at most its Undelivered() just before the kill, and no origin
//     applied more of its cost than it admitted (plus forgotten: a batch re-sent after a
//     lossy restart forgot it is applied again, rightly); and the origins' count is exactly
//     admitted - lost - forgotten + phantom, which holds when every live run's admitted
//     cost was applied exactly once, or, after a lossy restart, up to forgotten more (the
//     message lists admitted/applied per run);
//   - restart: a clean restart leaves the count as it was, a lossy one never raises it.
//
// Rollover scenarios. A lease is the tuple's, not a cell's: what is left of it at a window's
// end is spent in the next window (lease.go). So these runs cross window boundaries: each
// seed draws a window W of 20 ms to 5 s (log-uniform) and a span of 2 to 6 windows, and
// the load is per window: a flood, each window's drawn anew, 1.5 to 4 times the limit at
// random instants crowding the window's start, or one time in three a lull of 0 to 0.5
// times the limit (so that edges hold leases granted where there was room when the next
// window's flood begins: floodRequests); or 0.9 times the limit per window, evenly spread.
// The region's admissions are kept per cell: A(s), the requests admitted in cell s, by the
// instant of the decision (the edge's clock when it decided locally; the origin's when it
// decided a hand-off: the cell where each system counts it). Checks, per seed:
//   - limit, at every admission, at instant t in cell s, elapsed e: the sliding-window count
//     A(s) + A(s-1) x (W-e)/W (exact integers: A(s) x W + A(s-1) x (W-e) against the bound
//     x W) is at most floor(1.02 limit) + lost + forgotten of cells s and s-1 (both at full
//     weight). lost(s) is what killed runs admitted in s, a cell still live at the kill, and
//     no origin applied; forgotten(s) what lossy restarts dropped from cell s. The worst
//     count is reported as a ratio to the limit, less those allowances;
//   - under-limit: no request is denied whose admission would keep the region's
//     sliding-window count (A as admitted so far, at the instant of the decision) within
//     0.9 limit. The even schedule keeps the offered count within 0.9 limit at each
//     request's scheduled instant (it skips the requests that the discrete spread would
//     push over); a request that a delayed call pushed into the next cell may find the count
//     over: its denial is excused (the summary says how many were). The bar is 0.9 limit,
//     not the limit: the other runs' leases count as used, so denials below the limit are
//     by design (in 1000 seeds, at sliding counts of 0.97 limit and more). So it catches
//     gross under-admission only: not, e.g., a mutant that leaks the reservation of each
//     replay landing in the previous cell;
//   - quiescence: the one-cell checks no longer hold as they were. What an edge admitted in a
//     cell that died before its replay arrived is dropped, by the edge (Stats.ReplayExpired)
//     or by the origin (a replay of a dead cell), legitimately (SPEC section 2: such cells
//     never matter again); so admitted = applied + lost + forgotten holds only for the cells
//     still live at the end. Kept: the accounting per call is per cell (the growth of the
//     origin's current and previous cells, read at the instant of the call); every run,
//     in every cell, had no more of its cost applied than it admitted there (plus
//     forgotten(s), as above); a killed run lost, over the cells live at its kill, at most
//     its Undelivered() just before the kill; after healing, the origins' count of each of
//     the two cells still live is exactly A(s) - lost(s) - forgotten(s) + phantom(s) (up to
//     forgotten(s) more, as above); restarts as above, per cell. The edges still end with
//     nothing undelivered.
//
// Multi-limit scenarios (issue 22). Each request is a two-limit call (Edge.LimitAll): the
// tuple's hour and the same key over a day, with a limit of its own (0.5 to 2 times the
// hour's). The accounting stays the hour's; the limit check is against the tighter
// limit, so it holds for both windows; after healing, without lossy restarts, the origins
// count in the day exactly what they count in the hour (all or nothing).
//
// Not simulated: concurrency inside one process (two requests of one edge racing on a tuple,
// a flush racing a request; calls never overlap, so delays stretch the sim's time instead
// of overlapping); clock skew (one clock for all, so edges and origins roll over at the same
// instant); several tuples (batches hold one item), costs other than 1, TryLimit, cache eviction
// (the cache is far larger than one tuple); regions and the global layer; the wire
// encoding (package upstream); the origin's persistence code (package persist).
//
// Running: go test -run TestSim ./engine/ runs each scenario that is not open over
// RATCHET_SIM_RUNS seeds (default below, a few; fewer for rollover), and RATCHET_SIM=1 the open
// ones too; RATCHET_SIM_SEED=n runs seed n only, and with RATCHET_SIM_TRACE=1 logs its
// every event (rollover runs also log each decision's instant and cell, and each admission
// that takes the sliding-window count over the limit).

// simDefaultRuns is the number of seeds per scenario of a plain test run (about 1.5 s
// for the scenarios that are not open); a rollover scenario runs a quarter as many
// (runsDiv); the race detector slows the edge about eightfold, so a -race run takes
// simDefaultRunsRace (about 10 s on a loaded 2-core machine), and -short simShortRuns.
// These are a smoke test: the long run, which found every sim failure so far, is
// RATCHET_SIM_RUNS=1000 go test -run TestSim ./engine/ (a few minutes without -race).
const (
	simDefaultRuns     = 40
	simDefaultRunsRace = 8
	simShortRuns       = 2
)

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
	name          string
	faults        simFaults
	degradedShare float64
	// requests: limit × U(loadLo, loadHi); loadHi 0: floor(limit × loadLo). Rollover: per
	// window, and loadHi 0 spreads limit × loadLo per window evenly.
	loadLo, loadHi float64
	checkLimit     bool // admitted <= floor(1.02 limit) + lost + forgotten (rollover: at every admission)
	checkAll       bool // every request admitted (rollover: every one that keeps the count within limit × loadLo)
	rollover       bool // a short window, requests over several (see the top comment)
	// runsDiv, when not 0, divides the seeds of a plain run (RATCHET_SIM_RUNS unset): a
	// rollover seed runs several windows of traffic.
	runsDiv uint64
	// open, when set, says why the scenario still fails (issue 12): it runs only with
	// RATCHET_SIM=1.
	open string
	// multi: every request is a two-limit RL.LIMIT (Edge.LimitAll) on the tuple and on the
	// same key over a day, limit2 (drawn apart) apart: the limit check holds for the
	// tighter of the two, so for every window, and (without lossy restarts) the origins
	// end with equal counts in both windows: each request counted in both or neither.
	multi bool
	// resets: up to that many RL.RESETs of the tuple on its origin at random instants;
	// the checks are per segment between resets (sim_reset_test.go).
	resets int
}

var simAllFaults = simFaults{delay: 0.2, drop: 0.03, lostReply: 0.03, late: 0.03, dup: 0.03,
	partitions: 3, restarts: 1, lossy: 1, kills: 2}

var simScenarios = []simScenario{
	{name: "flood", faults: simAllFaults, loadLo: 1.5, loadHi: 4, checkLimit: true,
		open: "a lossy restart (a crash) forgets the leases the origin granted since its last snapshot, which an edge cut off from it still spends: 2 seeds of 1000 (745: 1.03x, 875: 1.05x)"},
	// Every fault but the lossy restart: clean restarts keep replay marks and leases. A
	// killed edge run's replay may arrive late, after its node's new run superseded it: a
	// superseded run's leases (and cold allowance) hold for leaseGraceMs more, so that its
	// budget is not handed to the new run meanwhile (seed 316 of 600, with the cold
	// allowance and evictions, passed the limit by 1.03x before).
	{name: "flood-clean-restarts", faults: simFaults{delay: 0.2, drop: 0.03, lostReply: 0.03, late: 0.03, dup: 0.03,
		partitions: 3, restarts: 2, kills: 2}, loadLo: 1.5, loadHi: 4, checkLimit: true},
	{name: "flood-delays-only", faults: simFaults{delay: 0.2}, loadLo: 1.5, loadHi: 4, checkLimit: true},
	{name: "under-limit", faults: simFaults{delay: 0.2}, degradedShare: 1, loadLo: 0.9, checkAll: true},
	// Faults after which no call was applied unseen: the origins' count converges exactly.
	{name: "quiescence-clean", degradedShare: 1, loadLo: 1.5, loadHi: 4,
		faults: simFaults{delay: 0.2, drop: 0.05, dup: 0.05, partitions: 3, restarts: 2, kills: 2}},
	// Timed-out calls that were applied (lost replies, late deliveries) and lossy restarts.
	// The count holds the phantom hand-offs (whose answers were lost) and, after a lossy
	// restart, between admitted less forgotten and admitted (re-sent batches bring some back).
	{name: "quiescence-timeouts", faults: simAllFaults, degradedShare: 1, loadLo: 1.5, loadHi: 4},
	// Window rollover: leases spent across window boundaries.
	{name: "rollover-flood-delays-only", faults: simFaults{delay: 0.2}, loadLo: 1.5, loadHi: 4, checkLimit: true,
		rollover: true, runsDiv: 4},
	{name: "rollover-under-limit", faults: simFaults{delay: 0.2}, degradedShare: 1, loadLo: 0.9, checkAll: true,
		rollover: true, runsDiv: 4},
	{name: "rollover-quiescence-clean", degradedShare: 1, loadLo: 1.5, loadHi: 4, rollover: true, runsDiv: 4,
		faults: simFaults{delay: 0.2, drop: 0.05, dup: 0.05, partitions: 3, restarts: 2, kills: 2}},
	// Every fault, lossy restarts included: 0 of 1000 seeds failed; another seed could fail
	// as flood does (the seeds a test run draws are fixed, and pass).
	{name: "rollover-flood", faults: simAllFaults, loadLo: 1.5, loadHi: 4, checkLimit: true, rollover: true, runsDiv: 4},
	// Several limits in one call (issue 22): floods of two-limit requests.
	{name: "multi-flood-delays-only", faults: simFaults{delay: 0.2}, loadLo: 1.5, loadHi: 4, checkLimit: true, multi: true},
	{name: "multi-flood-clean-restarts", faults: simFaults{delay: 0.2, drop: 0.03, lostReply: 0.03, late: 0.03, dup: 0.03,
		partitions: 3, restarts: 2, kills: 2}, loadLo: 1.5, loadHi: 4, checkLimit: true, multi: true},
	// Resets (issue 22): floods of 1.5 to 4 times the limit, with up to 3 resets; per segment
	// admitted <= floor(1.02 limit), and after healing no usage from before the last reset
	// in the count (sim_reset_test.go). No lossy restarts: a crash may lose a reset made
	// since the last snapshot, as it loses counts.
	{name: "reset-flood-delays-only", faults: simFaults{delay: 0.2}, loadLo: 1.5, loadHi: 4, checkLimit: true, resets: 3},
	{name: "reset-flood", faults: simFaults{delay: 0.2, drop: 0.03, lostReply: 0.03, late: 0.03, dup: 0.03,
		partitions: 3, restarts: 2, kills: 2}, loadLo: 1.5, loadHi: 4, checkLimit: true, resets: 3},
}

// simParams are one seed's draws.
type simParams struct {
	seed       uint64
	limit      uint64
	edges      int
	origins    int
	requests   int
	spanMs     int64
	windowMs   int64
	windows    float64 // rollover: the span in windows
	intensity  float64
	maxDelayMs int64
	snapMs     int64
	// coldShare is the origins' Config.ColdShare (cold.go); evict the chance that an edge's
	// cache drops the tuple before a request (the cold allowance must not be used twice in
	// a cell for that).
	coldShare, evict float64
	// limit2 is the day window's limit of a multi scenario: limit x 0.5 to 2.
	limit2 uint64
}

func (p simParams) String() string {
	w := ""
	if p.windows > 0 {
		w = fmt.Sprintf(" (%.2f windows of %d ms)", p.windows, p.windowMs)
	}
	if p.limit2 > 0 {
		w += fmt.Sprintf(", and limit %d over a day", p.limit2)
	}
	return fmt.Sprintf("limit %d, %d edges, %d origins, %d requests over %d ms%s, faults x%.2f, delays <= %d ms, cold share %g, evictions %.2f",
		p.limit, p.edges, p.origins, p.requests, p.spanMs, w, p.intensity, p.maxDelayMs, p.coldShare, p.evict)
}

func logUniform(r *rand.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo)))
}

func drawParams(sc simScenario, seed uint64, r *rand.Rand) simParams {
	p := simParams{seed: seed}
	p.limit = min(max(uint64(logUniform(r, 1, 10_000)), 1), 10_000)
	if sc.resets > 0 {
		// The edges' polls of the change feed are calls too, each stretching the sim's
		// time: tens of thousands of requests would outlast the hour's cell.
		p.limit = min(p.limit, 1000)
	}
	p.edges = 1 + r.IntN(16)
	p.origins = 1 + r.IntN(3)
	switch {
	case sc.rollover:
		p.windowMs = int64(logUniform(r, 20, 5000))
		p.windows = 2 + 4*r.Float64()
		p.spanMs = int64(p.windows * float64(p.windowMs)) // the schedule sets requests
	case sc.loadHi == 0:
		p.requests = int(math.Floor(float64(p.limit)*sc.loadLo + 1e-9)) // floor, whatever the float rounding
	default:
		p.requests = int(float64(p.limit) * (sc.loadLo + r.Float64()*(sc.loadHi-sc.loadLo)))
	}
	if !sc.rollover {
		p.windowMs = simWindowMs
		p.spanMs = int64(logUniform(r, 1, 5000))
	}
	p.intensity = 2 * r.Float64()
	p.maxDelayMs = int64(logUniform(r, 1, simTimeoutMs-1))
	p.snapMs = 50 + r.Int64N(950)
	// Drawn apart, so that the draws above stay what they were for each seed. The share is
	// at most 0.04/edges: the origins hold back twice each edge's allowance, which the
	// under-limit scenarios must leave room for (0.9 of the limit).
	cr := rand.New(rand.NewPCG(seed, 0xc01d))
	p.coldShare = min([]float64{0, 0.001, 0.01, engine.MaxColdShare}[cr.IntN(4)], 0.04/float64(p.edges))
	p.evict = []float64{0, 0, 0.1, 0.5}[cr.IntN(4)]
	if sc.multi {
		mr := rand.New(rand.NewPCG(seed, 0x22))
		p.limit2 = max(uint64(float64(p.limit)*(0.5+1.5*mr.Float64())), 1)
	}
	return p
}

// ---- the run ----

type simRun struct {
	sc      simScenario
	p       simParams
	rng     *rand.Rand
	clock   *engine.ManualClock
	tuple   engine.Tuple
	tuple2  engine.Tuple // multi: the same key over a day
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
	// phantom is what origins counted of hand-offs whose answer never reached their edge
	// (reply lost, or delivered late): the edge refused those requests, the origin may have
	// admitted and counted them. A denial too many, never an admission; at most each such
	// hand-off's cost (checked in call).
	phantom  uint64
	stats    simStats
	failures []string
	trace    func(format string, args ...any)

	// Resets (sim_reset_test.go): the change version of each reset, the origin that owns
	// the tuple, and admissions per segment (k: after k resets).
	resetVersions []uint64
	owner         int
	segAdmitted   map[int]uint64

	// Rollover: per cell (window sequence).
	cellAdmitted map[int64]uint64 // A(s): admitted in cell s, by the instant of the decision
	worstW       map[int64]uint64 // the largest A(s) x W + A(s-1) x (W-elapsed) at an admission in s
	cellForgot   map[int64]uint64 // dropped from cell s by lossy restarts
	cellPhantom  map[int64]uint64 // phantom, per cell
	cellLost     map[int64]uint64 // admitted in s by killed runs, s live at the kill, never applied (set by check)
	over         float64          // the worst sliding-window count / limit, less the allowances (set by check)
	excused      uint64           // denials of requests that would have put the count over limit × loadLo
	unfair       uint64           // denials of requests that would have kept it within
	firstUnfair  string
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
	eng         *engine.Engine
	boot        int                 // incarnation: late requests to an earlier one are lost
	saved       []engine.CellRecord // the last periodic snapshot, what a crash restarts from
	savedRuns   []engine.RunRecord  // its edge runs' replay marks
	savedLeases []engine.LeaseRecord
	savedResets []engine.ResetRecord // its reset records and change version
	savedChange uint64
}

// simEdge is one edge run.
type simEdge struct {
	slot              int
	run               string
	edge              *Edge
	admitted, applied uint64 // what it admitted; what origins' counts grew by in its calls
	killed            bool
	undelivered       uint64 // Undelivered() just before the kill
	// Rollover: the same per cell; the sequence at the kill; when an origin last served
	// one of its hand-offs.
	admittedIn, appliedIn map[int64]uint64
	killSeq               int64
	decidedAt             int64
	decidedSeg            int // resets: the segment its last hand-off was decided in
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
func (s *simRun) count(e *engine.Engine) uint64 {
	_, cur, _ := s.cells(e)
	return cur
}

// cells reads an origin's counts of the current cell, seq, and the previous one. A run
// that is not a rollover one never leaves its first cell.
func (s *simRun) cells(e *engine.Engine) (seq int64, cur, prev uint64) {
	st := e.Status(s.tuple)
	if !s.sc.rollover && st.Sequence != s.seq {
		s.failf("sim: the run left its cell (sequence %d, want %d)", st.Sequence, s.seq)
	}
	return st.Sequence, st.CurrentRegional, st.PreviousRegional
}

// cellName names cell seq relative to the run's first cell.
func (s *simRun) cellName(seq int64) string { return fmt.Sprintf("cell %+d", seq-s.seq) }

// credit records that a call of se made an origin's cells seq and seq-1 grow by cur and
// prev.
func (s *simRun) credit(se *simEdge, seq int64, cur, prev uint64) {
	se.applied += cur + prev
	if s.sc.rollover {
		se.appliedIn[seq] += cur
		se.appliedIn[seq-1] += prev
	}
}

// slidingW returns the region's sliding-window count at elapsed e into cell seq, times the
// window: A(seq) x W + A(seq-1) x (W-e), exact (counts stay far below 2^32 and W <= 5 s).
func (s *simRun) slidingW(seq, e int64) uint64 {
	w := uint64(s.p.windowMs)
	return s.cellAdmitted[seq]*w + s.cellAdmitted[seq-1]*(w-uint64(e))
}

// admit records an admission of se at instant at (rollover runs), and the sliding-window
// count it reached.
func (s *simRun) admit(se *simEdge, at int64) {
	seq, e := engine.Position(at, s.p.windowMs)
	s.cellAdmitted[seq]++
	se.admittedIn[seq]++
	uw := s.slidingW(seq, e)
	s.worstW[seq] = max(s.worstW[seq], uw)
	if s.trace != nil && uw > s.p.limit*uint64(s.p.windowMs) {
		s.tracef("%s admitted at %d ms: sliding-window count %.3f > the limit %d (%s: %d, previous: %d, elapsed %d ms)",
			se.run, at-simStartMs, float64(uw)/float64(s.p.windowMs), s.p.limit, s.cellName(seq), s.cellAdmitted[seq], s.cellAdmitted[seq-1], e)
	}
}

// deny judges a denial of se at instant at (rollover runs with checkAll): excused when the
// request would have put the region's sliding-window count over limit x loadLo.
func (s *simRun) deny(se *simEdge, at int64) {
	seq, e := engine.Position(at, s.p.windowMs)
	if s.withinLoad(s.cellAdmitted[seq]+1, s.cellAdmitted[seq-1], e) {
		if s.unfair++; s.unfair == 1 {
			s.firstUnfair = fmt.Sprintf("%s at %d ms (%s, elapsed %d ms: admitted %d there, %d in the previous cell)",
				se.run, at-simStartMs, s.cellName(seq), e, s.cellAdmitted[seq], s.cellAdmitted[seq-1])
		}
		return
	}
	s.excused++
}

// withinLoad reports whether counts cur and prev at elapsed e make a sliding-window count
// within limit x loadLo: 1000 x (cur x W + prev x (W-e)) <= round(1000 loadLo) x limit x W.
func (s *simRun) withinLoad(cur, prev uint64, e int64) bool {
	w := uint64(s.p.windowMs)
	share := uint64(math.Round(s.sc.loadLo * 1000))
	return 1000*(cur*w+prev*(w-uint64(e))) <= share*s.p.limit*w
}

func newSimRun(sc simScenario, seed uint64, trace func(string, ...any)) *simRun {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s := &simRun{sc: sc, p: drawParams(sc, seed, rng), rng: rng, clock: engine.NewManualClock(simStartMs),
		log: slog.New(slog.DiscardHandler), trace: trace}
	s.tuple = engine.Tuple{Workspace: "default", Namespace: "sim", Key: []byte("flood"), WindowMs: s.p.windowMs}
	s.tuple2 = engine.Tuple{Workspace: "default", Namespace: "sim", Key: []byte("flood"), WindowMs: 86_400_000} // simStartMs's day starts with its hour
	s.seq = simStartMs / s.p.windowMs
	if sc.rollover {
		s.cellAdmitted, s.worstW = map[int64]uint64{}, map[int64]uint64{}
		s.cellForgot, s.cellLost, s.cellPhantom = map[int64]uint64{}, map[int64]uint64{}, map[int64]uint64{}
	}
	for range s.p.origins {
		s.origins = append(s.origins, &simOrigin{eng: s.newEngine()})
	}
	for i := range s.p.edges {
		s.slots = append(s.slots, s.startEdge(i))
	}
	return s
}

func (s *simRun) newEngine() *engine.Engine {
	return engine.New(s.clock, engine.Config{MaxMemoryBytes: 1 << 20, Logger: s.log, ColdShare: s.p.coldShare})
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
	if s.sc.rollover {
		se.admittedIn, se.appliedIn = map[int64]uint64{}, map[int64]uint64{}
	}
	cfg := Config{NodeRun: se.run, DegradedShare: s.sc.degradedShare,
		ReplayInterval: simReplayMs * time.Millisecond, Freshness: time.Second,
		OriginTimeout: simTimeoutMs * time.Millisecond, MaxMemoryBytes: 64 << 10, Logger: s.log}
	for o := range s.origins {
		cfg.Origins = append(cfg.Origins, &simConn{s: s, from: se, origin: o})
		cfg.OriginIDs = append(cfg.OriginIDs, fmt.Sprintf("origin%d", o))
	}
	e, err := New(s.clock, cfg)
	if err != nil {
		panic(fmt.Sprintf("sim: edge.New: %v", err)) // a config bug of the sim, not a finding
	}
	se.edge = e
	s.runs = append(s.runs, se)
	for _, l := range e.links {
		e.heartbeat(context.Background(), l)
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

func (c *simConn) Read(_ context.Context, items []engine.ReadItem) ([]engine.CellCounts, engine.OriginMeta, error) {
	var cc []engine.CellCounts
	var m engine.OriginMeta
	err := c.s.call(c, "read", func(e *engine.Engine) { cc, m = e.ServeRead(c.from.run, items) })
	return cc, m, err
}

func (c *simConn) Replay(_ context.Context, b engine.ReplayBatch) ([]engine.CellCounts, engine.OriginMeta, error) {
	var cc []engine.CellCounts
	var m engine.OriginMeta
	err := c.s.call(c, "replay", func(e *engine.Engine) { cc, m = e.ServeReplay(b) })
	return cc, m, err
}

func (c *simConn) Decide(_ context.Context, r engine.DecideRequest) (engine.Decision, engine.CellCounts, engine.OriginMeta, error) {
	var d engine.Decision
	var cc engine.CellCounts
	var m engine.OriginMeta
	var serveErr error
	err := c.s.call(c, "decide", func(e *engine.Engine) {
		d, cc, m, serveErr = e.ServeDecide(c.from.run, r)
		c.from.decidedAt = c.s.clock.NowMs()
		c.from.decidedSeg = len(c.s.resetVersions)
	})
	if err != nil {
		return engine.Decision{}, engine.CellCounts{}, engine.OriginMeta{}, err
	}
	return d, cc, m, serveErr
}

// call carries one call through the network. serve is the origin's work; its results are
// the caller's only when call returns nil.
func (s *simRun) call(c *simConn, kind string, serve func(*engine.Engine)) error {
	o := s.origins[c.origin]
	boot := o.boot
	unseen := false // a hand-off whose answer the edge will not get
	apply := func() {
		if o.boot != boot { // the origin restarted since: the connection died with it
			s.stats.lateLost++
			return
		}
		// The clock stands still while the origin serves: both readings are of one pair of
		// cells.
		seq, cur, prev := s.cells(o.eng)
		serve(o.eng)
		_, cur2, prev2 := s.cells(o.eng)
		if cur2 < cur || prev2 < prev {
			s.failf("origin: origin%d's count of %s fell from %d (previous cell %d) to %d (%d) in a %s from %s",
				c.origin, s.cellName(seq), cur, prev, cur2, prev2, kind, c.from.run)
			return
		}
		if unseen {
			// The edge never learns this hand-off's answer: what it counted is phantom.
			if g := cur2 - cur + prev2 - prev; g > 1 {
				s.failf("origin: a hand-off of cost 1 from %s whose answer was lost grew the count by %d", c.from.run, g)
			}
			s.phantom += cur2 - cur + prev2 - prev
			if s.sc.rollover {
				s.cellPhantom[seq] += cur2 - cur
				s.cellPhantom[seq-1] += prev2 - prev
			}
		} else {
			s.credit(c.from, seq, cur2-cur, prev2-prev)
		}
		s.tracef("origin%d serves a %s from %s: %s %d -> %d, previous %d -> %d", c.origin, kind, c.from.run, s.cellName(seq), cur, cur2, prev, prev2)
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
			unseen = true
		}
		s.tracef("%s %s -> origin%d: applied, reply lost", c.from.run, kind, c.origin)
		apply()
		s.clock.Advance(simTimeoutMs)
		return errSimTimeout
	case next(f.late):
		s.stats.late++
		if kind == "decide" {
			s.stats.lateDecides++
			unseen = true
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
	var reqs []simRequest
	switch {
	case s.sc.rollover && s.sc.loadHi == 0:
		reqs = s.evenRequests(start)
		s.p.requests = len(reqs)
	case s.sc.rollover:
		reqs = s.floodRequests(start)
		s.p.requests = len(reqs)
	default:
		reqs = make([]simRequest, s.p.requests)
		for i := range reqs {
			reqs[i] = simRequest{at: at(), slot: s.rng.IntN(len(s.slots))}
		}
		slices.SortFunc(reqs, func(a, b simRequest) int { return cmp.Compare(a.at, b.at) })
	}
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
	s.scheduleResets(at)
}

type simRequest struct {
	at   int64
	slot int
}

// floodRequests draws each window's load, from start over the span: a lull (0 to 0.5 limit,
// uniform over the window) one time in three, else limit x U(loadLo, loadHi), front-loaded
// (density 1/(2 sqrt(x)) over the window): leases granted in a lull, where there was room,
// are still held when the next window's flood begins, and that flood uses up the room at
// once. (A mutant origin that stops counting a lease once its cell ends over-admits in 22
// of 1000 rollover-flood-delays-only seeds; front-loading doubled that.)
func (s *simRun) floodRequests(start int64) []simRequest {
	w, end := s.p.windowMs, start+s.p.spanMs
	var reqs []simRequest
	for seq := start / w; seq*w < end; seq++ {
		from, to := max(start, seq*w), min(end, (seq+1)*w)
		load, front := s.sc.loadLo+s.rng.Float64()*(s.sc.loadHi-s.sc.loadLo), 2.0
		if s.rng.IntN(3) == 0 {
			load, front = 0.5*s.rng.Float64(), 1
		}
		for range int(load * float64(s.p.limit) * float64(to-from) / float64(w)) {
			at := from + int64(float64(to-from)*math.Pow(s.rng.Float64(), front))
			reqs = append(reqs, simRequest{at: at, slot: s.rng.IntN(len(s.slots))})
		}
	}
	slices.SortFunc(reqs, func(a, b simRequest) int { return cmp.Compare(a.at, b.at) })
	return reqs
}

// evenRequests spreads limit x loadLo requests per window evenly over the span from start,
// leaving out each one that would put the sliding-window count at its instant over
// limit x loadLo (the spread is in whole ms, and the sliding window only approximates a
// rate).
func (s *simRun) evenRequests(start int64) []simRequest {
	w, share := s.p.windowMs, int64(math.Round(s.sc.loadLo*1000))
	offered := map[int64]uint64{}
	var reqs []simRequest
	for i := int64(0); ; i++ {
		at := start + i*1000*w/(share*int64(s.p.limit)) // i x W / (limit x loadLo)
		if at >= start+s.p.spanMs {
			return reqs
		}
		seq, e := engine.Position(at, w)
		if !s.withinLoad(offered[seq]+1, offered[seq-1], e) {
			continue
		}
		offered[seq]++
		reqs = append(reqs, simRequest{at: at, slot: s.rng.IntN(len(s.slots))})
	}
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
	handed := se.edge.originAllowed.Load() + se.edge.originDenied.Load()
	if s.p.evict > 0 && s.rng.Float64() < s.p.evict {
		evicted := s.tuple
		if s.sc.multi && s.rng.IntN(2) == 1 {
			evicted = s.tuple2 // the sibling a multi-limit request reaches from the first window
		}
		se.edge.cache.Del(maphash.Bytes(se.edge.seed, engine.AppendKey(nil, evicted)))
		se.edge.cache.Wait()
	}
	var d engine.Decision
	var err error
	if s.sc.multi {
		var out [2]engine.Decision
		var b int
		b, err = se.edge.LimitAll(context.Background(), []engine.LimitOp{{Tuple: s.tuple, Limit: s.p.limit}, {Tuple: s.tuple2, Limit: s.p.limit2}}, 1, out[:])
		d = out[b]
	} else {
		d, err = se.edge.Limit(context.Background(), s.tuple, s.p.limit, 1)
	}
	// The instant of the decision: the origin's when it decided a hand-off, else now (the
	// edge reads the clock again after each call it waits on, and decides after the last).
	at := s.clock.NowMs()
	if se.edge.originAllowed.Load()+se.edge.originDenied.Load() != handed {
		at = se.decidedAt
	}
	switch {
	case err != nil:
		s.failf("Limit: %s: %v", se.run, err)
	case d.Allowed:
		se.admitted++
		s.admitted++
		if s.sc.resets > 0 {
			s.segAdmit(se, se.edge.originAllowed.Load()+se.edge.originDenied.Load() != handed)
		}
		if s.sc.rollover {
			s.admit(se, at)
		}
	default:
		if s.denied == 0 {
			s.firstDenial = fmt.Sprintf("%s at %d ms, admitted so far %d (%+v; stats %+v)",
				se.run, s.clock.NowMs()-simStartMs, s.admitted, d, se.edge.Stats())
		}
		s.denied++
		if s.sc.rollover && s.sc.checkAll {
			s.deny(se, at)
		}
	}
	if s.sc.rollover {
		seq, e := engine.Position(at, s.p.windowMs)
		s.tracef("%s: request decided at %d ms (%s, elapsed %d ms): allowed %v (remaining %d)",
			se.run, at-simStartMs, s.cellName(seq), e, d.Allowed, d.Remaining)
		return
	}
	s.tracef("%s: request: allowed %v (remaining %d)", se.run, d.Allowed, d.Remaining)
}

// flusher is one tick of Run's flusher of link li in slot: flush, heartbeat when idle.
func (s *simRun) flusher(slot, li int, at int64) {
	s.push(at, evTimer, func() {
		e := s.slots[slot].edge
		l := e.links[li]
		e.flush(context.Background(), l, false)
		if s.clock.NowMs()-l.lastOKMs.Load() >= heartbeatMs {
			e.heartbeat(context.Background(), l)
		}
		s.followChanges(e, l)
		s.flusher(slot, li, max(at+simReplayMs, s.clock.NowMs()))
	})
}

func (s *simRun) snapshots(at int64) {
	s.push(at, evTimer, func() {
		for _, o := range s.origins {
			o.saved, o.savedRuns, o.savedLeases = o.eng.Snapshot(), slices.Collect(o.eng.Runs), simLeases(o.eng)
			o.savedResets, o.savedChange = simResets(o.eng)
		}
		s.snapshots(at + s.p.snapMs)
	})
}

// restart replaces origin o's Engine: clean, from a snapshot of the old one; lossy, from
// the last periodic snapshot.
func (s *simRun) restart(o int, lossy bool) {
	so := s.origins[o]
	seq, before, prevBefore := s.cells(so.eng)
	recs, runs, leases := so.eng.Snapshot(), slices.Collect(so.eng.Runs), simLeases(so.eng)
	resets, changes := simResets(so.eng)
	if lossy {
		recs, runs, leases, resets, changes = so.saved, so.savedRuns, so.savedLeases, so.savedResets, so.savedChange
		s.stats.lossy++
	} else {
		s.stats.restarts++
	}
	eng := s.newEngine()
	eng.RestoreResets(resets) // as cmd/ratchet does: before the cells
	eng.RestoreChanges(changes)
	if _, _, err := eng.Restore(recs); err != nil {
		s.failf("restart: origin%d: Restore: %v", o, err)
	}
	eng.RestoreRuns(runs)
	if _, _, err := eng.RestoreLeases(leases); err != nil {
		s.failf("restart: origin%d: RestoreLeases: %v", o, err)
	}
	_, after, prevAfter := s.cells(eng)
	switch {
	case after > before || prevAfter > prevBefore:
		s.failf("restart: origin%d (lossy %v): count of %s grew from %d (previous cell %d) to %d (%d)",
			o, lossy, s.cellName(seq), before, prevBefore, after, prevAfter)
	case !lossy && (after != before || prevAfter != prevBefore):
		s.failf("restart: origin%d, clean: count of %s went from %d (previous cell %d) to %d (%d)",
			o, s.cellName(seq), before, prevBefore, after, prevAfter)
	default:
		s.forgotten += before - after + prevBefore - prevAfter
		if s.sc.rollover {
			s.cellForgot[seq] += before - after
			s.cellForgot[seq-1] += prevBefore - prevAfter
		}
	}
	s.tracef("origin%d restarts (lossy %v): %s %d -> %d, previous %d -> %d", o, lossy, s.cellName(seq), before, after, prevBefore, prevAfter)
	so.eng, so.boot = eng, so.boot+1
}

// kill stops the edge in slot abruptly and starts a new run there.
func (s *simRun) kill(slot int) {
	se := s.slots[slot]
	se.undelivered, _ = se.edge.Undelivered()
	se.killed, se.killSeq = true, s.clock.NowMs()/s.p.windowMs
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
				se.edge.flush(context.Background(), l, false)
			}
		}
	}
}

// check runs the scenario's checks after healing, and sets s.lost.
func (s *simRun) check() {
	if s.sc.rollover {
		s.checkCells()
		return
	}
	if s.sc.resets > 0 {
		s.checkResets()
		return
	}
	var runs []string
	for _, r := range s.runs {
		runs = append(runs, fmt.Sprintf("%s %d/%d", r.run, r.admitted, r.applied))
		if !r.killed {
			continue
		}
		if r.applied > r.admitted+s.forgotten {
			s.failf("quiescence: killed %s: origins applied %d of its cost, it admitted %d (forgotten by lossy restarts %d)", r.run, r.applied, r.admitted, s.forgotten)
			continue
		}
		if r.applied > r.admitted {
			continue // a batch re-sent after a lossy restart forgot it: nothing lost
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
	if want := int64(s.admitted) - int64(s.lost) - int64(s.forgotten) + int64(s.phantom); int64(counted) < want || int64(counted) > want+int64(s.forgotten) {
		s.failf("quiescence: origins count %d, want %d = admitted %d - lost by kills %d - forgotten by lossy restarts %d + phantom hand-offs %d, or up to forgotten more (runs admitted/applied: %s)",
			counted, want, s.admitted, s.lost, s.forgotten, s.phantom, strings.Join(runs, ", "))
	}
	limit := s.p.limit
	if s.sc.multi {
		limit = min(limit, s.p.limit2) // within the tighter limit is within every window's
		var counted2 uint64
		for _, o := range s.origins {
			counted2 += o.eng.Status(s.tuple2).CurrentRegional
		}
		if s.sc.faults.lossy == 0 && counted2 != counted {
			s.failf("multi: origins count %d in the hour and %d in the day: a request counted in one window only", counted, counted2)
		}
	}
	if allow := limit*102/100 + s.lost + s.forgotten; s.sc.checkLimit && s.admitted > allow {
		s.failf("limit: admitted %d > %d = floor(1.02 x %d) + lost by kills %d + forgotten %d (%.2fx the limit)",
			s.admitted, allow, limit, s.lost, s.forgotten, float64(s.admitted)/float64(limit))
	}
	if s.sc.checkAll && s.denied > 0 {
		s.failf("under-limit: %d of %d requests denied; first: %s", s.denied, s.p.requests, s.firstDenial)
	}
}

// checkCells is check for the rollover scenarios (top comment): per cell. It sets s.lost,
// s.cellLost and s.over.
func (s *simRun) checkCells() {
	for _, r := range s.runs {
		var lost uint64 // over the cells live at the kill
		for _, seq := range sortedCells(r.admittedIn, r.appliedIn) {
			ad, ap := r.admittedIn[seq], r.appliedIn[seq]
			if ap > ad+s.cellForgot[seq] {
				s.failf("quiescence: %s: origins applied %d of its cost in %s, it admitted %d there (forgotten by lossy restarts %d)", r.run, ap, s.cellName(seq), ad, s.cellForgot[seq])
				continue
			}
			if ap > ad {
				continue // a batch re-sent after a lossy restart forgot it: nothing lost
			}
			if r.killed && seq >= r.killSeq-1 {
				lost += ad - ap
				s.cellLost[seq] += ad - ap
			}
		}
		if lost > r.undelivered {
			s.failf("quiescence: killed %s lost %d units of the cells live at its kill, more than its Undelivered() %d",
				r.run, lost, r.undelivered)
		}
		s.lost += lost
	}
	// The two cells still live after healing: no replay of theirs was dropped, so each
	// unit admitted there was applied, or lost or forgotten.
	end := s.clock.NowMs() / s.p.windowMs
	for _, seq := range []int64{end - 1, end} {
		var counted uint64
		for _, o := range s.origins {
			if _, cur, prev := s.cells(o.eng); seq == end {
				counted += cur
			} else {
				counted += prev
			}
		}
		want := int64(s.cellAdmitted[seq]) - int64(s.cellLost[seq]) - int64(s.cellForgot[seq]) + int64(s.cellPhantom[seq])
		if int64(counted) < want || int64(counted) > want+int64(s.cellForgot[seq]) {
			var runs []string
			for _, r := range s.runs {
				if r.admittedIn[seq] > 0 || r.appliedIn[seq] > 0 {
					runs = append(runs, fmt.Sprintf("%s %d/%d", r.run, r.admittedIn[seq], r.appliedIn[seq]))
				}
			}
			s.failf("quiescence: origins count %d in %s (live), want %d = admitted %d - lost by kills %d - forgotten by lossy restarts %d + phantom hand-offs %d, or up to forgotten more (runs admitted/applied there: %s)",
				counted, s.cellName(seq), want, s.cellAdmitted[seq], s.cellLost[seq], s.cellForgot[seq], s.cellPhantom[seq], strings.Join(runs, ", "))
		}
	}
	allowed := s.p.limit * 102 / 100
	w := uint64(s.p.windowMs)
	var over []string
	for _, seq := range sortedCells(s.worstW) {
		slack := s.cellLost[seq] + s.cellForgot[seq] + s.cellLost[seq-1] + s.cellForgot[seq-1]
		uw := s.worstW[seq]
		s.over = max(s.over, (float64(uw)/float64(w)-float64(slack))/float64(s.p.limit))
		if s.sc.checkLimit && uw > (allowed+slack)*w {
			over = append(over, fmt.Sprintf("%s: %.3f > %d (%.3fx the limit)", s.cellName(seq), float64(uw)/float64(w),
				allowed+slack, float64(uw)/float64(w)/float64(s.p.limit)))
		}
	}
	if len(over) > 0 {
		s.failf("limit: the region's sliding-window count at an admission exceeded floor(1.02 x %d) + lost and forgotten of the cell and the previous one in %d cells: %s",
			s.p.limit, len(over), strings.Join(over[:min(len(over), 3)], "; "))
	}
	if s.sc.checkAll && s.unfair > 0 {
		s.failf("under-limit: %d of %d requests denied although admitting each kept the sliding-window count within %.2f x the limit (%d denials excused); first: %s",
			s.unfair, s.p.requests, s.sc.loadLo, s.excused, s.firstUnfair)
	}
}

// sortedCells returns the sequences that are keys of any of ms, in order.
func sortedCells(ms ...map[int64]uint64) []int64 {
	var seqs []int64
	for _, m := range ms {
		for seq := range m {
			seqs = append(seqs, seq)
		}
	}
	slices.Sort(seqs)
	return slices.Compact(seqs)
}

// simResult is what one seed did.
type simResult struct {
	p        simParams
	stats    string  // the faults that happened
	over     float64 // (admitted - lost - forgotten) / limit; rollover: the worst sliding-window count's
	failures []string
	digest   string // everything observable, for the determinism test
	excused  uint64 // rollover with checkAll: denials excused
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
		_, cur, prev := s.cells(o.eng)
		counted += cur + prev
	}
	for _, r := range s.runs {
		if !r.killed {
			r.edge.Close()
		}
	}
	over := float64(int64(s.admitted)-int64(s.lost)-int64(s.forgotten)) / float64(s.p.limit)
	if sc.multi {
		over = float64(int64(s.admitted)-int64(s.lost)-int64(s.forgotten)) / float64(min(s.p.limit, s.p.limit2))
	}
	if sc.rollover {
		over = s.over
	}
	return simResult{p: s.p, stats: s.stats.String(), over: over, failures: s.failures, excused: s.excused,
		digest: fmt.Sprintf("admitted %d denied %d counted %d end %d lost %d forgotten %d excused %d %v",
			s.admitted, s.denied, counted, s.clock.NowMs(), s.lost, s.forgotten, s.excused, s.stats)}
}

// ---- tests ----

func TestSim(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(400)) // a run makes short-lived garbage: a third faster
	runs := uint64(simDefaultRuns)
	switch {
	case testing.Short():
		runs = simShortRuns
	case raceOn:
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
	plain := os.Getenv("RATCHET_SIM_RUNS") == ""
	if v := os.Getenv("RATCHET_SIM_SEED"); v != "" {
		plain = false
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
			last := last
			if plain && sc.runsDiv > 0 {
				last = max(runs/sc.runsDiv, 1)
			}
			var failed int
			byCheck := map[string]int{}
			worst, worstSeed := 0.0, uint64(0)
			var excused, requests uint64
			for seed := first; seed <= last; seed++ {
				r := runSim(sc, seed, trace)
				if r.over > worst {
					worst, worstSeed = r.over, seed
				}
				excused, requests = excused+r.excused, requests+uint64(r.p.requests)
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
			switch {
			case sc.rollover && sc.checkLimit:
				summary += fmt.Sprintf("; worst sliding-window count at an admission (less lost and forgotten)/limit %.3f at seed %d", worst, worstSeed)
			case sc.checkLimit:
				summary += fmt.Sprintf("; worst (admitted - lost - forgotten)/limit %.3f at seed %d", worst, worstSeed)
			case sc.rollover && sc.checkAll:
				summary += fmt.Sprintf("; %d of %d requests denied with an excuse (admitting them would have passed %.2f x the limit)",
					excused, requests, sc.loadLo)
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
	rollover := simScenarios[slices.IndexFunc(simScenarios, func(sc simScenario) bool { return sc.name == "rollover-flood" })]
	for seed := uint64(1); seed <= 3; seed++ {
		for _, sc := range []simScenario{simScenarios[0], rollover} {
			a, b := runSim(sc, seed, nil), runSim(sc, seed, nil)
			if a.digest != b.digest || strings.Join(a.failures, "|") != strings.Join(b.failures, "|") {
				t.Fatalf("%s seed %d ran twice differently:\n%s\n%s", sc.name, seed, a.digest, b.digest)
			}
		}
	}
}

// simLeases is what e.Leases yields, its keys copied.
func simLeases(e *engine.Engine) []engine.LeaseRecord {
	var out []engine.LeaseRecord
	e.Leases(func(r engine.LeaseRecord) bool {
		r.Key = strings.Clone(r.Key)
		out = append(out, r)
		return true
	})
	return out
}
