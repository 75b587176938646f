package wire

import (
	"fmt"
	"math"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// RL.INTERNAL.DECIDEMULTI cost batch-id deadline key limit pending inflight want return
// [key limit pending inflight want return ...] hands a multi-limit decision to the origin:
// 1 to engine.MaxLimits tuples (distinct keys), decided at one instant and counted all or
// none. Each item's fields are RL.INTERNAL.DECIDE's; cost, batch-id and deadline are the
// request's. The reply is [meta, then per item: allowed, limit, remaining,
// retry_after_ms, reset_after_ms, counts], the items in the request's order.

// CmdDecideMulti is the command name of a multi-limit hand-off, as senders spell it.
const CmdDecideMulti = "RL.INTERNAL.DECIDEMULTI"

const (
	// decideMultiHeadArgs: the command name, cost, batch-id and deadline.
	decideMultiHeadArgs = 4
	// decideMultiItemArgs: key limit pending inflight want return.
	decideMultiItemArgs = 6
	// decideItemInts is the length of one item's part of a DECIDEMULTI reply.
	decideItemInts = 5 + countsInts
)

// AppendDecideMulti appends RL.INTERNAL.DECIDEMULTI for r to dst.
func AppendDecideMulti(dst []byte, r engine.DecideMultiRequest) []byte {
	dst = resp.AppendArray(dst, decideMultiHeadArgs+decideMultiItemArgs*len(r.Items))
	dst = resp.AppendBulkString(dst, CmdDecideMulti)
	dst = resp.AppendBulkUint(dst, r.Cost)
	dst = resp.AppendBulkUint(dst, r.InflightBatch)
	dst = resp.AppendBulkInt(dst, r.Deadline)
	for _, it := range r.Items {
		dst = resp.AppendBulk(dst, it.Key)
		dst = resp.AppendBulkUint(dst, it.Limit)
		dst = resp.AppendBulkUint(dst, it.Pending)
		dst = resp.AppendBulkUint(dst, it.Inflight)
		dst = resp.AppendBulkUint(dst, it.Want)
		dst = resp.AppendBulkUint(dst, it.Return)
	}
	return dst
}

// ParseDecideMulti decodes an RL.INTERNAL.DECIDEMULTI request; keys alias args. Limits are
// from 1 to engine.MaxLimit (else ErrLimit), cost and wants to engine.MaxLimit and the
// others to math.MaxInt64 (else ErrCost); 1 to engine.MaxLimits items (else ErrSyntax).
func ParseDecideMulti(args [][]byte) (engine.DecideMultiRequest, error) {
	var r engine.DecideMultiRequest
	n := (len(args) - decideMultiHeadArgs) / decideMultiItemArgs
	if len(args) < decideMultiHeadArgs+decideMultiItemArgs || (len(args)-decideMultiHeadArgs)%decideMultiItemArgs != 0 || n > engine.MaxLimits {
		return r, fmt.Errorf("%w: %d arguments to DECIDEMULTI", ErrSyntax, len(args))
	}
	cost, ok1 := parseUint(args[1], engine.MaxLimit)
	batch, ok2 := parseUint(args[2], math.MaxInt64)
	deadline, ok3 := parseInt(args[3])
	if !ok1 || !ok2 || !ok3 {
		return r, ErrCost
	}
	r = engine.DecideMultiRequest{Cost: cost, InflightBatch: batch, Deadline: deadline, Items: make([]engine.DecideItem, n)}
	for i := range r.Items {
		a := args[decideMultiHeadArgs+decideMultiItemArgs*i:]
		if !validKey(a[0]) {
			return r, ErrKey
		}
		limit, ok1 := parseUint(a[1], engine.MaxLimit)
		pending, ok2 := parseUint(a[2], math.MaxInt64)
		inflight, ok3 := parseUint(a[3], math.MaxInt64)
		want, ok4 := parseUint(a[4], engine.MaxLimit)
		ret, ok5 := parseUint(a[5], math.MaxInt64)
		if !ok1 || limit == 0 {
			return r, ErrLimit
		}
		if !ok2 || !ok3 || !ok4 || !ok5 {
			return r, ErrCost
		}
		r.Items[i] = engine.DecideItem{Key: a[0], Limit: limit, Pending: pending, Inflight: inflight, Want: want, Return: ret}
	}
	return r, nil
}

// WriteDecideMultiReply writes the reply to RL.INTERNAL.DECIDEMULTI: ds and ccs are the
// items' decisions and counts.
func WriteDecideMultiReply(w *resp.Writer, ds []engine.Decision, ccs []engine.CellCounts, meta engine.OriginMeta) {
	w.Array(metaInts + decideItemInts*len(ds))
	writeMeta(w, meta)
	for i := range ds {
		writeDecision(w, ds[i])
		writeCellCounts(w, ccs[i])
	}
}

// ParseDecideMultiReply decodes the integers of a reply to RL.INTERNAL.DECIDEMULTI of
// len(ds) items into ds and ccs (of one length).
func ParseDecideMultiReply(v []int64, ds []engine.Decision, ccs []engine.CellCounts) (engine.OriginMeta, error) {
	if len(v) != metaInts+decideItemInts*len(ds) || len(ccs) != len(ds) {
		return engine.OriginMeta{}, fmt.Errorf("%w: decide multi reply of %d integers for %d items", ErrReply, len(v), len(ds))
	}
	meta, err := parseMeta(v[:metaInts])
	if err != nil {
		return meta, err
	}
	for i := range ds {
		g := v[metaInts+decideItemInts*i : metaInts+decideItemInts*(i+1)]
		if ds[i], err = parseDecision(g[:5]); err != nil {
			return meta, err
		}
		if err := parseCellCounts(g[5:], &ccs[i]); err != nil {
			return meta, err
		}
	}
	return meta, nil
}
