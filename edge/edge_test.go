package edge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
)

// ---- fake origin ----

var errOriginDown = errors.New("fake origin: down")

// fakeOrigin wraps an Origin (a LocalOrigin over an origin Engine). It counts calls per
// kind, records each call's clock time and each replay batch, fails on demand, can apply
// a replay and then fail (the reply was lost), can hold reads until released, and can
// rewrite read replies.
type fakeOrigin struct {
	inner engine.Origin
	clock engine.Clock

	reads, replays, decides atomic.Int64

	down             atomic.Bool // every call fails, nothing is applied
	replayApplyFails atomic.Bool // Replay applies the batch, then fails

	mu          sync.Mutex
	calls       []int64 // clock ms of every call, any kind
	batches     []engine.ReplayBatch
	gate        chan struct{} // non-nil: Read waits for it to close
	readEntered chan struct{} // gets one value each time a Read reaches the gate
	readRewrite func([]engine.CellCounts) []engine.CellCounts
}

func newFakeOrigin(inner engine.Origin, clock engine.Clock) *fakeOrigin {
	return &fakeOrigin{inner: inner, clock: clock, readEntered: make(chan struct{}, 1024)}
}

func (f *fakeOrigin) note() {
	f.mu.Lock()
	f.calls = append(f.calls, f.clock.NowMs())
	f.mu.Unlock()
}

func (f *fakeOrigin) total() int64 { return f.reads.Load() + f.replays.Load() + f.decides.Load() }

// holdReads makes every Read wait until the returned function is called.
func (f *fakeOrigin) holdReads() (release func()) {
	g := make(chan struct{})
	f.mu.Lock()
	f.gate = g
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.gate = nil
			f.mu.Unlock()
			close(g)
		})
	}
}

func (f *fakeOrigin) recorded() []engine.ReplayBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.batches)
}

func (f *fakeOrigin) callTimes() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeOrigin) Read(ctx context.Context, items []engine.ReadItem) ([]engine.CellCounts, engine.OriginMeta, error) {
	f.reads.Add(1)
	f.note()
	f.mu.Lock()
	g, rewrite := f.gate, f.readRewrite
	f.mu.Unlock()
	if g != nil {
		f.readEntered <- struct{}{}
		<-g
	}
	if f.down.Load() {
		return nil, engine.OriginMeta{}, errOriginDown
	}
	c, m, err := f.inner.Read(ctx, items)
	if err == nil && rewrite != nil {
		c = rewrite(c)
	}
	return c, m, err
}

func (f *fakeOrigin) Replay(ctx context.Context, b engine.ReplayBatch) ([]engine.CellCounts, engine.OriginMeta, error) {
	f.replays.Add(1)
	f.note()
	cp := b
	cp.Items = make([]engine.ReplayItem, len(b.Items))
	for i, it := range b.Items {
		cp.Items[i] = it
		cp.Items[i].Key = bytes.Clone(it.Key)
	}
	f.mu.Lock()
	f.batches = append(f.batches, cp)
	f.mu.Unlock()
	if f.down.Load() {
		return nil, engine.OriginMeta{}, errOriginDown
	}
	c, m, err := f.inner.Replay(ctx, b)
	if err == nil && f.replayApplyFails.Load() {
		return nil, engine.OriginMeta{}, errors.New("fake origin: reply lost after applying")
	}
	return c, m, err
}

func (f *fakeOrigin) Decide(ctx context.Context, r engine.DecideRequest) (engine.Decision, engine.CellCounts, engine.OriginMeta, error) {
	f.decides.Add(1)
	f.note()
	if f.down.Load() {
		return engine.Decision{}, engine.CellCounts{}, engine.OriginMeta{}, errOriginDown
	}
	return f.inner.Decide(ctx, r)
}

func (f *fakeOrigin) Changes(ctx context.Context, since uint64) (engine.ChangesReply, error) {
	f.note()
	if f.down.Load() {
		return engine.ChangesReply{}, errOriginDown
	}
	return f.inner.(engine.ChangesOrigin).Changes(ctx, since)
}

func (f *fakeOrigin) OverrideList(ctx context.Context, after uint64) (engine.ChangesReply, error) {
	f.note()
	if f.down.Load() {
		return engine.ChangesReply{}, errOriginDown
	}
	return f.inner.(engine.OverridesOrigin).OverrideList(ctx, after)
}

func (f *fakeOrigin) Reset(ctx context.Context, keys [][]byte) (int, error) {
	f.note()
	if f.down.Load() {
		return 0, errOriginDown
	}
	return f.inner.(engine.ResetOrigin).Reset(ctx, keys)
}

// ---- rig: one origin Engine, n edges on it ----

type edgeRig struct {
	clock  *engine.ManualClock
	origin *engine.Engine
	fakes  []*fakeOrigin
	edges  []*edge.Edge
}

// newEdgeRig builds n edges over one origin Engine, each with its own node run and its
// own fake around a LocalOrigin. cfg is a template: Origins, OriginIDs and NodeRun are
// filled in; DegradedShare 0 becomes 1 (the product default), MaxMemoryBytes 0 1 MiB.
func newEdgeRig(t testing.TB, now int64, n int, cfg edge.Config) *edgeRig {
	t.Helper()
	return newEdgeRigOrigin(t, now, n, engine.Config{MaxMemoryBytes: 1 << 30}, cfg)
}

// newEdgeRigOrigin is newEdgeRig with an origin configured by ocfg.
func newEdgeRigOrigin(t testing.TB, now int64, n int, ocfg engine.Config, cfg edge.Config) *edgeRig {
	t.Helper()
	r := &edgeRig{clock: engine.NewManualClock(now)}
	r.origin = engine.New(r.clock, ocfg)
	if cfg.DegradedShare == 0 {
		cfg.DegradedShare = 1
	}
	if cfg.MaxMemoryBytes == 0 {
		cfg.MaxMemoryBytes = 1 << 20 // the 256 MiB default makes a large, slow-to-build cache
	}
	for i := 0; i < n; i++ {
		run := fmt.Sprintf("edge-%d/boot", i+1)
		f := newFakeOrigin(engine.LocalOrigin{Engine: r.origin, Node: run}, r.clock)
		c := cfg
		c.Origins, c.OriginIDs, c.NodeRun = []engine.Origin{f}, []string{"origin-1:6380"}, run
		e, err := edge.New(r.clock, c)
		if err != nil {
			t.Fatalf("edge.New: %v", err)
		}
		t.Cleanup(e.Close)
		r.fakes, r.edges = append(r.fakes, f), append(r.edges, e)
	}
	return r
}

func edgeLimit(t testing.TB, e *edge.Edge, tp engine.Tuple, limit, cost uint64) engine.Decision {
	t.Helper()
	d, err := e.Limit(context.Background(), tp, limit, cost)
	if err != nil {
		t.Fatalf("Edge.Limit(%q, %d, %d): %v", tp.Key, limit, cost, err)
	}
	return d
}

// flushAll flushes e until nothing remains (bounded).
func flushAll(t testing.TB, e *edge.Edge) {
	t.Helper()
	for i := 0; e.FlushOnce(); i++ {
		if i == 100 {
			t.Fatalf("replays still pending after 100 flushes: %+v", e.Stats())
		}
	}
}

// handed counts the decisions e handed to its origin.
func handed(e *edge.Edge) uint64 { s := e.Stats(); return s.OriginAllowed + s.OriginDenied }

func originCount(o *engine.Engine, tp engine.Tuple) uint64 { return o.Status(tp).CurrentRegional }

// ---- 1. coalescing ----

// TestEdgeReplayCoalescesPerCell: the requests accepted on one cell between two flushes
// travel as one replay item with their summed cost; one batch carries several tuples, and
// both live cells of one tuple.
func TestEdgeReplayCoalescesPerCell(t *testing.T) {
	r := newEdgeRig(t, t0+100, 1, edge.Config{})
	e, f := r.edges[0], r.fakes[0]
	a, b, c := tup("a", 10_000), tup("b", 10_000), tup("c", 60_000)
	for i := 0; i < 10; i++ {
		edgeLimit(t, e, a, 1000, 1)
	}
	for i := 0; i < 4; i++ {
		edgeLimit(t, e, b, 1000, 2)
	}
	for i := 0; i < 3; i++ {
		edgeLimit(t, e, c, 1000, 1)
	}
	if n := f.replays.Load(); n != 0 {
		t.Fatalf("%d replays before any flush", n)
	}
	if got := originCount(r.origin, a); got != 0 {
		t.Fatalf("origin has %d for a before any flush", got)
	}
	if e.FlushOnce() {
		t.Fatalf("more to flush after one batch of 3 cells: %+v", e.Stats())
	}
	batches := f.recorded()
	if len(batches) != 1 {
		t.Fatalf("%d batches, want 1", len(batches))
	}
	b1 := batches[0]
	want := map[string]engine.ReplayItem{
		string(engine.AppendKey(nil, a)): {Seq: (t0 + 100) / 10_000, Cost: 10},
		string(engine.AppendKey(nil, b)): {Seq: (t0 + 100) / 10_000, Cost: 8},
		string(engine.AppendKey(nil, c)): {Seq: (t0 + 100) / 60_000, Cost: 3},
	}
	if len(b1.Items) != len(want) {
		t.Fatalf("batch has %d items, want %d: %+v", len(b1.Items), len(want), b1.Items)
	}
	for _, it := range b1.Items {
		w, ok := want[string(it.Key)]
		if !ok || it.Seq != w.Seq || it.Cost != w.Cost {
			t.Fatalf("item %+v; want one per tuple with the summed cost: %+v", it, want)
		}
		delete(want, string(it.Key))
	}
	if b1.Node != "edge-1/boot" || b1.ID == 0 {
		t.Fatalf("batch node %q id %d", b1.Node, b1.ID)
	}
	for tp, n := range map[*engine.Tuple]uint64{&a: 10, &b: 8, &c: 3} {
		if got := originCount(r.origin, *tp); got != n {
			t.Fatalf("origin has %d for %q, want %d", got, tp.Key, n)
		}
	}
	if s := e.Stats(); s.ReplayPending != 0 || s.Origins[0].Pinned != 0 || s.Origins[0].Inflight {
		t.Fatalf("after the acknowledged flush: %+v", s)
	}
	if e.FlushOnce(); f.replays.Load() != 1 {
		t.Fatalf("a flush with nothing pending sent a batch")
	}

	// Both cells of one tuple in one batch: 2 at the end of cell s, 3 at the start of s+1,
	// all decided here: the lease is the tuple's, so what is left of it at the end of cell
	// s is spent in s+1 without a round trip.
	s := (t0 + 100) / 10_000
	r.clock.Set((s+1)*10_000 - 1)
	edgeLimit(t, e, a, 1000, 1)
	edgeLimit(t, e, a, 1000, 1)
	r.clock.Set((s + 1) * 10_000)
	for i := 0; i < 3; i++ {
		edgeLimit(t, e, a, 1000, 1)
	}
	flushAll(t, e)
	batches = f.recorded()
	if len(batches) != 2 {
		t.Fatalf("%d batches, want 2", len(batches))
	}
	b2 := batches[1]
	if b2.ID <= b1.ID || b2.Node != b1.Node {
		t.Fatalf("second batch %s/%d after %s/%d", b2.Node, b2.ID, b1.Node, b1.ID)
	}
	items := slices.Clone(b2.Items)
	slices.SortFunc(items, func(x, y engine.ReplayItem) int { return int(x.Seq - y.Seq) })
	if len(items) != 2 || items[0].Seq != s || items[0].Cost != 2 || items[1].Seq != s+1 || items[1].Cost != 3 {
		t.Fatalf("second batch %+v; want (a, %d, 2) and (a, %d, 3)", items, s, s+1)
	}
	if n := handed(e); n != 0 {
		t.Fatalf("%d decisions handed to the origin, want 0 (the lease crosses the window boundary)", n)
	}
	if st := r.origin.Status(a); st.PreviousRegional != 12 || st.CurrentRegional != 3 {
		t.Fatalf("origin status %+v; want previous 12, current 3", st)
	}
}

// ---- 2. idempotent re-delivery ----

// TestEdgeReplayRedeliveryIsIdempotent: a batch whose reply is lost after the origin
// applied it is sent again unchanged (same node, ID and items) once the backoff passes;
// the origin applies it once; cost accepted meanwhile waits for the next batch.
func TestEdgeReplayRedeliveryIsIdempotent(t *testing.T) {
	r := newEdgeRig(t, t0+100, 1, edge.Config{})
	e, f := r.edges[0], r.fakes[0]
	a, b := tup("a", 60_000), tup("b", 60_000)
	for i := 0; i < 5; i++ {
		edgeLimit(t, e, a, 1000, 1)
	}
	edgeLimit(t, e, b, 1000, 2)

	f.replayApplyFails.Store(true)
	if !e.FlushOnce() {
		t.Fatal("a failed flush reports nothing more to do")
	}
	if got := originCount(r.origin, a); got != 5 {
		t.Fatalf("origin has %d for a after the first delivery, want 5", got)
	}
	if s := e.Stats(); !s.Origins[0].Inflight || s.Origins[0].Reachable {
		t.Fatalf("after a failed replay: %+v", s.Origins[0])
	}

	// Accepted while the batch is unacknowledged (the entry is fresh: no origin call).
	calls := f.total()
	for i := 0; i < 3; i++ {
		if d := edgeLimit(t, e, a, 1000, 1); !d.Allowed {
			t.Fatalf("request %d denied while the origin is in backoff: %+v", i, d)
		}
	}
	if f.total() != calls {
		t.Fatalf("fresh entry called the origin %d times", f.total()-calls)
	}
	// Still in backoff: no call.
	e.FlushOnce()
	if n := f.replays.Load(); n != 1 {
		t.Fatalf("%d replays during the backoff, want 1", n)
	}

	f.replayApplyFails.Store(false)
	r.clock.Advance(1000) // past any backoff, within the freshness and the cell
	e.FlushOnce()
	batches := f.recorded()
	if len(batches) != 2 {
		t.Fatalf("%d batches after the retry, want 2", len(batches))
	}
	first, again := batches[0], batches[1]
	sortItems := func(b engine.ReplayBatch) engine.ReplayBatch {
		b.Items = slices.Clone(b.Items)
		slices.SortFunc(b.Items, func(x, y engine.ReplayItem) int { return bytes.Compare(x.Key, y.Key) })
		return b
	}
	if fmt.Sprint(sortItems(first)) != fmt.Sprint(sortItems(again)) {
		t.Fatalf("re-sent batch differs:\n first %+v\n again %+v", first, again)
	}
	if got := originCount(r.origin, a); got != 5 {
		t.Fatalf("origin has %d for a after the re-delivery, want 5 (applied twice?)", got)
	}
	if s := e.Stats(); s.ReplayRetried != 1 {
		t.Fatalf("ReplayRetried %d, want 1", s.ReplayRetried)
	}

	flushAll(t, e)
	batches = f.recorded()
	if len(batches) != 3 {
		t.Fatalf("%d batches, want 3", len(batches))
	}
	next := batches[2]
	if next.ID != first.ID+1 || len(next.Items) != 1 || !bytes.Equal(next.Items[0].Key, engine.AppendKey(nil, a)) || next.Items[0].Cost != 3 {
		t.Fatalf("next batch %+v; want id %d with only (a, 3)", next, first.ID+1)
	}
	if ga, gb := originCount(r.origin, a), originCount(r.origin, b); ga != 8 || gb != 2 {
		t.Fatalf("origin has a=%d b=%d, want 8 and 2", ga, gb)
	}
	if st := e.Status(context.Background(), a); st.CurrentRegional != 8 {
		t.Fatalf("edge status %+v; want current 8", st)
	}
}

// TestEdgeReplayRetryAfterRefusal: a batch that never reached the origin is delivered,
// once, after the backoff.
func TestEdgeReplayRetryAfterRefusal(t *testing.T) {
	r := newEdgeRig(t, t0+100, 1, edge.Config{})
	e, f := r.edges[0], r.fakes[0]
	a := tup("a", 60_000)
	for i := 0; i < 4; i++ {
		edgeLimit(t, e, a, 1000, 1)
	}
	f.down.Store(true)
	e.FlushOnce()
	f.down.Store(false)
	r.clock.Advance(20)
	flushAll(t, e)
	if got := originCount(r.origin, a); got != 4 {
		t.Fatalf("origin has %d, want 4", got)
	}
	bs := f.recorded()
	if len(bs) != 2 || bs[0].ID != bs[1].ID {
		t.Fatalf("batches %+v; want the same batch twice", bs)
	}
}

// ---- 3. max-merge ----

// TestEdgeMaxMergesOriginCounts: counts another edge replayed raise this edge's view; an
// origin answer lower than what the edge knows never lowers it.
func TestEdgeMaxMergesOriginCounts(t *testing.T) {
	r := newEdgeRigOrigin(t, t0+100, 1, engine.Config{LeaseTTL: time.Second}, edge.Config{Freshness: time.Second})
	e, f := r.edges[0], r.fakes[0]
	a := tup("a", 60_000)
	key := engine.AppendKey(nil, a)
	seq := (t0 + 100) / 60_000
	other := func(id uint64, cost uint64) {
		r.origin.ServeReplay(engine.ReplayBatch{Node: "edge-x/boot", ID: id, Items: []engine.ReplayItem{{Key: key, Seq: seq, Cost: cost}}})
	}

	edgeLimit(t, e, a, 1000, 1) // cold read, 1 pending
	other(1, 40)
	if st := e.Status(context.Background(), a); st.CurrentRegional != 41 || st.Source != "origin" {
		t.Fatalf("status %+v; want current 41 (40 from the other edge, 1 pending here)", st)
	}
	flushAll(t, e)
	if got := originCount(r.origin, a); got != 41 {
		t.Fatalf("origin %d, want 41", got)
	}

	// The origin now answers less than the edge knows (e.g. after losing state).
	f.mu.Lock()
	f.readRewrite = func(cs []engine.CellCounts) []engine.CellCounts {
		for i := range cs {
			cs[i].CurRegional = 10
		}
		return cs
	}
	f.mu.Unlock()
	if st := e.Status(context.Background(), a); st.CurrentRegional != 41 || st.Source != "origin" {
		t.Fatalf("status %+v after a lower origin answer; want current still 41", st)
	}
	r.clock.Advance(1500) // stale, and the lease (1 s) ended: the next Limit reads the (lower) origin
	reads := f.reads.Load()
	d := edgeLimit(t, e, a, 43, 1)
	if f.reads.Load() != reads+1 {
		t.Fatal("stale entry did not read the origin")
	}
	if !d.Allowed || d.Remaining != 1 {
		t.Fatalf("decision %+v; want allowed with remaining 1 (43 - 41 - 1)", d)
	}
	if d := edgeLimit(t, e, a, 43, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("decision %+v; want allowed with remaining 0", d)
	}
	if d := edgeLimit(t, e, a, 43, 1); d.Allowed {
		t.Fatalf("decision %+v; want denied: the lower origin answer must not free budget", d)
	}

	// A higher origin value (another edge) raises the view at the next refresh.
	f.mu.Lock()
	f.readRewrite = nil
	f.mu.Unlock()
	other(2, 100)
	if st := e.Status(context.Background(), a); st.CurrentRegional != 143 {
		t.Fatalf("status %+v; want current 143 (142 at the origin + 1 pending)", st)
	}
}

// ---- 4. freshness ----

// TestEdgeFreshnessExpiry: within --freshness a warm tuple is decided without the origin;
// once it passes, the next request of a tuple whose lease has ended (leases live as long as
// the freshness here) reads the origin once and is fresh again.
func TestEdgeFreshnessExpiry(t *testing.T) {
	for _, fresh := range []time.Duration{time.Second, 250 * time.Millisecond} {
		t.Run(fresh.String(), func(t *testing.T) {
			r := newEdgeRigOrigin(t, t0, 1, engine.Config{LeaseTTL: fresh}, edge.Config{Freshness: fresh})
			e, f := r.edges[0], r.fakes[0]
			a := tup("a", 60_000)
			ms := fresh.Milliseconds()
			edgeLimit(t, e, a, 1000, 1)
			if n := f.reads.Load(); n != 1 {
				t.Fatalf("cold request made %d reads, want 1", n)
			}
			for _, at := range []int64{1, ms / 2, ms - 1} {
				r.clock.Set(t0 + at)
				edgeLimit(t, e, a, 1000, 1)
				edgeLimit(t, e, a, 1000, 0)
				if n := f.reads.Load(); n != 1 {
					t.Fatalf("at +%dms (fresh until +%dms): %d reads, want 1", at, ms, n)
				}
			}
			r.clock.Set(t0 + ms)
			edgeLimit(t, e, a, 1000, 1)
			if n := f.reads.Load(); n != 2 {
				t.Fatalf("at +%dms (stale): %d reads, want 2", ms, n)
			}
			edgeLimit(t, e, a, 1000, 1)
			r.clock.Set(t0 + 2*ms - 1)
			edgeLimit(t, e, a, 1000, 0)
			if n := f.reads.Load(); n != 2 {
				t.Fatalf("after the refresh: %d reads, want 2", n)
			}
			r.clock.Set(t0 + 2*ms)
			edgeLimit(t, e, a, 1000, 0) // a peek on a stale tuple reads too
			if n := f.reads.Load(); n != 3 {
				t.Fatalf("second expiry: %d reads, want 3", n)
			}
			if s := e.Stats(); s.OriginReads != 3 {
				t.Fatalf("Stats.OriginReads %d, want 3", s.OriginReads)
			}
		})
	}
}

// TestEdgeReplayExtendsFreshness: an acknowledged replay refreshes the entry like a read.
func TestEdgeReplayExtendsFreshness(t *testing.T) {
	r := newEdgeRig(t, t0, 1, edge.Config{Freshness: time.Second})
	e, f := r.edges[0], r.fakes[0]
	a := tup("a", 60_000)
	edgeLimit(t, e, a, 1000, 1)
	r.clock.Set(t0 + 900)
	edgeLimit(t, e, a, 1000, 1)
	flushAll(t, e) // acknowledged at +900: fresh until +1900
	r.clock.Set(t0 + 1500)
	edgeLimit(t, e, a, 1000, 1)
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("%d reads, want 1: the replay at +900 keeps the entry fresh", n)
	}
}

// ---- 5. strict mode ----

// TestEdgeStrictModeAcrossRollover: after a denial every request reads the origin before
// deciding, also after the window rolls over, until the end of the next window; then the
// tuple is decided locally again.
func TestEdgeStrictModeAcrossRollover(t *testing.T) {
	const w = 1000
	// A long freshness: every read below is due to strict mode alone.
	r := newEdgeRig(t, t0+100, 1, edge.Config{Freshness: time.Minute})
	e, f := r.edges[0], r.fakes[0]
	a := tup("a", w)
	key := engine.AppendKey(nil, a)
	s := t0 / w

	for i := 0; i < 3; i++ {
		if d := edgeLimit(t, e, a, 3, 1); !d.Allowed {
			t.Fatalf("request %d denied: %+v", i, d)
		}
	}
	if d := edgeLimit(t, e, a, 3, 1); d.Allowed {
		t.Fatalf("4th request allowed: %+v", d)
	}
	if n := f.reads.Load(); n != 1 {
		t.Fatalf("%d reads before strict mode, want 1 (the cold read)", n)
	}
	if st := e.Stats(); st.Strict != 1 {
		t.Fatalf("Stats.Strict %d, want 1", st.Strict)
	}

	reads := f.reads.Load()
	expectRead := func(at int64, want bool) engine.Decision {
		t.Helper()
		r.clock.Set(at)
		d := edgeLimit(t, e, a, 3, 0)
		got := f.reads.Load() - reads
		reads = f.reads.Load()
		if want && got != 1 || !want && got != 0 {
			t.Fatalf("peek at +%dms: %d origin reads, want read=%v", at-t0, got, want)
		}
		return d
	}
	expectRead(t0+200, true)
	expectRead(t0+999, true)

	// Next window: another edge counted 1 in cell s+1. The strict read sees it before the
	// decision: used = 1 + 3*(500/1000) = 2.5, so the remaining budget is 0, not 1.
	r.clock.Set(t0 + 1500)
	r.origin.ServeReplay(engine.ReplayBatch{Node: "edge-x/boot", ID: 1,
		Items: []engine.ReplayItem{{Key: key, Seq: s + 1, Cost: 1}}})
	if d := expectRead(t0+1500, true); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("peek at +1500: %+v; want allowed with remaining 0 (the origin's 1 read first)", d)
	}
	r.clock.Set(t0 + 1500)
	if st := e.Status(context.Background(), a); st.StrictMs != 500 || st.CurrentRegional != 1 || st.PreviousRegional != 3 {
		t.Fatalf("status at +1500: %+v; want strict 500 ms, current 1, previous 3", st)
	}
	reads = f.reads.Load()
	expectRead(t0+1999, true)

	// End of the next window: strict mode is over.
	expectRead(t0+2000, false)
	expectRead(t0+2500, false)
	r.clock.Set(t0 + 2600)
	if d := edgeLimit(t, e, a, 3, 1); !d.Allowed || f.reads.Load() != reads {
		t.Fatalf("request at +2600: %+v, %d reads; want allowed locally", d, f.reads.Load()-reads)
	}
	if st := e.Status(context.Background(), a); st.StrictMs != 0 {
		t.Fatalf("status at +2600: strict %d ms, want 0", st.StrictMs)
	}
}

// ---- 6. shared reads ----

// TestEdgeSharedReads: 50 concurrent requests on a cold tuple, then on a stale one, wait
// for one origin read each time.
func TestEdgeSharedReads(t *testing.T) {
	const n = 50
	// Leases of half a second: the stale round has none (a leased tuple is not read).
	r := newEdgeRigOrigin(t, t0, 1, engine.Config{LeaseTTL: 500 * time.Millisecond}, edge.Config{Freshness: time.Second})
	e, f := r.edges[0], r.fakes[0]
	a := tup("a", 60_000)

	round := func(name string, wantReads int64) {
		t.Helper()
		release := f.holdReads()
		defer release()
		var started, returned, allowed atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started.Add(1)
				d, err := e.Limit(context.Background(), a, 10_000, 1)
				if err != nil {
					t.Errorf("Limit: %v", err)
				} else if d.Allowed {
					allowed.Add(1)
				}
				returned.Add(1)
			}()
		}
		select {
		case <-f.readEntered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no origin read", name)
		}
		for started.Load() < n {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(30 * time.Millisecond) // let every request reach the shared read
		if got, ret := f.reads.Load(), returned.Load(); got != wantReads || ret != 0 {
			t.Fatalf("%s: while the read is held: %d reads (want %d), %d requests answered (want 0)", name, got, wantReads, ret)
		}
		release()
		wg.Wait()
		if got := f.reads.Load(); got != wantReads {
			t.Fatalf("%s: %d origin reads for %d concurrent requests, want %d", name, got, n, wantReads)
		}
		if allowed.Load() != n {
			t.Fatalf("%s: %d of %d allowed", name, allowed.Load(), n)
		}
	}
	round("cold", 1)
	r.clock.Advance(1000)
	round("stale", 2)
	if st := e.Status(context.Background(), a); st.CurrentRegional != 2*n {
		t.Fatalf("status %+v; want current %d", st, 2*n)
	}
}

// ---- 7. rendezvous placement ----

func placementEdge(t *testing.T, ids ...string) *edge.Edge {
	t.Helper()
	o, _ := newEngine(t0)
	cfg := edge.Config{OriginIDs: ids, NodeRun: "placement/1", DegradedShare: 1, MaxMemoryBytes: 1 << 20}
	for range ids {
		cfg.Origins = append(cfg.Origins, engine.LocalOrigin{Engine: o, Node: "placement/1"})
	}
	e, err := edge.New(engine.NewManualClock(t0), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestEdgeRendezvousPlacement: keys spread evenly over the origins; adding one moves keys
// only to it; every Edge with the same IDs, in any order, places keys alike.
func TestEdgeRendezvousPlacement(t *testing.T) {
	const keys = 6000
	ids := []string{"10.0.0.1:6380", "10.0.0.2:6380", "10.0.0.3:6380"}
	three := placementEdge(t, ids...)
	again := placementEdge(t, ids[2], ids[0], ids[1])
	four := placementEdge(t, append(slices.Clone(ids), "10.0.0.4:6380")...)

	per3, per4 := map[string]int{}, map[string]int{}
	moved := 0
	for i := 0; i < keys; i++ {
		tp := tup(fmt.Sprintf("user:%d", i), []int64{1000, 60_000, 3_600_000}[i%3])
		o3 := three.OriginFor(tp)
		if o := again.OriginFor(tp); o != o3 {
			t.Fatalf("key %d: %s on one edge, %s on another with the same origins", i, o3, o)
		}
		o4 := four.OriginFor(tp)
		per3[o3]++
		per4[o4]++
		if o4 != o3 {
			if o4 != "10.0.0.4:6380" {
				t.Fatalf("key %d moved from %s to %s when 10.0.0.4 was added", i, o3, o4)
			}
			moved++
		}
	}
	for _, id := range ids {
		if n := per3[id]; n < keys/3*85/100 || n > keys/3*115/100 {
			t.Errorf("3 origins: %s owns %d of %d keys: %v", id, n, keys, per3)
		}
	}
	for id, n := range per4 {
		if n < keys/4*85/100 || n > keys/4*115/100 {
			t.Errorf("4 origins: %s owns %d of %d keys: %v", id, n, keys, per4)
		}
	}
	if len(per3) != 3 || len(per4) != 4 {
		t.Fatalf("placement %v / %v", per3, per4)
	}
	t.Logf("3 origins: %v; 4 origins: %v; moved %d", per3, per4, moved)
	if moved != per4["10.0.0.4:6380"] {
		t.Fatalf("%d keys moved, but the new origin owns %d", moved, per4["10.0.0.4:6380"])
	}
}

// ---- 8. backoff ----

// TestEdgeBackoffWhileOriginDown: with the origin failing, 1000 requests (1 ms apart, the
// replay flusher ticking every 5 ms) all get answers from local memory, at
// limit*DegradedShare, with one origin call per backoff period; when the origin returns
// the edge reads it, becomes fresh, and delivers everything it accepted.
func TestEdgeBackoffWhileOriginDown(t *testing.T) {
	r := newEdgeRig(t, t0, 1, edge.Config{Freshness: time.Second, DegradedShare: 0.5})
	e, f := r.edges[0], r.fakes[0]
	a := tup("a", 60_000)
	f.down.Store(true)

	allowed := 0
	for i := 0; i < 1000; i++ {
		d := edgeLimit(t, e, a, 100, 1)
		if d.Limit != 100 {
			t.Fatalf("request %d: reply limit %d, want the requested 100", i, d.Limit)
		}
		if d.Allowed {
			allowed++
		}
		if i%5 == 4 {
			e.FlushOnce()
		}
		r.clock.Advance(1)
	}
	if allowed != 50 {
		t.Fatalf("%d allowed while the origin is down, want 50 (limit 100 x degraded share 0.5)", allowed)
	}
	times := f.callTimes()
	if len(times) < 3 || len(times) > 12 {
		t.Fatalf("%d origin calls over 1000 requests in 1 s (at %v), want a handful", len(times), times)
	}
	for i := 1; i < len(times); i++ {
		if times[i]-times[i-1] < 10 {
			t.Fatalf("origin calls at %v: two within 10 ms (the shortest backoff)", times)
		}
	}
	if st := e.Status(context.Background(), a); st.Source != "local" || st.Fresh || st.CurrentRegional != 50 {
		t.Fatalf("status while down: %+v; want local, not fresh, current 50", st)
	}
	if s := e.Stats(); s.Origins[0].Reachable || s.ReplayPending != 1 {
		t.Fatalf("stats while down: %+v", s)
	}

	// Recovery.
	f.down.Store(false)
	r.clock.Advance(1001) // past the longest backoff (1 s)
	reads := f.reads.Load()
	if d := edgeLimit(t, e, a, 100, 1); !d.Allowed {
		t.Fatalf("first request after recovery denied: %+v", d)
	}
	allowed++
	if f.reads.Load() != reads+1 {
		t.Fatal("the edge did not read the origin when it came back")
	}
	if st := e.Status(context.Background(), a); st.Source != "origin" || !st.Fresh {
		t.Fatalf("status after recovery: %+v; want origin, fresh", st)
	}
	flushAll(t, e)
	if got := originCount(r.origin, a); got != uint64(allowed) {
		t.Fatalf("origin has %d after recovery, want %d accepted", got, allowed)
	}
	if s := e.Stats(); !s.Origins[0].Reachable || s.ReplayPending != 0 {
		t.Fatalf("stats after recovery: %+v", s)
	}
	// Fresh and reachable again: the full limit applies.
	for allowed < 100 {
		if d := edgeLimit(t, e, a, 100, 1); !d.Allowed {
			t.Fatalf("request denied at %d of 100 after recovery: %+v", allowed, d)
		}
		allowed++
	}
	if d := edgeLimit(t, e, a, 100, 1); d.Allowed {
		t.Fatalf("101st request allowed: %+v", d)
	}
}

// TestEdgeBackoffProbeIsShared: while the origin is down and its backoff has passed,
// concurrent requests on many tuples make one probe, not one call each.
func TestEdgeBackoffProbeIsShared(t *testing.T) {
	r := newEdgeRig(t, t0, 1, edge.Config{})
	e, f := r.edges[0], r.fakes[0]
	f.down.Store(true)
	edgeLimit(t, e, tup("first", 60_000), 100, 1) // fails: backoff starts
	r.clock.Advance(15)                           // past the first backoff
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.Limit(context.Background(), tup(fmt.Sprintf("k%d", i), 60_000), 100, 1); err != nil {
				t.Errorf("Limit: %v", err)
			}
		}()
	}
	wg.Wait()
	if n := f.total(); n != 2 {
		t.Fatalf("%d origin calls, want 2 (the first failure and one probe)", n)
	}
}

// TestEdgeDegradedRetryAfter: while the origin is unreachable the edge enforces
// limit*DegradedShare; a request with cost <= limit denied by that reduced limit is not
// "never allowed" (retry_after_ms -1 is reserved for cost > limit, SPEC section 2).
func TestEdgeDegradedRetryAfter(t *testing.T) {
	r := newEdgeRig(t, t0, 1, edge.Config{DegradedShare: 0.5})
	e, f := r.edges[0], r.fakes[0]
	f.down.Store(true)
	for _, c := range []struct{ limit, cost uint64 }{{1, 1}, {10, 6}} {
		d := edgeLimit(t, e, tup(fmt.Sprintf("deg-%d", c.limit), 60_000), c.limit, c.cost)
		if d.Allowed {
			t.Fatalf("limit %d cost %d allowed at degraded share 0.5", c.limit, c.cost)
		}
		if d.RetryAfterMs < 0 {
			t.Errorf("limit %d cost %d (cost <= limit) denied while degraded with retry_after_ms %d; -1 means never", c.limit, c.cost, d.RetryAfterMs)
		}
	}
}

// ---- 9. exactness across edges ----

// TestEdgeExactAcrossEdgesRotating: requests rotate over 3 edges one at a time, with a
// replay flush after each (as a 5 ms flusher would between requests this far apart):
// exactly the limit is admitted, and the origin has it all.
func TestEdgeExactAcrossEdgesRotating(t *testing.T) {
	for _, c := range []struct{ limit, requests int }{{100, 300}, {5, 30}, {7, 40}} {
		t.Run(fmt.Sprint(c.limit), func(t *testing.T) {
			r := newEdgeRig(t, t0, 3, edge.Config{})
			a := tup("a", 60_000)
			admitted := 0
			for i := 0; i < c.requests; i++ {
				e := r.edges[i%3]
				if d := edgeLimit(t, e, a, uint64(c.limit), 1); d.Allowed {
					admitted++
				}
				r.clock.Advance(5)
				for _, e := range r.edges {
					e.FlushOnce()
				}
			}
			if admitted != c.limit {
				t.Fatalf("admitted %d of %d over 3 edges, want exactly %d", admitted, c.requests, c.limit)
			}
			if got := originCount(r.origin, a); got != uint64(c.limit) {
				t.Fatalf("origin has %d, want %d", got, c.limit)
			}
		})
	}
}

// TestEdgeSmallLimitExactWithBursts: limit 5 over 3 edges that all know the tuple (they
// read it recently). A burst of requests on edge 1 (its replays flushed between
// requests), then on edge 2, then on edge 3. SPEC section 5: small limits are exact
// across edges.
func TestEdgeSmallLimitExactWithBursts(t *testing.T) {
	r := newEdgeRig(t, t0, 3, edge.Config{})
	a := tup("login:alice", 15*60_000)
	for range 2 { // twice, so that every edge has heard that there are 3
		for _, e := range r.edges {
			e.Status(context.Background(), a)
		}
	}
	admitted := 0
	for i, e := range r.edges {
		for j := 0; j < 6; j++ {
			if d := edgeLimit(t, e, a, 5, 1); d.Allowed {
				admitted++
				t.Logf("edge %d request %d allowed", i+1, j+1)
			}
			r.clock.Advance(10)
			for _, e := range r.edges {
				e.FlushOnce()
			}
		}
	}
	if admitted != 5 {
		t.Fatalf("admitted %d, want exactly 5 (origin has %d)", admitted, originCount(r.origin, a))
	}
}

// TestEdgeFloodAcrossEdges: 3 edges, 4 goroutines each, flushers running every 5 ms, 3000
// requests on one tuple with limit 1000: the admitted count is within [1.00, 1.05] x
// limit, and after the final flush the origin holds exactly what was admitted. "warm":
// every edge has already talked to the origin (it reports 3 edges); "cold": the flood is
// the first traffic of all three edges.
// TestEdgeFloodAcrossEdges floods one key from 3 edges in simulated time: 3x the limit
// at about 40 requests per ms in all (what three edges on loopback take), requests
// interleaved over the edges, and each edge flushing its replays every 5 ms as Run does.
// Every edge has heard of the others (heartbeats) before the flood. The admitted total
// stays within [1.00, 1.05] x limit, cold key or warm.
func TestEdgeFloodAcrossEdges(t *testing.T) {
	const limit, requests, perMs = 1000, 3000, 40
	for _, warm := range []bool{false, true} {
		t.Run(map[bool]string{true: "warm", false: "cold"}[warm], func(t *testing.T) {
			r := newEdgeRig(t, t0, 3, edge.Config{ReplayInterval: 5 * time.Millisecond})
			a := tup("flood", 60_000)
			for _, e := range r.edges {
				e.Status(context.Background(), tup("hello", 60_000)) // each edge is heard: the origin counts 3
			}
			if warm {
				for _, e := range r.edges {
					e.Status(context.Background(), a)
				}
			}
			var admitted int
			for i := 0; i < requests; i++ {
				if i > 0 && i%perMs == 0 {
					r.clock.Advance(1)
					if ms := r.clock.NowMs() - t0; ms%5 == 0 {
						for _, e := range r.edges {
							e.FlushOnce()
						}
					}
				}
				if edgeLimit(t, r.edges[i%3], a, limit, 1).Allowed {
					admitted++
				}
			}
			for _, e := range r.edges {
				flushAll(t, e)
			}
			if admitted < limit || admitted > limit*105/100 {
				t.Errorf("admitted %d of %d with limit %d over 3 edges (handed off %d, %d, %d), want within [%d, %d]",
					admitted, requests, limit, handed(r.edges[0]), handed(r.edges[1]), handed(r.edges[2]), limit, limit*105/100)
			}
			t.Logf("admitted %d (handed off %d, %d, %d)", admitted, handed(r.edges[0]), handed(r.edges[1]), handed(r.edges[2]))
			if oc := originCount(r.origin, a); oc != uint64(admitted) {
				t.Errorf("origin has %d after the final flush, %d admitted", oc, admitted)
			}
		})
	}
}

// ---- 10. nothing lost to the cache ----

// TestEdgeTinyCacheLosesNothing: with a local cache far too small for the keys, accepted
// cost still reaches the origin: the replay set holds what the cache drops.
func TestEdgeTinyCacheLosesNothing(t *testing.T) {
	const keys, perKey = 400, 4
	r := newEdgeRig(t, t0, 1, edge.Config{MaxMemoryBytes: 2000})
	e := r.edges[0]
	accepted := 0
	for i := 0; i < keys*perKey; i++ {
		if d := edgeLimit(t, e, tup(fmt.Sprintf("k%d", i%keys), 60_000), 1000, 1); d.Allowed {
			accepted++
		}
		if i%97 == 96 {
			e.FlushOnce()
		}
	}
	flushAll(t, e)
	sum := uint64(0)
	for k := 0; k < keys; k++ {
		sum += originCount(r.origin, tup(fmt.Sprintf("k%d", k), 60_000))
	}
	if accepted != keys*perKey || sum != uint64(accepted) {
		t.Fatalf("accepted %d of %d; the origin has %d", accepted, keys*perKey, sum)
	}
	if s := e.Stats(); s.ReplayPending != 0 || s.OriginReads < keys {
		t.Fatalf("stats %+v", s)
	}
}

// TestEdgeTinyCacheConcurrentLosesNothing: the same with concurrent requests and the
// flusher running: the origin ends up with exactly the accepted cost.
func TestEdgeTinyCacheConcurrentLosesNothing(t *testing.T) {
	const keys, goroutines, perG = 32, 16, 400
	r := newEdgeRig(t, t0, 1, edge.Config{MaxMemoryBytes: 2000, ReplayInterval: time.Millisecond, OriginTimeout: time.Second})
	e := r.edges[0]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	var accepted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perG; i++ {
				d, err := e.Limit(context.Background(), tup(fmt.Sprintf("k%d", (g*7+i)%keys), 60_000), 1_000_000, 1)
				if err != nil {
					t.Errorf("Limit: %v", err)
					return
				}
				if d.Allowed {
					accepted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	<-done
	sum := uint64(0)
	for k := 0; k < keys; k++ {
		sum += originCount(r.origin, tup(fmt.Sprintf("k%d", k), 60_000))
	}
	if sum != uint64(accepted.Load()) {
		t.Fatalf("accepted %d; the origin has %d after the final flush (stats %+v)", accepted.Load(), sum, e.Stats())
	}
}

// ---- 11. status ----

// TestEdgeStatusSource: Status reads the origin first (source "origin", fresh) and falls
// back to local memory when it cannot (source "local").
func TestEdgeStatusSource(t *testing.T) {
	r := newEdgeRig(t, t0+100, 1, edge.Config{Freshness: time.Second})
	e, f := r.edges[0], r.fakes[0]
	a := tup("a", 60_000)
	key := engine.AppendKey(nil, a)

	st := e.Status(context.Background(), a)
	if st.Source != "origin" || !st.Fresh || st.CurrentRegional != 0 || st.Sequence != (t0+100)/60_000 || st.ElapsedMs != 100 {
		t.Fatalf("cold status: %+v", st)
	}
	edgeLimit(t, e, a, 100, 3)
	r.origin.ServeReplay(engine.ReplayBatch{Node: "edge-x/boot", ID: 1,
		Items: []engine.ReplayItem{{Key: key, Seq: st.Sequence, Cost: 10}}})
	reads := f.reads.Load()
	st = e.Status(context.Background(), a)
	if f.reads.Load() != reads+1 {
		t.Fatal("Status on a fresh tuple did not read the origin")
	}
	if st.Source != "origin" || !st.Fresh || st.CurrentRegional != 13 || st.Used() != 13 || st.Peek(100).Remaining != 87 {
		t.Fatalf("status: %+v; want origin, fresh, current 13 (10 there + 3 pending here)", st)
	}

	f.down.Store(true)
	r.clock.Advance(1000) // past the freshness
	st = e.Status(context.Background(), a)
	if st.Source != "local" || st.Fresh || st.CurrentRegional != 13 {
		t.Fatalf("status with the origin down: %+v; want local, not fresh, current 13", st)
	}
	// In backoff: answered locally without calling the origin.
	calls := f.total()
	if st := e.Status(context.Background(), a); st.Source != "local" || f.total() != calls {
		t.Fatalf("status in backoff: %+v, %d origin calls", st, f.total()-calls)
	}
	// A cold tuple with the origin down.
	if st := e.Status(context.Background(), tup("cold", 60_000)); st.Source != "local" || st.Fresh || st.CurrentRegional != 0 {
		t.Fatalf("cold status with the origin down: %+v", st)
	}

	f.down.Store(false)
	r.clock.Advance(1000)
	if st := e.Status(context.Background(), a); st.Source != "origin" || !st.Fresh || st.CurrentRegional != 13 {
		t.Fatalf("status after recovery: %+v", st)
	}
}

// TestTryLimitStaleInstant: an edge's wait-free path refuses an instant that precedes a
// window its entry already holds (Limit then decides at the clock's reading), and decides
// a current one from local memory.
func TestTryLimitStaleInstant(t *testing.T) {
	r := newEdgeRig(t, t0, 1, edge.Config{Freshness: time.Hour})
	e := r.edges[0]
	tp := engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 1000}
	edgeLimit(t, e, tp, 100, 1)
	if _, ok, err := e.TryLimit(tp, 100, 1, r.clock.NowMs()); !ok || err != nil {
		t.Fatalf("warm, current instant: ok %v, %v", ok, err)
	}
	r.clock.Advance(2000)
	edgeLimit(t, e, tp, 100, 1) // a cell two windows later
	if _, ok, _ := e.TryLimit(tp, 100, 1, r.clock.NowMs()-2000); ok {
		t.Fatal("TryLimit decided at an instant before a window the entry holds")
	}
}

// TestEdgeUndelivered: the cost an edge could not deliver counts its units and cells,
// those of an unanswered batch included, and nothing once the origin took it.
func TestEdgeUndelivered(t *testing.T) {
	r := newEdgeRig(t, t0, 1, edge.Config{Freshness: time.Second})
	e, f := r.edges[0], r.fakes[0]
	f.down.Store(true)
	a, b := tup("a", 60_000), tup("b", 1000)
	for range 5 {
		edgeLimit(t, e, a, 100, 1)
	}
	edgeLimit(t, e, b, 100, 7)
	r.clock.Advance(1000) // b's next window: a second cell of b
	edgeLimit(t, e, b, 100, 3)
	e.FlushOnce() // a batch is sent and fails: its cost is in flight, not delivered
	if units, cells := e.Undelivered(); units != 5+7+3 || cells != 3 {
		t.Fatalf("undelivered while down: %d units in %d cells, want 15 in 3", units, cells)
	}
	f.down.Store(false)
	r.clock.Advance(1001) // past the longest backoff
	flushAll(t, e)
	if units, cells := e.Undelivered(); units != 0 || cells != 0 {
		t.Fatalf("undelivered after the origin came back: %d units in %d cells", units, cells)
	}
}

// TestEdgeFailedHandOffNotStrict: a request the limit allows, refused only because its
// hand-off failed (the origin did not answer), leaves the tuple out of strict mode: a
// brief hiccup of the origin must not send every tuple it touched to the origin until
// the end of the next window. A denial by the limit still enters strict mode.
func TestEdgeFailedHandOffNotStrict(t *testing.T) {
	r := newEdgeRig(t, t0, 1, edge.Config{})
	e, f := r.edges[0], r.fakes[0]
	a := tup("hiccup", 60_000)
	if d := edgeLimit(t, e, a, 1000, 1); !d.Allowed {
		t.Fatalf("first request denied: %+v", d)
	}
	f.down.Store(true)
	// Beyond any lease a cold tuple gets: the request needs a hand-off, which fails.
	d := edgeLimit(t, e, a, 1000, 500)
	if d.Allowed {
		t.Fatalf("a request whose hand-off failed was admitted: %+v", d)
	}
	if st := e.Status(context.Background(), a); st.StrictMs != 0 {
		t.Fatalf("strict for %d ms after a refusal by a failed hand-off, want 0", st.StrictMs)
	}
	// The limit itself denies: strict mode, as before.
	if d := edgeLimit(t, e, a, 1000, 1000); d.Allowed {
		t.Fatalf("cost 1000 on top of 1 admitted under limit 1000: %+v", d)
	}
	if st := e.Status(context.Background(), a); st.StrictMs == 0 {
		t.Fatal("no strict mode after a denial by the limit")
	}
}
