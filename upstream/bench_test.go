package upstream

import (
	"context"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// BenchmarkRead measures one-item Reads from many goroutines, pipelined on one connection
// to the fake origin over loopback.
func BenchmarkRead(b *testing.B) {
	f := newFake(b, "s")
	f.record = false
	// The fake answers a canned reply without allocating, so that allocs/op are the client's.
	f.raw = func(argv [][]byte, w *resp.Writer) {
		// meta (edges, applied, lease_ttl_ms, boot, now), counts (seq 1, a lease of 16)
		w.Raw([]byte("*12\r\n:3\r\n:0\r\n:10000\r\n:1763898912000\r\n:1763898913234\r\n:1\r\n:10\r\n:0\r\n:7\r\n:0\r\n:16\r\n:5\r\n"))
	}
	c := newClient(b, f.addr(), Config{Secret: "s"})
	ctx := context.Background()
	if _, _, err := c.Read(ctx, []engine.ReadItem{{Key: testKey, Seq: 1}}); err != nil {
		b.Fatal(err)
	}
	start := c.writes.Load()
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		items := []engine.ReadItem{{Key: testKey, Seq: 1}}
		for pb.Next() {
			if _, _, err := c.Read(ctx, items); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if w := c.writes.Load() - start; w > 0 {
		b.ReportMetric(float64(b.N)/float64(w), "calls/write")
	}
}
