package engine_test

import (
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/internal/testmem"
)

// Memory benchmarks: the bytes one live cell costs in the origin's cell store (package
// testmem says what each figure is; edge/memory_test.go measures an edge's). They only run
// when asked:
//
//	go test -run xxx -bench BenchmarkMemory -benchtime 1x ./engine

// BenchmarkMemory fills an origin's cell store: 1M tuples with one live cell each, and
// 500k tuples with two (the previous and the current window).
func BenchmarkMemory(b *testing.B) {
	const w = 60_000
	origin := func(tuples int, twoCells bool) func() (func(), any) {
		return func() (func(), any) {
			c := engine.NewManualClock(t0)
			e := engine.New(c, engine.Config{MaxMemoryBytes: 4 << 30})
			fill := func() {
				var buf [32]byte
				rounds := 1
				if twoCells {
					rounds = 2
				}
				for r := 0; r < rounds; r++ {
					c.Set(t0 + int64(r)*w)
					for i := 0; i < tuples; i++ {
						if _, err := e.Limit(memTuple(buf[:0], i), 1000, 1); err != nil {
							b.Fatal(err)
						}
					}
				}
				if got, want := e.Stats().Cells, int64(tuples*rounds); got != want {
					b.Fatalf("%d cells, want %d", got, want)
				}
			}
			return fill, e
		}
	}
	b.Run("origin/1Mx1", func(b *testing.B) { testmem.MeasureCells(b, 1_000_000, origin(1_000_000, false)) })
	b.Run("origin/500kx2", func(b *testing.B) { testmem.MeasureCells(b, 1_000_000, origin(500_000, true)) })
}

// memTuple is tuple i of the memory benchmarks: key testmem.Key, default/default, 60 s.
func memTuple(buf []byte, i int) engine.Tuple {
	return engine.Tuple{Workspace: "default", Namespace: "default", Key: testmem.Key(buf, i), WindowMs: 60_000}
}
