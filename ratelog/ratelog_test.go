package ratelog

import (
	"testing"
	"time"
)

func TestAllow(t *testing.T) {
	l := New(10 * time.Second)
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at         time.Duration
		ok         bool
		suppressed uint64
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{9 * time.Second, false, 0},
		{10 * time.Second, true, 2},
		{11 * time.Second, false, 0},
		{25 * time.Second, true, 1},
	}
	for i, s := range steps {
		ok, sup := l.Allow(t0.Add(s.at))
		if ok != s.ok || sup != s.suppressed {
			t.Fatalf("step %d at %v: got (%v, %d), want (%v, %d)", i, s.at, ok, sup, s.ok, s.suppressed)
		}
	}
}
