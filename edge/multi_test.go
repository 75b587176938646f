package edge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
)

// DecideMulti hands a multi-limit decision to the wrapped origin, failing as Decide does.
func (f *fakeOrigin) DecideMulti(ctx context.Context, r engine.DecideMultiRequest) ([]engine.Decision, []engine.CellCounts, engine.OriginMeta, error) {
	f.decides.Add(1)
	f.note()
	if f.down.Load() {
		return nil, nil, engine.OriginMeta{}, errOriginDown
	}
	return f.inner.(engine.MultiOrigin).DecideMulti(ctx, r)
}

// edgeLimitAll decides ops on e as the server does: without waiting when local memory
// can, else waiting on the origin. It returns the binding decision and every limit's.
func edgeLimitAll(t testing.TB, e *edge.Edge, ops []engine.LimitOp, cost uint64, now int64) (engine.Decision, []engine.Decision) {
	t.Helper()
	out := make([]engine.Decision, len(ops))
	b, ok, err := e.TryLimitAll(ops, cost, now, out)
	if !ok {
		b, err = e.LimitAll(context.Background(), ops, cost, out)
	}
	if err != nil {
		t.Fatalf("LimitAll: %v", err)
	}
	return out[b], out
}

// modelTuple is a tuple as the region's truth knows it: every cost admitted anywhere.
type modelTuple struct {
	t     engine.Tuple
	cells map[int64]uint64
}

// admits is SPEC section 2 on the truth, in exact integers: used + cost <= limit, with
// used*W = cur*W + prev*(W-elapsed).
func (m *modelTuple) admits(now int64, limit, cost uint64) bool {
	w := m.t.WindowMs
	seq, e := now/w, now%w
	used := m.cells[seq]*uint64(w) + m.cells[seq-1]*uint64(w-e)
	return cost <= limit && used+cost*uint64(w) <= limit*uint64(w)
}

// TestEdgeMultiMatchesModel drives random histories of multi-limit (and single-limit)
// requests through three edges with leases on one origin, with flushes and time moving,
// and checks against the region's truth: a request admitted by any edge is one the model
// admits in every window (the region never passes a limit), a multi-limit request is
// counted in every window or in none (after flushing, the origin holds exactly the
// truth), and a denial never counts.
func TestEdgeMultiMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 2026))
	iterations := 30
	if testing.Short() {
		iterations = 8
	}
	var admitted, denied, local, handedOff int
	for it := 0; it < iterations; it++ {
		r := newEdgeRig(t, t0+rng.Int64N(1_000_000), 3, edge.Config{})
		windows := []int64{1000, 10_000, 60_000, 3_600_000}
		rng.Shuffle(len(windows), func(i, j int) { windows[i], windows[j] = windows[j], windows[i] })
		var ts []*modelTuple
		for _, w := range windows[:2+rng.IntN(3)] {
			ts = append(ts, &modelTuple{t: tup(fmt.Sprintf("multi-%d", it), w), cells: map[int64]uint64{}})
		}
		limits := make([]uint64, len(ts))
		for i := range limits {
			limits[i] = 20 + rng.Uint64N(200)
		}
		for step := 0; step < 400; step++ {
			switch x := rng.IntN(20); {
			case x == 0:
				r.clock.Advance(rng.Int64N(2000))
			case x < 4:
				r.clock.Advance(rng.Int64N(20))
			case x < 6:
				flushAll(t, r.edges[rng.IntN(len(r.edges))])
			}
			now := r.clock.NowMs()
			e := r.edges[rng.IntN(len(r.edges))]
			cost := 1 + rng.Uint64N(4)
			var sub []*modelTuple
			var ops []engine.LimitOp
			for i, m := range ts {
				if rng.IntN(4) > 0 {
					sub = append(sub, m)
					ops = append(ops, engine.LimitOp{Tuple: m.t, Limit: limits[i]})
				}
			}
			if len(ops) == 0 {
				continue
			}
			before := handed(e)
			var d engine.Decision
			if len(ops) == 1 {
				d = edgeLimit(t, e, ops[0].Tuple, ops[0].Limit, cost)
			} else {
				d, _ = edgeLimitAll(t, e, ops, cost, now)
			}
			now = r.clock.NowMs()
			if handed(e) > before {
				handedOff++
			} else {
				local++
			}
			if !d.Allowed {
				denied++
				continue
			}
			admitted++
			for i, m := range sub {
				if !m.admits(now, ops[i].Limit, cost) {
					t.Fatalf("iteration %d step %d: admitted cost %d past limit %d of window %d (truth %v at %d)",
						it, step, cost, ops[i].Limit, m.t.WindowMs, m.cells, now)
				}
			}
			for _, m := range sub {
				m.cells[now/m.t.WindowMs] += cost
			}
		}
		for _, e := range r.edges {
			flushAll(t, e)
		}
		now := r.clock.NowMs()
		for _, m := range ts {
			seq := now / m.t.WindowMs
			if st := r.origin.Status(m.t); st.CurrentRegional != m.cells[seq] || st.PreviousRegional != m.cells[seq-1] {
				t.Fatalf("iteration %d: window %d: origin counts cur=%d prev=%d, truth cur=%d prev=%d",
					it, m.t.WindowMs, st.CurrentRegional, st.PreviousRegional, m.cells[seq], m.cells[seq-1])
			}
		}
	}
	if admitted == 0 || denied == 0 || local == 0 || handedOff == 0 {
		t.Fatalf("history did not exercise the cases: %d admitted, %d denied, %d local, %d handed off", admitted, denied, local, handedOff)
	}
	t.Logf("%d admitted, %d denied; %d decided locally, %d handed off", admitted, denied, local, handedOff)
}

// TestEdgeMultiConcurrent: goroutines on three edges race two-limit requests on one key
// at one frozen instant while each edge's flusher runs. At every interleaving a request
// counts in both windows or neither: after flushing, the origin's two counts are equal,
// equal the admissions times the cost, and within the tighter limit.
func TestEdgeMultiConcurrent(t *testing.T) {
	r := newEdgeRig(t, t0+100, 3, edge.Config{})
	a, b := tup("both", 1000), tup("both", 60_000)
	ops := []engine.LimitOp{{Tuple: a, Limit: 500}, {Tuple: b, Limit: 300}}
	const workers, each, cost = 6, 150, 2
	var mu sync.Mutex
	var admitted uint64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var flushers sync.WaitGroup
	for _, e := range r.edges {
		flushers.Add(1)
		go func(e *edge.Edge) {
			defer flushers.Done()
			for {
				select {
				case <-stop:
					return
				default:
					e.FlushOnce()
				}
			}
		}(e)
	}
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(e *edge.Edge) {
			defer wg.Done()
			var n uint64
			for i := 0; i < each; i++ {
				if d, _ := edgeLimitAll(t, e, ops, cost, t0+100); d.Allowed {
					n++
				}
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		}(r.edges[g%len(r.edges)])
	}
	wg.Wait()
	close(stop)
	flushers.Wait()
	for _, e := range r.edges {
		flushAll(t, e)
	}
	ca, cb := originCount(r.origin, a), originCount(r.origin, b)
	if ca != cb || ca != admitted*cost || cb > 300 {
		t.Fatalf("origin counts 1s=%d 1m=%d; %d admitted at cost %d, limits 500 and 300", ca, cb, admitted, cost)
	}
	if cb < 300-2*cost*uint64(len(r.edges)) {
		t.Logf("admitted %d of 300 (leases held back the rest)", cb)
	}
}

// TestEdgeMultiHandOff: a two-limit request that the leases do not cover goes to the
// origin in one call; the origin decides it all or nothing, and a denial there counts in
// neither window.
func TestEdgeMultiHandOff(t *testing.T) {
	r := newEdgeRig(t, t0, 1, edge.Config{})
	e := r.edges[0]
	a, b := tup("hand", 1000), tup("hand", 60_000)
	ops := []engine.LimitOp{{Tuple: a, Limit: 10}, {Tuple: b, Limit: 4}}
	// A cost of 4 is within both limits but beyond any lease the origin grants near the
	// 1m limit (16 asked, at most half the room granted): handed over, and allowed.
	d, _ := edgeLimitAll(t, e, ops, 4, t0)
	if !d.Allowed || handed(e) != 1 || d.Limit != 4 || d.Remaining != 0 {
		t.Fatalf("first request: %+v after %d hand-offs; want allowed by the origin, the 1m limit binding", d, handed(e))
	}
	if originCount(r.origin, a) != 4 || originCount(r.origin, b) != 4 {
		t.Fatalf("origin counts %d and %d after the hand-off; want 4 in both", originCount(r.origin, a), originCount(r.origin, b))
	}
	if n := r.fakes[0].reads.Load(); n != 1 {
		t.Fatalf("the cold request read the origin %d times; want one read of both windows", n)
	}
	r.clock.Advance(1000) // a new 1s cell: the 1s limit has room, the 1m one none
	d, all := edgeLimitAll(t, e, ops, 1, t0+1000)
	if d.Allowed || d.Limit != 4 || !all[0].Allowed {
		t.Fatalf("second request: %+v (each: %+v); want denied by the 1m limit", d, all)
	}
	flushAll(t, e)
	if st := r.origin.Status(a); st.CurrentRegional != 0 || st.PreviousRegional != 4 {
		t.Fatalf("the 1s window counted a denied request: %+v", st)
	}
	if originCount(r.origin, b) != 4 {
		t.Fatalf("the 1m window counts %d; want 4", originCount(r.origin, b))
	}
}

// BenchmarkEdgeLimitAllWarm is BenchmarkEdgeLimitWarm with two limits in one call.
func BenchmarkEdgeLimitAllWarm(b *testing.B) {
	r := newEdgeRig(b, t0, 1, edge.Config{Freshness: time.Hour})
	e := r.edges[0]
	tp := benchTuples(1)[0]
	tp2 := tp
	tp2.WindowMs = 3_600_000
	ops := []engine.LimitOp{{Tuple: tp, Limit: engine.MaxLimit}, {Tuple: tp2, Limit: engine.MaxLimit}}
	out := make([]engine.Decision, 2)
	edgeLimitAll(b, e, ops, 1, t0) // the cold read
	b.ReportAllocs()
	for b.Loop() {
		if bi, err := e.LimitAll(context.Background(), ops, 1, out); err != nil || !out[bi].Allowed {
			b.Fatalf("%+v, %v", out[bi], err)
		}
	}
	if s := e.Stats(); s.OriginReads != 1 {
		b.Fatalf("the warm path read the origin: %d reads", s.OriginReads)
	}
}

// TestEdgeMultiOriginDown: with its origin down, an edge admits two-limit requests within
// its leases and then the degraded share, counting each in both windows or neither, and
// never past the tighter limit; a failed hand-off refuses without counting.
func TestEdgeMultiOriginDown(t *testing.T) {
	r := newEdgeRig(t, t0, 1, edge.Config{DegradedShare: 0.5})
	e := r.edges[0]
	a, b := tup("down", 60_000), tup("down", 3_600_000)
	ops := []engine.LimitOp{{Tuple: a, Limit: 40}, {Tuple: b, Limit: 1000}}
	if d, _ := edgeLimitAll(t, e, ops, 1, t0); !d.Allowed {
		t.Fatalf("first request: %+v", d)
	}
	flushAll(t, e)
	r.fakes[0].down.Store(true)
	admitted := uint64(1)
	for i := range 100 {
		d, all := edgeLimitAll(t, e, ops, 1, t0)
		if d.Allowed {
			admitted++
		}
		if d.Allowed != (all[0].Allowed && all[1].Allowed) {
			t.Fatalf("request %d: reply %+v for decisions %+v", i, d, all)
		}
	}
	sa, sb := e.Status(context.Background(), a), e.Status(context.Background(), b)
	if sa.CurrentRegional != admitted || sb.CurrentRegional != admitted {
		t.Fatalf("local counts %d and %d; %d admitted", sa.CurrentRegional, sb.CurrentRegional, admitted)
	}
	// The lease (16 asked, one unit of it spent before the origin went down) is spent
	// first; then the degraded limit, 0.5 x 40, holds the counts (lease spending included).
	if admitted != 20 {
		t.Fatalf("admitted %d with the origin down; want 20: the lease, then up to 0.5 x 40", admitted)
	}
	r.fakes[0].down.Store(false)
	r.clock.Advance(2000) // past the backoff
	flushAll(t, e)
	if oa, ob := originCount(r.origin, a), originCount(r.origin, b); oa != admitted || ob != admitted {
		t.Fatalf("origin counts %d and %d after the origin came back; %d admitted", oa, ob, admitted)
	}
}

// TestEdgeMultiSplitOrigins: when a key's windows belong to different origins, no one
// call decides them: two edges admit within both leases only, count each admission in
// both windows, and never pass the tighter limit together.
func TestEdgeMultiSplitOrigins(t *testing.T) {
	clock := engine.NewManualClock(t0)
	o1, o2 := engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30}), engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30})
	var edges []*edge.Edge
	for _, run := range []string{"split-1/1", "split-2/1"} {
		e, err := edge.New(clock, edge.Config{NodeRun: run, DegradedShare: 1, MaxMemoryBytes: 1 << 20, OriginIDs: []string{"o1:6380", "o2:6380"},
			Origins: []engine.Origin{engine.LocalOrigin{Engine: o1, Node: run}, engine.LocalOrigin{Engine: o2, Node: run}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		edges = append(edges, e)
	}
	var a, b engine.Tuple
	for i := 0; ; i++ {
		a, b = tup(fmt.Sprintf("split-%d", i), 60_000), tup(fmt.Sprintf("split-%d", i), 3_600_000)
		if edges[0].OriginFor(a) != edges[0].OriginFor(b) {
			break
		}
	}
	oa, ob := o1, o2
	if edges[0].OriginFor(a) == "o2:6380" {
		oa, ob = o2, o1
	}
	ops := []engine.LimitOp{{Tuple: a, Limit: 30}, {Tuple: b, Limit: 50}}
	admitted := uint64(0)
	for i := range 200 {
		e := edges[i%2]
		d, all := edgeLimitAll(t, e, ops, 1, t0)
		if d.Allowed {
			admitted++
		} else if d.RetryAfterMs <= 0 {
			t.Fatalf("request %d refused with retry_after_ms %d (%+v)", i, d.RetryAfterMs, all)
		}
		if i%20 == 19 {
			flushAll(t, edges[0])
			flushAll(t, edges[1])
		}
	}
	flushAll(t, edges[0])
	flushAll(t, edges[1])
	if admitted == 0 || admitted > 30 {
		t.Fatalf("admitted %d over two origins; want some, within the tighter limit 30", admitted)
	}
	if ca, cb := originCount(oa, a), originCount(ob, b); ca != admitted || cb != admitted {
		t.Fatalf("origins count %d (1m) and %d (1h); %d admitted", ca, cb, admitted)
	}
	t.Logf("admitted %d of 200 with limits 30 and 50 on two origins", admitted)
}

// TestEdgeMultiColdOneEntry: requests of one edge that arrive at once on a cold
// multi-limit key share one entry per tuple. Two entries of a tuple would each take in the
// run's one lease from their reads and each spend it (TestEdgeMultiConcurrent then
// admitted beyond the limit). Every request is admitted here, in its tuples' entries, and
// nothing is replayed: each entry holding admitted cost stays in the replay set, so a
// duplicate shows in its size.
func TestEdgeMultiColdOneEntry(t *testing.T) {
	r := newEdgeRig(t, t0+100, 1, edge.Config{})
	e := r.edges[0]
	const keys, callers = 50, 8
	for k := 0; k < keys; k++ {
		name := fmt.Sprintf("cold:%d", k)
		ops := []engine.LimitOp{{Tuple: tup(name, 1000), Limit: 500}, {Tuple: tup(name, 60_000), Limit: 300}}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for c := 0; c < callers; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				edgeLimitAll(t, e, ops, 1, t0+100)
			}()
		}
		close(start)
		wg.Wait()
	}
	if st := e.Stats(); st.Allowed != keys*callers || st.ReplayPending != 2*keys {
		t.Fatalf("%d of %d admitted, in %d entries for %d tuples; want all, in one entry each", st.Allowed, keys*callers, st.ReplayPending, 2*keys)
	}
}
