package commands

import (
	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// cmdLimit serves RL.LIMIT key limit window [COST n] [NS namespace].
func cmdLimit(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	a, err := ParseLimit(args[1:])
	if err != nil {
		w.Error(err.Error())
		return
	}
	t := engine.Tuple{Workspace: s.Workspace, Namespace: s.namespace(a.Namespace), Key: a.Key, WindowMs: a.WindowMs}
	var dec engine.Decision
	switch {
	case d.waitFree != nil && s.NoWait:
		now := s.lastMs.Load()
		if !d.opt.BatchTime {
			now = d.waitFree.Clock().NowMs()
		}
		var done bool
		if dec, done, err = d.waitFree.TryLimit(t, a.Limit, a.Cost, now); !done {
			s.WouldBlock = true
			return
		}
	case d.atBatch != nil:
		dec, err = d.atBatch.LimitAt(t, a.Limit, a.Cost, s.lastMs.Load())
	default:
		dec, err = d.opt.Limiter.Limit(s.ctx(), t, a.Limit, a.Cost)
	}
	writeDecision(w, &dec, err)
}

// writeDecision writes RL.LIMIT's reply: the five integers, or err.
func writeDecision(w *resp.Writer, dec *engine.Decision, err error) {
	if err != nil {
		w.Error(errReply(err))
		return
	}
	w.Array(5)
	w.Int(boolInt(dec.Allowed))
	w.Int(int64(dec.Limit))
	w.Int(int64(dec.Remaining))
	w.Int(dec.RetryAfterMs)
	w.Int(dec.ResetAfterMs)
}

// cmdStatus serves RL.STATUS key window [NS namespace] [LIMIT n]: a map in RESP3, a flat
// array of names and values in RESP2.
func cmdStatus(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	a, err := ParseStatus(args[1:])
	if err != nil {
		w.Error(err.Error())
		return
	}
	if d.waitFree != nil && s.NoWait {
		s.WouldBlock = true // an edge's RL.STATUS reads its origin first
		return
	}
	t := engine.Tuple{Workspace: s.Workspace, Namespace: s.namespace(a.Namespace), Key: a.Key, WindowMs: a.WindowMs}
	st := d.opt.Limiter.Status(s.ctx(), t)
	writeStatus(w, &st, a.Limit)
}

// writeStatus writes RL.STATUS's reply of st, with the fields of LIMIT when limit > 0.
func writeStatus(w *resp.Writer, st *engine.Status, limit uint64) {
	n := 10
	if limit > 0 {
		n += 3
	}
	w.Map(n)
	field := func(name string, v int64) {
		w.BulkString(name)
		w.Int(v)
	}
	field("sequence", st.Sequence)
	field("window_ms", st.WindowMs)
	field("current_regional", int64(st.CurrentRegional))
	field("current_imported", int64(st.CurrentImported))
	field("previous_regional", int64(st.PreviousRegional))
	field("previous_imported", int64(st.PreviousImported))
	field("used", int64(st.Used()))
	w.BulkString("source")
	w.BulkString(st.Source)
	field("fresh", boolInt(st.Fresh))
	field("strict_ms", st.StrictMs)
	if limit > 0 {
		p := st.Peek(limit)
		field("limit", int64(limit))
		field("remaining", int64(p.Remaining))
		field("reset_after_ms", p.ResetAfterMs)
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
