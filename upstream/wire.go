package upstream

import (
	"errors"
	"fmt"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// The wire format of docs/internal-protocol.md: requests are arrays of bulk strings,
// replies flat arrays of integers.

// errProtocol marks a reply that does not fit its request: the connection is out of step
// and is closed.
var errProtocol = errors.New("protocol error")

func errProto(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errProtocol, fmt.Sprintf(format, a...))
}

func appendHello(b []byte, secret, nodeRun string) []byte {
	b = resp.AppendArray(b, 3)
	b = resp.AppendBulkString(b, "RL.INTERNAL.HELLO")
	b = resp.AppendBulkString(b, secret)
	return resp.AppendBulkString(b, nodeRun)
}

func appendRead(b []byte, items []engine.ReadItem) []byte {
	b = resp.AppendArray(b, 1+2*len(items))
	b = resp.AppendBulkString(b, "RL.INTERNAL.READ")
	for _, it := range items {
		b = resp.AppendBulk(b, it.Key)
		b = resp.AppendBulkInt(b, it.Seq)
	}
	return b
}

func appendReplay(b []byte, id uint64, items []engine.ReplayItem) []byte {
	b = resp.AppendArray(b, 2+4*len(items))
	b = resp.AppendBulkString(b, "RL.INTERNAL.REPLAY")
	b = resp.AppendBulkUint(b, id)
	for _, it := range items {
		b = resp.AppendBulk(b, it.Key)
		b = resp.AppendBulkInt(b, it.Seq)
		b = resp.AppendBulkUint(b, it.Cost)
		b = resp.AppendBulkUint(b, it.Limit)
	}
	return b
}

func appendDecide(b []byte, r engine.DecideRequest) []byte {
	b = resp.AppendArray(b, 7)
	b = resp.AppendBulkString(b, "RL.INTERNAL.DECIDE")
	b = resp.AppendBulk(b, r.Key)
	b = resp.AppendBulkUint(b, r.Limit)
	b = resp.AppendBulkUint(b, r.Cost)
	b = resp.AppendBulkUint(b, r.Pending)
	b = resp.AppendBulkUint(b, r.Inflight)
	return resp.AppendBulkUint(b, r.InflightBatch)
}

// appendForward encodes RL.INTERNAL.FORWARD proto workspace arg...: a command the origin
// runs for one of the edge's clients, whose reply comes back as one bulk string.
func appendForward(b []byte, proto int, ws string, args [][]byte) []byte {
	b = resp.AppendArray(b, 3+len(args))
	b = resp.AppendBulkString(b, "RL.INTERNAL.FORWARD")
	b = resp.AppendBulkInt(b, int64(proto))
	b = resp.AppendBulkString(b, ws)
	for _, a := range args {
		b = resp.AppendBulk(b, a)
	}
	return b
}

// decode stores the reply rep to cl. An error reply is cl's error and keeps the connection;
// a reply that does not fit cl's request is a protocol error, returned.
func (cl *call) decode(rep resp.Reply) error {
	switch rep.Kind {
	case resp.ErrorReply:
		cl.err = &ServerError{Msg: string(rep.Text)}
		return nil
	case resp.BulkReply:
		if cl.op != opForward {
			return errProto("unexpected bulk reply")
		}
		cl.raw = append([]byte(nil), rep.Text...)
		return nil
	case resp.IntsReply:
		if cl.op == opForward {
			return errProto("integers in reply to a forwarded command")
		}
	default:
		return errProto("unexpected simple string reply")
	}
	v := rep.Ints
	switch cl.op {
	case opRead, opReplay:
		if len(v) != 2+5*len(cl.counts) {
			return errProto("reply of %d integers to a request of %d items", len(v), len(cl.counts))
		}
		meta, err := decodeMeta(v[0], v[1])
		if err != nil {
			return err
		}
		for i := range cl.counts {
			g := v[2+5*i : 7+5*i]
			if g[0] != cl.counts[i].Seq {
				return errProto("reply for seq %d to a request for seq %d", g[0], cl.counts[i].Seq)
			}
			if err := decodeCounts(g, &cl.counts[i]); err != nil {
				return err
			}
		}
		cl.meta = meta
	case opDecide:
		if len(v) != 12 {
			return errProto("decide reply of %d integers", len(v))
		}
		meta, err := decodeMeta(v[0], v[1])
		if err != nil {
			return err
		}
		v = v[1:]
		allowed, limit, remaining, retry, reset := v[1], v[2], v[3], v[4], v[5]
		if allowed < 0 || allowed > 1 || limit < 0 || remaining < 0 || retry < -1 || reset < 0 {
			return errProto("decide reply out of range")
		}
		if err := decodeCounts(v[6:11], &cl.cc); err != nil {
			return err
		}
		cl.dec = engine.Decision{Allowed: allowed == 1, Limit: uint64(limit), Remaining: uint64(remaining),
			RetryAfterMs: retry, ResetAfterMs: reset}
		cl.meta = meta
	}
	return nil
}

// decodeMeta reads a reply's header: edges (at least 1 by the protocol; 0 is read as 1)
// and the last replay batch the origin applied for this edge run.
func decodeMeta(edges, applied int64) (engine.OriginMeta, error) {
	if edges < 0 || applied < 0 {
		return engine.OriginMeta{}, errProto("negative edge count or batch id")
	}
	return engine.OriginMeta{Edges: int(max(edges, 1)), Applied: uint64(applied)}, nil
}

// decodeCounts reads a counts group: seq, cur_regional, cur_imported, prev_regional,
// prev_imported.
func decodeCounts(g []int64, cc *engine.CellCounts) error {
	for _, n := range g[1:5] {
		if n < 0 {
			return errProto("negative count")
		}
	}
	*cc = engine.CellCounts{Seq: g[0], CurRegional: uint64(g[1]), CurImported: uint64(g[2]),
		PrevRegional: uint64(g[3]), PrevImported: uint64(g[4])}
	return nil
}
