package commands

import (
	"context"
	"strings"

	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// Regional commands on an edge. The counter keyspace, CL.THROTTLE and the limiter scripts
// (kvParsers) hold state that cannot be merged like window cells: an edge checks their
// arguments, then has the origin of their first key (rendezvous hashing, as for tuples)
// run them, with RL.INTERNAL.FORWARD, and writes the origin's reply as it is. A
// transaction of such commands is forwarded whole and runs atomically on the origin.
//
// RL.INTERNAL.FORWARD proto workspace argc arg... [argc arg...] (wire.AppendForward,
// wire.ParseForward): one command runs as it would for a client of that workspace and
// protocol. A transaction is framed: MULTI, its commands, EXEC, so that one of a single
// command still answers EXEC's array (an edge before this framing sent a transaction's
// commands bare, and an origin still runs two or more bare commands as MULTI ... EXEC).
// The reply is one bulk string: the command's (or EXEC's) reply, encoded for the client.

// Forward runs a payload of RL.INTERNAL.FORWARD on the origin of key (edge.Edge.Forward),
// within ctx.
type Forward func(ctx context.Context, ws string, key []byte, proto int, payload [][]byte) ([]byte, error)

// errMixedEdgeTx refuses, on an edge, a transaction with both RL commands (decided at the
// edge) and regional commands (decided by the origin): they cannot run at one instant.
const errMixedEdgeTx = "EXECABORT Transaction discarded: on an edge, a transaction of counter, CL.THROTTLE or script commands may hold only PING, ECHO and TIME besides them (RL commands are decided at the edge)"

// forwardable reports whether an origin runs the command name for an edge
// (RL.INTERNAL.FORWARD): the regional commands, and in a transaction of them the few that
// touch no state.
func forwardable(name string) bool {
	if kvParsers[name] != nil {
		return true
	}
	switch name {
	case "ping", "echo", "time", "rl.override": // RL.OVERRIDE: override.go
		return true
	}
	return false
}

// forwardState is what RL.INTERNAL.FORWARD reuses on one cluster connection: the session
// the forwarded commands run in (the edge's client, as the origin sees it) and the
// writers of their replies.
type forwardState struct {
	sess         *Session
	out, scratch resp.Writer
}

// Requests a forwarded transaction is framed with; never written to.
var (
	argsMulti = [][]byte{[]byte("MULTI")}
	argsExec  = [][]byte{[]byte("EXEC")}
)

// forward has the origin run payload for s and writes its reply to w. On an event loop it
// sets WouldBlock instead: the request waits on the network.
func (d *Dispatcher) forward(s *Session, w *resp.Writer, key []byte, payload [][]byte) {
	if s.NoWait {
		s.WouldBlock = true
		return
	}
	raw, err := d.opt.Forward(s.ctx(), s.Workspace, key, w.Proto(), payload)
	if err != nil {
		w.Error("TRYAGAIN the origin did not answer: " + err.Error())
		return
	}
	w.Raw(raw)
}

// forwardOne serves one regional command on an edge: checked here, run by the origin.
func (d *Dispatcher) forwardOne(s *Session, w *resp.Writer, upper string, r kvReq, args [][]byte) {
	if d.opt.Forward == nil {
		w.Error(kvOnOrigin(upper))
		return
	}
	if r.err != "" {
		w.Error(r.err)
		return
	}
	var key []byte
	if len(r.keys) > 0 {
		key = r.keys[0]
	}
	d.forward(s, w, key, wire.AppendForwardCmd(nil, d.forwardScript(args)))
}

// forwardScript returns the request an edge forwards for a client's args: EVALSHA of a
// script the interpreter runs and the edge has in its own cache (SCRIPT LOAD or EVAL
// through the edge) goes as EVAL of its text, which the origin then caches; EVALSHA of a
// SHA the edge does not know goes as it is (the origin may know it: loaded there), and
// every other request too. So SCRIPT LOAD then EVALSHA through an edge runs as on Redis.
func (d *Dispatcher) forwardScript(args [][]byte) [][]byte {
	if len(args) < 3 {
		return args
	}
	var eval []byte
	switch {
	case strings.EqualFold(string(args[0]), "evalsha"):
		eval = []byte("EVAL")
	case strings.EqualFold(string(args[0]), "evalsha_ro"):
		eval = []byte("EVAL_RO")
	default:
		return args
	}
	if _, e := lookupScript(true, args[1]); e == "" { // a known script: a native path there too
		return args
	}
	body, ok := d.lua.Body(string(args[1]))
	if !ok {
		return args
	}
	out := make([][]byte, len(args))
	copy(out, args)
	out[0], out[1] = eval, body
	return out
}

// forwardExec serves EXEC on an edge for a queue that holds regional commands: the whole
// queue runs on the origin of its first key, atomically. It reports false when the queue
// has none (cmdExec serves it).
func (d *Dispatcher) forwardExec(s *Session, w *resp.Writer) bool {
	tx := s.tx
	if tx == nil || tx.dirty || d.opt.Forward == nil {
		return false
	}
	var key []byte
	regional := false
	for _, q := range tx.cmds {
		if parse := kvParsers[q.cmd.Name]; parse != nil {
			if !regional {
				if ks := parse(q.args).keys; len(ks) > 0 {
					key = ks[0]
				}
			}
			regional = true
		}
	}
	if !regional {
		return false
	}
	for _, q := range tx.cmds {
		if tx.hasRL || !forwardable(q.cmd.Name) {
			s.endTx()
			w.Error(errMixedEdgeTx)
			return true
		}
	}
	if s.NoWait { // keep the queue for the EXEC served again where it may wait
		s.WouldBlock = true
		return true
	}
	s.endTx()
	payload := wire.AppendForwardCmd(nil, argsMulti) // framed: EXEC answers an array, even of one
	for _, q := range tx.cmds {
		payload = wire.AppendForwardCmd(payload, d.forwardScript(q.args))
	}
	payload = wire.AppendForwardCmd(payload, argsExec)
	d.forward(s, w, key, payload)
	return true
}

// unframeTx returns the commands of a forwarded transaction framed by MULTI ... EXEC, and
// true; any other payload as it is, and false.
func unframeTx(cmds [][][]byte) ([][][]byte, bool) {
	n := len(cmds)
	if n >= 2 && len(cmds[0]) == 1 && len(cmds[n-1]) == 1 &&
		strings.EqualFold(string(cmds[0][0]), "multi") && strings.EqualFold(string(cmds[n-1][0]), "exec") {
		return cmds[1 : n-1], true
	}
	return cmds, false
}

// cmdInternalForward serves RL.INTERNAL.FORWARD on an origin: see the top of this file.
func cmdInternalForward(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	f, err := wire.ParseForward(args)
	if err != nil {
		w.Error(errSyntax.Error())
		return
	}
	fs := s.fwd
	if fs == nil {
		fs = &forwardState{sess: NewSession(s.ID, s.Addr, s.LocalAddr, s.lastMs.Load())}
		fs.sess.Authed = true
		s.fwd = fs
	}
	cs := fs.sess // the client's connection, as the origin sees it
	cmds, framed := unframeTx(f.Cmds)
	for _, c := range cmds {
		if cmd := d.lookup(cs, c[0]); cmd == nil || !forwardable(cmd.Name) {
			w.Error("ERR RL.INTERNAL.FORWARD runs counter, CL.THROTTLE and script commands only")
			return
		} else if s.NoWait && len(c) >= 3 && strings.HasPrefix(cmd.Name, "eval") && kvParsers[cmd.Name](c).lua != nil {
			s.WouldBlock = true // a script runs off the event loop (lua.go)
			return
		}
	}
	cs.Workspace = f.Workspace
	cs.mu.Lock()
	cs.proto = f.Proto
	cs.mu.Unlock()
	fs.out.Reset()
	fs.out.SetProto(f.Proto)
	if len(cmds) == 1 && !framed {
		d.Serve(cs, &fs.out, cmds[0])
	} else {
		fs.scratch.Reset()
		fs.scratch.SetProto(f.Proto)
		d.Serve(cs, &fs.scratch, argsMulti)
		for _, c := range cmds {
			d.Serve(cs, &fs.scratch, c)
		}
		d.Serve(cs, &fs.out, argsExec)
	}
	cs.Close() // nothing of a transaction outlives its forward
	w.Bulk(fs.out.Bytes())
}
