package engine_test

import (
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// BenchmarkEdgeLimitWarm: an edge deciding from local memory on one warm tuple (cached,
// fresh, far from its limit), with the cost left pending for the replay flusher.
func BenchmarkEdgeLimitWarm(b *testing.B) {
	r := newEdgeRig(b, t0, 1, engine.EdgeConfig{Freshness: time.Hour})
	e := r.edges[0]
	tp := benchTuples(1)[0]
	edgeLimit(b, e, tp, engine.MaxLimit, 1) // the cold read
	b.ReportAllocs()
	for b.Loop() {
		if d, err := e.Limit(tp, engine.MaxLimit, 1); err != nil || !d.Allowed {
			b.Fatalf("%+v, %v", d, err)
		}
	}
	if s := e.Stats(); s.OriginReads != 1 {
		b.Fatalf("the warm path read the origin: %d reads", s.OriginReads)
	}
}

// BenchmarkEdgeLimitWarmManyKeys: the same over 64Ki warm tuples.
func BenchmarkEdgeLimitWarmManyKeys(b *testing.B) {
	r := newEdgeRig(b, t0, 1, engine.EdgeConfig{Freshness: time.Hour, MaxMemoryBytes: 256 << 20})
	e := r.edges[0]
	ts := benchTuples(1 << 16)
	for _, tp := range ts {
		edgeLimit(b, e, tp, engine.MaxLimit, 1)
	}
	reads := e.Stats().OriginReads
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if d, err := e.Limit(ts[i&(len(ts)-1)], engine.MaxLimit, 1); err != nil || !d.Allowed {
			b.Fatalf("%+v, %v", d, err)
		}
		i++
	}
	if s := e.Stats(); s.OriginReads != reads {
		b.Fatalf("the warm path read the origin: %d reads", s.OriginReads-reads)
	}
}
