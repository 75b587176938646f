package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// lazyRig is an engine saved part by part (Tuples) and a second engine that adopted its
// seed, to load those parts lazily. Loading part held blocks until release is closed.
type lazyRig struct {
	clock  *engine.ManualClock
	old    *engine.Engine
	byPart [engine.Parts][]engine.CellRecord
	cells  int
	resets []engine.ResetRecord // the old engine's, restored before the load (RestoreResets)

	mu       sync.Mutex
	restored map[string]int // how many times each key's records were handed to Restore
	hashed   int            // the loads given a key's hash (keyed restores)
}

func newLazyRig(t *testing.T, tuples int) *lazyRig {
	t.Helper()
	r := &lazyRig{clock: engine.NewManualClock(t0)}
	r.old = engine.New(r.clock, engine.Config{Standalone: true})
	for i := range tuples {
		mustLimit(t, r.old, tup(fmt.Sprint("k", i), 60_000), 10, 9)
	}
	r.capture(t)
	if r.cells != tuples {
		t.Fatalf("%d cells saved, want %d", r.cells, tuples)
	}
	return r
}

// capture saves the old engine's cells part by part, and its reset records.
func (r *lazyRig) capture(t *testing.T) {
	t.Helper()
	r.byPart, r.cells, r.resets = [engine.Parts][]engine.CellRecord{}, 0, nil
	prev := -1
	for tr := range r.old.Tuples {
		if tr.Part < prev {
			t.Fatalf("part %d after %d", tr.Part, prev)
		}
		prev = tr.Part
		for _, c := range tr.Cells {
			c.Key = strings.Clone(tr.Key) // lent for the call only
			r.byPart[tr.Part] = append(r.byPart[tr.Part], c)
			r.cells++
		}
	}
	for rec := range r.old.Resets {
		rec.Cancels = slices.Clone(rec.Cancels) // lent for the call only
		r.resets = append(r.resets, rec)
	}
}

// start returns a new engine with the old one's seed, loading lazily, its part held
// blocked until release is closed.
func (r *lazyRig) start(t *testing.T, held int, release <-chan struct{}) (*engine.Engine, <-chan struct{}) {
	t.Helper()
	e := engine.New(r.clock, engine.Config{Standalone: true})
	if err := e.AdoptShardSeed(r.old.ShardSeed()); err != nil {
		t.Fatal(err)
	}
	if n := e.RestoreResets(r.resets); n != len(r.resets) {
		t.Fatalf("restored %d reset records of %d", n, len(r.resets))
	}
	seed := r.old.ShardSeed()
	done := e.LoadLazily(func(from, to int, keep func(string) bool, keyHash uint64) {
		for part := from; part < to; part++ {
			if part == held {
				<-release
			}
			recs := r.byPart[part]
			if keep != nil { // as persist does: the key's hash first (a wrong one misses records)
				recs = slices.DeleteFunc(slices.Clone(recs), func(c engine.CellRecord) bool {
					return keyHash != 0 && engine.KeyHash(seed, c.Key) != keyHash || !keep(c.Key)
				})
			}
			r.mu.Lock()
			if keyHash != 0 {
				r.hashed++
			}
			if r.restored == nil {
				r.restored = map[string]int{}
			}
			for _, c := range recs {
				r.restored[c.Key]++
			}
			r.mu.Unlock()
			if _, _, err := e.Restore(recs); err != nil {
				t.Error(err)
			}
		}
	})
	return e, done
}

// TestLoadLazilyDecidesFromTheSnapshot: while the background load is stuck on part 0, a
// decision on a tuple of another part loads that part first: it sees the snapshot's 9
// of 10, never an empty count.
func TestLoadLazilyDecidesFromTheSnapshot(t *testing.T) {
	r := newLazyRig(t, 2000)
	release := make(chan struct{})
	e, done := r.start(t, 0, release)
	if !e.Loading() || !e.Stats().Loading {
		t.Fatalf("not loading")
	}
	checked := 0
	for i := range 2000 {
		tp := tup(fmt.Sprint("k", i), 60_000)
		if _, ok := r.partOf(tp); !ok {
			continue // in part 0, held
		}
		if d := mustLimit(t, e, tp, 10, 1); !d.Allowed || d.Remaining != 0 {
			t.Fatalf("tuple %d: first decision %+v, want the 10th of 10 allowed", i, d)
		}
		if d := mustLimit(t, e, tp, 10, 1); d.Allowed {
			t.Fatalf("tuple %d: 11th of 10 allowed", i)
		}
		if checked++; checked == 50 {
			break
		}
	}
	select {
	case <-done:
		t.Fatalf("loaded with part 0 held")
	default:
	}
	close(release)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the load did not end")
	}
	if e.Loading() || e.Stats().Cells != int64(r.cells) {
		t.Fatalf("after the load: loading %v, %d cells, want %d", e.Loading(), e.Stats().Cells, r.cells)
	}
}

// partOf reports whether tp's cell was saved from a part other than 0.
func (r *lazyRig) partOf(tp engine.Tuple) (int, bool) {
	key := string(engine.AppendKey(nil, tp))
	for s, recs := range r.byPart {
		for _, c := range recs {
			if c.Key == key {
				return s, s != 0
			}
		}
	}
	return -1, false
}

// TestLoadLazilyPassesWait: a pass over the store during the load (a save's Tuples) waits
// for every part, so a snapshot saved then holds every cell of the old one.
func TestLoadLazilyPassesWait(t *testing.T) {
	r := newLazyRig(t, 3000)
	release := make(chan struct{})
	e, done := r.start(t, 0, release)
	counted := make(chan int)
	go func() {
		n := 0
		for range e.Records {
			n++
		}
		counted <- n
	}()
	select {
	case n := <-counted:
		t.Fatalf("a pass ended with part 0 held: %d cells", n)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if n := <-counted; n != r.cells {
		t.Fatalf("the pass saw %d cells, want %d", n, r.cells)
	}
	<-done
}

// TestAdoptShardSeedEmptyOnly: a seed is adopted only by an empty store.
func TestAdoptShardSeedEmptyOnly(t *testing.T) {
	e, _ := newEngine(t0)
	if err := e.AdoptShardSeed(42); err != nil || e.ShardSeed() != 42 {
		t.Fatalf("adopt on an empty store: %v, seed %d", err, e.ShardSeed())
	}
	mustLimit(t, e, tup("k", 60_000), 10, 1)
	if err := e.AdoptShardSeed(43); !errors.Is(err, engine.ErrNotEmpty) || e.ShardSeed() != 42 {
		t.Fatalf("adopt on a store holding a tuple: %v, seed %d", err, e.ShardSeed())
	}
}

// TestWaitLoaded: WaitLoaded returns only once every part is loaded (DBSIZE after a
// restart counts the snapshot's cells).
func TestWaitLoaded(t *testing.T) {
	r := newLazyRig(t, 1000)
	release := make(chan struct{})
	e, _ := r.start(t, 0, release)
	waited := make(chan int64)
	go func() {
		e.WaitLoaded()
		waited <- e.Stats().Cells
	}()
	select {
	case n := <-waited:
		t.Fatalf("WaitLoaded returned with part 0 held: %d cells", n)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if n := <-waited; n != int64(r.cells) {
		t.Fatalf("after WaitLoaded: %d cells, want %d", n, r.cells)
	}
}

// TestLoadLazilyResets: the reset records restored before a lazy load cancel what they
// cancelled of each part's raw cells as the part loads; a reset of a tuple whose part is
// not loaded yet waits for it, then zeroes the snapshot's count (not an empty entry that
// the part's load would fill again).
func TestLoadLazilyResets(t *testing.T) {
	const tuples, reset = 2000, 200
	r := newLazyRig(t, tuples)
	for i := range reset {
		if n, err := r.old.Reset([]engine.Tuple{tup(fmt.Sprint("k", i), 60_000)}); n != 1 || err != nil {
			t.Fatalf("reset k%d: %d, %v", i, n, err)
		}
	}
	r.capture(t) // the cells raw (9 each), and the records that cancel 9 of the first 200
	if len(r.resets) != reset || r.cells != tuples {
		t.Fatalf("saved %d reset records, %d cells", len(r.resets), r.cells)
	}
	// Hold the part of a tuple that was not reset.
	late := fmt.Sprint("k", tuples-1)
	held, _ := r.partOf(tup(late, 60_000))
	release := make(chan struct{})
	e, done := r.start(t, held, release)
	resetDone := make(chan int)
	go func() {
		n, err := e.Reset([]engine.Tuple{tup(late, 60_000)})
		if err != nil {
			t.Error(err)
		}
		resetDone <- n
	}()
	select {
	case n := <-resetDone:
		t.Fatalf("a reset of a tuple whose part is held returned: %d held usage", n)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if n := <-resetDone; n != 1 {
		t.Fatalf("the reset of %s after its part loaded found %d tuples with usage, want 1", late, n)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the load did not end")
	}
	for i := range tuples {
		k := fmt.Sprint("k", i)
		want := uint64(0) // 9 of 10 used: the 10th is allowed, nothing remains
		if i < reset || k == late {
			want = 9 // reset: counts from zero
		}
		if d := mustLimit(t, e, tup(k, 60_000), 10, 1); !d.Allowed || d.Remaining != want {
			t.Fatalf("%s after the load: %+v, want allowed with %d remaining", k, d, want)
		}
	}
}

// TestLoadLazilyKeyedAccessRestoresItsTuple: a decision on a tuple whose part is not
// loaded yet restores that tuple's records alone (not the part's other tuples); the part's
// load then skips them, so a reset of the tuple in between is not undone by the snapshot's
// count, while the part's other tuples get theirs.
func TestLoadLazilyKeyedAccessRestoresItsTuple(t *testing.T) {
	const tuples = 3000
	r := newLazyRig(t, tuples)
	part := -1 // a part beyond the background load's first batch, with two tuples or more
	for p := 16; p < engine.Parts; p++ {
		if len(r.byPart[p]) >= 2 {
			part = p
			break
		}
	}
	if part < 0 {
		t.Fatal("no part holds two tuples")
	}
	x, y := r.byPart[part][0].Key, r.byPart[part][1].Key
	tupleOf := func(key string) engine.Tuple {
		tp, err := engine.ParseKey([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	release := make(chan struct{})
	e, done := r.start(t, 0, release) // the background load stuck on part 0
	if d := mustLimit(t, e, tupleOf(x), 10, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("%q: first decision %+v, want the 10th of 10 allowed", x, d)
	}
	if got := e.Stats().Tuples; got != 1 {
		t.Fatalf("after a decision on %q: %d tuples restored, want 1 (its own; its part holds %d)", x, got, len(r.byPart[part]))
	}
	if n, err := e.Reset([]engine.Tuple{tupleOf(x)}); n != 1 || err != nil {
		t.Fatalf("reset %q: %d, %v", x, n, err)
	}
	close(release)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the load did not end")
	}
	if d := mustLimit(t, e, tupleOf(x), 10, 1); !d.Allowed || d.Remaining != 9 {
		t.Fatalf("%q, reset before its part loaded: %+v, want allowed with 9 remaining", x, d)
	}
	if d := mustLimit(t, e, tupleOf(y), 10, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("%q, of the same part: %+v, want the 10th of 10 allowed", y, d)
	}
	if got := e.Stats().Tuples; got != tuples {
		t.Fatalf("after the load: %d tuples, want %d", got, tuples)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.restored[x] != 1 || r.restored[y] != 1 {
		t.Fatalf("records restored %d times for %q, %d for %q: want once each", r.restored[x], x, r.restored[y], y)
	}
	if r.hashed == 0 {
		t.Fatal("no keyed restore was given its key's hash")
	}
}

// TestSweepSkipsShardsLoading: a sweep during a lazy load passes over the shards whose
// parts are not all loaded rather than loading them (a second loader, unpaced, beside the
// background one), and sweeps the others.
func TestSweepSkipsShardsLoading(t *testing.T) {
	r := newLazyRig(t, 1000)
	release := make(chan struct{})
	defer close(release)
	e, _ := r.start(t, 0, release) // shard 0 never fully loaded while part 0 is held
	swept := make(chan int64)
	go func() { swept <- e.Sweep() }()
	select {
	case <-swept:
	case <-time.After(30 * time.Second):
		t.Fatal("the sweep waited for a part held by the load")
	}
}

// TestLoadAheadLoadsEachPartOnce: LoadAhead's workers and the background load take the
// shards between them, every record is restored exactly once, and with time enough
// LoadAhead returns with the load over.
func TestLoadAheadLoadsEachPartOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(workers, " workers"), func(t *testing.T) {
			r := newLazyRig(t, 3000)
			e, done := r.start(t, -1, nil)
			if !e.LoadAhead(nil, workers) { // never stopped
				t.Fatal("LoadAhead returned with parts still to load")
			}
			select {
			case <-done:
			default:
				t.Fatal("LoadAhead reported the load over, its channel not closed")
			}
			if e.Loading() {
				t.Fatal("still loading")
			}
			if n := e.Stats().Cells; n != int64(r.cells) {
				t.Fatalf("%d cells loaded, want %d", n, r.cells)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			for k, n := range r.restored {
				if n != 1 {
					t.Fatalf("key %q restored %d times", k, n)
				}
			}
			if len(r.restored) != r.cells {
				t.Fatalf("%d keys restored, want %d", len(r.restored), r.cells)
			}
		})
	}
}
