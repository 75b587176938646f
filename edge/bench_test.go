package edge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
)

// BenchmarkEdgeLimitWarm: an edge deciding from local memory on one warm tuple (cached,
// fresh, far from its limit), with the cost left pending for the replay flusher.
func BenchmarkEdgeLimitWarm(b *testing.B) {
	r := newEdgeRig(b, t0, 1, edge.Config{Freshness: time.Hour})
	e := r.edges[0]
	tp := benchTuples(1)[0]
	edgeLimit(b, e, tp, engine.MaxLimit, 1) // the cold read
	b.ReportAllocs()
	for b.Loop() {
		if d, err := e.Limit(context.Background(), tp, engine.MaxLimit, 1); err != nil || !d.Allowed {
			b.Fatalf("%+v, %v", d, err)
		}
	}
	if s := e.Stats(); s.OriginReads != 1 {
		b.Fatalf("the warm path read the origin: %d reads", s.OriginReads)
	}
}

// BenchmarkEdgeLimitWarmManyKeys: the same over 64Ki warm tuples.
func BenchmarkEdgeLimitWarmManyKeys(b *testing.B) {
	r := newEdgeRig(b, t0, 1, edge.Config{Freshness: time.Hour, MaxMemoryBytes: 256 << 20})
	e := r.edges[0]
	ts := benchTuples(1 << 16)
	for _, tp := range ts {
		edgeLimit(b, e, tp, engine.MaxLimit, 1)
	}
	reads := e.Stats().OriginReads
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if d, err := e.Limit(context.Background(), ts[i&(len(ts)-1)], engine.MaxLimit, 1); err != nil || !d.Allowed {
			b.Fatalf("%+v, %v", d, err)
		}
		i++
	}
	if s := e.Stats(); s.OriginReads != reads {
		b.Fatalf("the warm path read the origin: %d reads", s.OriginReads-reads)
	}
}

// BenchmarkEdgeLimitTwoWindows: a two-limit request (a minute and an hour on one key)
// over 64Ki warm keys, against one window of the same keys (one=true); each case
// flushes every 1000 requests, as a busy flusher would. Compare ns/op: the bound
// is 1.6 for the whole server.
func BenchmarkEdgeLimitTwoWindows(b *testing.B) {
	for _, one := range []bool{true, false} {
		b.Run(fmt.Sprintf("one=%v", one), func(b *testing.B) {
			r := newEdgeRig(b, t0, 1, edge.Config{Freshness: time.Hour, MaxMemoryBytes: 256 << 20})
			e := r.edges[0]
			ops := make([][]engine.LimitOp, 1<<16)
			for i, tp := range benchTuples(len(ops)) {
				hour := tp
				hour.WindowMs = 3_600_000
				ops[i] = []engine.LimitOp{{Tuple: tp, Limit: engine.MaxLimit}, {Tuple: hour, Limit: engine.MaxLimit}}
				if one {
					ops[i] = ops[i][:1]
				}
				edgeLimitAll(b, e, ops[i], 1, r.clock.NowMs())
			}
			for e.FlushOnce() {
			}
			out := make([]engine.Decision, 2)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				op := ops[i&(len(ops)-1)]
				var err error
				if len(op) == 1 {
					out[0], err = e.Limit(context.Background(), op[0].Tuple, op[0].Limit, 1)
				} else {
					_, err = e.LimitAll(context.Background(), op, 1, out)
				}
				if err != nil || !out[0].Allowed {
					b.Fatalf("%+v, %v", out, err)
				}
				if i++; i%1000 == 0 {
					e.FlushOnce()
				}
			}
		})
	}
}

// BenchmarkEdgeFlushKeep: one replay flush of 1000 warm tuples, each with one request
// accepted since the last, to an origin that saves snapshots (the flusher keeps each
// acknowledged batch until a save holds it; a save every 200 batches) or not (nothing is
// kept). The Limit calls are inside the loop too: compare the two.
func BenchmarkEdgeFlushKeep(b *testing.B) {
	for _, snapshots := range []bool{false, true} {
		b.Run(fmt.Sprintf("snapshots=%v", snapshots), func(b *testing.B) {
			clock := engine.NewManualClock(t0)
			o := newCrashOrigin(clock, snapshots)
			e := crashEdges(b, o, 1, edge.Config{Freshness: time.Hour, MaxMemoryBytes: 256 << 20})[0]
			ts := benchTuples(1000)
			for _, tp := range ts {
				edgeLimit(b, e, tp, engine.MaxLimit, 1)
			}
			flushAll(b, e)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for _, tp := range ts {
					if d, err := e.Limit(context.Background(), tp, engine.MaxLimit, 1); err != nil || !d.Allowed {
						b.Fatalf("%+v, %v", d, err)
					}
				}
				e.FlushOnce()
				if n++; snapshots && n%200 == 0 {
					for range o.engine().Runs { // a save captures the marks, then is on disk
					}
					o.engine().RunsSaved()
				}
			}
			b.ReportMetric(float64(e.Stats().ReplayUnsaved), "unsaved-units")
		})
	}
}
