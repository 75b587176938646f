package wire_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

func multiKey(w int64) []byte {
	return engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: w})
}

func TestDecideMultiRoundTrip(t *testing.T) {
	for _, want := range []engine.DecideMultiRequest{
		{Items: []engine.DecideItem{{Key: multiKey(1000), Limit: 1}}},
		{Cost: 2, InflightBatch: 5, Deadline: 1763898913750, Items: []engine.DecideItem{
			{Key: multiKey(1000), Limit: 10, Pending: 3, Inflight: 4, Want: 16, Return: 7},
			{Key: multiKey(3_600_000), Limit: engine.MaxLimit, Pending: math.MaxInt64, Inflight: math.MaxInt64, Want: engine.MaxLimit, Return: math.MaxInt64}}},
	} {
		got, err := wire.ParseDecideMulti(parse(t, wire.AppendDecideMulti(nil, want)))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, %v, want %+v", got, err, want)
		}
	}
	nine := engine.DecideMultiRequest{}
	for w := range int64(9) {
		nine.Items = append(nine.Items, engine.DecideItem{Key: multiKey(w + 1), Limit: 1})
	}
	for _, c := range []struct {
		req  []byte
		want error
	}{
		{wire.AppendDecideMulti(nil, nine), wire.ErrSyntax},
		{wire.AppendDecideMulti(nil, engine.DecideMultiRequest{}), wire.ErrSyntax},
		{[]byte("RL.INTERNAL.DECIDEMULTI 1 0 0 k 1 0 0 0\r\n"), wire.ErrSyntax}, // an item one argument short
		{[]byte("RL.INTERNAL.DECIDEMULTI 1 0 -1 k 1 0 0 0 0\r\n"), wire.ErrCost},
		{wire.AppendDecideMulti(nil, engine.DecideMultiRequest{Items: []engine.DecideItem{{Key: multiKey(1), Limit: 1}, {Key: multiKey(2)}}}), wire.ErrLimit},
		{wire.AppendDecideMulti(nil, engine.DecideMultiRequest{Items: []engine.DecideItem{{Key: []byte("k"), Limit: 1}}}), wire.ErrKey},
	} {
		if _, err := wire.ParseDecideMulti(parse(t, c.req)); !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", strings.TrimSpace(string(c.req)), err, c.want)
		}
	}
}

func TestDecideMultiReplyRoundTrip(t *testing.T) {
	meta := engine.OriginMeta{Edges: 2, Applied: 5, LeaseTTLMs: 2500, Boot: 1763898912000, Now: 1763898913001, Durable: 4, Hand: 3}
	ds := []engine.Decision{{Allowed: true, Limit: 10, Remaining: 7, ResetAfterMs: 1234}, {Limit: engine.MaxLimit, RetryAfterMs: -1, ResetAfterMs: 50}}
	ccs := []engine.CellCounts{{Seq: 8, CurRegional: 9, LeaseLeft: 30, LeaseSeq: 2}, {Seq: 1, PrevImported: 1}}
	var w resp.Writer
	wire.WriteDecideMultiReply(&w, ds, ccs, meta)
	gd, gc := make([]engine.Decision, 2), make([]engine.CellCounts, 2)
	m, err := wire.ParseDecideMultiReply(ints(t, &w), gd, gc)
	if err != nil || m != meta || !reflect.DeepEqual(gd, ds) || !reflect.DeepEqual(gc, ccs) {
		t.Errorf("got %+v %+v %+v, %v", m, gd, gc, err)
	}
	// A reply for another number of items does not fit.
	if _, err := wire.ParseDecideMultiReply(ints(t, &w), make([]engine.Decision, 1), make([]engine.CellCounts, 1)); !errors.Is(err, wire.ErrReply) {
		t.Errorf("a reply of 2 items read for 1: %v", err)
	}
}

// FuzzParseDecideMulti: whatever the parser accepts is within range and re-reads as
// itself.
func FuzzParseDecideMulti(f *testing.F) {
	seeds := append(requestSeeds(),
		wire.AppendDecideMulti(nil, engine.DecideMultiRequest{Cost: 1, InflightBatch: 2, Deadline: 3, Items: []engine.DecideItem{
			{Key: multiKey(1000), Limit: 10, Pending: 1, Inflight: 2, Want: 16, Return: 4}, {Key: multiKey(60_000), Limit: 100}}}),
		[]byte("RL.INTERNAL.DECIDEMULTI 1 0 0 k 1 0 0 0\r\n"),
		[]byte("RL.INTERNAL.DECIDEMULTI 1 0 -1 k 1 0 0 0 0\r\n"))
	fuzzRequest(f, seeds, func(t *testing.T, args [][]byte) {
		r, err := wire.ParseDecideMulti(args)
		if err != nil {
			return
		}
		if len(r.Items) == 0 || len(r.Items) > engine.MaxLimits || r.Cost > engine.MaxLimit || r.Deadline < 0 || r.InflightBatch > math.MaxInt64 {
			t.Fatalf("accepted out of range: %+v", r)
		}
		for _, it := range r.Items {
			if it.Limit == 0 || it.Limit > engine.MaxLimit || it.Want > engine.MaxLimit || it.Return > math.MaxInt64 {
				t.Fatalf("accepted an item out of range: %+v", it)
			}
		}
		again, err := wire.ParseDecideMulti(parse(t, wire.AppendDecideMulti(nil, r)))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("%+v re-read as %+v, %v", r, again, err)
		}
	})
}
