package persist

import (
	"testing"
	"time"
)

// TestPacerPausesOnlyWhileServing: a compaction's pacer pauses after each slice while
// requests are served, three times the slice (a quarter of a thread), once the slice past
// half the base (half a thread), and not at all past the base, nor after a slice over
// which the count of requests served stood still (a quiet process). And the thresholds of
// behindLevel.
func TestPacerPausesOnlyWhileServing(t *testing.T) {
	serving := func(call int) uint64 { return uint64(call) }
	for _, tc := range []struct {
		name   string
		served func(call int) uint64 // the count at the pacer's call of it
		behind int
		want   []int // each pause, in slices
	}{
		{"serving", serving, 0, []int{3, 3, 3, 3, 3}},
		{"serving, past half the base", serving, 1, []int{1, 1, 1, 1, 1}},
		{"serving, past the base", serving, 2, nil},
		{"quiet", func(int) uint64 { return 7 }, 0, nil},
		{"quiet, then serving", func(call int) uint64 { return uint64(max(call-3, 0)) }, 0, []int{3, 3, 3}},
		{"no count", nil, 0, []int{3, 3, 3, 3, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			defer func(f func(time.Duration)) { compactPause = f }(compactPause)
			compactPause = func(d time.Duration) { got = append(got, int(d/compactSlice)) }
			var served func() uint64
			if tc.served != nil {
				calls := 0
				served = func() uint64 { calls++; return tc.served(calls) }
			}
			p := newPacer(func() int { return tc.behind }, served)
			now := time.Unix(0, 0)
			p.now, p.start, p.readAt = func() time.Time { return now }, now, now
			for range 5 {
				now = now.Add(quietEvery) // a pause, long enough for the count to be read again
				p.start = now
				now = now.Add(compactSlice) // each slice lasts exactly one
				for range 256 {
					p.step()
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("pauses %v (in slices), want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("pauses %v (in slices), want %v", got, tc.want)
				}
			}
		})
	}
}

func TestBehindLevel(t *testing.T) {
	for _, tc := range []struct {
		log, base int64
		want      int
	}{
		{0, 100, 0}, {50, 100, 0}, {51, 100, 1}, {100, 100, 1}, {101, 100, 2}, {1, 0, 2},
	} {
		if got := behindLevel(tc.log, tc.base); got != tc.want {
			t.Errorf("behindLevel(%d, %d) = %d, want %d", tc.log, tc.base, got, tc.want)
		}
	}
}
