package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// TestOriginAppliedIncludesBatch: an origin's answer that says it applied replay batch N
// of an edge run (OriginMeta.Applied = N) must hold counts that include batch N. The edge
// trusts it: it drops the cost it has in flight in batch N from its view (reads), and the
// origin does not count that cost again (hand-offs). Batches adding 7 each are replayed
// one after the other while reads and hand-offs of the same run ask concurrently:
//
//   - a read saying Applied = N must count at least 7×N;
//   - a hand-off sent while batches 1..k-1 were answered and batch k may be in flight
//     (Inflight 7, InflightBatch k) must decide on at least 7×k, whether the origin has
//     applied batch k or counts it as on its way.
//
// Re-deliveries of each batch run beside it and must change nothing.
func TestOriginAppliedIncludesBatch(t *testing.T) {
	const (
		batches = 1000
		cost    = 7
		limit   = 1 << 40
		run     = "edge-1/boot"
	)
	origin, clock := newEngine(t0 + 100)
	local := engine.LocalOrigin{Engine: origin, Node: run}
	tp := engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("applied"), WindowMs: 60_000}
	key := engine.AppendKey(nil, tp)
	seq := clock.NowMs() / tp.WindowMs
	ctx := context.Background()

	var answered atomic.Uint64 // the last batch whose Replay returned
	done := make(chan struct{})
	var (
		mu   sync.Mutex
		errs []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 5 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { // the edge's flusher, with a duplicate delivery of every batch beside it
		defer wg.Done()
		defer close(done)
		for id := uint64(1); id <= batches; id++ {
			b := engine.ReplayBatch{Node: run, ID: id, Items: []engine.ReplayItem{{Key: key, Seq: seq, Cost: cost, Limit: limit}}}
			var dup sync.WaitGroup
			dup.Add(1)
			go func() {
				defer dup.Done()
				if cc, _, err := local.Replay(ctx, b); err != nil || cc[0].CurRegional < cost*id {
					fail("re-delivery of batch %d answered %+v, %v: want at least %d", id, cc, err, cost*id)
				}
			}()
			cc, meta, err := local.Replay(ctx, b)
			dup.Wait()
			if err != nil || meta.Applied < id || cc[0].CurRegional < cost*id {
				fail("replay of batch %d answered %+v %+v, %v", id, cc, meta, err)
			}
			answered.Store(id)
		}
	}()
	// asker runs ask until the replays are done or ask fails.
	asker := func(ask func() error) {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := ask(); err != nil {
				fail("%v", err)
				return
			}
		}
	}
	go asker(func() error { // reads
		cc, meta, err := local.Read(ctx, []engine.ReadItem{{Key: key, Seq: seq}})
		if err == nil && cc[0].CurRegional < cost*meta.Applied {
			fail("read answered Applied=%d with count %d: batch %d is missing", meta.Applied, cc[0].CurRegional, meta.Applied)
		}
		return err
	})
	for range 2 { // hand-offs (cost 0: they count nothing)
		go asker(func() error {
			k := answered.Load() + 1
			d, _, meta, err := local.Decide(ctx, engine.DecideRequest{Key: key, Limit: limit, Inflight: cost, InflightBatch: k})
			if used := limit - d.Remaining; err == nil && used < cost*k {
				fail("hand-off with batch %d in flight decided on %d (Applied=%d), want at least %d", k, used, meta.Applied, cost*k)
			}
			return err
		})
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if got := origin.Status(tp).CurrentRegional; got != cost*batches {
		t.Fatalf("origin counts %d after %d batches of %d, each delivered twice: want %d", got, batches, cost, cost*batches)
	}
}
