package commands

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/scripting"
)

// The scripts Ratchet has no native path for run on the Lua interpreter (package
// scripting), with Redis 7.0's semantics, over the counter keyspace: EVAL and EVALSHA of
// another text or SHA1 parse into a kvReq on the EVAL's KEYS like a known script, and the
// script's redis.call runs the counter commands (kvParsers) inside that same KV.Do, so the
// script is one atomic step on its keys. A command must name keys among the EVAL's KEYS,
// in their order (the transaction holds only those); TIME answers the script time in
// microseconds (keyspace.Tx.NowUs, as the native scripts read it); other commands are unknown
// to scripts, as Redis answers for a command it does not have.

// Replies of the Lua fallback.
const (
	errLuaUnknownCmd = "ERR Unknown Redis command called from script"
	errLuaArity      = "ERR Wrong number of args calling Redis command from script"
	errLuaUndeclared = "ERR Ratchet runs a script's commands on its KEYS only: pass every key the script uses in KEYS, in order"
	errLuaACLCmd     = "ERR The user executing the script can't run this command or subcommand"
	errLuaACLKey     = "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments"
)

// luaCommands are the command table's rows of the commands scripts may call.
var luaCommands = sync.OnceValue(func() map[string]*Command {
	m := map[string]*Command{}
	for _, c := range kvCommands() {
		m[c.Name] = c
	}
	return m
})

// luaReq is an EVAL or EVALSHA that the interpreter runs, as parseEval gives it: the
// Dispatcher's engine caches and runs scripts, so the parsers (stateless) leave it to
// Dispatcher.parseKV to bind the request to it (bindLua).
type luaReq struct {
	body       []byte // the script (EVAL); nil for EVALSHA of sha
	sha        string
	keys, argv [][]byte
	readOnly   bool
	ws         string // the EVAL's workspace
}

// parseKV parses the counter command name with kvParsers, binding a script without a
// native path to d's engine and to s's ACL user.
func (d *Dispatcher) parseKV(s *Session, name string, args [][]byte) kvReq {
	return d.bindKV(s, kvParsers[name](args))
}

// bindKV binds r, parsed by kvParsers, as parseKV does.
func (d *Dispatcher) bindKV(s *Session, r kvReq) kvReq {
	if r.lua != nil {
		r.lua.ws = s.Workspace // a script's PUBLISH reaches its workspace (pubsub.go)
		r = d.bindLua(r.lua, s.user)
	}
	return r
}

// runKV runs r on tx's keys base, base+1, ... for user: its error, or its run; a known
// script whose keys hold a type other than a string runs its own text on the
// interpreter instead (the native paths read strings only), answering as Redis does.
func (d *Dispatcher) runKV(r *kvReq, user *aclUser, tx *keyspace.Tx, base int, w *resp.Writer) {
	if r.err != "" {
		w.Error(r.err)
		return
	}
	if r.known != nil && !tx.StringsOnly() {
		for i := range r.keys {
			if tx.Kind(base+i) > keyspace.KindString {
				q := &luaReq{body: r.known.body, keys: r.keys, argv: r.argv, readOnly: r.readOnly}
				d.luaRun(q, user)(tx, base, w)
				return
			}
		}
	}
	r.run(tx, base, w)
}

// bindLua makes q a kvReq that runs on d's engine, its redis.call checked against user's
// permissions (nil: no ACL file, every permission). A body is compiled at once, so a
// syntax error answers before any key is locked (an edge too).
func (d *Dispatcher) bindLua(q *luaReq, user *aclUser) kvReq {
	if q.body != nil {
		if _, msg := d.lua.Load(q.body); msg != "" {
			return kvReq{err: msg}
		}
	} else if !d.lua.Exists(q.sha) {
		if d.kv() == nil { // an edge: the origin may know it (forwardScript)
			return kvReq{keys: q.keys, lua: q}
		}
		return kvReq{err: errNoScript}
	}
	return kvReq{keys: q.keys, lua: q, run: d.luaRun(q, user)}
}

// luaRun returns the run of q on d's interpreter, its redis.call checked against user's
// permissions.
func (d *Dispatcher) luaRun(q *luaReq, user *aclUser) func(tx *keyspace.Tx, base int, w *resp.Writer) {
	return func(tx *keyspace.Tx, base int, w *resp.Writer) {
		c := callers.Get().(*txCaller)
		*c = txCaller{tx: tx, base: base, keys: q.keys, ro: q.readOnly, user: user, table: d.table, d: d, ws: q.ws,
			w: c.w, num: c.num[:0], out: c.out[:0]}
		r := d.lua.Run(context.Background(), scripting.Request{Body: q.body, SHA: q.sha, Keys: q.keys, Args: q.argv}, c)
		c.out = r.Append(c.out, w.Proto())
		w.Raw(c.out)
		c.release()
	}
}

// callers are txCallers with their buffers, reused from one script to the next.
var callers = sync.Pool{New: func() any { return new(txCaller) }}

// release puts c back in callers, unless a huge reply grew its buffers.
func (c *txCaller) release() {
	if cap(c.out) > 64<<10 || cap(c.w.Bytes()) > 64<<10 {
		return
	}
	c.w.Reset()
	*c = txCaller{w: c.w, num: c.num[:0], out: c.out[:0]}
	callers.Put(c)
}

// While a script runs past the time limit (Options.Scripting.TimeLimit, Redis's
// busy-reply-threshold), other clients' commands answer BUSY, as Redis's processCommand
// answers them: after the unknown-command, arity, authentication and ACL checks, and in a
// transaction too (flagging it; EXEC answers EXECABORT). The commands Redis 7.0 flags
// allow_busy and Ratchet has still run, but for WATCH and UNWATCH, which may wait on the
// script's keys; so do the RL commands, which decide on the rate limiter's own store that
// no script holds, and the cluster's RL.INTERNAL traffic (a forwarded command answers
// BUSY inside it, as the origin's own clients get). Busy is one atomic load while no
// script runs. A script runs off the event loops (Session.NoWait: it sets WouldBlock),
// so that it blocks no other connection and SCRIPT KILL can reach it.

// allowBusy reports whether cmd runs while a script is busy.
func allowBusy(cmd *Command, args [][]byte) bool {
	switch cmd.Name {
	case "auth", "hello", "quit", "reset", "multi", "discard":
		return true
	case "script":
		return len(args) == 2 && strings.EqualFold(string(args[1]), "kill")
	}
	return strings.HasPrefix(cmd.Name, "rl.")
}

// busyRefused answers BUSY to cmd when a script is busy and cmd may not run meanwhile.
func (d *Dispatcher) busyRefused(s *Session, w *resp.Writer, cmd *Command, args [][]byte) bool {
	if !d.lua.Busy() || allowBusy(cmd, args) {
		return false
	}
	d.cmds.reject(s, cmd) // Redis counts a BUSY refusal as a rejected call
	switch {
	case s.tx != nil && cmd.Name == "exec": // as Redis's rejectCommand: the transaction ends
		s.endTx()
		w.Error("EXECABORT Transaction discarded because of: " + scripting.ErrBusy)
	case s.tx != nil:
		s.flagTx()
		w.Error(scripting.ErrBusy)
	default:
		w.Error(scripting.ErrBusy)
	}
	return true
}

// txCaller runs a script's redis.call on the counter keyspace inside the EVAL's KV.Do:
// KEYS[i] is the transaction's key base+i-1.
type txCaller struct {
	tx    *keyspace.Tx
	base  int
	keys  [][]byte
	ro    bool
	user  *aclUser            // the EVAL's caller; nil: no ACL file
	table map[string]*Command // the Dispatcher's rows, bound to the ACL bits
	d     *Dispatcher
	ws    string      // the EVAL's workspace: where its PUBLISH goes (pubsub.go)
	w     resp.Writer // the command's reply, parsed into a scripting.Reply
	num   []byte      // TIME's reply digits
	time  [2]scripting.Reply
	out   []byte // the script's reply, as EVAL writes it
	lower [32]byte
}

// Call runs one command as Redis's scriptCall: unknown command, arity, the caller's ACL
// (the command and its keys, as Redis 7's scriptVerifyACL) and read-only checks first,
// then the command on the transaction.
func (c *txCaller) Call(args [][]byte, proto int) (scripting.Reply, bool) {
	name := c.lowerName(args[0])
	if name == "time" { // the script time the native paths read (tx.NowUs: microseconds)
		if len(args) != 1 {
			return scripting.ErrorReply(errLuaArity), false
		}
		if msg := c.aclDenied(name, args); msg != "" {
			return scripting.ErrorReply(msg), false
		}
		us := c.tx.NowUs()
		c.num = strconv.AppendInt(c.num[:0], us/1_000_000, 10)
		split := len(c.num)
		c.num = strconv.AppendInt(c.num, us%1_000_000, 10)
		c.time = [2]scripting.Reply{scripting.BulkReply(c.num[:split:split]), scripting.BulkReply(c.num[split:])}
		return scripting.Reply{Kind: scripting.Array, Elems: c.time[:]}, false
	}
	if name == "publish" {
		return c.callPublish(args), false
	}
	cmd := luaCommands()[name]
	if cmd == nil {
		return scripting.ErrorReply(errLuaUnknownCmd), false
	}
	if cmd.Arity > 0 && len(args) != cmd.Arity || cmd.Arity < 0 && len(args) < -cmd.Arity {
		return scripting.ErrorReply(errLuaArity), false
	}
	if msg := c.aclDenied(name, args); msg != "" {
		return scripting.ErrorReply(msg), false
	}
	write := cmd.Flags&flagWrite != 0
	if write && c.ro {
		return scripting.ErrorReply(errScriptRO), false
	}
	r := kvParsers[name](args)
	if r.err != "" {
		return scripting.ErrorReply(r.err), false
	}
	if r.all {
		return scripting.ErrorReply(errLuaFlush), false
	}
	base, ok := c.declared(r.keys)
	if !ok {
		return scripting.ErrorReply(errLuaUndeclared), false
	}
	c.w.Reset()
	c.w.SetProto(proto)
	r.run(c.tx, base, &c.w)
	reply, _, err := scripting.ParseReply(c.w.Bytes())
	if err != nil { // a handler wrote something that is not one reply: a bug, said plainly
		return scripting.ErrorReply("ERR internal error: " + err.Error()), write
	}
	return reply, write
}

// lowerName returns a command's name in lower case: the command table's key. A name of
// up to 32 bytes is lowered into c's buffer, and its string made only when it is not a
// command scripts know (the map's lookup of string(bytes) makes none).
func (c *txCaller) lowerName(b []byte) string {
	if len(b) > len(c.lower) {
		return strings.ToLower(string(b))
	}
	l := c.lower[:len(b)]
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		l[i] = ch
	}
	switch string(l) {
	case "time":
		return "time"
	case "publish":
		return "publish"
	}
	if cmd := luaCommands()[string(l)]; cmd != nil {
		return cmd.Name
	}
	return string(l)
}

// aclDenied returns Redis's error for the script's caller running the command name with
// args, "" when it may.
func (c *txCaller) aclDenied(name string, args [][]byte) string {
	cmd := c.table[name]
	if c.user == nil || cmd == nil {
		return ""
	}
	switch denied, _ := c.user.denies(cmd, args); denied {
	case aclNoCmd:
		return errLuaACLCmd
	case aclNoKey:
		return errLuaACLKey
	}
	return ""
}

// declared returns the transaction index of keys[0] when keys are consecutive KEYS of the
// EVAL, in order (a command without keys: any index).
func (c *txCaller) declared(keys [][]byte) (int, bool) {
	if len(keys) == 0 {
		return c.base, true
	}
	for j := range c.keys {
		if j+len(keys) > len(c.keys) {
			break
		}
		match := true
		for i, k := range keys {
			if string(c.keys[j+i]) != string(k) {
				match = false
				break
			}
		}
		if match {
			return c.base + j, true
		}
	}
	return 0, false
}

// callPublish is a script's PUBLISH channel message (bottleneck's scripts announce
// capacity so): checked as Redis checks it, then sent to the channel's subscribers.
func (c *txCaller) callPublish(args [][]byte) scripting.Reply {
	if len(args) != 3 {
		return scripting.ErrorReply(errLuaArity)
	}
	if msg := c.aclDenied("publish", args); msg != "" {
		return scripting.ErrorReply(msg)
	}
	if c.user != nil && !c.user.channelsAllowed(c.table["publish"], args) {
		return scripting.ErrorReply("ERR The user executing the script can't publish to the channel mentioned in the command")
	}
	return scripting.Reply{Kind: scripting.Int, Int: c.d.publish(nil, nil, c.ws, args[1], args[2])}
}
