package persist

import (
	"testing"
	"time"
)

// TestPacerPausesOnlyWhileServing: a compaction's pacer pauses after each slice while
// requests are served, and not after a slice over which the count of requests served stood
// still (a quiet process), nor while the logs are behind. Each slice is made to have lasted
// by moving the pacer's start back a slice.
func TestPacerPausesOnlyWhileServing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		served func(call int) uint64 // the count at the pacer's call of it
		behind bool
		want   int // pauses over 10 slices
	}{
		{"serving", func(call int) uint64 { return uint64(call) }, false, 10},
		{"quiet", func(int) uint64 { return 7 }, false, 0},
		{"quiet, then serving", func(call int) uint64 { return uint64(max(call-5, 0)) }, false, 6},
		{"serving, behind", func(call int) uint64 { return uint64(call) }, true, 0},
		{"no count", nil, false, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pauses := 0
			defer func(f func(time.Duration)) { compactPause = f }(compactPause)
			compactPause = func(time.Duration) { pauses++ }
			var served func() uint64
			if tc.served != nil {
				calls := 0
				served = func() uint64 { calls++; return tc.served(calls) }
			}
			p := newPacer(func() bool { return tc.behind }, served)
			for range 10 {
				p.start = time.Now().Add(-compactSlice)
				for range 256 {
					p.step()
				}
			}
			if pauses != tc.want {
				t.Fatalf("%d pauses over 10 slices, want %d", pauses, tc.want)
			}
		})
	}
}
