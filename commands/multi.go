package commands

import (
	"runtime"
	"strconv"
	"sync/atomic"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

// Transactions (MULTI/EXEC/DISCARD), with Redis's semantics: after MULTI every command is
// checked (name, arity, authentication, and for RL.LIMIT and RL.STATUS their arguments)
// and answered +QUEUED or an error; an error makes EXEC answer EXECABORT. EXEC runs the
// queue and answers the array of its replies (an error reply stays one element).
//
// Atomicity: on an origin, EXEC hands every RL.LIMIT and RL.STATUS of the queue to
// engine.Engine.Transact, which decides them at one instant with the shards of all their
// tuples locked, so no other client's request falls between two of them. On an edge the
// decisions are made one after the other at one instant (those that need the origin wait
// for it, as any RL.LIMIT does), and one edge transaction runs at a time; plain requests
// of other clients may fall between them. Under Session.NoWait an edge's EXEC of a queue
// holding RL commands sets WouldBlock before running anything; the queue stays in the
// Session, and the server serves the same EXEC again where it may wait.
//
// The queue is bounded: maxTxCommands commands and maxTxBytes bytes per transaction, and
// maxTxBytesAll bytes across all connections. Past a bound the command answers an error,
// and EXEC will abort. A transaction that will abort keeps no commands.

const (
	maxTxCommands = 10_000
	maxTxBytes    = 4 << 20  // per transaction: argument bytes, plus txArgCost per argument
	maxTxBytesAll = 64 << 20 // all transactions of all connections together
	txArgCost     = 24       // a slice header per argument
	txCmdCost     = 64       // a queued command's own overhead
)

const (
	errExecAbort   = "EXECABORT Transaction discarded because of previous errors."
	errTxTooLarge  = "ERR transaction too large: at most 10000 commands and 4 MiB"
	errTxNoMemory  = "OOM transaction queues of all connections are full"
	errExecNoMulti = "ERR EXEC without MULTI"
)

// txQueue is a connection's open transaction.
type txQueue struct {
	cmds  []queuedCmd
	bytes int64
	dirty bool // a queue-time error: EXEC aborts
	hasRL bool // the queue holds RL.LIMIT or RL.STATUS
}

// queuedCmd is one queued command with its own copy of the arguments (the server's read
// buffer, which the request's arguments alias, is reused after Serve returns).
type queuedCmd struct {
	cmd  *Command
	args [][]byte
}

// txAccount is what one session holds of the dispatcher's budget of queued bytes. It
// refers to nothing of the session, so a cleanup can release it after the session is
// garbage, should the server never call Session.Close.
type txAccount struct {
	total *atomic.Int64 // the dispatcher's bytes queued by all sessions
	limit int64         // the bound on total
	n     atomic.Int64  // of which this session's
}

// reserve takes n bytes of the budget; false when all sessions together would pass it.
func (a *txAccount) reserve(n int64) bool {
	if a.total.Add(n) > a.limit {
		a.total.Add(-n)
		return false
	}
	a.n.Add(n)
	return true
}

func (a *txAccount) release() { a.total.Add(-a.n.Swap(0)) }

// Close releases what the session holds beyond its connection: an open transaction's
// queue and its watched keys. The server calls it when the connection closes; it is safe
// to call more than once.
func (s *Session) Close() {
	s.endTx()
	if s.d != nil {
		s.d.pubsub.unsubscribeAll(s)
		s.d.track.close(s)
	}
}

// InMulti reports whether the connection is inside MULTI.
func (s *Session) InMulti() bool { return s.tx != nil }

// endTx ends the session's transaction, releasing its bytes, and forgets the watched keys:
// as in Redis, EXEC (run, aborted or refused) and DISCARD unwatch.
func (s *Session) endTx() {
	s.tx = nil
	s.txLen.Store(0)
	if s.txAcct != nil {
		s.txAcct.release()
	}
	s.unwatch()
}

func (s *Session) unwatch() {
	if s.watch != nil && s.watch.Len() > 0 {
		s.watch.Clear()
	}
}

// serveInMulti serves a request of a connection inside MULTI: the transaction commands
// run now, anything else is checked and queued.
func (d *Dispatcher) serveInMulti(s *Session, w *resp.Writer, args [][]byte) {
	tx := s.tx
	cmd := d.lookup(s, args[0])
	if cmd == nil {
		d.cmds.reject(s, nil)
		s.flagTx()
		d.unknown(w, args)
		return
	}
	if (cmd.Arity > 0 && len(args) != cmd.Arity) || (cmd.Arity < 0 && len(args) < -cmd.Arity) {
		d.cmds.reject(s, cmd)
		msg := "ERR wrong number of arguments for '" + cmd.Name + "' command"
		if cmd.Name == "exec" {
			// As Redis: an EXEC refused ends the transaction.
			s.endTx()
			w.Error("EXECABORT Transaction discarded because of: " + msg)
			return
		}
		s.flagTx()
		w.Error(msg)
		return
	}
	if !s.Authed && cmd.Flags&flagNoAuth == 0 && !d.autoAuth(s) {
		d.cmds.reject(s, cmd)
		s.flagTx()
		w.Error("NOAUTH Authentication required.")
		return
	}
	if s.user != nil { // as Redis 7: a command refused by the ACL aborts the transaction
		if msg := d.aclDenied(s, cmd, args); msg != "" {
			d.cmds.reject(s, cmd)
			s.flagTx()
			w.Error(msg)
			return
		}
	}
	if d.busyRefused(s, w, cmd, args) {
		return
	}
	if s.lastCmd.Load() != cmd {
		s.lastCmd.Store(cmd)
	}
	if cmd.Flags&flagTx != 0 { // MULTI, EXEC, DISCARD, WATCH, QUIT run now
		mark := d.cmds.begin(s, w)
		cmd.Handler(d, s, w, args)
		if !s.WouldBlock {
			d.cmds.done(s, cmd, w, mark)
		}
		return
	}
	mark := d.cmds.begin(s, w) // a queued command counts as it is queued
	defer d.cmds.done(s, cmd, w, mark)
	if cmd.NotInTx != "" {
		s.flagTx()
		w.Error(cmd.NotInTx)
		return
	}
	if cmd.Check != nil {
		if err := cmd.Check(args[1:]); err != nil {
			s.flagTx()
			w.Error(err.Error())
			return
		}
	}
	if !tx.dirty { // a transaction that will abort keeps nothing
		if err := d.queue(s, cmd, args); err != "" {
			w.Error(err)
			return
		}
	}
	w.Simple("QUEUED")
}

// flagTx marks the session's transaction to abort at EXEC, and drops what it holds.
func (s *Session) flagTx() {
	s.tx.dirty, s.tx.cmds, s.tx.bytes = true, nil, 0
	s.txAcct.release()
	s.txLen.Store(1)
}

// queue appends a copy of the request to the session's transaction, or returns the error
// to answer (the transaction is then flagged) when a bound would be passed.
func (d *Dispatcher) queue(s *Session, cmd *Command, args [][]byte) string {
	tx := s.tx
	n := int64(txCmdCost)
	for _, a := range args {
		n += int64(len(a)) + txArgCost
	}
	if len(tx.cmds) >= maxTxCommands || tx.bytes+n > maxTxBytes {
		s.flagTx()
		return errTxTooLarge
	}
	if !s.txAcct.reserve(n) {
		s.flagTx()
		return errTxNoMemory
	}
	tx.bytes += n
	size := 0
	for _, a := range args {
		size += len(a)
	}
	buf := make([]byte, 0, size)
	cp := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		cp[i] = buf[len(buf)-len(a):]
	}
	tx.cmds = append(tx.cmds, queuedCmd{cmd: cmd, args: cp})
	s.txLen.Store(int32(len(tx.cmds)) + 1)
	if cmd.Name == "rl.limit" || cmd.Name == "rl.status" {
		tx.hasRL = true
	}
	return ""
}

func cmdMulti(d *Dispatcher, s *Session, w *resp.Writer, _ [][]byte) {
	if s.tx != nil {
		w.Error("ERR MULTI calls can not be nested")
		return
	}
	if s.txAcct == nil {
		s.txAcct = &txAccount{total: &d.txBytes, limit: d.txBudget}
		runtime.AddCleanup(s, (*txAccount).release, s.txAcct)
	}
	s.tx = &txQueue{}
	s.txLen.Store(1)
	w.OK()
}

func cmdDiscard(_ *Dispatcher, s *Session, w *resp.Writer, _ [][]byte) {
	if s.tx == nil {
		w.Error("ERR DISCARD without MULTI")
		return
	}
	s.endTx()
	w.OK()
}

// maxWatchedKeys bounds the keys one connection watches.
const maxWatchedKeys = 10_000

const (
	errWatchInMulti = "ERR WATCH inside MULTI is not allowed"
	// errResetInMulti refuses RL.RESET in a transaction: a reset reaches edges and regions
	// through the change feed and publication, so it cannot be one isolated step of EXEC.
	errResetInMulti = "ERR RL.RESET is not allowed inside MULTI: a reset cannot be one isolated step of a transaction; send it on its own"
	errWatchTooMany = "ERR too many watched keys: at most 10000 per connection in Ratchet"
	errWatchOnEdge  = "ERR WATCH is not supported on an edge: the keys live on the origin, which cannot see this connection's transaction; connect to the origin to WATCH"
)

// cmdWatch serves WATCH key [key ...] on an origin: a change to any of the keys in the
// counter keyspace before EXEC makes EXEC answer a null array (keyspace.Watch). RL tuples
// are not keyspace keys: a key is watched in the keyspace only. An edge refuses WATCH
// (errWatchOnEdge) rather than answer an EXEC that ignores a change on the origin.
func cmdWatch(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if s.tx != nil {
		w.Error(errWatchInMulti)
		return
	}
	kv := d.kv()
	if kv == nil {
		w.Error(errWatchOnEdge)
		return
	}
	if s.watch == nil {
		s.watch = new(keyspace.Watch)
		runtime.AddCleanup(s, (*keyspace.Watch).Clear, s.watch) // should Close never come
	}
	if s.watch.Len()+len(args)-1 > maxWatchedKeys {
		w.Error(errWatchTooMany)
		return
	}
	if err := kv.Watch(s.watch, s.Workspace, args[1:]); err != nil {
		w.Error(errReply(err))
		return
	}
	w.OK()
}

func cmdUnwatch(_ *Dispatcher, s *Session, w *resp.Writer, _ [][]byte) {
	s.unwatch()
	w.OK()
}

// watchFailed ends the transaction of s, whose watched keys changed: EXEC answers a null
// array and runs nothing.
func watchFailed(s *Session, w *resp.Writer) {
	s.endTx()
	w.NullArray()
}

func cmdExec(d *Dispatcher, s *Session, w *resp.Writer, _ [][]byte) {
	tx := s.tx
	switch {
	case tx == nil:
		w.Error(errExecNoMulti)
		return
	case tx.dirty:
		s.endTx()
		w.Error(errExecAbort)
		return
	case tx.hasRL && d.waitFree != nil && s.NoWait:
		// An edge's decisions may wait on its origin: decide nothing here, and keep the
		// queue for the EXEC served again where it may wait.
		s.WouldBlock = true
		return
	}
	s.endTx() // the queued commands run outside MULTI; tx keeps them until the end
	w.Array(len(tx.cmds))
	if !tx.hasRL {
		for _, q := range tx.cmds {
			q.cmd.Handler(d, s, w, q.args)
		}
		return
	}
	if d.transactor != nil {
		d.execTransact(s, w, tx.cmds)
		return
	}
	d.execSequential(s, w, tx.cmds)
}

// Transactor is a Limiter that runs a transaction's decisions and reads as one step (the
// origin's *engine.Engine).
type Transactor interface {
	Transact(ops []engine.TxOp, out []engine.TxResult)
}

// execTransact runs cmds on an origin: every RL command in one engine.Transact, then the
// replies in order.
func (d *Dispatcher) execTransact(s *Session, w *resp.Writer, cmds []queuedCmd) {
	ops := make([]engine.TxOp, 0, len(cmds))
	statusLimits := make([]uint64, 0, len(cmds))
	for _, q := range cmds {
		switch q.cmd.Name {
		case "rl.limit":
			ops = append(ops, d.limitTxOp(s, q.args[1:]))
			statusLimits = append(statusLimits, 0)
		case "rl.status":
			a, _ := ParseStatus(q.args[1:])
			t := s.tuple(a.Key, a.Namespace, a.WindowMs)
			ops = append(ops, engine.TxOp{Tuple: t, Read: true})
			statusLimits = append(statusLimits, d.limitFor(t, a.Limit))
		}
	}
	out := make([]engine.TxResult, len(ops))
	d.transactor.Transact(ops, out)
	i := 0
	for _, q := range cmds {
		switch q.cmd.Name {
		case "rl.limit":
			writeDecision(w, &out[i].Decision, out[i].Err)
			i++
		case "rl.status":
			writeStatus(w, &out[i].Status, statusLimits[i])
			i++
		default:
			q.cmd.Handler(d, s, w, q.args)
		}
	}
}

// execSequential runs cmds one after the other (an edge), every RL.LIMIT at one instant
// where local memory decides it, and one such transaction at a time.
func (d *Dispatcher) execSequential(s *Session, w *resp.Writer, cmds []queuedCmd) {
	d.txMu.Lock()
	defer d.txMu.Unlock()
	var now int64
	if d.waitFree != nil {
		now = d.waitFree.Clock().NowMs()
	} else {
		now = s.lastMs.Load()
	}
	for _, q := range cmds {
		switch q.cmd.Name {
		case "rl.limit":
			if isMultiLimit(q.args[1:]) {
				d.execLimitMulti(s, w, q.args[1:], now)
				continue
			}
			a, _ := ParseLimit(q.args[1:])
			t := s.tuple(a.Key, a.Namespace, a.WindowMs)
			a.Limit = d.limitFor(t, a.Limit)
			var dec engine.Decision
			var err error
			switch {
			case d.waitFree != nil:
				var ok bool
				if dec, ok, err = d.waitFree.TryLimit(t, a.Limit, a.Cost, now); !ok {
					dec, err = d.opt.Limiter.Limit(s.ctx(), t, a.Limit, a.Cost)
				}
			case d.atBatch != nil:
				dec, err = d.atBatch.LimitAt(t, a.Limit, a.Cost, now)
			default:
				dec, err = d.opt.Limiter.Limit(s.ctx(), t, a.Limit, a.Cost)
			}
			writeDecision(w, &dec, err)
		case "rl.status":
			a, _ := ParseStatus(q.args[1:])
			t := s.tuple(a.Key, a.Namespace, a.WindowMs)
			st := d.opt.Limiter.Status(s.ctx(), t)
			writeStatus(w, &st, d.limitFor(t, a.Limit))
		default:
			q.cmd.Handler(d, s, w, q.args)
		}
	}
}

// multiField is CLIENT LIST's multi field: the commands queued, -1 outside MULTI. Other
// goroutines read it, so it comes from txLen.
func (s *Session) multiField() string { return strconv.Itoa(int(s.txLen.Load()) - 1) }
