package edge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ratchet/ratchet/edge"
	"github.com/ratchet/ratchet/engine"
)

// hangingOrigin answers nothing: every call waits for its context to end.
type hangingOrigin struct{}

func (hangingOrigin) Read(ctx context.Context, _ []engine.ReadItem) ([]engine.CellCounts, engine.OriginMeta, error) {
	<-ctx.Done()
	return nil, engine.OriginMeta{}, ctx.Err()
}

func (hangingOrigin) Replay(ctx context.Context, _ engine.ReplayBatch) ([]engine.CellCounts, engine.OriginMeta, error) {
	<-ctx.Done()
	return nil, engine.OriginMeta{}, ctx.Err()
}

func (hangingOrigin) Decide(ctx context.Context, _ engine.DecideRequest) (engine.Decision, engine.CellCounts, engine.OriginMeta, error) {
	<-ctx.Done()
	return engine.Decision{}, engine.CellCounts{}, engine.OriginMeta{}, ctx.Err()
}

func (hangingOrigin) Forward(ctx context.Context, _ int, _ string, _ [][]byte) ([]byte, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestEdgeCallsTakeTheRequestContext: a request's context reaches every call the edge
// makes to its origin for it. With an origin that never answers and an OriginTimeout of an
// hour, Limit (a read, then a hand-off), Status and Forward return once their context is
// cancelled; the cancellation says nothing of the origin, which stays reachable, and the
// request is not admitted.
func TestEdgeCallsTakeTheRequestContext(t *testing.T) {
	e, err := edge.New(engine.NewManualClock(t0), edge.Config{Origins: []engine.Origin{hangingOrigin{}},
		OriginIDs: []string{"o"}, NodeRun: "e/1", OriginTimeout: time.Hour, MaxMemoryBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	calls := []struct {
		name string
		call func(ctx context.Context) string
	}{
		{"Limit", func(ctx context.Context) string {
			if d, err := e.Limit(ctx, tup("k", 1000), 10, 1); err != nil || d.Allowed {
				return fmt.Sprintf("%+v, %v", d, err)
			}
			return ""
		}},
		{"Status", func(ctx context.Context) string {
			if st := e.Status(ctx, tup("k", 1000)); st.Source != "local" {
				return "source " + st.Source
			}
			return ""
		}},
		{"Forward", func(ctx context.Context) string {
			if _, err := e.Forward(ctx, "default", []byte("k"), 2, [][]byte{[]byte("GET"), []byte("k")}); err == nil {
				return "no error"
			}
			return ""
		}},
	}
	for _, c := range calls {
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan string, 1)
		go func() { got <- c.call(ctx) }()
		cancel()
		select {
		case msg := <-got:
			if msg != "" {
				t.Errorf("%s: %s", c.name, msg)
			}
		case <-time.After(time.Minute): // generous: it returns as soon as it sees the cancellation
			t.Fatalf("%s kept waiting on the origin after its context was cancelled", c.name)
		}
		if st := e.Stats(); !st.Origins[0].Reachable {
			t.Fatalf("%s: a cancelled request put the origin in backoff", c.name)
		}
	}
}
