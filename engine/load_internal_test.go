package engine

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEnsureKeyBound: a part not loaded yet keeps at most maxKeyedBytes of the keys
// restored on their own; past it, a keyed access loads the whole part.
func TestEnsureKeyBound(t *testing.T) {
	const now = 1_704_067_200_000
	e := New(NewManualClock(now), Config{Standalone: true})
	release := make(chan struct{})
	defer close(release)
	const held = 0 // the background load stuck on its first batch
	e.LoadLazily(func(from, _ int, _ func(string) bool, _ uint64) {
		if from == held {
			<-release
		}
	})
	// Tuples of one part beyond the first batch, with keys of 1 KiB: four of them fill
	// the bound. The first part to get enough of them (a few hundred thousand keys hashed).
	pad := strings.Repeat("x", 1000)
	tupleOf := func(i int) Tuple { return Tuple{Key: fmt.Appendf(nil, "%s%d", pad, i), WindowMs: 60_000} }
	need := maxKeyedBytes/1000 + 2
	byPart := map[int][]int{}
	part := -1
	var buf []byte
	for i := 0; part < 0; i++ {
		buf = AppendKey(buf[:0], tupleOf(i))
		p := partOf(hashKey(e.store.seed, buf))
		if p < loadBatch {
			continue
		}
		if byPart[p] = append(byPart[p], i); len(byPart[p]) == need {
			part = p
		}
	}
	var keys []Tuple
	for _, i := range byPart[part] {
		keys = append(keys, tupleOf(i))
	}
	l := e.store.loader.Load()
	for i, tp := range keys {
		if _, err := e.Limit(tp, 10, 1); err != nil {
			t.Fatal(err)
		}
		l.parts[part].mu.Lock()
		loaded, kept := l.isLoaded(part), len(l.parts[part].keys)
		l.parts[part].mu.Unlock()
		if kept > maxKeyedBytes+1100 {
			t.Fatalf("after %d keys: %d bytes of keys kept, bound %d", i+1, kept, maxKeyedBytes)
		}
		if i == len(keys)-1 && !loaded {
			t.Fatalf("after %d keys of 1 KiB: part %d not loaded whole (%d bytes of keys kept)", i+1, part, kept)
		}
	}
}

// TestPacer: the background load runs an eighth of the time in the first 2 s it serves
// requests (slices of 2 ms, pauses of 14), then half of it, by the totals: a pause that
// overshoots is owed back to the load, which then runs without pausing until its time
// run catches up with its share.
func TestPacer(t *testing.T) {
	if loadSliceMs != 2 || loadShareFirst != 8 || loadShare != 2 || loadFirstMs != 2000 {
		t.Fatalf("the steps below are for slices of 2 ms and an eighth of a thread for 2 s, then half")
	}
	type step struct {
		now       int64 // the clock after a batch
		want      int64 // pause's answer
		sleptTill int64 // when the pause ended (when want > 0)
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a slice, then a pause 7 times as long", []step{{1, 0, 0}, {2, 14, 16}, {17, 0, 0}, {18, 14, 32}}},
		{"an overshoot is run back", []step{{2, 14, 30}, {31, 0, 0}, {32, 0, 0}, {34, 14, 48}, {49, 0, 0}}},
		{"a long batch, a pause 7 times as long", []step{{7, 49, 56}, {57, 0, 0}, {58, 14, 72}}},
		// Past the first 2 s: half a thread, counted from then (not owed what the first
		// share left unrun).
		{"then half", []step{{2, 14, 16}, {2000, 0, 0}, {2002, 2, 2004}, {2005, 0, 0}, {2006, 2, 2008}}},
		{"a long batch at half, a pause as long", []step{{2000, 0, 0}, {2007, 7, 2014}, {2015, 0, 0}, {2016, 2, 2018}}},
		// A slice's pause: the count begins again.
		{"a step forward of the clock", []step{{2, 14, 16}, {3_600_005, 0, 0}, {3_600_007, 2, 3_600_009}, {3_600_010, 0, 0}, {3_600_011, 2, 3_600_013}}},
		{"a step back", []step{{2, 14, 16}, {-3_600_000, 0, 0}, {-3_599_998, 2, -3_599_996}, {-3_599_995, 0, 0}}},
		// Behind its share by more than pacerBehindMs (here a clock that stepped back 1.2 s
		// at half a thread): a slice's pause, then as if begun then, not a run without
		// pauses until the clock catches up.
		{"a step back at half", []step{{2000, 0, 0}, {2002, 2, 2004}, {800, 2, 802}, {803, 0, 0}, {804, 2, 806}}},
		// The load held up past the bound (a pause longer than pacerAheadMs owed).
		{"held up", []step{{2, 14, 16}, {200, 14, 214}, {215, 0, 0}, {216, 14, 230}}},
		// A clock that stands (a test's ManualClock): a pause counts as long as asked.
		{"a clock that stands", []step{{2, 14, 2}, {2, 0, 0}, {10, 0, 0}, {17, 0, 0}, {18, 14, 18}, {18, 0, 0}, {19, 0, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPacer(0)
			if p.idle(0, 1) { // requests from 0 on
				t.Fatal("idle, with a request served")
			}
			for i, s := range tc.steps {
				if got := p.pause(s.now); got != s.want {
					t.Fatalf("step %d at %d: pause %d, want %d", i, s.now, got, s.want)
				}
				if s.want > 0 {
					p.slept(s.sleptTill)
				}
			}
		})
	}
}

// TestPacerFirstShareFromRequests: the first share's 2 s begin with the first pause taken
// for requests, not with the load (a restart loads before it listens).
func TestPacerFirstShareFromRequests(t *testing.T) {
	p := newPacer(0)
	if got := p.pause(2); got != 14 || !p.idle(2, 0) {
		t.Fatalf("pause %d at 2 ms, want 14, and idle: no request served", got)
	}
	if got := p.pause(3000); got != 14 || p.idle(3000, 5) { // an eighth still, 3 s on
		t.Fatalf("pause %d at 3000 ms, want 14 (an eighth of a thread), and not idle", got)
	}
	p.slept(3014)
	if got := p.pause(4999); got != 14 {
		t.Fatalf("pause %d at 4999 ms, want 14: an eighth until 2 s after the requests came", got)
	}
	p.slept(5013)
	if got := p.pause(5014); got != 0 {
		t.Fatalf("pause %d at 5014 ms, want 0: half a thread, counted from then", got)
	}
	if got := p.pause(5016); got != 2 {
		t.Fatalf("pause %d at 5016 ms, want 2: half a thread", got)
	}
}

// TestLoadPausesOnlyWhileServing: the background load takes an eighth of a thread in its
// first 2 s while the process serves requests (it pauses 7 times as long as it runs),
// then half (as long), and runs on without pausing while none comes (no request to give
// the thread to).
func TestLoadPausesOnlyWhileServing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		serving bool
	}{{"idle", false}, {"serving", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const start = 1_704_067_200_000
			clock := NewManualClock(start)
			e := New(clock, Config{Standalone: true})
			var paused time.Duration
			defer func(p func(time.Duration)) { loadPause = p }(loadPause)
			loadPause = func(d time.Duration) { // only the loader's goroutine pauses
				paused += d
				clock.Advance(d.Milliseconds())
			}
			var first, then int64 // batches run in the first 2 s, and after
			<-e.LoadLazily(func(from, _ int, keep func(string) bool, _ uint64) {
				if keep != nil {
					return
				}
				if clock.NowMs() < start+loadFirstMs {
					first++
				} else {
					then++
				}
				clock.Advance(1) // each batch takes a millisecond
				if tc.serving {
					e.decisions.Add(uint64(first+then), true) // a request served meanwhile
				}
			})
			ran := time.Duration(first+then) * time.Millisecond
			if !tc.serving && paused != 0 {
				t.Fatalf("no request served: the load paused %v over %v of loading", paused, ran)
			}
			want := time.Duration(first*(loadShareFirst-1)+then*(loadShare-1)) * time.Millisecond
			if tc.serving && (first < 200 || paused < want*9/10 || paused > want*11/10) {
				t.Fatalf("requests served: the load paused %v over %v of loading (%d ms in its first 2 s), want about %v", paused, ran, first, want)
			}
		})
	}
}

// TestLoadAheadStopsInTime: LoadAhead stops taking shards once stop is closed (here after
// its tenth batch), its last shard loaded whole, and leaves the rest to the background
// load.
func TestLoadAheadStopsInTime(t *testing.T) {
	clock := NewManualClock(1_704_067_200_000)
	e := New(clock, Config{Standalone: true})
	e.decisions.Add(1, true) // a process that serves: the background load pauses
	release := make(chan struct{})
	defer func(p func(time.Duration)) { loadPause = p }(loadPause)
	loadPause = func(time.Duration) { <-release } // the background load's first pause holds it
	var mu sync.Mutex
	loads := map[int]int{}
	calls := 0
	stop := make(chan struct{})
	done := e.LoadLazily(func(from, to int, _ func(string) bool, _ uint64) {
		mu.Lock()
		defer mu.Unlock()
		for p := from; p < to; p++ {
			loads[p]++
		}
		if calls++; calls == 10 {
			close(stop)
		}
		clock.Advance(1) // a batch takes a millisecond: the background load pauses after 2
	})
	if e.LoadAhead(stop, 1) {
		t.Fatal("LoadAhead reported every part loaded, stopped after 10 batches")
	}
	l := e.store.loader.Load()
	shards := 0
	for i := range shardCount {
		if l.shardLoaded(i) {
			shards++
		}
	}
	// The worker's shard (64 batches: it goes on past stop, not to leave one half taken),
	// and none after it; the background load held at its first pause, within its shard.
	if shards != 1 {
		t.Fatalf("%d shards loaded whole after LoadAhead, want the worker's 1", shards)
	}
	close(release)
	<-done
	for p := range Parts {
		if loads[p] != 1 {
			t.Fatalf("part %d loaded %d times", p, loads[p])
		}
	}
}
