package wire_test

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// changesReply is a reply to RL.INTERNAL.CHANGES with a change of each shape.
var changesReply = engine.ChangesReply{Version: 1 << 40, Changes: []engine.Change{
	{Version: 5, Kind: engine.ChangeReset, Key: key},
	{Version: 1<<40 - 1, Kind: 200, Key: []byte{}, Fields: []int64{-1, math.MaxInt64, math.MinInt64, 0}},
}}

func TestChangesGolden(t *testing.T) {
	if got, want := wire.AppendChanges(nil, 42), []byte("*2\r\n$19\r\nRL.INTERNAL.CHANGES\r\n$2\r\n42\r\n"); !bytes.Equal(got, want) {
		t.Errorf("request %q, want %q", got, want)
	}
	// version 300, resync 1, no changes: uvarint 300 is ac 02.
	var w resp.Writer
	wire.WriteChangesReply(&w, engine.ChangesReply{Version: 300, Resync: true})
	if got, want := w.Bytes(), []byte("$4\r\n\xac\x02\x01\x00\r\n"); !bytes.Equal(got, want) {
		t.Errorf("reply %q, want %q", got, want)
	}
	// version 9, then one change: version 9, kind 1, key "ab", no fields; then fields 1 and -1.
	got := wire.AppendChangesPayload(nil, engine.ChangesReply{Version: 9, Changes: []engine.Change{
		{Version: 9, Kind: engine.ChangeReset, Key: []byte("ab"), Fields: []int64{1, -1}}}})
	if want := []byte("\x09\x00\x01\x09\x01\x02ab\x02\x02\x01"); !bytes.Equal(got, want) {
		t.Errorf("payload %q, want %q", got, want)
	}
}

func TestChangesRoundTrip(t *testing.T) {
	for _, want := range []engine.ChangesReply{{}, {Version: 7, Resync: true}, changesReply} {
		got, err := wire.ParseChangesReply(wire.AppendChangesPayload(nil, want))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%+v re-read as %+v, %v", want, got, err)
		}
	}
	since, err := wire.ParseChanges(parse(t, wire.AppendChanges(nil, math.MaxInt64)))
	if err != nil || since != math.MaxInt64 {
		t.Errorf("since re-read as %d, %v", since, err)
	}
}

func TestChangesMalformed(t *testing.T) {
	for _, args := range [][]string{
		{"RL.INTERNAL.CHANGES"},
		{"RL.INTERNAL.CHANGES", "1", "2"},
		{"RL.INTERNAL.CHANGES", "-1"},
		{"RL.INTERNAL.CHANGES", "01"},
		{"RL.INTERNAL.CHANGES", "9223372036854775808"},
	} {
		if _, err := wire.ParseChanges(bytesArgs(args)); !errors.Is(err, wire.ErrSyntax) {
			t.Errorf("%q: %v, want ErrSyntax", args, err)
		}
	}
	valid := wire.AppendChangesPayload(nil, changesReply)
	for name, b := range map[string][]byte{
		"empty":             nil,
		"truncated":         valid[:len(valid)-1],
		"trailing byte":     append(append([]byte(nil), valid...), 0),
		"resync 2":          {1, 2, 0},
		"too many changes":  {1, 0, 0x81, 0x02}, // 257
		"version above":     wire.AppendChangesPayload(nil, engine.ChangesReply{Version: 4, Changes: []engine.Change{{Version: 5}}}),
		"versions not up":   wire.AppendChangesPayload(nil, engine.ChangesReply{Version: 9, Changes: []engine.Change{{Version: 5}, {Version: 5}}}),
		"version 0":         wire.AppendChangesPayload(nil, engine.ChangesReply{Version: 9, Changes: []engine.Change{{Version: 0}}}),
		"kind 256":          {9, 0, 1, 9, 0x80, 0x02, 0, 0},
		"key too long":      {9, 0, 1, 9, 1, 0x81, 0x20},
		"too many fields":   wire.AppendChangesPayload(nil, engine.ChangesReply{Version: 9, Changes: []engine.Change{{Version: 9, Fields: make([]int64, 9)}}}),
		"version over 2^63": append([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 0, 0),
	} {
		if _, err := wire.ParseChangesReply(b); !errors.Is(err, wire.ErrReply) {
			t.Errorf("%s: %v, want ErrReply", name, err)
		}
	}
}

func bytesArgs(args []string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}

func FuzzParseChanges(f *testing.F) {
	seeds := append(requestSeeds(), wire.AppendChanges(nil, 0), wire.AppendChanges(nil, 1<<40), []byte("RL.INTERNAL.CHANGES 01\r\n"))
	fuzzRequest(f, seeds, func(t *testing.T, args [][]byte) {
		since, err := wire.ParseChanges(args)
		if err != nil {
			return
		}
		again, err := wire.ParseChanges(parse(t, wire.AppendChanges(nil, since)))
		if err != nil || again != since {
			t.Fatalf("%d re-read as %d, %v", since, again, err)
		}
	})
}

func FuzzParseChangesReply(f *testing.F) {
	f.Add(wire.AppendChangesPayload(nil, changesReply))
	f.Add(wire.AppendChangesPayload(nil, engine.ChangesReply{Version: 3, Resync: true}))
	f.Add([]byte{9, 0, 1, 9, 1, 2, 'a', 'b', 1, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := wire.ParseChangesReply(data)
		if err != nil {
			return
		}
		if len(r.Changes) > engine.MaxChangesPerReply {
			t.Fatalf("accepted %d changes", len(r.Changes))
		}
		again, err := wire.ParseChangesReply(wire.AppendChangesPayload(nil, r))
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("%+v re-read as %+v, %v", r, again, err)
		}
	})
}

func TestResetMessages(t *testing.T) {
	k2 := engine.AppendKey(nil, engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte("k"), WindowMs: 1000})
	if got, want := wire.AppendReset(nil, [][]byte{k2}), []byte("*2\r\n$17\r\nRL.INTERNAL.RESET\r\n$5\r\n\xe8\x07\x00\x00k\r\n"); !bytes.Equal(got, want) {
		t.Errorf("request %q, want %q", got, want)
	}
	keys, err := wire.ParseReset(parse(t, wire.AppendReset(nil, [][]byte{key, k2})))
	if err != nil || !reflect.DeepEqual(keys, [][]byte{key, k2}) {
		t.Errorf("re-read as %q, %v", keys, err)
	}
	if _, err := wire.ParseReset(bytesArgs([]string{"RL.INTERNAL.RESET"})); !errors.Is(err, wire.ErrSyntax) {
		t.Errorf("no keys: %v", err)
	}
	if _, err := wire.ParseReset(bytesArgs([]string{"RL.INTERNAL.RESET", string(key), "\x00"})); !errors.Is(err, wire.ErrKey) {
		t.Errorf("a bad key: %v", err)
	}
	var w resp.Writer
	wire.WriteResetReply(&w, 2)
	if got := string(w.Bytes()); got != "*1\r\n:2\r\n" {
		t.Errorf("reply %q", got)
	}
	for _, c := range []struct {
		v     []int64
		nkeys int
		ok    bool
	}{{[]int64{2}, 2, true}, {[]int64{0}, 1, true}, {[]int64{3}, 2, false}, {[]int64{-1}, 2, false}, {nil, 2, false}, {[]int64{1, 1}, 2, false}} {
		if _, err := wire.ParseResetReply(c.v, c.nkeys); (err == nil) != c.ok || (err != nil && !errors.Is(err, wire.ErrReply)) {
			t.Errorf("reply %v to %d keys: %v", c.v, c.nkeys, err)
		}
	}
}

// TestPublishResetRows: a reset row travels in PUBLISH with its region behind a zero byte.
func TestPublishResetRows(t *testing.T) {
	comps := []engine.Component{{Key: key, Seq: 5, Region: "eu", Count: 7, Reset: true}, {Key: key, Seq: 5, Region: "eu", Count: 9}}
	b := wire.AppendPublish(nil, comps)
	if !bytes.Contains(b, []byte("$3\r\n\x00eu\r\n$1\r\n7\r\n")) {
		t.Errorf("encoded as %q", b)
	}
	got, err := wire.ParsePublish(parse(t, b))
	if err != nil || !reflect.DeepEqual(got, comps) {
		t.Errorf("re-read as %+v, %v", got, err)
	}
	if _, err := wire.ParsePublish(bytesArgs([]string{"RL.INTERNAL.PUBLISH", string(key), "5", "\x00", "7"})); !errors.Is(err, wire.ErrInt) {
		t.Errorf("a reset row without a region: %v", err)
	}
}

func FuzzParseReset(f *testing.F) {
	seeds := append(requestSeeds(), wire.AppendReset(nil, [][]byte{key}), []byte("RL.INTERNAL.RESET\r\n"))
	fuzzRequest(f, seeds, func(t *testing.T, args [][]byte) {
		keys, err := wire.ParseReset(args)
		if err != nil {
			return
		}
		again, err := wire.ParseReset(parse(t, wire.AppendReset(nil, keys)))
		if err != nil || !reflect.DeepEqual(again, keys) {
			t.Fatalf("%q re-read as %q, %v", keys, again, err)
		}
	})
}
