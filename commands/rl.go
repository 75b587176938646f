package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// cmdLimit serves RL.LIMIT key limit window [limit window ...] [COST n] [NS namespace].
func cmdLimit(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if isMultiLimit(args[1:]) {
		cmdLimitMulti(d, s, w, args)
		return
	}
	a, err := ParseLimit(args[1:])
	if err != nil {
		w.Error(err.Error())
		return
	}
	t := engine.Tuple{Workspace: s.Workspace, Namespace: s.namespace(a.Namespace), Key: a.Key, WindowMs: a.WindowMs}
	a.Limit = d.limitFor(t, a.Limit)
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
	writeStatus(w, &st, d.limitFor(t, a.Limit))
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

// Resetter is a Limiter that resets tuples (an edge's, which hands them to their origins;
// an origin's engine is called directly): it returns how many of them held usage.
type Resetter interface {
	Reset(ctx context.Context, ts []engine.Tuple) (int, error)
}

// errNoReset answers RL.RESET on a limiter that cannot reset.
var errNoReset = errors.New("ERR RL.RESET is not supported by this node")

// cmdReset serves RL.RESET key window [window ...] [NS namespace]: the number of the
// tuples that held usage.
func cmdReset(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	a, err := ParseReset(args[1:])
	if err != nil {
		w.Error(err.Error())
		return
	}
	if d.waitFree != nil && s.NoWait {
		s.WouldBlock = true // an edge's RL.RESET waits on its origins
		return
	}
	ts := make([]engine.Tuple, len(a.Windows))
	for i, win := range a.Windows {
		ts[i] = s.tuple(a.Key, a.Namespace, win)
	}
	var n int
	r, ok := d.opt.Limiter.(Resetter)
	switch {
	case ok:
		n, err = r.Reset(s.ctx(), ts)
	case d.opt.Origin != nil:
		n, err = d.opt.Origin.Reset(ts)
	default:
		err = errNoReset
	}
	if err != nil {
		w.Error(errReply(err))
		return
	}
	w.Int(int64(n))
}

// ---- several limits in one call ----

// MultiLimiter is a Limiter that decides multi-limit requests (an edge's; an origin's
// engine is called directly): LimitAll decides cost against every limit of ops at one
// instant and counts it in every tuple when all allow, in none otherwise; out[i] receives
// ops[i]'s decision and the result is engine.Binding's index. TryLimitAll is LimitAll at
// nowMs when local memory decides it without waiting, as WaitFreeLimiter.TryLimit.
type MultiLimiter interface {
	LimitAll(ctx context.Context, ops []engine.LimitOp, cost uint64, out []engine.Decision) (int, error)
	TryLimitAll(ops []engine.LimitOp, cost uint64, nowMs int64, out []engine.Decision) (binding int, ok bool, err error)
}

// errNoMulti answers a multi-limit RL.LIMIT on a limiter that cannot decide one.
var errNoMulti = errors.New("ERR several limits in one RL.LIMIT are not supported by this node")

// cmdLimitMulti serves RL.LIMIT with several (limit, window) pairs.
func cmdLimitMulti(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	a, err := ParseLimits(args[1:])
	if err != nil {
		w.Error(err.Error())
		return
	}
	ml, _ := d.opt.Limiter.(MultiLimiter)
	switch {
	case ml != nil:
		d.limitMultiOn(ml, s, w, &a)
	case d.opt.Origin != nil:
		d.limitMultiOrigin(s, w, &a)
	default:
		w.Error(errNoMulti.Error())
	}
}

// limitMultiOrigin decides a multi-limit request on the origin's engine, at the batch's
// instant with Options.BatchTime. (Apart from the interface calls of limitMultiOn, its
// arrays stay on the stack.)
func (d *Dispatcher) limitMultiOrigin(s *Session, w *resp.Writer, a *LimitsArgs) {
	var ops [engine.MaxLimits]engine.LimitOp
	var out [engine.MaxLimits]engine.Decision
	n := a.ops(d, s, ops[:])
	now := s.lastMs.Load()
	if d.atBatch == nil {
		now = d.opt.Origin.Clock().NowMs()
	}
	b, err := d.opt.Origin.LimitMulti(ops[:n], a.Cost, now, out[:n])
	writeDecision(w, &out[b], err)
}

// multiScratch holds a multi-limit request's tuples and decisions on their way through a
// MultiLimiter (an interface call, through which arrays on the stack would escape).
type multiScratch struct {
	ops [engine.MaxLimits]engine.LimitOp
	out [engine.MaxLimits]engine.Decision
}

var multiScratches = sync.Pool{New: func() any { return new(multiScratch) }}

// limitMultiOn decides a multi-limit request on ml (an edge): without waiting where the
// server may not wait, as cmdLimit does.
func (d *Dispatcher) limitMultiOn(ml MultiLimiter, s *Session, w *resp.Writer, a *LimitsArgs) {
	sc := multiScratches.Get().(*multiScratch)
	n := a.ops(d, s, sc.ops[:])
	ops, out := sc.ops[:n], sc.out[:n]
	defer func() {
		clear(ops) // the tuples' keys alias the request
		multiScratches.Put(sc)
	}()
	var b int
	var err error
	if d.waitFree != nil && s.NoWait {
		now := s.lastMs.Load()
		if !d.opt.BatchTime {
			now = d.waitFree.Clock().NowMs()
		}
		var done bool
		if b, done, err = ml.TryLimitAll(ops, a.Cost, now, out); !done {
			s.WouldBlock = true
			return
		}
	} else {
		b, err = ml.LimitAll(s.ctx(), ops, a.Cost, out)
	}
	writeDecision(w, &out[b], err)
}

// isMultiLimit reports whether RL.LIMIT's arguments (after the command name) carry more
// than one (limit, window) pair: the fourth is a number where an option would be a word.
func isMultiLimit(args [][]byte) bool {
	return len(args) > 3 && len(args[3]) > 0 && args[3][0] >= '0' && args[3][0] <= '9'
}

// LimitsArgs are the parsed arguments of RL.LIMIT with one or more (limit, window) pairs.
type LimitsArgs struct {
	Key       []byte
	Limits    [engine.MaxLimits]uint64
	WindowsMs [engine.MaxLimits]int64
	N         int // pairs in Limits and WindowsMs
	Cost      uint64
	Namespace []byte // nil: the default namespace
}

// ops fills ops with a's tuples of session s, their limits overridden where d has an
// override (RL.OVERRIDE), and returns how many.
func (a *LimitsArgs) ops(d *Dispatcher, s *Session, ops []engine.LimitOp) int {
	for i := 0; i < a.N; i++ {
		t := s.tuple(a.Key, a.Namespace, a.WindowsMs[i])
		ops[i] = engine.LimitOp{Tuple: t, Limit: d.limitFor(t, a.Limits[i])}
	}
	return a.N
}

// Errors of the multi-limit form, naming the rule.
var (
	errTooManyLimits = fmt.Errorf("ERR at most %d limit and window pairs in one RL.LIMIT", engine.MaxLimits)
	errLimitNoWindow = errors.New("ERR limit without a window: limits and windows come in pairs")
)

// errWindowTwice is the error of a window given twice (as equal milliseconds).
func errWindowTwice(ms int64) error {
	return fmt.Errorf("ERR window %dms appears twice: each limit needs a window of its own", ms)
}

// ParseLimits parses "key limit window [limit window ...] [COST n] [NS namespace]": 1 to
// engine.MaxLimits pairs with distinct windows; pairs end at the first argument that does
// not start with a digit. Checks run in argument order; the first failure is returned.
func ParseLimits(args [][]byte) (LimitsArgs, error) {
	var a LimitsArgs
	if len(args) < 3 {
		return a, errSyntax
	}
	if err := checkKey(args[0]); err != nil {
		return a, err
	}
	a.Key = args[0]
	rest := args[1:]
	for len(rest) > 0 && len(rest[0]) > 0 && rest[0][0] >= '0' && rest[0][0] <= '9' {
		if a.N == engine.MaxLimits {
			return a, errTooManyLimits
		}
		limit, ok := parseUint(rest[0], engine.MaxLimit)
		if !ok || limit == 0 {
			return a, errLimit
		}
		if len(rest) < 2 {
			return a, errLimitNoWindow
		}
		w, err := ParseWindow(rest[1])
		if err != nil {
			return a, err
		}
		for _, seen := range a.WindowsMs[:a.N] {
			if seen == w {
				return a, errWindowTwice(w)
			}
		}
		a.Limits[a.N], a.WindowsMs[a.N] = limit, w
		a.N++
		rest = rest[2:]
	}
	if a.N == 0 {
		return a, errLimit
	}
	var err error
	a.Cost, a.Namespace, err = parseLimitOptions(rest)
	return a, err
}

// parseLimitOptions parses RL.LIMIT's options: [COST n] [NS namespace], in any order,
// each at most once. Cost defaults to 1.
func parseLimitOptions(rest [][]byte) (cost uint64, ns []byte, err error) {
	cost = 1
	var seenCost, seenNS, ok bool
	for ; len(rest) > 0; rest = rest[2:] {
		if len(rest) < 2 {
			return cost, ns, errSyntax
		}
		switch {
		case bytes.EqualFold(rest[0], []byte("COST")) && !seenCost:
			seenCost = true
			if cost, ok = parseUint(rest[1], engine.MaxLimit); !ok {
				return cost, ns, errCost
			}
		case bytes.EqualFold(rest[0], []byte("NS")) && !seenNS:
			seenNS = true
			if ns, err = checkNamespace(rest[1]); err != nil {
				return cost, ns, err
			}
		default:
			return cost, ns, errSyntax
		}
	}
	return cost, ns, nil
}

// checkLimit is RL.LIMIT's queue-time check (MULTI): either form.
func checkLimit(args [][]byte) error {
	if isMultiLimit(args) {
		_, err := ParseLimits(args)
		return err
	}
	_, err := ParseLimit(args)
	return err
}

// limitTxOp is the engine.TxOp of a queued RL.LIMIT's arguments (checked when queued).
func (d *Dispatcher) limitTxOp(s *Session, args [][]byte) engine.TxOp {
	if !isMultiLimit(args) {
		a, _ := ParseLimit(args)
		t := s.tuple(a.Key, a.Namespace, a.WindowMs)
		return engine.TxOp{Tuple: t, Limit: d.limitFor(t, a.Limit), Cost: a.Cost}
	}
	a, _ := ParseLimits(args)
	ops := make([]engine.LimitOp, engine.MaxLimits)
	n := a.ops(d, s, ops)
	return engine.TxOp{Tuple: ops[0].Tuple, Limit: ops[0].Limit, Cost: a.Cost, More: ops[1:n]}
}

// execLimitMulti runs a queued multi-limit RL.LIMIT (args checked when queued) in a
// sequential transaction (an edge's) at now where local memory decides it.
func (d *Dispatcher) execLimitMulti(s *Session, w *resp.Writer, args [][]byte, now int64) {
	a, _ := ParseLimits(args)
	ml, ok := d.opt.Limiter.(MultiLimiter)
	if !ok {
		w.Error(errNoMulti.Error())
		return
	}
	sc := multiScratches.Get().(*multiScratch)
	n := a.ops(d, s, sc.ops[:])
	ops, out := sc.ops[:n], sc.out[:n]
	b, done, err := ml.TryLimitAll(ops, a.Cost, now, out)
	if !done {
		b, err = ml.LimitAll(s.ctx(), ops, a.Cost, out)
	}
	writeDecision(w, &out[b], err)
	clear(ops)
	multiScratches.Put(sc)
}
