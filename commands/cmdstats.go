package commands

import (
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/resp"
)

// Per-command statistics: INFO commandstats (Redis's format) and, through CommandStats,
// Prometheus's ratchet_commands_total{command} and ratchet_command_duration_seconds.
//
// Counts are exact and cost one atomic add per request, in the session's stripe
// (counterStripes) at the command's place in the table (Command.id; 0 stands for every
// unknown name, so no client-chosen name ever becomes a label): no map, no lock. The
// durations are a sample: each session times its first request and then one in
// durationSample (two readings of the monotonic clock), which keeps the clock off the hot
// path; usec is estimated from the sample (its mean times calls).

// unknownCommand is the name under which requests for commands that do not exist count.
const unknownCommand = "unknown"

// durationSample is how many requests of a session pass per one timed (a power of two).
const durationSample = 16

// DurationBounds are the upper bounds of the duration histogram's buckets, in seconds.
var DurationBounds = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, .1, .25, 1}

// boundsNs are DurationBounds in nanoseconds.
var boundsNs = func() []int64 {
	out := make([]int64, len(DurationBounds))
	for i, b := range DurationBounds {
		out[i] = int64(b * 1e9)
	}
	return out
}()

// CommandStat is one command's statistics since the start.
type CommandStat struct {
	Name     string // lower case, or "unknown"
	Calls    uint64 // requests that ran (failed ones included)
	Rejected uint64 // requests refused before running: arity, authentication (all of "unknown")
	Failed   uint64 // requests that ran and answered an error
	Usec     uint64 // microseconds spent running, estimated from the timed sample
	// Timed is the number of timed calls, TimedSeconds their total duration, and Buckets
	// their cumulative counts at each of DurationBounds.
	Timed        uint64
	TimedSeconds float64
	Buckets      []uint64
}

type cmdCount struct{ calls, rejected, failed atomic.Uint64 }

type cmdTiming struct {
	ns      atomic.Uint64   // total of the timed calls
	buckets []atomic.Uint64 // timed calls by boundsNs; the last one is above every bound
}

// cmdStats holds the counters of a Dispatcher's table. Its slices are sized once, in
// newCmdStats, and never change; the counters are atomic.
type cmdStats struct {
	names   []string // by Command.id
	stripes [counterStripes]struct {
		c []cmdCount // by Command.id; an allocation per stripe (~1.5 KB), apart from the others
	}
	timing []cmdTiming // by Command.id
}

// newCmdStats numbers the commands of ordered from 1 (Command.id) and sizes the counters.
func newCmdStats(ordered []*Command) *cmdStats {
	cs := &cmdStats{names: []string{unknownCommand}, timing: make([]cmdTiming, len(ordered)+1)}
	for i, c := range ordered {
		c.id = i + 1
		cs.names = append(cs.names, c.Name)
	}
	for i := range cs.stripes {
		cs.stripes[i].c = make([]cmdCount, len(cs.names))
	}
	for i := range cs.timing {
		cs.timing[i].buckets = make([]atomic.Uint64, len(boundsNs)+1)
	}
	return cs
}

func (cs *cmdStats) stripe(s *Session) []cmdCount {
	return cs.stripes[uint64(s.ID)%counterStripes].c
}

// reject counts a request for cmd (nil: an unknown command) refused before running.
func (cs *cmdStats) reject(s *Session, cmd *Command) {
	id := 0
	if cmd != nil {
		id = cmd.id
	}
	cs.stripe(s)[id].rejected.Add(1)
}

// callMark is what begin notes before a command runs.
type callMark struct {
	at    int   // the reply's offset in the writer
	began int64 // monotonic ns when timed, else 0
}

// begin notes where cmd's reply starts and, for one request in durationSample of the
// session, the time.
func (cs *cmdStats) begin(s *Session, w *resp.Writer) (m callMark) {
	m.at = len(w.Bytes())
	if s.statTick++; s.statTick&(durationSample-1) == 1 {
		m.began = monoNs()
	}
	return m
}

// done counts a request for cmd that ran, failed when its reply is an error.
func (cs *cmdStats) done(s *Session, cmd *Command, w *resp.Writer, m callMark) {
	if m.began != 0 {
		cs.observe(cmd.id, m.began)
	}
	c := &cs.stripe(s)[cmd.id]
	c.calls.Add(1)
	if b := w.Bytes(); len(b) > m.at && (b[m.at] == '-' || b[m.at] == '!') {
		c.failed.Add(1)
	}
}

// observe records the duration of a timed call of command id that began at began.
//
//go:noinline
func (cs *cmdStats) observe(id int, began int64) {
	ns := max(monoNs()-began, 1)
	t := &cs.timing[id]
	i := 0
	for i < len(boundsNs) && ns > boundsNs[i] {
		i++
	}
	t.buckets[i].Add(1)
	t.ns.Add(uint64(ns))
}

// total is the number of requests counted, run or refused.
func (cs *cmdStats) total() uint64 {
	var sum uint64
	for i := range cs.stripes {
		for j := range cs.stripes[i].c {
			c := &cs.stripes[i].c[j]
			sum += c.calls.Load() + c.rejected.Load()
		}
	}
	return sum
}

// snapshot returns the statistics of every command with a request counted, in table
// order, "unknown" first.
func (cs *cmdStats) snapshot() []CommandStat {
	var out []CommandStat
	for id, name := range cs.names {
		st := CommandStat{Name: name}
		for i := range cs.stripes {
			c := &cs.stripes[i].c[id]
			st.Calls += c.calls.Load()
			st.Rejected += c.rejected.Load()
			st.Failed += c.failed.Load()
		}
		if st.Calls == 0 && st.Rejected == 0 {
			continue
		}
		t := &cs.timing[id]
		st.Buckets = make([]uint64, len(boundsNs))
		var cum uint64
		for i := range boundsNs {
			cum += t.buckets[i].Load()
			st.Buckets[i] = cum
		}
		ns := t.ns.Load()
		st.Timed = cum + t.buckets[len(boundsNs)].Load()
		st.TimedSeconds = float64(ns) / 1e9
		if st.Timed > 0 {
			st.Usec = uint64(float64(ns) / float64(st.Timed) * float64(st.Calls) / 1e3)
		}
		out = append(out, st)
	}
	return out
}

// CommandStats returns the statistics of every command requested so far.
func (d *Dispatcher) CommandStats() []CommandStat { return d.cmds.snapshot() }

// processStart is the origin of monoNs.
var processStart = time.Now()

// monoNs is the monotonic clock in nanoseconds since processStart, at least 1.
//
//go:noinline
func monoNs() int64 { return int64(time.Since(processStart)) + 1 }
