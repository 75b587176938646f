package engine_test

import (
	"fmt"
	"maps"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// This file holds property tests of the G-Counter of SPEC section 6: several region
// origins (Engines on one ManualClock) exchange components through Publishable,
// Components and MergeComponents, with deliveries reordered, duplicated, delayed, dropped,
// and origins restarted. A model kept beside the engines says what each one must hold.

// gcID names one component: a cell (tuple key, sequence) and a region.
type gcID struct {
	key    string
	seq    int64
	region string
}

// gcCellID names one cell as seen by one engine (index into the rig's engines).
type gcCellID struct {
	eng int
	key string
	seq int64
}

// gcView is every live component an engine holds, read with Components.
type gcView map[gcID]uint64

func viewOf(t testing.TB, e *engine.Engine) gcView {
	t.Helper()
	v := gcView{}
	for _, c := range e.Components() {
		id := gcID{string(c.Key), c.Seq, c.Region}
		if _, dup := v[id]; dup {
			t.Fatalf("%s: Components returned %v twice", e.Region(), id)
		}
		if c.Count == 0 {
			t.Fatalf("%s: Components returned a zero row %v", e.Region(), id)
		}
		v[id] = c.Count
	}
	return v
}

// regional returns the engine's own row of a cell; imported the sum of the others.
func (v gcView) regional(own, key string, seq int64) uint64 { return v[gcID{key, seq, own}] }

func (v gcView) imported(own, key string, seq int64) uint64 {
	var n uint64
	for id, c := range v {
		if id.key == key && id.seq == seq && id.region != own {
			n += c
		}
	}
	return n
}

func cloneComps(cs []engine.Component) []engine.Component {
	out := make([]engine.Component, len(cs))
	for i, c := range cs {
		out[i] = c
		out[i].Key = slices.Clone(c.Key)
	}
	return out
}

// gcMsg is a batch of components on its way to engine to.
type gcMsg struct {
	to    int
	comps []engine.Component
}

// gcRig is a set of region origins, the network between them and the model.
type gcRig struct {
	t      testing.TB
	rng    *rand.Rand
	clock  *engine.ManualClock
	engs   []*engine.Engine
	tuples []engine.Tuple
	window map[string]int64 // tuple key -> window

	inflight []gcMsg
	lossy    bool // restarts may lose state (empty restarts)

	truth    map[gcCellID]uint64 // accepted cost per region engine and cell (exact mode)
	minLimit map[gcCellID]uint64 // model of the lowest limit a cell saw since (re)start
	pub      map[gcCellID]uint64 // model of the count last marked published
	last     []gcView            // the previous view of each engine (monotonicity)
	// held is, per engine and component, the highest count the engine has held since it
	// last (re)started: at quiescence every engine must hold at least the highest of them.
	held []map[gcID]uint64
	// everCounted is the cost each region accepted per cell over all its restarts: no
	// region may end up above it (nothing is counted twice).
	everCounted map[gcID]uint64
}

var gcRegions = []string{"r0", "r1", "r2"}

func newGCRig(t testing.TB, seed uint64, lossy bool) *gcRig {
	r := &gcRig{
		t: t, rng: rand.New(rand.NewPCG(seed, 0x9c0)),
		clock: engine.NewManualClock(t0 + 500), lossy: lossy,
		window: map[string]int64{}, truth: map[gcCellID]uint64{}, minLimit: map[gcCellID]uint64{},
		pub: map[gcCellID]uint64{}, everCounted: map[gcID]uint64{},
	}
	for _, k := range []string{"a", "b", "c"} {
		for _, w := range []int64{1000, 60_000} {
			tp := tup(k, w)
			r.tuples = append(r.tuples, tp)
			r.window[string(engine.AppendKey(nil, tp))] = w
		}
	}
	for _, name := range gcRegions {
		r.engs = append(r.engs, engine.New(r.clock, engine.Config{Region: name, MaxMemoryBytes: 1 << 30}))
		r.last = append(r.last, gcView{})
		r.held = append(r.held, map[gcID]uint64{})
	}
	return r
}

func (r *gcRig) live(key string, seq int64) bool {
	w := r.window[key]
	return seq >= r.clock.NowMs()/w-1
}

// check verifies the view of engine only (every engine when only < 0) against its previous
// one: no live component ever decreases or disappears (an empty restart resets the
// engine's baseline first).
func (r *gcRig) check(step string, only int) {
	r.t.Helper()
	for i, e := range r.engs {
		if only >= 0 && i != only {
			continue
		}
		v := viewOf(r.t, e)
		for id, old := range r.last[i] {
			if !r.live(id.key, id.seq) {
				continue
			}
			if v[id] < old {
				r.t.Fatalf("after %s: %s's component %q seq %d of %s went from %d to %d",
					step, e.Region(), id.key[8:], id.seq, id.region, old, v[id])
			}
		}
		for id, c := range v {
			r.held[i][id] = max(r.held[i][id], c)
		}
		r.last[i] = v
	}
}

// count makes one request on engine i.
func (r *gcRig) count(i int) {
	tp := r.tuples[r.rng.IntN(len(r.tuples))]
	limits := []uint64{20, 100, 1000, 1 << 40}
	limit := limits[r.rng.IntN(len(limits))]
	cost := uint64(r.rng.IntN(5)) // 0 is a peek
	d := mustLimit(r.t, r.engs[i], tp, limit, cost)
	if d.Allowed && cost > 0 {
		id := gcCellID{i, string(engine.AppendKey(nil, tp)), r.clock.NowMs() / tp.WindowMs}
		r.truth[id] += cost
		r.everCounted[gcID{id.key, id.seq, r.engs[i].Region()}] += cost
		if m := r.minLimit[id]; m == 0 || limit < m {
			r.minLimit[id] = limit
		}
	}
}

// publish runs Publishable on engine i, checks it against the model and sends the batch
// to every peer (sometimes dropping a copy, as a failed connection does).
func (r *gcRig) publish(i int, threshold float64) {
	r.t.Helper()
	e := r.engs[i]
	own := e.Region()
	before := viewOf(r.t, e)
	// The model: a live cell whose regional count grew since last published, and that has
	// a foreign count, or no known limit, or reached threshold of its lowest limit.
	want := map[gcID]uint64{}
	for id, c := range before {
		if id.region != own {
			continue
		}
		cid := gcCellID{i, id.key, id.seq}
		if c <= r.pub[cid] {
			continue
		}
		ml := r.minLimit[cid]
		if before.imported(own, id.key, id.seq) > 0 || ml == 0 || float64(c) >= threshold*float64(ml) {
			want[id] = c
		}
	}
	out := e.Publishable(threshold, 1<<20)
	got := map[gcID]uint64{}
	for _, c := range out {
		if c.Region != own {
			r.t.Fatalf("%s: Publishable returned a component of region %q (%v): foreign counts are never republished", own, c.Region, c)
		}
		id := gcID{string(c.Key), c.Seq, c.Region}
		if _, dup := got[id]; dup {
			r.t.Fatalf("%s: Publishable returned %v twice", own, id)
		}
		got[id] = c.Count
	}
	if !maps.Equal(got, want) {
		r.t.Fatalf("%s: Publishable(%v) = %v, want %v (view %v, pub %v, minLimit %v)", own, threshold,
			fmtComps(got), fmtComps(want), fmtComps(before), r.pub, r.minLimit)
	}
	for id, c := range got {
		r.pub[gcCellID{i, id.key, id.seq}] = c
	}
	if again := e.Publishable(threshold, 1<<20); len(again) != 0 {
		r.t.Fatalf("%s: a second Publishable with no growth returned %d components", own, len(again))
	}
	if len(out) == 0 {
		return
	}
	for j := range r.engs {
		if j != i && r.rng.IntN(20) != 0 {
			r.inflight = append(r.inflight, gcMsg{to: j, comps: cloneComps(out)})
		}
	}
}

// antiEntropy sends everything engine i holds to engine j.
func (r *gcRig) antiEntropy(i, j int) {
	if comps := r.engs[i].Components(); len(comps) > 0 {
		r.inflight = append(r.inflight, gcMsg{to: j, comps: cloneComps(comps)})
	}
}

// merge delivers comps to engine i and keeps the model's publication marks: a peer's copy
// of our own row that raises the regional count marks it published.
func (r *gcRig) merge(i int, comps []engine.Component) int {
	e := r.engs[i]
	before := viewOf(r.t, e)
	changed := e.MergeComponents(comps)
	after := viewOf(r.t, e)
	own := e.Region()
	n := 0
	for id, c := range after {
		if c != before[id] {
			n++
			if id.region == own {
				cid := gcCellID{i, id.key, id.seq}
				r.pub[cid] = max(r.pub[cid], c)
			}
		}
	}
	// changed counts rows that raised a count; one batch may raise the same component
	// twice, so it is at least the number of components that changed.
	if changed < n {
		r.t.Fatalf("%s: MergeComponents reported %d changes, %d components changed", own, changed, n)
	}
	// Merge never lowers, and every row of a live cell is now at least its count.
	for id, c := range before {
		if after[id] < c {
			r.t.Fatalf("%s: merge lowered %v from %d to %d", own, id, c, after[id])
		}
	}
	for _, c := range comps {
		id := gcID{string(c.Key), c.Seq, c.Region}
		if r.live(id.key, id.seq) && c.Seq <= r.clock.NowMs()/r.window[id.key] && after[id] < c.Count {
			r.t.Fatalf("%s: after merging %v=%d the component is %d", own, id, c.Count, after[id])
		}
	}
	return changed
}

// deliver hands one in-flight batch, chosen at random (so batches overtake each other), to
// its engine; it may stay in flight to be delivered again, or be merged twice at once.
func (r *gcRig) deliver() int {
	if len(r.inflight) == 0 {
		return -2
	}
	k := r.rng.IntN(len(r.inflight))
	m := r.inflight[k]
	if r.rng.IntN(5) != 0 {
		r.inflight = slices.Delete(r.inflight, k, k+1)
	}
	r.merge(m.to, m.comps)
	if r.rng.IntN(5) == 0 {
		before := viewOf(r.t, r.engs[m.to])
		if n := r.merge(m.to, m.comps); n != 0 {
			r.t.Fatalf("%s: merging the same batch twice changed %d components", r.engs[m.to].Region(), n)
		}
		if after := viewOf(r.t, r.engs[m.to]); !maps.Equal(before, after) {
			r.t.Fatalf("%s: merging the same batch twice changed the view:\n%v\n%v", r.engs[m.to].Region(),
				fmtComps(before), fmtComps(after))
		}
	}
	return m.to
}

// restart replaces engine i: from its snapshot, or (lossy) empty and restored from what
// its peers hold. The model forgets the cells' limits; everything held counts as published.
func (r *gcRig) restart(i int) {
	old := r.engs[i]
	e := engine.New(r.clock, engine.Config{Region: old.Region(), MaxMemoryBytes: 1 << 30})
	for id := range r.minLimit {
		if id.eng == i {
			delete(r.minLimit, id)
		}
	}
	if !r.lossy {
		snap := old.Snapshot()
		if _, _, err := e.Restore(snap); err != nil {
			r.t.Fatal(err)
		}
		r.engs[i] = e
		if v := viewOf(r.t, e); !maps.Equal(v, r.last[i]) {
			r.t.Fatalf("%s: restored from its snapshot holds\n%v\nwant\n%v", e.Region(), fmtComps(v), fmtComps(r.last[i]))
		}
	} else {
		r.engs[i] = e
		r.last[i] = gcView{} // data loss: a new baseline
		r.held[i] = map[gcID]uint64{}
		for j, p := range r.engs {
			if j != i {
				e.MergeComponents(cloneComps(p.Components()))
			}
		}
		// What the peers held of our row is back.
		for j, p := range r.engs {
			if j == i {
				continue
			}
			pv := viewOf(r.t, p)
			ev := viewOf(r.t, e)
			for id, c := range pv {
				if ev[id] < c {
					r.t.Fatalf("%s restored from peers: %v is %d, %s holds %d", e.Region(), id, ev[id], p.Region(), c)
				}
			}
		}
	}
	for id := range r.pub {
		if id.eng == i {
			delete(r.pub, id)
		}
	}
	for id, c := range viewOf(r.t, e) {
		if id.region == e.Region() {
			r.pub[gcCellID{i, id.key, id.seq}] = c
		}
	}
}

// step takes one random action and returns its name and the engine whose components it
// may have changed (-1: every engine, -2: none).
func (r *gcRig) step() (string, int) {
	n := len(r.engs)
	switch p := r.rng.IntN(100); {
	case p < 40:
		i := r.rng.IntN(n)
		r.count(i)
		return "count", i
	case p < 55:
		thresholds := []float64{0, 0.2, 0.5, 1}
		r.publish(r.rng.IntN(n), thresholds[r.rng.IntN(len(thresholds))])
		return "publish", -2
	case p < 59:
		i, j := r.rng.IntN(n), r.rng.IntN(n-1)
		if j >= i {
			j++
		}
		r.antiEntropy(i, j)
		return "anti-entropy", -2
	case p < 92:
		return "deliver", r.deliver()
	case p < 97:
		r.clock.Advance(int64(r.rng.IntN(300)))
		return "advance", -1
	default:
		i := r.rng.IntN(n)
		r.restart(i)
		return "restart", i
	}
}

// quiesce delivers everything in flight (in random order), then runs a full anti-entropy
// round between every pair, delivered in random order too.
func (r *gcRig) quiesce() {
	for len(r.inflight) > 0 {
		k := r.rng.IntN(len(r.inflight))
		m := r.inflight[k]
		r.inflight = slices.Delete(r.inflight, k, k+1)
		r.merge(m.to, m.comps)
	}
	r.check("flush", -1)
	for i := range r.engs {
		for j := range r.engs {
			if i != j {
				r.antiEntropy(i, j)
			}
		}
	}
	r.rng.Shuffle(len(r.inflight), func(a, b int) { r.inflight[a], r.inflight[b] = r.inflight[b], r.inflight[a] })
	for _, m := range r.inflight {
		r.merge(m.to, m.comps)
	}
	r.inflight = nil
	r.check("anti-entropy round", -1)
}

// converged checks that every engine reads the same global count of every live cell, made
// of each region's own count once: regional is the engine's own, imported the others'.
func (r *gcRig) converged() {
	r.t.Helper()
	now := r.clock.NowMs()
	views := make([]gcView, len(r.engs))
	for i, e := range r.engs {
		views[i] = viewOf(r.t, e)
	}
	for i := 1; i < len(views); i++ {
		if !maps.Equal(views[0], views[i]) {
			r.t.Fatalf("not converged: %s holds\n%v\n%s holds\n%v", r.engs[0].Region(), fmtComps(views[0]),
				r.engs[i].Region(), fmtComps(views[i]))
		}
	}
	for _, tp := range r.tuples {
		key := string(engine.AppendKey(nil, tp))
		seq := now / tp.WindowMs
		var firstUsed uint64
		for i, e := range r.engs {
			st := e.Status(tp)
			for _, c := range []struct {
				seq                int64
				regional, imported uint64
			}{{seq, st.CurrentRegional, st.CurrentImported}, {seq - 1, st.PreviousRegional, st.PreviousImported}} {
				var sum uint64
				for j, o := range r.engs {
					own := r.engs[j].Status(tp)
					rj := own.CurrentRegional
					if c.seq == seq-1 {
						rj = own.PreviousRegional
					}
					if rj != views[0][gcID{key, c.seq, o.Region()}] {
						r.t.Fatalf("%s: regional of %q seq %d is %d, its row elsewhere is %d", o.Region(), tp.Key, c.seq, rj,
							views[0][gcID{key, c.seq, o.Region()}])
					}
					if j != i {
						sum += rj
					}
					id := gcID{key, c.seq, o.Region()}
					if want := r.truth[gcCellID{j, key, c.seq}]; !r.lossy && rj != want {
						r.t.Fatalf("%s: regional of %q seq %d is %d, accepted %d", o.Region(), tp.Key, c.seq, rj, want)
					}
					// At least what any origin held of it since its last restart; at most
					// what the region accepted over all its lives (nothing counted twice).
					for k := range r.engs {
						if lb := r.held[k][id]; rj < lb {
							r.t.Fatalf("%s: regional of %q seq %d is %d, below the %d %s held", o.Region(), tp.Key, c.seq, rj, lb,
								r.engs[k].Region())
						}
					}
					if ub := r.everCounted[id]; rj > ub {
						r.t.Fatalf("%s: regional of %q seq %d is %d, above the %d it ever accepted", o.Region(), tp.Key, c.seq, rj, ub)
					}
				}
				if c.imported != sum {
					r.t.Fatalf("%s: imported of %q seq %d is %d, the other regions' counts sum to %d",
						e.Region(), tp.Key, c.seq, c.imported, sum)
				}
			}
			if i == 0 {
				firstUsed = st.Used()
			} else if st.Used() != firstUsed {
				r.t.Fatalf("%s: used of %q is %d, %s reads %d", e.Region(), tp.Key, st.Used(), r.engs[0].Region(), firstUsed)
			}
		}
	}
}

func fmtComps(m map[gcID]uint64) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b gcID) int {
		if a.key != b.key {
			if a.key < b.key {
				return -1
			}
			return 1
		}
		if a.seq != b.seq {
			return int(a.seq - b.seq)
		}
		if a.region < b.region {
			return -1
		}
		if a.region > b.region {
			return 1
		}
		return 0
	})
	s := "["
	for _, k := range keys {
		s += fmt.Sprintf(" %q/%d/%s=%d", k.key[8:], k.seq, k.region, m[k])
	}
	return s + " ]"
}

func gcSeeds() int {
	if raceEnabled || testing.Short() {
		return 20
	}
	return 100
}

// TestGCounterRandomInterleavings: origins count, publish, send anti-entropy, restart from
// snapshots, while batches are reordered, duplicated and dropped. No component ever
// decreases, a batch merged twice changes nothing, Publishable returns exactly the own
// cells that are due, and after everything is delivered every origin holds the same
// components and reads regional = its accepted cost, imported = the others'.
func TestGCounterRandomInterleavings(t *testing.T) {
	for seed := range uint64(gcSeeds()) {
		r := newGCRig(t, seed, false)
		for s := 0; s < 300; s++ {
			what, changed := r.step()
			if changed > -2 {
				r.check(fmt.Sprintf("seed %d step %d (%s)", seed, s, what), changed)
			}
		}
		r.quiesce()
		r.converged()
	}
}

// TestGCounterEmptyRestarts: as above, but a restarted origin comes back empty and gets its
// cells from its peers' Components. Counts it had not published are lost (the spec's lower
// bound); everything else still converges, with each region's count counted once.
func TestGCounterEmptyRestarts(t *testing.T) {
	for seed := range uint64(gcSeeds()) {
		r := newGCRig(t, 1000+seed, true)
		for s := 0; s < 300; s++ {
			what, changed := r.step()
			if changed > -2 {
				r.check(fmt.Sprintf("seed %d step %d (%s)", seed, s, what), changed)
			}
		}
		r.quiesce()
		r.converged()
	}
}

// randomBatches makes n batches of rows for live cells of a few tuples, from every region
// including recv's own, with random (not monotonic) counts.
func randomBatches(rng *rand.Rand, now int64, n int) [][]engine.Component {
	var out [][]engine.Component
	regions := append(slices.Clone(gcRegions), "r3")
	for range n {
		var b []engine.Component
		for range 1 + rng.IntN(6) {
			w := []int64{1000, 60_000}[rng.IntN(2)]
			tp := tup([]string{"a", "b"}[rng.IntN(2)], w)
			b = append(b, engine.Component{
				Key:    engine.AppendKey(nil, tp),
				Seq:    now/w - int64(rng.IntN(2)),
				Region: regions[rng.IntN(len(regions))],
				Count:  uint64(rng.IntN(50)),
			})
		}
		out = append(out, b)
	}
	return out
}

// TestGCounterMergeOrderFree: the same batches, merged one by one in any order, grouped
// into fewer larger merges (associativity), and with repeats, give the same components:
// the max of every row, the receiver's own row included (raised, never lowered).
func TestGCounterMergeOrderFree(t *testing.T) {
	iters := 400
	if raceEnabled {
		iters = 60
	}
	for seed := range uint64(iters) {
		rng := rand.New(rand.NewPCG(seed, 7))
		clock := engine.NewManualClock(t0 + 1500)
		batches := randomBatches(rng, clock.NowMs(), 1+rng.IntN(8))
		// The receiver is r0 and has counted some itself.
		setup := func() *engine.Engine {
			e := engine.New(clock, engine.Config{Region: "r0"})
			for _, k := range []string{"a", "b"} {
				mustLimit(t, e, tup(k, 60_000), 1<<40, 20)
			}
			return e
		}
		want := viewOf(t, setup())
		for _, b := range batches {
			for _, c := range b {
				id := gcID{string(c.Key), c.Seq, c.Region}
				if c.Count > 0 {
					want[id] = max(want[id], c.Count)
				}
			}
		}
		var first gcView
		for perm := range 6 {
			e := setup()
			order := rng.Perm(len(batches))
			for k := 0; k < len(order); {
				// Group a random run of consecutive batches into one merge.
				g := 1 + rng.IntN(3)
				var group []engine.Component
				for _, i := range order[k:min(k+g, len(order))] {
					group = append(group, cloneComps(batches[i])...)
				}
				k += g
				e.MergeComponents(group)
				if rng.IntN(3) == 0 { // a duplicate delivery
					e.MergeComponents(group)
				}
			}
			// Replay one random batch again at the end: an old, delayed delivery.
			before := viewOf(t, e)
			if n := e.MergeComponents(cloneComps(batches[rng.IntN(len(batches))])); n != 0 {
				t.Fatalf("seed %d: a batch delivered again changed %d components", seed, n)
			}
			got := viewOf(t, e)
			if !maps.Equal(before, got) {
				t.Fatalf("seed %d: a batch delivered again changed the view", seed)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("seed %d perm %d: got\n%v\nwant\n%v", seed, perm, fmtComps(got), fmtComps(want))
			}
			if perm == 0 {
				first = got
			} else if !maps.Equal(first, got) {
				t.Fatalf("seed %d: orders disagree", seed)
			}
		}
	}
}

// TestGCounterThreeRegionsNoDoubleCount: three regions each count 30 of one cell; after
// publication and anti-entropy in both directions (every row reaching every region twice,
// directly and through a third), each reads regional 30, imported 60, used 90.
func TestGCounterThreeRegionsNoDoubleCount(t *testing.T) {
	clock := engine.NewManualClock(t0)
	tp := tup("k", 60_000)
	var engs []*engine.Engine
	for _, name := range gcRegions {
		e := engine.New(clock, engine.Config{Region: name})
		for range 30 {
			mustLimit(t, e, tp, 100, 1)
		}
		engs = append(engs, e)
	}
	for i, e := range engs {
		out := e.Publishable(0.2, 100) // 30 >= 0.2*100: due
		if len(out) != 1 || out[0].Count != 30 || out[0].Region != gcRegions[i] {
			t.Fatalf("%s: Publishable = %+v, want one row of 30", e.Region(), out)
		}
		for j, p := range engs {
			if j != i {
				p.MergeComponents(cloneComps(out))
			}
		}
	}
	for round := range 3 {
		for i, e := range engs {
			for j, p := range engs {
				if i != j {
					p.MergeComponents(cloneComps(e.Components()))
				}
			}
		}
		for _, e := range engs {
			st := e.Status(tp)
			if st.CurrentRegional != 30 || st.CurrentImported != 60 || st.Used() != 90 {
				t.Fatalf("round %d: %s reads regional %d imported %d used %d, want 30 60 90", round, e.Region(),
					st.CurrentRegional, st.CurrentImported, st.Used())
			}
			if len(e.Components()) != 3 {
				t.Fatalf("%s holds %d components, want 3", e.Region(), len(e.Components()))
			}
		}
	}
	// The limit is shared: 100 - 90 left everywhere.
	for _, e := range engs {
		if d := mustLimit(t, e, tp, 100, 0); d.Remaining != 10 {
			t.Fatalf("%s: remaining %d, want 10", e.Region(), d.Remaining)
		}
	}
}

// TestGCounterOlderPublishNeverLowers: a batch published earlier and delivered after a
// newer one changes nothing; the same holds for the receiver's own row.
func TestGCounterOlderPublishNeverLowers(t *testing.T) {
	clock := engine.NewManualClock(t0)
	a := engine.New(clock, engine.Config{Region: "a"})
	b := engine.New(clock, engine.Config{Region: "b"})
	tp := tup("k", 60_000)
	mustLimit(t, a, tp, 1<<40, 5)
	old := a.Publishable(0, 100)
	mustLimit(t, a, tp, 1<<40, 7)
	newer := a.Publishable(0, 100)
	if len(old) != 1 || len(newer) != 1 || old[0].Count != 5 || newer[0].Count != 12 {
		t.Fatalf("publications %+v then %+v, want 5 then 12", old, newer)
	}
	if n := b.MergeComponents(newer); n != 1 {
		t.Fatalf("newer merge changed %d", n)
	}
	if n := b.MergeComponents(old); n != 0 {
		t.Fatalf("older merge after the newer changed %d", n)
	}
	if st := b.Status(tp); st.CurrentImported != 12 || st.CurrentRegional != 0 {
		t.Fatalf("b reads regional %d imported %d, want 0 12", st.CurrentRegional, st.CurrentImported)
	}
	// a's own row, as b holds it (12) and an older copy (5): a is at 12 and stays there.
	if n := a.MergeComponents(old); n != 0 {
		t.Fatalf("own older row changed %d", n)
	}
	if st := a.Status(tp); st.CurrentRegional != 12 || st.CurrentImported != 0 {
		t.Fatalf("a reads regional %d imported %d, want 12 0", st.CurrentRegional, st.CurrentImported)
	}
}

// TestGCounterOwnRowOnlyRaises: a peer's copy of our own row lowers nothing, raises the
// regional count (not imported) when it is higher, and is not published back as growth.
func TestGCounterOwnRowOnlyRaises(t *testing.T) {
	clock := engine.NewManualClock(t0)
	a := engine.New(clock, engine.Config{Region: "a"})
	tp := tup("k", 60_000)
	key := engine.AppendKey(nil, tp)
	seq := t0 / 60_000
	mustLimit(t, a, tp, 1000, 300)
	if out := a.Publishable(0.2, 100); len(out) != 1 || out[0].Count != 300 {
		t.Fatalf("Publishable = %+v", out)
	}
	if n := a.MergeComponents([]engine.Component{{Key: key, Seq: seq, Region: "a", Count: 100}}); n != 0 {
		t.Fatalf("a lower own row changed %d", n)
	}
	if st := a.Status(tp); st.CurrentRegional != 300 || st.CurrentImported != 0 {
		t.Fatalf("after a lower own row: regional %d imported %d", st.CurrentRegional, st.CurrentImported)
	}
	if n := a.MergeComponents([]engine.Component{{Key: key, Seq: seq, Region: "a", Count: 450}}); n != 1 {
		t.Fatalf("a higher own row changed %d", n)
	}
	if st := a.Status(tp); st.CurrentRegional != 450 || st.CurrentImported != 0 {
		t.Fatalf("after a higher own row: regional %d imported %d, want 450 0", st.CurrentRegional, st.CurrentImported)
	}
	if out := a.Publishable(0.2, 100); len(out) != 0 {
		t.Fatalf("the raised row was published back: %+v", out)
	}
	// Growth after it is published as usual, from the raised count.
	mustLimit(t, a, tp, 1000, 1)
	if out := a.Publishable(0.2, 100); len(out) != 1 || out[0].Count != 451 {
		t.Fatalf("Publishable after growth = %+v, want 451", out)
	}
	// Components hold one row of a, never a foreign copy of it.
	if cs := a.Components(); len(cs) != 1 || cs[0].Region != "a" || cs[0].Count != 451 {
		t.Fatalf("Components = %+v", cs)
	}
}

// TestGCounterPublishThreshold: a cell is not published below threshold x the lowest limit
// seen, is published on reaching it, then at every growth; a lower limit seen later lowers
// the threshold; once a foreign count exists every growth is published.
func TestGCounterPublishThreshold(t *testing.T) {
	clock := engine.NewManualClock(t0)
	e := engine.New(clock, engine.Config{Region: "a"})
	tp := tup("k", 60_000)
	pub := func() []engine.Component { return e.Publishable(0.2, 100) }

	for range 19 {
		mustLimit(t, e, tp, 100, 1)
		if out := pub(); len(out) != 0 {
			t.Fatalf("published at %d of limit 100: %+v", e.Status(tp).CurrentRegional, out)
		}
	}
	mustLimit(t, e, tp, 100, 1) // 20 = 0.2 * 100
	if out := pub(); len(out) != 1 || out[0].Count != 20 {
		t.Fatalf("at 20 of 100: %+v", out)
	}
	if out := pub(); len(out) != 0 {
		t.Fatalf("published again without growth: %+v", out)
	}
	mustLimit(t, e, tp, 100, 1)
	if out := pub(); len(out) != 1 || out[0].Count != 21 {
		t.Fatalf("growth past the threshold not published: %+v", out)
	}

	// A lower limit seen later lowers the threshold.
	tp2 := tup("k2", 60_000)
	mustLimit(t, e, tp2, 1000, 10)
	if out := pub(); len(out) != 0 {
		t.Fatalf("10 of 1000 published: %+v", out)
	}
	mustLimit(t, e, tp2, 50, 1) // 11 >= 0.2 * 50
	if out := pub(); len(out) != 1 || out[0].Count != 11 {
		t.Fatalf("11 with lowest limit 50: %+v", out)
	}

	// A foreign count makes every growth due, below threshold too.
	tp3 := tup("k3", 60_000)
	mustLimit(t, e, tp3, 1000, 1)
	if out := pub(); len(out) != 0 {
		t.Fatalf("1 of 1000 published: %+v", out)
	}
	e.MergeComponents([]engine.Component{{Key: engine.AppendKey(nil, tp3), Seq: t0 / 60_000, Region: "b", Count: 1}})
	if out := pub(); len(out) != 1 || out[0].Count != 1 {
		t.Fatalf("with a foreign count, 1 of 1000 not published: %+v", out)
	}
	for want := uint64(2); want < 6; want++ {
		mustLimit(t, e, tp3, 1000, 1)
		if out := pub(); len(out) != 1 || out[0].Count != want {
			t.Fatalf("with a foreign count, growth to %d: %+v", want, out)
		}
	}
	// Only own rows, never b's.
	for _, c := range e.Components() {
		if c.Region == "b" && c.Count != 1 {
			t.Fatalf("b's row changed: %+v", c)
		}
	}
}

// TestGCounterPublishThresholdExact: for many limits L, a cell at ceil(0.2 L') - 1 is not
// due and at ceil(0.2 L') it is (exact arithmetic, no float slip either way), where L' is
// the limit as the store keeps it: L below 2^26, else L rounded down to its 26 highest bits
// (a threshold lowered by less than 2^-25 of it, never raised).
func TestGCounterPublishThresholdExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	limits := []uint64{1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 49, 50, 51, 99, 100, 101, 999, 1000, 1001,
		1 << 20, 1<<20 + 1, 5 << 40, 5<<40 + 3, engine.MaxLimit - 1, engine.MaxLimit}
	for range 300 {
		limits = append(limits, 1+rng.Uint64N(engine.MaxLimit))
	}
	clock := engine.NewManualClock(t0)
	for i, L := range limits {
		e := engine.New(clock, engine.Config{Region: "a"})
		tp := tup(fmt.Sprint("k", i), 60_000)
		kept := L
		if n := bits.Len64(L); n > 26 {
			kept = L >> (n - 26) << (n - 26)
		}
		due := (kept + 4) / 5 // ceil(L'/5)
		if due > 1 {
			mustLimit(t, e, tp, L, due-1)
			if out := e.Publishable(0.2, 10); len(out) != 0 {
				t.Fatalf("L=%d: published at %d < 0.2L", L, due-1)
			}
			mustLimit(t, e, tp, L, 1)
		} else {
			mustLimit(t, e, tp, L, due)
		}
		if out := e.Publishable(0.2, 10); len(out) != 1 || out[0].Count != due {
			t.Fatalf("L=%d: at %d = ceil(0.2L) Publishable = %+v", L, due, out)
		}
	}
}

// TestGCounterRestartFromPeers: an origin that lost everything gets back, from a peer's
// Components, its own published rows (as regional) and the other regions' rows (as
// imported), and does not publish them back as growth.
func TestGCounterRestartFromPeers(t *testing.T) {
	clock := engine.NewManualClock(t0)
	tp := tup("k", 60_000)
	a := engine.New(clock, engine.Config{Region: "a"})
	b := engine.New(clock, engine.Config{Region: "b"})
	c := engine.New(clock, engine.Config{Region: "c"})
	mustLimit(t, a, tp, 100, 40)
	mustLimit(t, b, tp, 100, 7)
	mustLimit(t, c, tp, 100, 25)
	for _, src := range []*engine.Engine{a, c} {
		b.MergeComponents(cloneComps(src.Publishable(0.2, 10)))
	}
	mustLimit(t, a, tp, 100, 5) // 45, not published yet
	a = engine.New(clock, engine.Config{Region: "a"})
	a.MergeComponents(cloneComps(b.Components()))
	st := a.Status(tp)
	if st.CurrentRegional != 40 || st.CurrentImported != 32 {
		t.Fatalf("a restored from b: regional %d imported %d, want 40 (published) and 32 (7+25)",
			st.CurrentRegional, st.CurrentImported)
	}
	if out := a.Publishable(0, 10); len(out) != 0 {
		t.Fatalf("a republished what it got back: %+v", out)
	}
	// Restored from a snapshot of the restored state: the same, foreign rows one by one.
	a2 := engine.New(clock, engine.Config{Region: "a"})
	if _, _, err := a2.Restore(a.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(viewOf(t, a2), viewOf(t, a)) {
		t.Fatalf("snapshot round trip: %v vs %v", fmtComps(viewOf(t, a2)), fmtComps(viewOf(t, a)))
	}
}

// TestGCounterLateRowKeepsCurrentCell: a tuple counted two windows ago (cell s-2, dead but
// not swept yet) and now (cell s) gets a delayed component for s-1. The late row must not
// push out the current cell: s-1 and s are both live, s-2 is the one to drop.
func TestGCounterLateRowKeepsCurrentCell(t *testing.T) {
	const w = 60_000
	clock := engine.NewManualClock(t0 + 10)
	e := engine.New(clock, engine.Config{Region: "a"})
	tp := tup("k", w)
	key := engine.AppendKey(nil, tp)
	mustLimit(t, e, tp, 1000, 4) // cell s-2
	clock.Advance(2 * w)
	mustLimit(t, e, tp, 1000, 7) // cell s; s-2 is dead and no sweep ran yet
	s := clock.NowMs() / w
	e.MergeComponents([]engine.Component{{Key: key, Seq: s - 1, Region: "b", Count: 5}})
	st := e.Status(tp)
	if st.CurrentRegional != 7 || st.PreviousImported != 5 {
		t.Fatalf("after b's late row for s-1: current regional %d (want 7), previous imported %d (want 5)",
			st.CurrentRegional, st.PreviousImported)
	}
}

// TestGCounterLateReplayKeepsCurrentCell: the same through an edge's replay: cost of s-1
// replayed after the boundary, while the origin holds s-2 (unswept) and s.
func TestGCounterLateReplayKeepsCurrentCell(t *testing.T) {
	const w = 60_000
	clock := engine.NewManualClock(t0 + 10)
	e := engine.New(clock, engine.Config{Region: "a"})
	tp := tup("k", w)
	key := engine.AppendKey(nil, tp)
	mustLimit(t, e, tp, 1000, 4) // cell s-2
	clock.Advance(2 * w)
	mustLimit(t, e, tp, 1000, 7) // cell s
	s := clock.NowMs() / w
	e.ServeReplay(engine.ReplayBatch{Node: "edge1/x", ID: 1, Items: []engine.ReplayItem{{Key: key, Seq: s - 1, Cost: 3, Limit: 1000}}})
	st := e.Status(tp)
	if st.CurrentRegional != 7 || st.PreviousRegional != 3 {
		t.Fatalf("after a late replay for s-1: current regional %d (want 7), previous regional %d (want 3)",
			st.CurrentRegional, st.PreviousRegional)
	}
}

// TestGCounterFutureRowKeepsPreviousCell: a peer whose clock is a little ahead publishes
// its row for s+1 while this origin is still in s and holds s-1 and s. Both held cells are
// live (s-1 weighs in every decision until s ends): the early row must not push out s-1.
func TestGCounterFutureRowKeepsPreviousCell(t *testing.T) {
	const w = 60_000
	clock := engine.NewManualClock(t0 + w - 1000) // in s-1
	e := engine.New(clock, engine.Config{Region: "a"})
	tp := tup("k", w)
	key := engine.AppendKey(nil, tp)
	mustLimit(t, e, tp, 100, 60) // cell s-1
	clock.Advance(1000 + w - 50) // 50 ms before the end of s
	mustLimit(t, e, tp, 100, 1)  // cell s
	s := clock.NowMs() / w
	before := e.Status(tp)
	if before.PreviousRegional != 60 || before.CurrentRegional != 1 {
		t.Fatalf("setup: %+v", before)
	}
	e.MergeComponents([]engine.Component{{Key: key, Seq: s + 1, Region: "b", Count: 2}})
	after := e.Status(tp)
	if after.PreviousRegional != 60 || after.CurrentRegional != 1 {
		t.Fatalf("b's row for s+1 pushed out a live cell: previous regional %d (want 60), current %d (want 1)",
			after.PreviousRegional, after.CurrentRegional)
	}
	// 60*(50/60000) + 1 = 1.05 used: 98 more pass, not 99.
	if d := mustLimit(t, e, tp, 100, 99); d.Allowed {
		t.Fatalf("99 more allowed with 1.05 used of 100")
	}
}

// TestGCounterRestoreOwnRegionRecord: a record that lists this region among its foreign
// components (a peer's copy saved by hand) raises the regional count, not imported.
func TestGCounterRestoreOwnRegionRecord(t *testing.T) {
	clock := engine.NewManualClock(t0)
	e := engine.New(clock, engine.Config{Region: "a"})
	tp := tup("k", 60_000)
	mustLimit(t, e, tp, 1000, 3)
	rec := engine.CellRecord{Key: string(engine.AppendKey(nil, tp)), Seq: t0 / 60_000, Regional: 2, Imported: 13,
		Foreign: []engine.RegionCount{{Region: "a", Count: 9}, {Region: "b", Count: 4}}}
	if _, _, err := e.Restore([]engine.CellRecord{rec}); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(tp); st.CurrentRegional != 9 || st.CurrentImported != 4 {
		t.Fatalf("regional %d imported %d, want 9 4", st.CurrentRegional, st.CurrentImported)
	}
}

// TestGCounterPublishableLimit: Publishable returns "at most limit" components, as its
// doc says. It checks the limit only between shards, so the two due cells of one tuple
// (same shard: seq-1 and seq) come out together for a limit of 1. Minor: the Replicator
// splits whatever it gets into batches of MaxBatch.
func TestGCounterPublishableLimit(t *testing.T) {
	const w = 60_000
	clock := engine.NewManualClock(t0 + w - 10)
	e := engine.New(clock, engine.Config{Region: "a"})
	tp := tup("k", w)
	mustLimit(t, e, tp, 1000, 500) // seq-1
	clock.Advance(20)
	mustLimit(t, e, tp, 1000, 300) // seq
	got := 0
	for range 3 {
		out := e.Publishable(0.2, 1)
		if len(out) > 1 {
			t.Fatalf("Publishable(0.2, 1) returned %d components: %+v", len(out), out)
		}
		got += len(out)
	}
	if got != 2 {
		t.Fatalf("%d components published in 3 calls, want 2", got)
	}
}

// TestMergeComponentsRespectsMaxMemory: a full store refuses other regions' rows for
// tuples it does not hold (they would be new cells), keeps merging rows of tuples it holds,
// and still restores its own row (a lower bound after data loss).
func TestMergeComponentsRespectsMaxMemory(t *testing.T) {
	clock := engine.NewManualClock(1_700_000_000_000)
	e := engine.New(clock, engine.Config{Region: "a", MaxMemoryBytes: 200})
	held := engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("held"), WindowMs: 60_000}
	if _, err := e.Limit(held, 100, 1); err != nil {
		t.Fatal(err)
	}
	seq := clock.NowMs() / 60_000
	key := func(k string) []byte {
		return engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte(k), WindowMs: 60_000})
	}
	changed := e.MergeComponents([]engine.Component{
		{Key: key("held"), Seq: seq, Region: "b", Count: 5},
		{Key: key("new-foreign"), Seq: seq, Region: "b", Count: 7},
		{Key: key("new-own"), Seq: seq, Region: "a", Count: 9},
	})
	if changed != 2 {
		t.Fatalf("changed %d rows, want 2 (the held tuple's foreign row and our own row)", changed)
	}
	if st := e.Status(held); st.CurrentImported != 5 || st.CurrentRegional != 1 {
		t.Fatalf("held tuple: %+v", st)
	}
	own := engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("new-own"), WindowMs: 60_000}
	if st := e.Status(own); st.CurrentRegional != 9 {
		t.Fatalf("own row not restored: %+v", st)
	}
	foreign := engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("new-foreign"), WindowMs: 60_000}
	if st := e.Status(foreign); st.CurrentImported != 0 {
		t.Fatalf("foreign row stored past --max-memory: %+v", st)
	}
	if e.Stats().RefusedFull != 1 {
		t.Fatalf("RefusedFull = %d, want 1", e.Stats().RefusedFull)
	}
}
