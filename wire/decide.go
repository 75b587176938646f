package wire

import (
	"fmt"
	"math"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// RL.INTERNAL.DECIDE key limit cost pending inflight batch-id want return deadline
// hands one decision to the origin. The reply is [meta, allowed, limit, remaining, retry_after_ms,
// reset_after_ms, counts].

// decideReplyInts is the length of a reply to RL.INTERNAL.DECIDE.
const decideReplyInts = metaInts + 5 + countsInts

// AppendDecide appends RL.INTERNAL.DECIDE for r to dst.
func AppendDecide(dst []byte, r engine.DecideRequest) []byte {
	dst = resp.AppendArray(dst, decideArgs)
	dst = resp.AppendBulkString(dst, CmdDecide)
	dst = resp.AppendBulk(dst, r.Key)
	dst = resp.AppendBulkUint(dst, r.Limit)
	dst = resp.AppendBulkUint(dst, r.Cost)
	dst = resp.AppendBulkUint(dst, r.Pending)
	dst = resp.AppendBulkUint(dst, r.Inflight)
	dst = resp.AppendBulkUint(dst, r.InflightBatch)
	dst = resp.AppendBulkUint(dst, r.Want)
	dst = resp.AppendBulkUint(dst, r.Return)
	return resp.AppendBulkInt(dst, r.Deadline)
}

// ParseDecide decodes an RL.INTERNAL.DECIDE request. The key aliases args. Limit is from 1
// to engine.MaxLimit (else ErrLimit), Cost and Want to engine.MaxLimit and the others to
// math.MaxInt64 (else ErrCost).
func ParseDecide(args [][]byte) (engine.DecideRequest, error) {
	if len(args) != decideArgs {
		return engine.DecideRequest{}, fmt.Errorf("%w: %d arguments to DECIDE", ErrSyntax, len(args))
	}
	if !validKey(args[1]) {
		return engine.DecideRequest{}, ErrKey
	}
	limit, ok1 := parseUint(args[2], engine.MaxLimit)
	cost, ok2 := parseUint(args[3], engine.MaxLimit)
	pending, ok3 := parseUint(args[4], math.MaxInt64)
	inflight, ok4 := parseUint(args[5], math.MaxInt64)
	batch, ok5 := parseUint(args[6], math.MaxInt64)
	want, ok6 := parseUint(args[7], engine.MaxLimit)
	ret, ok7 := parseUint(args[8], math.MaxInt64)
	deadline, ok8 := parseInt(args[9])
	if !ok1 || limit == 0 {
		return engine.DecideRequest{}, ErrLimit
	}
	if !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 || !ok8 {
		return engine.DecideRequest{}, ErrCost
	}
	return engine.DecideRequest{Key: args[1], Limit: limit, Cost: cost, Pending: pending,
		Inflight: inflight, InflightBatch: batch, Want: want, Return: ret, Deadline: deadline}, nil
}

// WriteDecideReply writes the reply to RL.INTERNAL.DECIDE.
func WriteDecideReply(w *resp.Writer, dec engine.Decision, cc engine.CellCounts, meta engine.OriginMeta) {
	w.Array(decideReplyInts)
	writeMeta(w, meta)
	writeDecision(w, dec)
	writeCellCounts(w, cc)
}

// writeDecision writes a decision's five integers: allowed, limit, remaining,
// retry_after_ms, reset_after_ms.
func writeDecision(w *resp.Writer, dec engine.Decision) {
	allowed := int64(0)
	if dec.Allowed {
		allowed = 1
	}
	w.Int(allowed)
	w.Int(clampInt(dec.Limit))
	w.Int(clampInt(dec.Remaining))
	w.Int(dec.RetryAfterMs)
	w.Int(dec.ResetAfterMs)
}

// parseDecision reads a decision's five integers.
func parseDecision(d []int64) (engine.Decision, error) {
	allowed, limit, remaining, retry, reset := d[0], d[1], d[2], d[3], d[4]
	if allowed < 0 || allowed > 1 || limit < 0 || remaining < 0 || retry < -1 || reset < 0 {
		return engine.Decision{}, fmt.Errorf("%w: decision out of range", ErrReply)
	}
	return engine.Decision{Allowed: allowed == 1, Limit: uint64(limit), Remaining: uint64(remaining),
		RetryAfterMs: retry, ResetAfterMs: reset}, nil
}

// ParseDecideReply decodes the integers of a reply to RL.INTERNAL.DECIDE.
func ParseDecideReply(v []int64) (engine.Decision, engine.CellCounts, engine.OriginMeta, error) {
	var (
		dec  engine.Decision
		cc   engine.CellCounts
		meta engine.OriginMeta
	)
	if len(v) != decideReplyInts {
		return dec, cc, meta, fmt.Errorf("%w: decide reply of %d integers", ErrReply, len(v))
	}
	meta, err := parseMeta(v[:metaInts])
	if err != nil {
		return dec, cc, meta, err
	}
	d := v[metaInts:]
	if dec, err = parseDecision(d[:5]); err != nil {
		return engine.Decision{}, cc, meta, err
	}
	if err := parseCellCounts(d[5:], &cc); err != nil {
		return engine.Decision{}, cc, meta, err
	}
	return dec, cc, meta, nil
}
