package edge_test

import (
	"fmt"

	"github.com/ratchet/ratchet/engine"
)

// t0 is the tests' start instant: 2024-01-01T00:00:00Z, at the start of every window.
const t0 int64 = 1_704_067_200_000

func newEngine(now int64) (*engine.Engine, *engine.ManualClock) {
	clock := engine.NewManualClock(now)
	return engine.New(clock, engine.Config{MaxMemoryBytes: 1 << 30}), clock
}

func tup(key string, windowMs int64) engine.Tuple {
	return engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte(key), WindowMs: windowMs}
}

func benchTuples(n int) []engine.Tuple {
	ts := make([]engine.Tuple, n)
	for i := range ts {
		ts[i] = engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte(fmt.Sprintf("user:%08d", i)), WindowMs: 60_000}
	}
	return ts
}
