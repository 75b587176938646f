package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// refBinding is the binding limit of a multi-limit request, from the words: when
// any denies, the denying one with the largest retry_after_ms (-1, never, largest); else
// the one with the least remaining; the first on a tie.
func refBinding(ds []refDecision) int {
	best := -1
	for i, d := range ds {
		if !d.Allowed {
			r := func(ms int64) float64 {
				if ms < 0 {
					return 1e300
				}
				return float64(ms)
			}
			if best < 0 || ds[best].Allowed || r(d.RetryAfterMs) > r(ds[best].RetryAfterMs) {
				best = i
			}
		}
	}
	if best >= 0 {
		return best
	}
	best = 0
	for i, d := range ds {
		if d.Remaining < ds[best].Remaining {
			best = i
		}
	}
	return best
}

// TestLimitMultiMatchesModel drives random histories of multi-limit requests (through
// LimitMulti and through Transact), mixed with single-limit ones on the same tuples, and
// checks every decision against the model: each limit decided at one instant, the cost
// counted in every window when all allow and in none otherwise, and the reply the
// binding limit's.
func TestLimitMultiMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 22))
	iterations := 200
	if raceEnabled || testing.Short() {
		iterations = 40
	}
	var multiAllowed, multiDenied, partial int
	for it := 0; it < iterations; it++ {
		clock := engine.NewManualClock(1_700_000_000_000 + rng.Int64N(1_000_000))
		eng := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})
		var tuples []*refTuple
		seen := map[int64]bool{}
		for len(tuples) < 2+rng.IntN(engine.MaxLimits-1) {
			w := 1 + rng.Int64N(60)
			if seen[w] {
				continue
			}
			seen[w] = true
			tuples = append(tuples, &refTuple{t: engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("user:1"), WindowMs: w},
				cells: map[int64]uint64{}})
		}
		for step := 0; step < 120; step++ {
			switch r := rng.IntN(10); {
			case r < 3:
				clock.Advance(rng.Int64N(60))
			case r < 6:
				clock.Advance(rng.Int64N(3))
			}
			now := clock.NowMs()
			cost := rng.Uint64N(8)
			if rng.IntN(4) == 0 { // a single limit on one of the tuples
				rt := tuples[rng.IntN(len(tuples))]
				limit := 1 + rng.Uint64N(30)
				s, seq := rt.state(now)
				want := refDecide(s, limit, cost, false)
				got := mustLimit(t, eng, rt.t, limit, cost)
				if fromDecision(got) != want {
					t.Fatalf("iteration %d step %d: single %+v: engine %+v, model %v", it, step, rt.t, got, want)
				}
				if want.Allowed {
					rt.cells[seq] += cost
				}
				continue
			}
			// A multi-limit request on a random subset (at least one) of the tuples.
			var sub []*refTuple
			for _, rt := range tuples {
				if rng.IntN(3) > 0 {
					sub = append(sub, rt)
				}
			}
			if len(sub) == 0 {
				sub = tuples[:1]
			}
			ops := make([]engine.LimitOp, len(sub))
			want := make([]refDecision, len(sub))
			seqs := make([]int64, len(sub))
			for i, rt := range sub {
				ops[i] = engine.LimitOp{Tuple: rt.t, Limit: 1 + rng.Uint64N(30)}
				var s refState
				s, seqs[i] = rt.state(now)
				want[i] = refDecide(s, ops[i].Limit, cost, false)
			}
			all := true
			for _, d := range want {
				all = all && d.Allowed
			}
			wb := refBinding(want)
			var got engine.Decision
			if rng.IntN(3) == 0 {
				out := make([]engine.TxResult, 1)
				eng.Transact([]engine.TxOp{{Tuple: ops[0].Tuple, Limit: ops[0].Limit, Cost: cost, More: ops[1:]}}, out)
				if out[0].Err != nil {
					t.Fatalf("Transact: %v", out[0].Err)
				}
				got = out[0].Decision
			} else {
				out := make([]engine.Decision, len(ops))
				b, err := eng.LimitMulti(ops, cost, now, out)
				if err != nil {
					t.Fatalf("LimitMulti: %v", err)
				}
				for i := range out {
					// Each limit is decided as alone at that instant; only the counting is joint.
					if fromDecision(out[i]) != want[i] {
						t.Fatalf("iteration %d step %d: limit %d (%+v L=%d c=%d): engine %+v, model %v", it, step, i, ops[i].Tuple, ops[i].Limit, cost, out[i], want[i])
					}
				}
				if b != wb {
					t.Fatalf("iteration %d step %d: binding %d, model %d (%v)", it, step, b, wb, want)
				}
				got = out[b]
			}
			if fromDecision(got) != want[wb] || got.Allowed != all || got.Limit != ops[wb].Limit {
				t.Fatalf("iteration %d step %d: reply %+v, model %v (binding %d of %v)", it, step, got, want[wb], wb, want)
			}
			if all {
				multiAllowed++
				for i, rt := range sub {
					rt.cells[seqs[i]] += cost
				}
			} else {
				multiDenied++
				for _, d := range want {
					if d.Allowed {
						partial++ // one limit allowed, another denied: nothing counted
						break
					}
				}
			}
			for _, rt := range tuples {
				s, seq := rt.state(now)
				if st := eng.Status(rt.t); st.CurrentRegional != rt.cells[seq] || st.PreviousRegional != rt.cells[seq-1] {
					t.Fatalf("iteration %d step %d: Status(%+v) = %+v; model cur=%d prev=%d (elapsed %d)", it, step, rt.t, st, rt.cells[seq], rt.cells[seq-1], s.e)
				}
			}
		}
	}
	if multiAllowed == 0 || partial == 0 {
		t.Fatalf("history did not exercise the cases: %d allowed, %d denied, %d with a limit that allowed", multiAllowed, multiDenied, partial)
	}
	t.Logf("multi-limit requests: %d allowed, %d denied (%d of them allowed by some limit)", multiAllowed, multiDenied, partial)
}

// TestLimitMultiConcurrent: goroutines race multi-limit requests on one key's two
// windows, and single-limit ones on the first window, at one frozen instant. At every
// interleaving a multi-limit request counts in both windows or neither: the second
// window's count is the multi-limit admissions exactly, the first's that plus the single
// ones, and neither passes its limit.
func TestLimitMultiConcurrent(t *testing.T) {
	e, _ := newEngine(t0 + 10)
	a, b := tup("k", 1000), tup("k", 60_000)
	const limA, limB, workers, each = 300, 200, 8, 200
	var mu sync.Mutex
	var multi, single uint64
	var wg sync.WaitGroup
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var m, s uint64
			out := make([]engine.Decision, 2)
			for i := 0; i < each; i++ {
				if g%4 == 3 {
					if mustLimit(t, e, a, limA, 1).Allowed {
						s++
					}
					continue
				}
				bi, err := e.LimitMulti([]engine.LimitOp{{Tuple: b, Limit: limB}, {Tuple: a, Limit: limA}}, 1, t0+10, out)
				if err != nil {
					t.Error(err)
					return
				}
				if out[bi].Allowed {
					m++
				}
			}
			mu.Lock()
			multi, single = multi+m, single+s
			mu.Unlock()
		}(g)
	}
	wg.Wait()
	sa, sb := e.Status(a), e.Status(b)
	if sb.CurrentRegional != multi || sa.CurrentRegional != multi+single {
		t.Fatalf("counts a=%d b=%d; admitted %d multi-limit, %d single", sa.CurrentRegional, sb.CurrentRegional, multi, single)
	}
	if sa.CurrentRegional > limA || sb.CurrentRegional > limB || sa.CurrentRegional != limA {
		t.Fatalf("counts a=%d b=%d for limits %d and %d", sa.CurrentRegional, sb.CurrentRegional, limA, limB)
	}
}

// TestLimitMultiFull: a multi-limit request that needs a new cell past --max-memory
// gets ErrFull and counts in none of its windows, the one that had room included.
func TestLimitMultiFull(t *testing.T) {
	e := engine.New(engine.NewManualClock(t0), engine.Config{MaxMemoryBytes: 4000})
	held := tup("k", 1000)
	mustLimit(t, e, held, 100, 1)
	for i := 0; ; i++ {
		if _, err := e.Limit(tup(fmt.Sprintf("filler%d", i), 1000), 100, 1); errors.Is(err, engine.ErrFull) {
			break
		}
	}
	out := make([]engine.Decision, 2)
	_, err := e.LimitMulti([]engine.LimitOp{{Tuple: held, Limit: 100}, {Tuple: tup("k", 60_000), Limit: 100}}, 5, t0, out)
	if !errors.Is(err, engine.ErrFull) {
		t.Fatalf("LimitMulti past the bound: %v", err)
	}
	if st := e.Status(held); st.CurrentRegional != 1 {
		t.Fatalf("the window with room counted: %+v", st)
	}
}

// TestBinding: the decision a multi-limit reply carries.
func TestBinding(t *testing.T) {
	ok := func(rem uint64) engine.Decision { return engine.Decision{Allowed: true, Remaining: rem} }
	no := func(retry int64) engine.Decision { return engine.Decision{RetryAfterMs: retry} }
	for _, c := range []struct {
		name string
		ds   []engine.Decision
		want int
	}{
		{"one", []engine.Decision{ok(3)}, 0},
		{"least remaining", []engine.Decision{ok(5), ok(2), ok(9)}, 1},
		{"tie: first", []engine.Decision{ok(2), ok(2)}, 0},
		{"a denial over any allowance", []engine.Decision{ok(0), no(10)}, 1},
		{"largest retry", []engine.Decision{no(10), ok(1), no(900), no(5)}, 2},
		{"never over any retry", []engine.Decision{no(900), no(-1)}, 1},
	} {
		if got := engine.Binding(c.ds); got != c.want {
			t.Errorf("%s: Binding = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestServeDecideMulti: a multi-limit hand-off is decided all or nothing with the edge's
// pending cost counted as used, counts nothing after its deadline, and refuses malformed
// requests.
func TestServeDecideMulti(t *testing.T) {
	e, clock := newEngine(t0)
	ka, kb := engine.AppendKey(nil, tup("h", 1000)), engine.AppendKey(nil, tup("h", 60_000))
	req := func(pendingB uint64) engine.DecideMultiRequest {
		return engine.DecideMultiRequest{Cost: 2, Items: []engine.DecideItem{{Key: ka, Limit: 10}, {Key: kb, Limit: 5, Pending: pendingB}}}
	}
	ds, ccs, _, err := e.ServeDecideMulti("edge/1", req(0))
	if err != nil || !ds[0].Allowed || !ds[1].Allowed || ccs[0].CurRegional != 2 || ccs[1].CurRegional != 2 {
		t.Fatalf("first: %+v %+v %v", ds, ccs, err)
	}
	// 2 counted and 2 pending at the edge: 2 more do not fit the 1m limit of 5; nothing
	// is counted in the 1s window either.
	ds, ccs, _, err = e.ServeDecideMulti("edge/1", req(2))
	if err != nil || !ds[0].Allowed || ds[1].Allowed || ccs[0].CurRegional != 2 || ccs[1].CurRegional != 2 {
		t.Fatalf("second: %+v %+v %v", ds, ccs, err)
	}
	// Past its deadline a hand-off is refused and counts nothing.
	late := req(0)
	late.Deadline = clock.NowMs()
	if ds, _, _, err = e.ServeDecideMulti("edge/1", late); err != nil || ds[0].Allowed || ds[1].Allowed {
		t.Fatalf("late: %+v %v", ds, err)
	}
	if st := e.Status(tup("h", 1000)); st.CurrentRegional != 2 {
		t.Fatalf("the 1s window counts %d; want 2", st.CurrentRegional)
	}
	for _, bad := range []engine.DecideMultiRequest{
		{Cost: 1},
		{Cost: 1, Items: []engine.DecideItem{{Key: ka, Limit: 1}, {Key: ka, Limit: 2}}},
		{Cost: 1, Items: []engine.DecideItem{{Key: []byte{0}, Limit: 1}}},
	} {
		if _, _, _, err := e.ServeDecideMulti("edge/1", bad); err == nil {
			t.Errorf("ServeDecideMulti(%+v) accepted", bad)
		}
	}
}
