package wire

import (
	"fmt"

	"github.com/ratchet/ratchet/resp"
)

// RL.INTERNAL.RESET key [key ...]: an edge hands its client's RL.RESET of tuples (keys
// made by engine.AppendKey) to their origin. The reply is [n]: how many of them held usage.

// CmdReset is RL.INTERNAL.RESET.
const CmdReset = "RL.INTERNAL.RESET"

// MaxResetKeys is the most keys of one RL.INTERNAL.RESET: an RL.RESET names at most
// engine.MaxLimits windows, far below MaxArgs.
const MaxResetKeys = MaxArgs - 1

// AppendReset appends RL.INTERNAL.RESET of keys to dst. The caller keeps len(keys) from 1
// to MaxResetKeys.
func AppendReset(dst []byte, keys [][]byte) []byte {
	dst = resp.AppendArray(dst, 1+len(keys))
	dst = resp.AppendBulkString(dst, CmdReset)
	for _, k := range keys {
		dst = resp.AppendBulk(dst, k)
	}
	return dst
}

// ParseReset decodes an RL.INTERNAL.RESET request of at least one key. Keys alias args.
func ParseReset(args [][]byte) ([][]byte, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("%w: %d arguments to RESET", ErrSyntax, len(args))
	}
	for i, k := range args[1:] {
		if !validKey(k) {
			return nil, fmt.Errorf("%w: key %d", ErrKey, i)
		}
	}
	return args[1:], nil
}

// WriteResetReply writes the reply to RL.INTERNAL.RESET.
func WriteResetReply(w *resp.Writer, n int) {
	w.Array(1)
	w.Int(int64(n))
}

// ParseResetReply decodes the integers of a reply to RL.INTERNAL.RESET of nkeys keys.
func ParseResetReply(v []int64, nkeys int) (int, error) {
	if len(v) != 1 || v[0] < 0 || v[0] > int64(nkeys) {
		return 0, fmt.Errorf("%w: reset reply %v to %d keys", ErrReply, v, nkeys)
	}
	return int(v[0]), nil
}
