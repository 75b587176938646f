package upstream

import (
	"errors"
	"fmt"

	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// The messages themselves (docs/internal-protocol.md) are encoded and decoded by package
// wire; this file matches each reply to its call.

// errProtocol marks a reply that does not fit its request: the connection is out of step
// and is closed.
var errProtocol = errors.New("protocol error")

func errProto(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errProtocol, fmt.Sprintf(format, a...))
}

// decode stores the reply rep to cl. An error reply is cl's error and keeps the connection;
// a reply that does not fit cl's request is a protocol error, returned.
func (cl *call) decode(rep resp.Reply) error {
	switch rep.Kind {
	case resp.ErrorReply:
		cl.err = &ServerError{Msg: string(rep.Text)}
		return nil
	case resp.BulkReply:
		switch cl.op {
		case opForward:
			cl.raw = append([]byte(nil), rep.Text...)
			return nil
		case opChanges:
			var err error
			if cl.chg, err = wire.ParseChangesReply(rep.Text); err != nil {
				return fmt.Errorf("%w: %w", errProtocol, err)
			}
			return nil
		}
		return errProto("unexpected bulk reply")
	case resp.IntsReply:
		switch cl.op {
		case opForward, opPing, opChanges:
			return errProto("unexpected integers reply")
		case opPublish:
			return nil
		}
	default:
		if cl.op == opPublish || cl.op == opPing {
			return nil
		}
		return errProto("unexpected simple string reply")
	}
	var err error
	switch cl.op {
	case opRead, opReplay:
		cl.meta, err = wire.ParseCountsReply(rep.Ints, cl.counts)
	case opDecide:
		cl.dec, cl.cc, cl.meta, err = wire.ParseDecideReply(rep.Ints)
	case opDecideMulti:
		cl.meta, err = wire.ParseDecideMultiReply(rep.Ints, cl.decs, cl.counts)
	case opReset:
		cl.n, err = wire.ParseResetReply(rep.Ints, cl.n)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errProtocol, err)
	}
	return nil
}
