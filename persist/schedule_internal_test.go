package persist

import (
	"testing"
	"time"
)

// TestNextCapture: captures come interval apart less 1.5x the save time, never closer than
// interval/4.
func TestNextCapture(t *testing.T) {
	for _, tt := range []struct{ interval, longest, want time.Duration }{
		{time.Second, 0, time.Second},
		{time.Second, 200 * time.Millisecond, 700 * time.Millisecond},
		{time.Second, 500 * time.Millisecond, 250 * time.Millisecond},
		{time.Second, 5 * time.Second, 250 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Millisecond, 85 * time.Millisecond},
	} {
		if got := nextCapture(tt.interval, tt.longest); got != tt.want {
			t.Errorf("nextCapture(%v, %v) = %v, want %v", tt.interval, tt.longest, got, tt.want)
		}
		// The next snapshot is on disk within interval of this capture while saves take
		// at most longest and longest is at most half of interval.
		if tt.longest <= tt.interval/2 && nextCapture(tt.interval, tt.longest)+tt.longest > tt.interval {
			t.Errorf("interval %v, save %v: the bound does not hold", tt.interval, tt.longest)
		}
	}
}
