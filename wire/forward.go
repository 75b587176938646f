package wire

import (
	"fmt"
	"strconv"

	"github.com/ratchet/ratchet/resp"
)

// RL.INTERNAL.FORWARD proto workspace argc arg... [argc arg...]: commands an origin runs
// for one of an edge's clients, in that workspace and RESP protocol; several run as
// MULTI ... EXEC. The reply is one bulk string: the command's (or EXEC's) reply, encoded
// for the client, which the edge writes as it is.

// Forward is an RL.INTERNAL.FORWARD request.
type Forward struct {
	Proto     int        // 2 or 3
	Workspace string     // not empty
	Cmds      [][][]byte // at least one command of at least one argument; alias the request
}

// AppendForwardCmd appends one command to a forward payload: its argument count, then its
// arguments (which are not copied).
func AppendForwardCmd(payload [][]byte, args [][]byte) [][]byte {
	payload = append(payload, strconv.AppendInt(nil, int64(len(args)), 10))
	return append(payload, args...)
}

// AppendForward appends RL.INTERNAL.FORWARD proto ws payload... to dst, where payload is
// made by AppendForwardCmd. The caller keeps len(payload) within MaxForwardArgs.
func AppendForward(dst []byte, proto int, ws string, payload [][]byte) []byte {
	dst = resp.AppendArray(dst, 3+len(payload))
	dst = resp.AppendBulkString(dst, CmdForward)
	dst = resp.AppendBulkInt(dst, int64(proto))
	dst = resp.AppendBulkString(dst, ws)
	for _, a := range payload {
		dst = resp.AppendBulk(dst, a)
	}
	return dst
}

// ParseForward decodes an RL.INTERNAL.FORWARD request. Every error wraps ErrSyntax.
func ParseForward(args [][]byte) (Forward, error) {
	if len(args) < 3 {
		return Forward{}, fmt.Errorf("%w: %d arguments to FORWARD", ErrSyntax, len(args))
	}
	proto, ok := parseInt(args[1])
	if !ok || (proto != 2 && proto != 3) || len(args[2]) == 0 {
		return Forward{}, fmt.Errorf("%w: protocol or workspace", ErrSyntax)
	}
	f := Forward{Proto: int(proto), Workspace: string(args[2])}
	for rest := args[3:]; len(rest) > 0; {
		n, ok := parseInt(rest[0])
		if !ok || n < 1 || n > int64(len(rest)-1) {
			return Forward{}, fmt.Errorf("%w: argument count of command %d", ErrSyntax, len(f.Cmds))
		}
		f.Cmds, rest = append(f.Cmds, rest[1:1+n]), rest[1+n:]
	}
	if len(f.Cmds) == 0 {
		return Forward{}, fmt.Errorf("%w: no command", ErrSyntax)
	}
	return f, nil
}
