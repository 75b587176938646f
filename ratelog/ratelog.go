// Package ratelog rate-limits log lines that a client can cause (protocol errors, timeouts,
// failed authentication), so that no client can flood the log: each kind of event is
// logged at most once per interval, with the number of events that were not logged since.
package ratelog

import (
	"sync/atomic"
	"time"
)

// Limiter admits one log line per interval. The zero value admits every line; it is safe
// for concurrent use.
type Limiter struct {
	every      time.Duration
	last       atomic.Int64 // unix nanoseconds of the last admitted line
	suppressed atomic.Uint64
}

// New returns a Limiter that admits one line per every.
func New(every time.Duration) *Limiter { return &Limiter{every: every} }

// Allow reports whether a line may be logged at now, and how many were refused since the
// last one admitted (to log beside it as "suppressed").
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed uint64) {
	n := now.UnixNano()
	last := l.last.Load()
	if last != 0 && n-last < int64(l.every) {
		l.suppressed.Add(1)
		return false, 0
	}
	if !l.last.CompareAndSwap(last, n) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
