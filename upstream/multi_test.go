package upstream

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// TestDecideMulti: a multi-limit hand-off travels as one RL.INTERNAL.DECIDEMULTI and its
// reply is decoded item by item, in the request's order.
func TestDecideMulti(t *testing.T) {
	f := newFake(t, "s")
	c := newClient(t, f.addr(), Config{Secret: "s"})
	ds, ccs, meta, err := c.DecideMulti(context.Background(), engine.DecideMultiRequest{Cost: 3, InflightBatch: 5, Deadline: 1763898913750,
		Items: []engine.DecideItem{{Key: testKey, Limit: 10, Pending: 1, Inflight: 2, Want: 16, Return: 4}, {Key: testKey2, Limit: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	wantD := []engine.Decision{{Allowed: true, Limit: 10, Remaining: 7}, {Limit: 2, ResetAfterMs: 1}}
	wantCC := []engine.CellCounts{{CurRegional: 1, CurImported: 2, PrevRegional: 5, LeaseLeft: 16, LeaseSeq: 4}, {Seq: 1, PrevRegional: 5}}
	wantMeta := engine.OriginMeta{Edges: 4, Applied: 2, LeaseTTLMs: 7000, Boot: cannedBoot, Now: 1763898913750, Hand: 9}
	if !slices.Equal(ds, wantD) || !slices.Equal(ccs, wantCC) || meta != wantMeta {
		t.Fatalf("DecideMulti = %+v %+v %+v, want %+v %+v %+v", ds, ccs, meta, wantD, wantCC, wantMeta)
	}
	if _, _, _, err := c.DecideMulti(context.Background(), engine.DecideMultiRequest{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("DecideMulti without items: %v, want ErrTooLarge", err)
	}
}
