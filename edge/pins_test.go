package edge

import (
	"fmt"
	"testing"
)

// pinRig is an edge whose one origin link is used directly, and n entries with distinct
// hashes but for the last two of every 100, which share one (a chain in byKey).
func pinRig(tb testing.TB, n int) (*Edge, *originLink, []*localEntry) {
	tb.Helper()
	e, _, _ := newInternalEdge(tb)
	e.cfg.MaxPinned = 1 << 30
	l := e.links[0]
	les := make([]*localEntry, n)
	for i := range les {
		h := uint64(i) * 0x9E3779B97F4A7C15
		if i%100 == 99 {
			h = les[i-1].hash
		}
		les[i] = &localEntry{hash: h, key: []byte(fmt.Sprint(i))}
	}
	return e, l, les
}

// findPinned reports whether le is in l.byKey's chain of its hash.
func findPinned(l *originLink, le *localEntry) bool {
	for p := l.byKey[le.hash]; p != nil; p = p.sameHash {
		if p == le {
			return true
		}
	}
	return false
}

// TestPinsShrinkAfterBurst: a burst pins 20,000 entries; when all but 1,000 are delivered
// the replay set is made anew at its size: its pins, and its index when the cache had let
// the entries go (else they are not in it), where every entry still pinned (chains of one
// hash included) is found, while the delivered ones are not.
func TestPinsShrinkAfterBurst(t *testing.T) {
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			e, l, les := pinRig(t, 20_000)
			for _, le := range les {
				le.cached.Store(cached)
				if err := e.pin(l, le); err != nil {
					t.Fatal(err)
				}
			}
			if !cached && l.byPeak < 19_000 {
				t.Fatalf("peak %d after pinning 20,000 entries", l.byPeak)
			}
			for _, le := range les[1000:] {
				e.unpinIfIdle(l, le)
			}
			if l.byPeak > 20_000/shrinkFactor {
				t.Errorf("the index kept its burst's peak %d with 1,000 entries pinned: not made anew", l.byPeak)
			}
			if cap(l.pins) >= 20_000/2 {
				t.Errorf("pins kept its burst's capacity %d with 1,000 entries pinned: not made anew", cap(l.pins))
			}
			if len(l.pins) != 1000 {
				t.Fatalf("%d pinned, want 1000", len(l.pins))
			}
			for i, le := range les {
				if got, want := findPinned(l, le), i < 1000 && !cached; got != want || le.pinned != (i < 1000) {
					t.Fatalf("entry %d: found %v, pinned %v, want found %v", i, got, le.pinned, want)
				}
				if i < 1000 && l.pins[le.pinIdx] != le {
					t.Fatalf("entry %d: not at its index in pins", i)
				}
			}
			for _, le := range les[:1000] {
				e.unpinIfIdle(l, le)
			}
			if len(l.byKey) != 0 || len(l.pins) != 0 {
				t.Fatalf("after every entry was delivered: %d in the index, %d pinned", len(l.byKey), len(l.pins))
			}
		})
	}
}

// BenchmarkPinUnpin: pinning and delivering 1,000 entries, on a link whose replay set
// once held 200,000 (burst) or never more than 1,000.
func BenchmarkPinUnpin(b *testing.B) {
	for _, burst := range []bool{false, true} {
		b.Run(fmt.Sprintf("burst=%v", burst), func(b *testing.B) {
			e, l, les := pinRig(b, 200_000)
			if burst {
				for _, le := range les {
					_ = e.pin(l, le)
				}
				for _, le := range les {
					e.unpinIfIdle(l, le)
				}
			}
			few := les[:1000]
			for b.Loop() {
				for _, le := range few {
					_ = e.pin(l, le)
				}
				for _, le := range few {
					e.unpinIfIdle(l, le)
				}
			}
		})
	}
}
