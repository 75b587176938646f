package wire_test

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// The fuzz targets feed each decoder what the network can carry. A request decoder gets
// the arguments of any RESP request; whatever it accepts must encode and decode back to
// itself. A reply decoder gets the integers of any reply. None may panic. The seeds run
// with every `go test`.

// fuzzRequest runs check on the arguments of the first request in data, if any.
func fuzzRequest(f *testing.F, seeds [][]byte, check func(t *testing.T, args [][]byte)) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		args, n, err := resp.Parse(data, nil, resp.DefaultLimits())
		if err != nil || n == 0 {
			return
		}
		check(t, args)
	})
}

// requestSeeds are valid requests of every kind and a few broken ones.
func requestSeeds() [][]byte {
	k2 := engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 60000})
	return [][]byte{
		wire.AppendHello(nil, "s", "edge/1"),
		wire.AppendRead(nil, []engine.ReadItem{{Key: key, Seq: 3, Limit: 100, Want: 16}, {Key: k2, Seq: 0}}),
		wire.AppendRead(nil, nil),
		wire.AppendReplay(nil, engine.ReplayBatch{ID: 9, Boot: 1763898912000, Items: []engine.ReplayItem{{Key: key, Seq: 3, Cost: 2, Limit: 100, Want: 16, Return: 5},
			{Key: k2, Seq: 4, Limit: 10, Return: 1 << 40}}}),
		wire.AppendDecide(nil, engine.DecideRequest{Key: key, Limit: 10, Cost: 1, Pending: 2, Inflight: 3, InflightBatch: 4,
			Want: 16, Return: 6, Deadline: 1763898913750}),
		wire.AppendPublish(nil, []engine.Component{{Key: k2, Seq: 5, Region: "eu", Count: 7}}),
		wire.AppendPublish(nil, []engine.Component{{Key: k2, Seq: 5, Region: "eu", Count: 7, Reset: true}}),
		wire.AppendForward(nil, 2, "ws", wire.AppendForwardCmd(wire.AppendForwardCmd(nil, strs("INCR", "k")), strs("PING"))),
		[]byte("*4\r\n$19\r\nRL.INTERNAL.FORWARD\r\n$1\r\n3\r\n$2\r\nws\r\n$1\r\n9\r\n"),
		[]byte("*3\r\n$16\r\nRL.INTERNAL.READ\r\n$1\r\n\x00\r\n$2\r\n01\r\n"),
		[]byte("*5\r\n$16\r\nRL.INTERNAL.READ\r\n$1\r\n\x00\r\n$1\r\n1\r\n$1\r\n0\r\n$3\r\n016\r\n"),
		[]byte("RL.INTERNAL.REPLAY 1 k 1 2 3 4 5\r\n"),
		[]byte("RL.INTERNAL.REPLAY 1 k 1 2 3 4 5 6\r\n"), // an item one argument long
		[]byte("RL.INTERNAL.DECIDE k 1 1 0 0 0\r\n"),
		[]byte("RL.INTERNAL.DECIDE k 1 1 0 0 0 16 0\r\n"),
		[]byte("RL.INTERNAL.DECIDE k 1 1 0 0 0 16 0 0\r\n"),
		[]byte("RL.INTERNAL.DECIDE k 1 1 0 0 0 16 0 0 0\r\n"), // one argument too many
		[]byte("RL.INTERNAL.DECIDE k 1 1 0 0 0 16 0 -1\r\n"),
	}
}

func FuzzParseHello(f *testing.F) {
	fuzzRequest(f, requestSeeds(), func(t *testing.T, args [][]byte) {
		h, err := wire.ParseHello(args)
		if err != nil {
			return
		}
		again, err := wire.ParseHello(parse(t, wire.AppendHello(nil, string(h.Secret), h.NodeRun)))
		if err != nil || !bytes.Equal(again.Secret, h.Secret) || again.NodeRun != h.NodeRun {
			t.Fatalf("%+v re-read as %+v, %v", h, again, err)
		}
	})
}

func FuzzParseRead(f *testing.F) {
	fuzzRequest(f, requestSeeds(), func(t *testing.T, args [][]byte) {
		items, err := wire.ParseRead(args)
		if err != nil {
			return
		}
		for _, it := range items {
			if it.Limit > engine.MaxLimit {
				t.Fatalf("accepted out of range: %+v", it)
			}
		}
		again, err := wire.ParseRead(parse(t, wire.AppendRead(nil, items)))
		if err != nil || len(again) != len(items) || (len(items) > 0 && !reflect.DeepEqual(again, items)) {
			t.Fatalf("%v re-read as %v, %v", items, again, err)
		}
	})
}

func FuzzParseReplay(f *testing.F) {
	fuzzRequest(f, requestSeeds(), func(t *testing.T, args [][]byte) {
		b, err := wire.ParseReplay(args)
		if err != nil {
			return
		}
		again, err := wire.ParseReplay(parse(t, wire.AppendReplay(nil, b)))
		if err != nil || !reflect.DeepEqual(again, b) {
			t.Fatalf("%+v re-read as %+v, %v", b, again, err)
		}
	})
}

func FuzzParseDecide(f *testing.F) {
	fuzzRequest(f, requestSeeds(), func(t *testing.T, args [][]byte) {
		r, err := wire.ParseDecide(args)
		if err != nil {
			return
		}
		if r.Limit == 0 || r.Limit > engine.MaxLimit || r.Cost > engine.MaxLimit || r.Inflight > math.MaxInt64 || r.Return > math.MaxInt64 ||
			r.Deadline < 0 {
			t.Fatalf("accepted out of range: %+v", r)
		}
		again, err := wire.ParseDecide(parse(t, wire.AppendDecide(nil, r)))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("%+v re-read as %+v, %v", r, again, err)
		}
	})
}

func FuzzParsePublish(f *testing.F) {
	fuzzRequest(f, requestSeeds(), func(t *testing.T, args [][]byte) {
		comps, err := wire.ParsePublish(args)
		if err != nil {
			return
		}
		again, err := wire.ParsePublish(parse(t, wire.AppendPublish(nil, comps)))
		if err != nil || !reflect.DeepEqual(again, comps) {
			t.Fatalf("%+v re-read as %+v, %v", comps, again, err)
		}
	})
}

func FuzzParseForward(f *testing.F) {
	fuzzRequest(f, requestSeeds(), func(t *testing.T, args [][]byte) {
		fw, err := wire.ParseForward(args)
		if err != nil {
			return
		}
		var payload [][]byte
		for _, c := range fw.Cmds {
			payload = wire.AppendForwardCmd(payload, c)
		}
		if len(payload) != len(args)-3 {
			t.Fatalf("%d payload arguments re-encoded as %d", len(args)-3, len(payload))
		}
		again, err := wire.ParseForward(parse(t, wire.AppendForward(nil, fw.Proto, fw.Workspace, payload)))
		if err != nil || !reflect.DeepEqual(again, fw) {
			t.Fatalf("%+v re-read as %+v, %v", fw, again, err)
		}
	})
}

// fuzzReply runs check on the integers of the first reply in data, if it is one.
func fuzzReply(f *testing.F, check func(t *testing.T, v []int64)) {
	var w resp.Writer
	meta := engine.OriginMeta{Edges: 2, Applied: 3, LeaseTTLMs: 10000, Boot: 1763898912000, Now: 1763898913234, Durable: 2}
	wire.WriteCountsReply(&w, meta, []engine.CellCounts{{Seq: 4, CurRegional: 5, LeaseLeft: 6, LeaseSeq: 7}, {Seq: 9}})
	f.Add(append([]byte(nil), w.Bytes()...))
	w.Reset()
	wire.WriteDecideReply(&w, engine.Decision{Allowed: true, Limit: 10, Remaining: 3, RetryAfterMs: -1, ResetAfterMs: 5},
		engine.CellCounts{Seq: 4, CurRegional: 7, LeaseLeft: 8, LeaseSeq: 9}, meta)
	f.Add(append([]byte(nil), w.Bytes()...))
	f.Add([]byte("*1\r\n:0\r\n"))
	f.Add([]byte("*7\r\n:0\r\n:0\r\n:1\r\n:-1\r\n:0\r\n:0\r\n:0\r\n")) // the old counts reply
	f.Add([]byte("*11\r\n:1\r\n:0\r\n:-1\r\n:5\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n"))
	f.Add([]byte("*11\r\n:1\r\n:0\r\n:10000\r\n:5\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n")) // a meta without now
	f.Add([]byte("*12\r\n:0\r\n:0\r\n:0\r\n:5\r\n:-9\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := resp.NewReplyReader(bytes.NewReader(data), wire.MaxReplyInts).Read(nil)
		if err != nil || rep.Kind != resp.IntsReply {
			return
		}
		check(t, rep.Ints)
	})
}

func FuzzParseCountsReply(f *testing.F) {
	fuzzReply(f, func(t *testing.T, v []int64) {
		// The request it answers asked for the seqs the reply holds, when it has groups.
		// A reply is the meta (6 integers), then 7 per item.
		counts := make([]engine.CellCounts, max(len(v)-6, 0)/7)
		for i := range counts {
			counts[i].Seq = v[6+7*i]
		}
		meta, err := wire.ParseCountsReply(v, counts)
		if err != nil {
			return
		}
		var w resp.Writer
		wire.WriteCountsReply(&w, meta, counts)
		again := make([]engine.CellCounts, len(counts))
		for i := range again {
			again[i].Seq = counts[i].Seq
		}
		m, err := wire.ParseCountsReply(ints(t, &w), again)
		if err != nil || m != meta || !reflect.DeepEqual(again, counts) {
			t.Fatalf("%+v %+v re-read as %+v %+v, %v", meta, counts, m, again, err)
		}
	})
}

func FuzzParseDecideReply(f *testing.F) {
	fuzzReply(f, func(t *testing.T, v []int64) {
		dec, cc, meta, err := wire.ParseDecideReply(v)
		if err != nil {
			return
		}
		var w resp.Writer
		wire.WriteDecideReply(&w, dec, cc, meta)
		d, c, m, err := wire.ParseDecideReply(ints(t, &w))
		if err != nil || d != dec || c != cc || m != meta {
			t.Fatalf("%+v %+v %+v re-read as %+v %+v %+v, %v", dec, cc, meta, d, c, m, err)
		}
	})
}

func FuzzParsePublishReply(f *testing.F) {
	fuzzReply(f, func(t *testing.T, v []int64) {
		n, err := wire.ParsePublishReply(v)
		if err != nil {
			return
		}
		var w resp.Writer
		wire.WritePublishReply(&w, n)
		if again, err := wire.ParsePublishReply(ints(t, &w)); err != nil || again != n {
			t.Fatalf("%d re-read as %d, %v", n, again, err)
		}
	})
}
