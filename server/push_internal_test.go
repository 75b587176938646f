package server

import (
	"testing"
	"time"
)

// TestOutboxBounds: the hard bound cuts at once; the soft one once the outbox has stayed
// past it for softFor (going back under it starts the count again); a cut outbox takes
// nothing more.
func TestOutboxBounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type push struct {
		at     time.Duration // after t0
		n      int
		taken  bool // the owner took the bytes just before
		wantOK bool
	}
	for _, tt := range []struct {
		name  string
		hard  int
		soft  int
		for_  time.Duration
		steps []push
	}{
		{"hard", 100, 0, 0, []push{{0, 60, false, true}, {0, 40, false, true}, {0, 1, false, false}, {0, 1, false, false}}},
		{"hard after a take", 100, 0, 0, []push{{0, 90, false, true}, {0, 90, true, true}, {0, 11, false, false}}},
		{"soft for a while", 1000, 50, time.Second, []push{{0, 60, false, true}, {500 * time.Millisecond, 1, false, true},
			{time.Second, 1, false, false}}},
		{"soft resets under it", 1000, 50, time.Second, []push{{0, 60, false, true}, {900 * time.Millisecond, 1, true, true},
			{1500 * time.Millisecond, 60, false, true}, {2000 * time.Millisecond, 1, false, true}, {2600 * time.Millisecond, 1, false, false}}},
	} {
		o := &outbox{hard: tt.hard, soft: tt.soft, softFor: tt.for_}
		for i, st := range tt.steps {
			if st.taken {
				o.buf, o.softSince = nil, time.Time{}
			}
			o.buf = append(o.buf, make([]byte, st.n)...)
			if ok := o.checkBound(t0.Add(st.at)); ok != st.wantOK || (ok == o.cut) {
				t.Errorf("%s: step %d: ok %v cut %v, want ok %v", tt.name, i, ok, o.cut, st.wantOK)
			}
			if o.cut {
				break
			}
		}
	}
}
