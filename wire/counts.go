package wire

import (
	"fmt"
	"math"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// RL.INTERNAL.READ [key seq limit want ...] and RL.INTERNAL.REPLAY batch-id boot changes key
// seq cost limit want return [...] are both answered with [meta, counts × n]: the meta is
// edges, applied, lease_ttl_ms, boot, now, durable; a counts group is seq, cur_regional, cur_imported,
// prev_regional, prev_imported, lease_left, lease_seq, one per item in order.

// countsInts is the number of integers of one counts group; metaInts of the meta.
const (
	countsInts = 7
	metaInts   = 11
)

// AppendRead appends RL.INTERNAL.READ key seq limit want ... to dst. No items is a
// heartbeat. The caller keeps len(items) within MaxReadItems.
func AppendRead(dst []byte, items []engine.ReadItem) []byte {
	dst = resp.AppendArray(dst, 1+readArgs*len(items))
	dst = resp.AppendBulkString(dst, CmdRead)
	for _, it := range items {
		dst = resp.AppendBulk(dst, it.Key)
		dst = resp.AppendBulkInt(dst, it.Seq)
		dst = resp.AppendBulkUint(dst, it.Limit)
		dst = resp.AppendBulkUint(dst, it.Want)
	}
	return dst
}

// ParseRead decodes an RL.INTERNAL.READ request. Keys alias args.
func ParseRead(args [][]byte) ([]engine.ReadItem, error) {
	if len(args) < 1 || (len(args)-1)%readArgs != 0 {
		return nil, fmt.Errorf("%w: %d arguments to READ", ErrSyntax, len(args))
	}
	rest := args[1:]
	items := make([]engine.ReadItem, 0, len(rest)/readArgs)
	for i := 0; i < len(rest); i += readArgs {
		seq, ok := parseInt(rest[i+1])
		if !validKey(rest[i]) || !ok {
			return nil, fmt.Errorf("%w: item %d", ErrKey, i/readArgs)
		}
		limit, ok1 := parseUint(rest[i+2], engine.MaxLimit)
		want, ok2 := parseUint(rest[i+3], engine.MaxLimit)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: item %d", ErrInt, i/readArgs)
		}
		items = append(items, engine.ReadItem{Key: rest[i], Seq: seq, Limit: limit, Want: want})
	}
	return items, nil
}

// AppendReplay appends RL.INTERNAL.REPLAY id boot changes key seq cost limit want return ... to
// dst: batch b, without its Node. The caller keeps len(b.Items) from 1 to MaxReplayItems.
func AppendReplay(dst []byte, b engine.ReplayBatch) []byte {
	dst = resp.AppendArray(dst, replayHeadArgs+replayArgs*len(b.Items))
	dst = resp.AppendBulkString(dst, CmdReplay)
	dst = resp.AppendBulkUint(dst, b.ID)
	dst = resp.AppendBulkUint(dst, uint64(max(b.Boot, 0)))
	dst = resp.AppendBulkUint(dst, min(b.Changes, math.MaxInt64))
	for _, it := range b.Items {
		dst = resp.AppendBulk(dst, it.Key)
		dst = resp.AppendBulkInt(dst, it.Seq)
		dst = resp.AppendBulkUint(dst, it.Cost)
		dst = resp.AppendBulkUint(dst, it.Limit)
		dst = resp.AppendBulkUint(dst, it.Want)
		dst = resp.AppendBulkUint(dst, it.Return)
	}
	return dst
}

// ParseReplay decodes an RL.INTERNAL.REPLAY request of at least one item. The batch's
// Node is left empty: the origin knows the sender from its HELLO. Keys alias args.
func ParseReplay(args [][]byte) (engine.ReplayBatch, error) {
	if len(args) < replayHeadArgs+replayArgs || (len(args)-replayHeadArgs)%replayArgs != 0 {
		return engine.ReplayBatch{}, fmt.Errorf("%w: %d arguments to REPLAY", ErrSyntax, len(args))
	}
	id, ok := parseInt(args[1])
	if !ok {
		return engine.ReplayBatch{}, fmt.Errorf("%w: batch id", ErrSyntax)
	}
	boot, ok := parseInt(args[2])
	if !ok {
		return engine.ReplayBatch{}, fmt.Errorf("%w: boot", ErrSyntax)
	}
	changes, ok := parseInt(args[3])
	if !ok {
		return engine.ReplayBatch{}, fmt.Errorf("%w: changes", ErrSyntax)
	}
	rest := args[replayHeadArgs:]
	b := engine.ReplayBatch{ID: uint64(id), Boot: boot, Changes: uint64(changes), Items: make([]engine.ReplayItem, 0, len(rest)/replayArgs)}
	for i := 0; i < len(rest); i += replayArgs {
		if !validKey(rest[i]) {
			return engine.ReplayBatch{}, fmt.Errorf("%w: item %d", ErrKey, i/replayArgs)
		}
		seq, ok := parseInt(rest[i+1])
		var n [4]uint64 // cost, limit, want, return
		for j := range n {
			var okj bool
			n[j], okj = parseUint(rest[i+2+j], math.MaxInt64)
			ok = ok && okj
		}
		if !ok {
			return engine.ReplayBatch{}, fmt.Errorf("%w: item %d", ErrInt, i/replayArgs)
		}
		b.Items = append(b.Items, engine.ReplayItem{Key: rest[i], Seq: seq, Cost: n[0], Limit: n[1],
			Want: n[2], Return: n[3]})
	}
	return b, nil
}

// WriteCountsReply writes the reply to RL.INTERNAL.READ or RL.INTERNAL.REPLAY: meta, then
// one counts group per item. Counts above math.MaxInt64 are written as math.MaxInt64.
func WriteCountsReply(w *resp.Writer, meta engine.OriginMeta, counts []engine.CellCounts) {
	w.Array(metaInts + countsInts*len(counts))
	writeMeta(w, meta)
	for _, c := range counts {
		writeCellCounts(w, c)
	}
}

// ParseCountsReply decodes the integers of a reply to RL.INTERNAL.READ or
// RL.INTERNAL.REPLAY into counts, which holds one element per item of the request with
// Seq set to the item's seq: a group for another seq does not fit.
func ParseCountsReply(v []int64, counts []engine.CellCounts) (engine.OriginMeta, error) {
	if len(v) != metaInts+countsInts*len(counts) {
		return engine.OriginMeta{}, fmt.Errorf("%w: reply of %d integers to a request of %d items", ErrReply, len(v), len(counts))
	}
	meta, err := parseMeta(v[:metaInts])
	if err != nil {
		return engine.OriginMeta{}, err
	}
	for i := range counts {
		g := v[metaInts+countsInts*i : metaInts+countsInts*(i+1)]
		if g[0] != counts[i].Seq {
			return engine.OriginMeta{}, fmt.Errorf("%w: reply for seq %d to a request for seq %d", ErrReply, g[0], counts[i].Seq)
		}
		if err := parseCellCounts(g, &counts[i]); err != nil {
			return engine.OriginMeta{}, err
		}
	}
	return meta, nil
}

func writeMeta(w *resp.Writer, meta engine.OriginMeta) {
	w.Int(int64(meta.Edges))
	w.Int(clampInt(meta.Applied))
	w.Int(meta.LeaseTTLMs)
	w.Int(meta.Boot)
	w.Int(meta.Now)
	w.Int(clampInt(meta.Durable))
	w.Int(clampInt(meta.Hand))
	w.Int(clampInt(meta.HandsDurable))
	w.Int(clampInt(meta.HandsRestored))
	w.Int(meta.ColdPPM)
	w.Int(clampInt(meta.Changes))
}

// parseMeta reads a reply's header (metaInts integers): edges (at least 1 by the
// protocol; 0 is read as 1), the last replay batch the origin applied for this edge run,
// the leases' TTL, the origin's boot, its clock, the last batch of the run its saved
// snapshot holds, and the hand-off marks (the hand-off's number, the last one saved, the
// last one restored), and the cold allowance in millionths of a limit.
func parseMeta(v []int64) (engine.OriginMeta, error) {
	edges, applied, ttl, boot, now, durable := v[0], v[1], v[2], v[3], v[4], v[5]
	hand, handsDurable, handsRestored, cold, changes := v[6], v[7], v[8], v[9], v[10]
	if edges < 0 || applied < 0 || ttl < 0 || durable < 0 || hand < 0 || handsDurable < 0 || handsRestored < 0 || changes < 0 {
		return engine.OriginMeta{}, fmt.Errorf("%w: negative edge count, batch id, hand-off, lease TTL or change version", ErrReply)
	}
	if cold < 0 || cold > 1e6 {
		return engine.OriginMeta{}, fmt.Errorf("%w: cold allowance of %d millionths", ErrReply, cold)
	}
	return engine.OriginMeta{Edges: int(max(edges, 1)), Applied: uint64(applied), LeaseTTLMs: ttl, Boot: boot, Now: now,
		Durable: uint64(durable), Hand: uint64(hand), HandsDurable: uint64(handsDurable), HandsRestored: uint64(handsRestored), ColdPPM: cold,
		Changes: uint64(changes)}, nil
}

func writeCellCounts(w *resp.Writer, c engine.CellCounts) {
	w.Int(c.Seq)
	w.Int(clampInt(c.CurRegional))
	w.Int(clampInt(c.CurImported))
	w.Int(clampInt(c.PrevRegional))
	w.Int(clampInt(c.PrevImported))
	w.Int(clampInt(c.LeaseLeft))
	w.Int(clampInt(c.LeaseSeq))
}

// parseCellCounts reads a counts group (countsInts integers).
func parseCellCounts(g []int64, cc *engine.CellCounts) error {
	for _, n := range g[1:countsInts] {
		if n < 0 {
			return fmt.Errorf("%w: negative count", ErrReply)
		}
	}
	*cc = engine.CellCounts{Seq: g[0], CurRegional: uint64(g[1]), CurImported: uint64(g[2]),
		PrevRegional: uint64(g[3]), PrevImported: uint64(g[4]), LeaseLeft: uint64(g[5]), LeaseSeq: uint64(g[6])}
	return nil
}

func validKey(b []byte) bool {
	_, err := engine.ParseKey(b)
	return err == nil
}
