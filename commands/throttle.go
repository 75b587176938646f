package commands

import (
	"math"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

// CL.THROTTLE key max_burst count_per_period period [quantity], byte for byte as the
// redis-cell module answers it: its usage and parse errors ("Cell error: ..."), and the
// reply [limited, limit, remaining, retry_after_s, reset_after_s] of keyspace.Tx.Throttle.
// Its state is a key of the counter keyspace, so it runs like the counter commands: alone,
// or inside a transaction's KV.Do.

const errThrottleUsage = "Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"

// ThrottleArgs are the parsed arguments of CL.THROTTLE.
type ThrottleArgs struct {
	Key    []byte
	Params engine.ThrottleParams
}

// ParseThrottle parses CL.THROTTLE's arguments after the command name, as redis-cell does:
// 4 or 5 of them, each number an i64 as Rust parses it (an optional sign, digits).
func ParseThrottle(args [][]byte) (ThrottleArgs, string) {
	if len(args) != 4 && len(args) != 5 {
		return ThrottleArgs{}, errThrottleUsage
	}
	a := ThrottleArgs{Key: args[0], Params: engine.ThrottleParams{Quantity: 1}}
	for i, dst := range []*int64{&a.Params.MaxBurst, &a.Params.Count, &a.Params.Period, &a.Params.Quantity} {
		if i+1 >= len(args) {
			break
		}
		v, ok := rustInt(args[i+1])
		if !ok {
			return ThrottleArgs{}, "Cell error: Couldn't parse as integer: " + clip(args[i+1])
		}
		*dst = v
	}
	if len(a.Key) > keyspace.MaxKey {
		return ThrottleArgs{}, errReply(keyspace.ErrKeyTooLarge)
	}
	return a, ""
}

// rustInt reads b as Rust's str::parse::<i64>: an optional '+' or '-', then at least one
// digit and nothing else, within 64 bits (leading zeros allowed).
func rustInt(b []byte) (int64, bool) {
	neg, v, ok := signedDigits(b)
	switch {
	case !ok:
		return 0, false
	case neg && v <= 1<<63:
		return int64(-v), true // -(1<<63) is MinInt64
	case !neg && v <= math.MaxInt64:
		return int64(v), true
	}
	return 0, false
}

func parseThrottleReq(args [][]byte) kvReq {
	a, e := ParseThrottle(args[1:])
	if e != "" {
		return kvReq{err: e}
	}
	return kvReq{keys: args[1:2], run: func(tx *keyspace.Tx, base int, w *resp.Writer) {
		r, err := engine.ThrottleTx(tx, base, a.Params)
		if err != nil {
			w.Error(errReply(err))
			return
		}
		writeThrottle(w, &r)
	}}
}

// writeThrottle writes CL.THROTTLE's reply of r.
func writeThrottle(w *resp.Writer, r *engine.ThrottleResult) {
	retry, reset := r.Seconds()
	w.Array(5)
	w.Int(boolInt(r.Limited))
	w.Int(r.Limit)
	w.Int(r.Remaining)
	w.Int(retry)
	w.Int(reset)
}
