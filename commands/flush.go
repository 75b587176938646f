package commands

import (
	"strings"

	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

// FLUSHALL and FLUSHDB [ASYNC|SYNC], as Redis 7.0 answers them, over the keyspace: every
// key of the connection's workspace goes (there is one database, and a workspace never
// sees another's keys), in one step that holds every shard of the keyspace
// (keyspace.KV.DoAll), alone or inside EXEC. Each removed key that is watched aborts its
// watchers' EXEC; every tracking connection of the workspace gets a null invalidation
// (tracked). ASYNC and SYNC both flush at once. The rate limiter's cells (RL.LIMIT) are
// not the keyspace's and stay: they are reset per tuple, and replicated between origins.
// A script may not call them (errLuaFlush): its step holds its own keys only. An edge
// forwards them to its origin, as any keyspace write.

// errLuaFlush refuses FLUSHALL and FLUSHDB from a script.
const errLuaFlush = "ERR Ratchet does not run FLUSHALL or FLUSHDB from a script: send it as a command"

func init() {
	kvParsers["flushall"] = parseFlush
	kvParsers["flushdb"] = parseFlush
}

// parseFlush is FLUSHALL or FLUSHDB [ASYNC|SYNC].
func parseFlush(args [][]byte) kvReq {
	if len(args) > 2 || len(args) == 2 && !strings.EqualFold(string(args[1]), "async") &&
		!strings.EqualFold(string(args[1]), "sync") {
		return kvReq{err: errSyntaxMsg}
	}
	return kvReq{all: true, run: func(tx *keyspace.Tx, _ int, w *resp.Writer) {
		tx.Flush()
		w.OK()
	}}
}

// flushCommands are the command table's rows of FLUSHALL and FLUSHDB.
func flushCommands() []*Command {
	mode := ArgDoc{Name: "flush-type", Type: "oneof", Optional: true, Args: []ArgDoc{
		{Name: "async", Type: "pure-token", Token: "ASYNC"}, {Name: "sync", Type: "pure-token", Token: "SYNC"}}}
	row := func(name, summary string) *Command {
		return &Command{Name: name, Arity: -1, Flags: flagWrite, Group: "server", Summary: summary,
			Args: []ArgDoc{mode}, Handler: kvHandler(name)}
	}
	return []*Command{
		row("flushall", "Removes all keys of the keyspace (of the connection's workspace; rate-limit cells stay)."),
		row("flushdb", "Removes all keys of the keyspace (of the connection's workspace; rate-limit cells stay)."),
	}
}
