package engine

import (
	"sync/atomic"
	"time"
)

// Clock is the engine's only source of time, in milliseconds since the Unix epoch.
// Decisions never read time any other way, so tests drive windows without sleeping.
type Clock interface {
	NowMs() int64
}

// MicroClock is a Clock that also reads microseconds: the time scripts read with TIME.
// A Clock without it gives scripts its milliseconds, times 1000.
type MicroClock interface {
	Clock
	// NowUs returns the time in microseconds since the Unix epoch.
	NowUs() int64
}

// SystemClock reads the wall clock.
type SystemClock struct{}

// NowMs returns the wall-clock time in milliseconds since the Unix epoch.
func (SystemClock) NowMs() int64 { return time.Now().UnixMilli() }

// NowUs returns the wall-clock time in microseconds since the Unix epoch.
func (SystemClock) NowUs() int64 { return time.Now().UnixMicro() }

// ManualClock is a Clock that only moves when told to. It is safe for concurrent use.
type ManualClock struct{ ms atomic.Int64 }

// NewManualClock returns a ManualClock reading ms.
func NewManualClock(ms int64) *ManualClock {
	c := &ManualClock{}
	c.ms.Store(ms)
	return c
}

// NowMs returns the clock's current reading.
func (c *ManualClock) NowMs() int64 { return c.ms.Load() }

// Set moves the clock to ms.
func (c *ManualClock) Set(ms int64) { c.ms.Store(ms) }

// Advance moves the clock forward by d milliseconds.
func (c *ManualClock) Advance(d int64) { c.ms.Add(d) }
