package wire_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// key is a valid tuple key (engine.AppendKey) of 27 bytes.
var key = engine.AppendKey(nil, engine.Tuple{Workspace: "ws", Namespace: "n\r\n", Key: []byte("login:alice"), WindowMs: 1000})

// parse splits one encoded request into its arguments, as an origin's connection does.
func parse(t testing.TB, b []byte) [][]byte {
	t.Helper()
	args, n, err := resp.Parse(b, nil, resp.DefaultLimits())
	if err != nil || n != len(b) {
		t.Fatalf("resp.Parse(%q) = %d of %d bytes, %v", b, n, len(b), err)
	}
	return args
}

// ints reads the one reply written to w as a sender does.
func ints(t testing.TB, w *resp.Writer) []int64 {
	t.Helper()
	rep, err := resp.NewReplyReader(bytes.NewReader(w.Bytes()), wire.MaxReplyInts).Read(nil)
	if err != nil || rep.Kind != resp.IntsReply {
		t.Fatalf("reply %q: %v, kind %d", w.Bytes(), err, rep.Kind)
	}
	return rep.Ints
}

func strs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func TestMaxArgsIsTheParsersBound(t *testing.T) {
	if wire.MaxArgs != resp.DefaultLimits().MaxArgs {
		t.Fatalf("wire.MaxArgs %d, resp.DefaultLimits().MaxArgs %d", wire.MaxArgs, resp.DefaultLimits().MaxArgs)
	}
}

// TestGolden holds the encoders to the layout docs/internal-protocol.md documents, byte
// for byte: both ends of a pair must agree. Every field of every message has a non-zero
// value in some case, so a field written in the wrong place or left out changes the bytes.
func TestGolden(t *testing.T) {
	k := "$" + strconv.Itoa(len(key)) + "\r\n" + string(key) // the key as a bulk string
	var w resp.Writer
	meta := engine.OriginMeta{Edges: 3, Applied: 1<<64 - 1, LeaseTTLMs: 10000, Boot: 1763898912000, Now: 1763898913234, Durable: 77,
		Hand: 12, HandsDurable: 9, HandsRestored: 4, ColdPPM: 1000, Changes: 31}
	cc := engine.CellCounts{Seq: 5, CurRegional: 1, CurImported: 2, PrevRegional: 3, PrevImported: 1<<64 - 1,
		LeaseLeft: 40, LeaseSeq: 1849598113792}
	reply := func(f func(w *resp.Writer)) []byte { w.Reset(); f(&w); return append([]byte(nil), w.Bytes()...) }
	cases := []struct {
		name      string
		got, want []byte
	}{
		{"hello", wire.AppendHello(nil, "sec", "edge/1"), []byte("*3\r\n$17\r\nRL.INTERNAL.HELLO\r\n$3\r\nsec\r\n$6\r\nedge/1\r\n")},
		{"peer hello", wire.AppendHello(nil, "s", wire.PeerRun("eu")), []byte("*3\r\n$17\r\nRL.INTERNAL.HELLO\r\n$1\r\ns\r\n$7\r\npeer:eu\r\n")},
		// key seq limit want, per item.
		{"read", wire.AppendRead(nil, []engine.ReadItem{{Key: key, Seq: 29000001, Limit: 100, Want: 7},
			{Key: []byte("k2"), Seq: 0, Limit: engine.MaxLimit}, {Seq: -3, Want: 16}}),
			[]byte("*13\r\n$16\r\nRL.INTERNAL.READ\r\n" +
				k + "\r\n$8\r\n29000001\r\n$3\r\n100\r\n$1\r\n7\r\n" +
				"$2\r\nk2\r\n$1\r\n0\r\n$16\r\n1125899906842624\r\n$1\r\n0\r\n" +
				"$0\r\n\r\n$2\r\n-3\r\n$1\r\n0\r\n$2\r\n16\r\n")},
		{"heartbeat", wire.AppendRead(nil, nil), []byte("*1\r\n$16\r\nRL.INTERNAL.READ\r\n")},
		// batch-id boot changes, then key seq cost limit want return per item.
		{"replay", wire.AppendReplay(nil, engine.ReplayBatch{ID: 1<<63 + 5, Boot: 1763898912000, Changes: 31, Items: []engine.ReplayItem{
			{Key: key, Seq: 7, Cost: 3, Limit: 10, Want: 64, Return: 1 << 40},
			{Key: []byte("k2"), Seq: 8, Cost: 1<<64 - 1}}}),
			[]byte("*16\r\n$18\r\nRL.INTERNAL.REPLAY\r\n$19\r\n9223372036854775813\r\n$13\r\n1763898912000\r\n$2\r\n31\r\n" +
				k + "\r\n$1\r\n7\r\n$1\r\n3\r\n$2\r\n10\r\n$2\r\n64\r\n$13\r\n1099511627776\r\n" +
				"$2\r\nk2\r\n$1\r\n8\r\n$20\r\n18446744073709551615\r\n$1\r\n0\r\n$1\r\n0\r\n$1\r\n0\r\n")},
		// key limit cost pending inflight batch-id want return deadline.
		{"decide", wire.AppendDecide(nil, engine.DecideRequest{Key: key, Limit: 10, Cost: 2, Pending: 5, Inflight: 1<<64 - 1, InflightBatch: 9,
			Want: 24, Return: 1 << 40, Deadline: 1763898913750}),
			[]byte("*10\r\n$18\r\nRL.INTERNAL.DECIDE\r\n" + k + "\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n5\r\n$20\r\n18446744073709551615\r\n$1\r\n9\r\n" +
				"$2\r\n24\r\n$13\r\n1099511627776\r\n$13\r\n1763898913750\r\n")},
		{"decide, deadline 0 (none)", wire.AppendDecide(nil, engine.DecideRequest{Key: []byte("k"), Limit: 1}),
			[]byte("*10\r\n$18\r\nRL.INTERNAL.DECIDE\r\n$1\r\nk\r\n$1\r\n1\r\n$1\r\n0\r\n$1\r\n0\r\n$1\r\n0\r\n$1\r\n0\r\n" +
				"$1\r\n0\r\n$1\r\n0\r\n$1\r\n0\r\n")},
		{"publish", wire.AppendPublish(nil, []engine.Component{{Key: []byte("\x01\x00\x00k"), Seq: 9, Region: "eu", Count: 1<<64 - 1}, {Key: []byte("x"), Seq: -2, Region: "us-east"}}),
			[]byte("*9\r\n$19\r\nRL.INTERNAL.PUBLISH\r\n$4\r\n\x01\x00\x00k\r\n$1\r\n9\r\n$2\r\neu\r\n$20\r\n18446744073709551615\r\n$1\r\nx\r\n$2\r\n-2\r\n$7\r\nus-east\r\n$1\r\n0\r\n")},
		{"forward", wire.AppendForward(nil, 3, "ws", wire.AppendForwardCmd(wire.AppendForwardCmd(nil, strs("INCR", "k")), strs("PING"))),
			[]byte("*8\r\n$19\r\nRL.INTERNAL.FORWARD\r\n$1\r\n3\r\n$2\r\nws\r\n$1\r\n2\r\n$4\r\nINCR\r\n$1\r\nk\r\n$1\r\n1\r\n$4\r\nPING\r\n")},
		// meta (edges applied lease_ttl_ms boot now durable hand hands_durable
		// hands_restored cold_ppm changes), then per item seq cur_regional
		// cur_imported prev_regional prev_imported lease_left lease_seq.
		{"counts reply", reply(func(w *resp.Writer) { wire.WriteCountsReply(w, meta, []engine.CellCounts{cc, {Seq: -1}}) }),
			[]byte("*25\r\n:3\r\n:9223372036854775807\r\n:10000\r\n:1763898912000\r\n:1763898913234\r\n:77\r\n:12\r\n:9\r\n:4\r\n:1000\r\n:31\r\n" +
				":5\r\n:1\r\n:2\r\n:3\r\n:9223372036854775807\r\n:40\r\n:1849598113792\r\n" +
				":-1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n")},
		{"saturated lease", reply(func(w *resp.Writer) {
			wire.WriteCountsReply(w, engine.OriginMeta{Edges: 1}, []engine.CellCounts{{Seq: 2, LeaseLeft: 1<<64 - 1, LeaseSeq: 1 << 63}})
		}), []byte("*18\r\n:1\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:2\r\n:0\r\n:0\r\n:0\r\n:0\r\n:9223372036854775807\r\n:9223372036854775807\r\n")},
		// meta, allowed limit remaining retry_after_ms reset_after_ms, counts.
		{"decide reply", reply(func(w *resp.Writer) {
			wire.WriteDecideReply(w, engine.Decision{Allowed: true, Limit: 10, Remaining: 7, RetryAfterMs: -1, ResetAfterMs: 1234}, cc, meta)
		}), []byte("*23\r\n:3\r\n:9223372036854775807\r\n:10000\r\n:1763898912000\r\n:1763898913234\r\n:77\r\n:12\r\n:9\r\n:4\r\n:1000\r\n:31\r\n" +
			":1\r\n:10\r\n:7\r\n:-1\r\n:1234\r\n" +
			":5\r\n:1\r\n:2\r\n:3\r\n:9223372036854775807\r\n:40\r\n:1849598113792\r\n")},
		{"publish reply", reply(func(w *resp.Writer) { wire.WritePublishReply(w, 42) }), []byte("*1\r\n:42\r\n")},
	}
	for _, c := range cases {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.name, c.got, c.want)
		}
	}
}

func TestHelloRoundTrip(t *testing.T) {
	for _, run := range []string{"edge-1/boot", wire.PeerRun("eu-west"), ""} {
		h, err := wire.ParseHello(parse(t, wire.AppendHello(nil, "s3cret", run)))
		if err != nil || string(h.Secret) != "s3cret" || h.NodeRun != run {
			t.Errorf("%q: %+v, %v", run, h, err)
		}
	}
	if region, ok := wire.PeerRegion(wire.PeerRun("eu")); !ok || region != "eu" {
		t.Errorf("PeerRegion(PeerRun(eu)) = %q, %v", region, ok)
	}
	if _, ok := wire.PeerRegion("edge-1/boot"); ok {
		t.Error("an edge's run read as a peer's")
	}
	if _, err := wire.ParseHello(strs("RL.INTERNAL.HELLO", "s")); !errors.Is(err, wire.ErrSyntax) {
		t.Errorf("two arguments: %v", err)
	}
}

func TestReadRoundTrip(t *testing.T) {
	for _, items := range [][]engine.ReadItem{
		{},
		{{Key: key, Seq: 0}},
		{{Key: key, Seq: math.MaxInt64, Limit: engine.MaxLimit, Want: engine.MaxLimit},
			{Key: engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", WindowMs: 1}), Seq: 17, Limit: 1, Want: 16},
			{Key: key, Seq: 18, Limit: 100}},
	} {
		got, err := wire.ParseRead(parse(t, wire.AppendRead(nil, items)))
		if err != nil || len(got) != len(items) || (len(items) > 0 && !reflect.DeepEqual(got, items)) {
			t.Errorf("%v: got %v, %v", items, got, err)
		}
	}
}

func TestReplayRoundTrip(t *testing.T) {
	want := engine.ReplayBatch{ID: math.MaxInt64, Boot: math.MaxInt64, Changes: math.MaxInt64, Items: []engine.ReplayItem{
		{Key: key, Seq: 7, Cost: 3, Limit: 10, Want: 64, Return: 1 << 40},
		{Key: key, Seq: math.MaxInt64, Cost: math.MaxInt64, Limit: 0, Want: math.MaxInt64, Return: math.MaxInt64},
		{Key: key, Seq: 8, Limit: 5, Return: 9}, // a return alone: no cost
	}}
	got, err := wire.ParseReplay(parse(t, wire.AppendReplay(nil, want)))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v", got, err)
	}
}

func TestDecideRoundTrip(t *testing.T) {
	for _, want := range []engine.DecideRequest{
		{Key: key, Limit: 1},
		{Key: key, Limit: 10, Cost: 2, Pending: 3, Inflight: 4, InflightBatch: 5, Want: 16, Return: 7, Deadline: 1763898913750},
		{Key: key, Limit: engine.MaxLimit, Cost: engine.MaxLimit, Pending: math.MaxInt64, Inflight: math.MaxInt64, InflightBatch: math.MaxInt64,
			Want: engine.MaxLimit, Return: math.MaxInt64, Deadline: math.MaxInt64},
	} {
		got, err := wire.ParseDecide(parse(t, wire.AppendDecide(nil, want)))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, %v, want %+v", got, err, want)
		}
	}
}

func TestPublishRoundTrip(t *testing.T) {
	want := []engine.Component{
		{Key: key, Seq: 3, Region: "eu", Count: 0},
		{Key: key, Seq: math.MaxInt64, Region: strings.Repeat("r", wire.MaxRegionLen), Count: math.MaxInt64},
	}
	got, err := wire.ParsePublish(parse(t, wire.AppendPublish(nil, want)))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, %v", got, err)
	}
	var w resp.Writer
	wire.WritePublishReply(&w, 7)
	if n, err := wire.ParsePublishReply(ints(t, &w)); n != 7 || err != nil {
		t.Errorf("publish reply: %d, %v", n, err)
	}
}

func TestForwardRoundTrip(t *testing.T) {
	for _, want := range []wire.Forward{
		{Proto: 2, Workspace: "default", Cmds: [][][]byte{strs("INCR", "k")}},
		{Proto: 3, Workspace: "ws", Cmds: [][][]byte{strs("SET", "k", "1"), strs("PING"), strs("EVALSHA", "abc", "1", "k", "")}},
	} {
		var payload [][]byte
		for _, c := range want.Cmds {
			payload = wire.AppendForwardCmd(payload, c)
		}
		got, err := wire.ParseForward(parse(t, wire.AppendForward(nil, want.Proto, want.Workspace, payload)))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, %v, want %+v", got, err, want)
		}
	}
}

func TestCountsReplyRoundTrip(t *testing.T) {
	meta := engine.OriginMeta{Edges: 4, Applied: 99, LeaseTTLMs: 10000, Boot: 1763898912000, Now: 1763898913001, Durable: 98}
	want := []engine.CellCounts{{Seq: 12, CurRegional: 1, CurImported: 2, PrevRegional: 3, PrevImported: 4, LeaseLeft: 5, LeaseSeq: 6}, {Seq: 11}}
	var w resp.Writer
	wire.WriteCountsReply(&w, meta, want)
	got := []engine.CellCounts{{Seq: 12}, {Seq: 11}}
	m, err := wire.ParseCountsReply(ints(t, &w), got)
	if err != nil || m != meta || !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v %+v, %v", m, got, err)
	}
	// Counts and leases beyond int64 saturate; an origin that reports no edges counts as
	// one; a boot or a clock before 1970 is still read as it is.
	w.Reset()
	wire.WriteCountsReply(&w, engine.OriginMeta{Boot: -7, Now: -5}, []engine.CellCounts{{Seq: 1, CurRegional: 1<<64 - 1, LeaseLeft: 1<<64 - 1, LeaseSeq: 1 << 63}})
	got = []engine.CellCounts{{Seq: 1}}
	m, err = wire.ParseCountsReply(ints(t, &w), got)
	if err != nil || m != (engine.OriginMeta{Edges: 1, Boot: -7, Now: -5}) ||
		got[0] != (engine.CellCounts{Seq: 1, CurRegional: math.MaxInt64, LeaseLeft: math.MaxInt64, LeaseSeq: math.MaxInt64}) {
		t.Errorf("saturated: %+v %+v, %v", m, got, err)
	}
}

func TestDecideReplyRoundTrip(t *testing.T) {
	meta := engine.OriginMeta{Edges: 2, Applied: 5, LeaseTTLMs: 2500, Boot: 1763898912000, Now: math.MaxInt64, Durable: 4}
	cc := engine.CellCounts{Seq: 8, CurRegional: 9, PrevImported: 1, LeaseLeft: 30, LeaseSeq: math.MaxInt64}
	for _, dec := range []engine.Decision{
		{Allowed: true, Limit: 10, Remaining: 7, RetryAfterMs: -1, ResetAfterMs: 1234},
		{Limit: engine.MaxLimit, RetryAfterMs: 50, ResetAfterMs: math.MaxInt64},
	} {
		var w resp.Writer
		wire.WriteDecideReply(&w, dec, cc, meta)
		d, c, m, err := wire.ParseDecideReply(ints(t, &w))
		if err != nil || d != dec || c != cc || m != meta {
			t.Errorf("got %+v %+v %+v, %v", d, c, m, err)
		}
	}
}

// TestBounds checks that the largest requests the bounds allow (every integer at its
// longest) are within the origin's parser, one more item is not, and the replies to them
// are within what a sender reads.
func TestBounds(t *testing.T) {
	// The values docs/internal-protocol.md states: 1+4n arguments of READ, 4+6n of REPLAY.
	if wire.MaxReadItems != 2047 || wire.MaxReplayItems != 1364 || wire.MaxPublishItems != 2047 || wire.MaxForwardArgs != 8189 {
		t.Errorf("bounds %d %d %d %d, documented 2047 1364 2047 8189",
			wire.MaxReadItems, wire.MaxReplayItems, wire.MaxPublishItems, wire.MaxForwardArgs)
	}
	k := engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 1})
	lim := resp.DefaultLimits()
	fits := func(b []byte) bool {
		_, n, err := resp.Parse(b, nil, lim)
		return err == nil && n == len(b)
	}
	reads := make([]engine.ReadItem, wire.MaxReadItems+1)
	replays := make([]engine.ReplayItem, wire.MaxReplayItems+1)
	comps := make([]engine.Component, wire.MaxPublishItems+1)
	for i := range reads {
		reads[i] = engine.ReadItem{Key: k, Seq: math.MaxInt64 - int64(i), Limit: engine.MaxLimit, Want: engine.MaxLimit}
	}
	for i := range replays {
		replays[i] = engine.ReplayItem{Key: k, Seq: math.MaxInt64 - int64(i), Cost: math.MaxInt64, Limit: math.MaxInt64,
			Want: math.MaxInt64, Return: math.MaxInt64}
	}
	for i := range comps {
		comps[i] = engine.Component{Key: k, Seq: int64(i), Region: "eu", Count: 1}
	}
	payload := make([][]byte, wire.MaxForwardArgs+1)
	for i := range payload {
		payload[i] = []byte("x")
	}
	cases := []struct {
		name      string
		max, over []byte
	}{
		{"read", wire.AppendRead(nil, reads[:wire.MaxReadItems]), wire.AppendRead(nil, reads)},
		{"replay", wire.AppendReplay(nil, engine.ReplayBatch{ID: math.MaxInt64, Boot: math.MaxInt64, Items: replays[:wire.MaxReplayItems]}),
			wire.AppendReplay(nil, engine.ReplayBatch{ID: math.MaxInt64, Boot: math.MaxInt64, Items: replays})},
		{"publish", wire.AppendPublish(nil, comps[:wire.MaxPublishItems]), wire.AppendPublish(nil, comps)},
		{"forward", wire.AppendForward(nil, 2, "ws", payload[:wire.MaxForwardArgs]), wire.AppendForward(nil, 2, "ws", payload)},
	}
	for _, c := range cases {
		if !fits(c.max) || fits(c.over) {
			t.Errorf("%s: the bound does not match resp.DefaultLimits().MaxArgs %d", c.name, lim.MaxArgs)
		}
	}
	if got, err := wire.ParseRead(parse(t, cases[0].max)); err != nil || !reflect.DeepEqual(got, reads[:wire.MaxReadItems]) {
		t.Errorf("largest read: %d items, %v", len(got), err)
	}
	if got, err := wire.ParseReplay(parse(t, cases[1].max)); err != nil || !reflect.DeepEqual(got.Items, replays[:wire.MaxReplayItems]) {
		t.Errorf("largest replay: %d items, %v", len(got.Items), err)
	}
	// The replies to the largest read and replay, every integer at its longest, fit what a
	// sender reads, and decode.
	full := engine.CellCounts{CurRegional: math.MaxInt64, CurImported: math.MaxInt64, PrevRegional: math.MaxInt64,
		PrevImported: math.MaxInt64, LeaseLeft: math.MaxInt64, LeaseSeq: math.MaxInt64}
	meta := engine.OriginMeta{Edges: math.MaxInt64, Applied: math.MaxInt64, LeaseTTLMs: math.MaxInt64, Boot: math.MinInt64, Now: math.MinInt64,
		Durable: math.MaxInt64, Hand: math.MaxInt64, HandsDurable: math.MaxInt64, HandsRestored: math.MaxInt64, ColdPPM: 1e6, Changes: math.MaxInt64}
	for _, n := range []int{wire.MaxReadItems, wire.MaxReplayItems} {
		counts := make([]engine.CellCounts, n)
		asked := make([]engine.CellCounts, n)
		for i := range counts {
			counts[i], counts[i].Seq = full, math.MinInt64+int64(i)
			asked[i].Seq = counts[i].Seq
		}
		var w resp.Writer
		wire.WriteCountsReply(&w, meta, counts)
		v := ints(t, &w)
		if len(v) != 11+7*n || len(v) > wire.MaxReplyInts {
			t.Errorf("counts reply to %d items: %d integers, MaxReplyInts %d", n, len(v), wire.MaxReplyInts)
		}
		if m, err := wire.ParseCountsReply(v, asked); err != nil || m != meta || !reflect.DeepEqual(asked, counts) {
			t.Errorf("counts reply to %d items: %+v, %v", n, m, err)
		}
	}
}

func TestMalformedRequests(t *testing.T) {
	k := string(key)
	const (
		over   = "1125899906842625"    // engine.MaxLimit + 1
		beyond = "9223372036854775808" // math.MaxInt64 + 1
	)
	cases := []struct {
		name  string
		parse func([][]byte) error
		args  []string
		want  error // nil: the request is valid (each group's base, changed by one field below)
	}{
		{"read valid", read, []string{"RL.INTERNAL.READ", k, "1", "10", "16", k, "2", "0", "0"}, nil},
		{"read no name", read, nil, wire.ErrSyntax},
		{"read key only", read, []string{"RL.INTERNAL.READ", k}, wire.ErrSyntax},
		{"read without want", read, []string{"RL.INTERNAL.READ", k, "1", "10"}, wire.ErrSyntax},
		{"read old format", read, []string{"RL.INTERNAL.READ", k, "1"}, wire.ErrSyntax},
		// Two items of the old format are as many arguments as one new item: the second key
		// is read as a limit.
		{"read old format, two items", read, []string{"RL.INTERNAL.READ", k, "1", k, "2"}, wire.ErrInt},
		{"read extra argument", read, []string{"RL.INTERNAL.READ", k, "1", "10", "16", k}, wire.ErrSyntax},
		{"read bad key", read, []string{"RL.INTERNAL.READ", "garbage", "1", "10", "16"}, wire.ErrKey},
		{"read bad seq", read, []string{"RL.INTERNAL.READ", k, "-1", "10", "16"}, wire.ErrKey},
		{"read seq leading zero", read, []string{"RL.INTERNAL.READ", k, "01", "10", "16"}, wire.ErrKey},
		{"read seq overflow", read, []string{"RL.INTERNAL.READ", k, beyond, "10", "16"}, wire.ErrKey},
		{"read bad limit", read, []string{"RL.INTERNAL.READ", k, "1", "x", "16"}, wire.ErrInt},
		{"read negative limit", read, []string{"RL.INTERNAL.READ", k, "1", "-10", "16"}, wire.ErrInt},
		{"read limit over max", read, []string{"RL.INTERNAL.READ", k, "1", over, "16"}, wire.ErrInt},
		{"read bad want", read, []string{"RL.INTERNAL.READ", k, "1", "10", "+16"}, wire.ErrInt},
		{"read want leading zero", read, []string{"RL.INTERNAL.READ", k, "1", "10", "016"}, wire.ErrInt},
		{"read want overflow", read, []string{"RL.INTERNAL.READ", k, "1", "10", beyond}, wire.ErrInt},
		{"read empty want", read, []string{"RL.INTERNAL.READ", k, "1", "10", ""}, wire.ErrInt},
		{"read bad want in second item", read, []string{"RL.INTERNAL.READ", k, "1", "10", "16", k, "2", "10", "x"}, wire.ErrInt},
		{"read key error first", read, []string{"RL.INTERNAL.READ", "", "x", "x", "x"}, wire.ErrKey},

		{"replay valid", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "0", k, "1", "2", "10", "16", "7", k, "2", "0", "0", "0", "0"}, nil},
		{"replay no items", replay, []string{"RL.INTERNAL.REPLAY", "1", "0"}, wire.ErrSyntax},
		{"replay without boot", replay, []string{"RL.INTERNAL.REPLAY", "3", k, "1", "2", "10", "16", "7"}, wire.ErrSyntax},
		{"replay bad changes", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "x", k, "1", "2", "10", "16", "7"}, wire.ErrSyntax},
		{"replay without changes", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", k, "1", "2", "10", "16", "7"}, wire.ErrSyntax},
		{"replay bad boot", replay, []string{"RL.INTERNAL.REPLAY", "3", "-5", "0", k, "1", "2", "10", "16", "7"}, wire.ErrSyntax},
		{"replay old format", replay, []string{"RL.INTERNAL.REPLAY", "1", "0", "0", k, "1", "1", "1"}, wire.ErrSyntax},
		{"replay short item", replay, []string{"RL.INTERNAL.REPLAY", "1", "0", "0", k, "1", "2", "10", "16"}, wire.ErrSyntax},
		{"replay long item", replay, []string{"RL.INTERNAL.REPLAY", "1", "0", "0", k, "1", "2", "10", "16", "7", "0"}, wire.ErrSyntax},
		{"replay bad id", replay, []string{"RL.INTERNAL.REPLAY", "x", "0", "0", k, "1", "2", "10", "16", "7"}, wire.ErrSyntax},
		{"replay bad key", replay, []string{"RL.INTERNAL.REPLAY", "1", "0", "0", "\x00", "1", "2", "10", "16", "7"}, wire.ErrKey},
		{"replay bad seq", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "0", k, "-1", "2", "10", "16", "7"}, wire.ErrInt},
		{"replay bad cost", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "0", k, "1000", "x", "10", "16", "7"}, wire.ErrInt},
		{"replay bad limit", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "0", k, "1000", "2", "+1", "16", "7"}, wire.ErrInt},
		{"replay bad want", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "0", k, "1000", "2", "10", "x", "7"}, wire.ErrInt},
		{"replay want leading zero", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "0", k, "1000", "2", "10", "016", "7"}, wire.ErrInt},
		{"replay bad return", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "0", k, "1000", "2", "10", "16", ""}, wire.ErrInt},
		{"replay return overflow", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "0", k, "1000", "2", "10", "16", beyond}, wire.ErrInt},
		{"replay bad return in second item", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "0", k, "1", "2", "10", "16", "7", k, "2", "0", "0", "0", "x"}, wire.ErrInt},
		{"replay key error first", replay, []string{"RL.INTERNAL.REPLAY", "3", "0", "0", "", "x", "x", "x", "x", "x"}, wire.ErrKey},

		{"decide valid", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", "7", "1763898913750"}, nil},
		{"decide old format", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0"}, wire.ErrSyntax},
		{"decide without return and deadline", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16"}, wire.ErrSyntax},
		{"decide without deadline", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", "7"}, wire.ErrSyntax},
		{"decide extra argument", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", "7", "0", "0"}, wire.ErrSyntax},
		{"decide bad key", decide, []string{"RL.INTERNAL.DECIDE", "", "0", "x", "0", "0", "0", "x", "x", "x"}, wire.ErrKey},
		{"decide zero limit", decide, []string{"RL.INTERNAL.DECIDE", k, "0", "1", "0", "0", "0", "16", "7", "0"}, wire.ErrLimit},
		{"decide limit over max", decide, []string{"RL.INTERNAL.DECIDE", k, over, "1", "0", "0", "0", "16", "7", "0"}, wire.ErrLimit},
		{"decide cost over max", decide, []string{"RL.INTERNAL.DECIDE", k, "10", over, "0", "0", "0", "16", "7", "0"}, wire.ErrCost},
		{"decide bad pending", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "-1", "0", "0", "16", "7", "0"}, wire.ErrCost},
		{"decide inflight overflow", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", beyond, "0", "16", "7", "0"}, wire.ErrCost},
		{"decide batch overflow", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", beyond, "16", "7", "0"}, wire.ErrCost},
		{"decide bad want", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "x", "7", "0"}, wire.ErrCost},
		{"decide negative want", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "-16", "7", "0"}, wire.ErrCost},
		{"decide want overflow", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", beyond, "7", "0"}, wire.ErrCost},
		{"decide bad return", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", "", "0"}, wire.ErrCost},
		{"decide return overflow", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", beyond, "0"}, wire.ErrCost},
		{"decide largest deadline", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", "7", "9223372036854775807"}, nil},
		{"decide bad deadline", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", "7", "soon"}, wire.ErrCost},
		{"decide empty deadline", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", "7", ""}, wire.ErrCost},
		{"decide negative deadline", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", "7", "-1763898913750"}, wire.ErrCost},
		{"decide deadline leading zero", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", "7", "01763898913750"}, wire.ErrCost},
		{"decide deadline overflow", decide, []string{"RL.INTERNAL.DECIDE", k, "10", "1", "0", "0", "0", "16", "7", beyond}, wire.ErrCost},
		{"decide limit error before want", decide, []string{"RL.INTERNAL.DECIDE", k, "0", "1", "0", "0", "0", "x", "7", "0"}, wire.ErrLimit},

		{"publish no rows", publish, []string{"RL.INTERNAL.PUBLISH"}, wire.ErrSyntax},
		{"publish short row", publish, []string{"RL.INTERNAL.PUBLISH", k, "1", "eu"}, wire.ErrSyntax},
		{"publish bad key", publish, []string{"RL.INTERNAL.PUBLISH", "zz", "1", "eu", "1"}, wire.ErrKey},
		{"publish empty region", publish, []string{"RL.INTERNAL.PUBLISH", k, "1", "", "1"}, wire.ErrInt},
		{"publish long region", publish, []string{"RL.INTERNAL.PUBLISH", k, "1", strings.Repeat("r", 256), "1"}, wire.ErrInt},
		{"publish bad count", publish, []string{"RL.INTERNAL.PUBLISH", k, "1", "eu", "-1"}, wire.ErrInt},
		{"forward short", forward, []string{"RL.INTERNAL.FORWARD", "2"}, wire.ErrSyntax},
		{"forward proto", forward, []string{"RL.INTERNAL.FORWARD", "4", "ws", "1", "PING"}, wire.ErrSyntax},
		{"forward no workspace", forward, []string{"RL.INTERNAL.FORWARD", "2", "", "1", "PING"}, wire.ErrSyntax},
		{"forward no command", forward, []string{"RL.INTERNAL.FORWARD", "2", "ws"}, wire.ErrSyntax},
		{"forward zero argc", forward, []string{"RL.INTERNAL.FORWARD", "2", "ws", "0", "PING"}, wire.ErrSyntax},
		{"forward argc beyond", forward, []string{"RL.INTERNAL.FORWARD", "2", "ws", "1", "PING", "2", "GET"}, wire.ErrSyntax},
		{"forward huge argc", forward, []string{"RL.INTERNAL.FORWARD", "2", "ws", "99999999999999999999", "PING"}, wire.ErrSyntax},
	}
	for _, c := range cases {
		if err := c.parse(strs(c.args...)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func read(a [][]byte) error    { _, err := wire.ParseRead(a); return err }
func replay(a [][]byte) error  { _, err := wire.ParseReplay(a); return err }
func decide(a [][]byte) error  { _, err := wire.ParseDecide(a); return err }
func publish(a [][]byte) error { _, err := wire.ParsePublish(a); return err }
func forward(a [][]byte) error { _, err := wire.ParseForward(a); return err }

func TestMalformedReplies(t *testing.T) {
	counts := func(v []int64) error {
		_, err := wire.ParseCountsReply(v, []engine.CellCounts{{Seq: 7}})
		return err
	}
	decideReply := func(v []int64) error { _, _, _, err := wire.ParseDecideReply(v); return err }
	publishReply := func(v ...int64) error { _, err := wire.ParsePublishReply(v); return err }
	// Valid replies (checked below), and each changed in one place.
	meta := []int64{1, 0, 10000, 1763898912000, 1763898913234, 0, 0, 0, 0, 0, 5} // edges applied lease_ttl_ms boot now durable hand hands_durable hands_restored cold_ppm changes
	group := []int64{7, 0, 0, 0, 0, 30, 99}                                      // seq cur_regional cur_imported prev_regional prev_imported lease_left lease_seq
	cr := slices.Concat(meta, group)
	dr := slices.Concat(meta, []int64{1, 10, 9, 0, 500}, group) // allowed limit remaining retry reset
	set := func(v []int64, i int, n int64) []int64 { v = slices.Clone(v); v[i] = n; return v }
	if err := counts(cr); err != nil {
		t.Fatalf("the valid counts reply: %v", err)
	}
	if err := decideReply(dr); err != nil {
		t.Fatalf("the valid decide reply: %v", err)
	}
	cases := []struct {
		name string
		err  error
	}{
		{"counts short", counts(cr[:len(cr)-1])},
		{"counts long", counts(append(slices.Clone(cr), 0))},
		{"counts old format", counts([]int64{1, 0, 7, 0, 0, 0, 0})},
		{"counts meta without now", counts(slices.Concat(meta[:4], meta[5:], group))},
		{"counts other seq", counts(set(cr, 11, 8))},
		{"counts negative cur_regional", counts(set(cr, 12, -1))},
		{"counts negative prev_imported", counts(set(cr, 15, -1))},
		{"counts negative lease_left", counts(set(cr, 16, -1))},
		{"counts negative lease_seq", counts(set(cr, 17, -1))},
		{"counts negative edges", counts(set(cr, 0, -1))},
		{"counts negative applied", counts(set(cr, 1, -1))},
		{"counts negative lease ttl", counts(set(cr, 2, -1))},
		{"counts negative durable", counts(set(cr, 5, -1))},
		{"counts negative hand", counts(set(cr, 6, -1))},
		{"counts negative hands_durable", counts(set(cr, 7, -1))},
		{"counts negative hands_restored", counts(set(cr, 8, -1))},
		{"counts negative cold_ppm", counts(set(cr, 9, -1))},
		{"counts cold_ppm over a million", counts(set(cr, 9, 1e6+1))},
		{"counts negative changes", counts(set(cr, 10, -1))},
		{"counts meta without changes", counts(slices.Concat(meta[:10], group))},
		{"counts meta without hands", counts(slices.Concat(meta[:6], group))},
		{"counts meta without durable", counts(slices.Concat(meta[:5], group))},
		{"decide short", decideReply(dr[:len(dr)-1])},
		{"decide long", decideReply(append(slices.Clone(dr), 0))},
		{"decide old format", decideReply([]int64{1, 0, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0})},
		{"decide meta without now", decideReply(slices.Concat(meta[:4], dr[11:]))},
		{"decide negative lease ttl", decideReply(set(dr, 2, -1))},
		{"decide allowed 2", decideReply(set(dr, 11, 2))},
		{"decide retry -2", decideReply(set(dr, 14, -2))},
		{"decide negative reset", decideReply(set(dr, 15, -1))},
		{"decide negative count", decideReply(set(dr, 17, -5))},
		{"decide negative lease_left", decideReply(set(dr, 21, -1))},
		{"decide negative lease_seq", decideReply(set(dr, 22, -1))},
		{"publish empty", publishReply()},
		{"publish negative", publishReply(-1)},
	}
	for _, c := range cases {
		if !errors.Is(c.err, wire.ErrReply) {
			t.Errorf("%s: %v, want ErrReply", c.name, c.err)
		}
	}
}
