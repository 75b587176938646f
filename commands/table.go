package commands

import (
	"github.com/ratchet/ratchet/resp"
)

type cmdFlags uint8

const (
	flagNoAuth   cmdFlags = 1 << iota // allowed before AUTH
	flagWrite                         // may change counts
	flagReadonly                      // never changes counts
	flagFast                          // O(1)
	flagTx                            // runs at once inside MULTI (MULTI, EXEC, DISCARD, WATCH, QUIT)
)

// Command is one row of the command table.
type Command struct {
	Name     string // lower case
	Arity    int    // Redis convention: n exact, -n at least n (the name counts)
	Flags    cmdFlags
	FirstKey int // position of the key argument, 0 when none
	LastKey  int // 0: FirstKey is the only key; -1: every argument from FirstKey is a key
	KeyStep  int // with LastKey -1: every KeyStep-th argument is a key (MSET: 2); 0 means 1
	Group    string
	Summary  string
	Args     []ArgDoc
	Handler  func(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte)
	// Check, when set, validates the arguments (after the name) when the command is
	// queued in a transaction, so that an error aborts the transaction at EXEC.
	Check func(args [][]byte) error
	// NotInTx, when set, is the error that refuses the command inside MULTI (the
	// transaction then aborts at EXEC): a command that cannot be one isolated step of it.
	NotInTx string

	aclBit  int            // the command's bit in an ACL user's set; -1: never checked (acl.go)
	aclSubs map[string]int // a container's subcommands' bits (CLIENT LIST: "list")
	id      int            // the place in its Dispatcher's table, from 1: the index of its statistics
}

// ArgDoc documents one argument for COMMAND DOCS (and so for redis-cli's hints).
type ArgDoc struct {
	Name     string
	Type     string // key, integer, string, pure-token, block, oneof
	Token    string
	Optional bool
	Multiple bool // may be repeated (COMMAND DOCS flag "multiple")
	Args     []ArgDoc
}

func commandTable() []*Command {
	opt := func(a ArgDoc) ArgDoc { a.Optional = true; return a }
	rows := []*Command{
		{Name: "rl.limit", Arity: -4, Flags: flagWrite | flagFast, FirstKey: 1, Group: "ratchet",
			Summary: "Decides a request against one or several sliding-window limits and counts it in all when all allow.",
			Args: []ArgDoc{{Name: "key", Type: "key"},
				{Name: "limits", Type: "block", Multiple: true, Args: []ArgDoc{{Name: "limit", Type: "integer"}, {Name: "window", Type: "string"}}},
				opt(ArgDoc{Name: "cost", Type: "integer", Token: "COST"}), opt(ArgDoc{Name: "namespace", Type: "string", Token: "NS"})},
			Handler: cmdLimit, Check: checkLimit},
		{Name: "rl.status", Arity: -3, Flags: flagReadonly | flagFast, FirstKey: 1, Group: "ratchet",
			Summary: "Reads a tuple's counts without counting.",
			Args: []ArgDoc{{Name: "key", Type: "key"}, {Name: "window", Type: "string"},
				opt(ArgDoc{Name: "namespace", Type: "string", Token: "NS"}), opt(ArgDoc{Name: "limit", Type: "integer", Token: "LIMIT"})},
			Handler: cmdStatus, Check: func(a [][]byte) error { _, err := ParseStatus(a); return err }},
		{Name: "rl.reset", Arity: -3, Flags: flagWrite | flagFast, FirstKey: 1, Group: "ratchet", NotInTx: errResetInMulti,
			Summary: "Zeroes a key's usage in one or several windows, everywhere; returns how many held usage.",
			Args: []ArgDoc{{Name: "key", Type: "key"}, {Name: "window", Type: "string", Multiple: true},
				opt(ArgDoc{Name: "namespace", Type: "string", Token: "NS"})},
			Handler: cmdReset, Check: func(a [][]byte) error { _, err := ParseReset(a); return err }},
		{Name: "ping", Arity: -1, Flags: flagFast, Group: "connection", Summary: "Returns the server's liveliness response.",
			Args: []ArgDoc{opt(ArgDoc{Name: "message", Type: "string"})}, Handler: cmdPing},
		{Name: "echo", Arity: 2, Flags: flagFast, Group: "connection", Summary: "Returns the given string.",
			Args: []ArgDoc{{Name: "message", Type: "string"}}, Handler: cmdEcho},
		{Name: "quit", Arity: -1, Flags: flagNoAuth | flagFast | flagTx, Group: "connection", Summary: "Closes the connection.", Handler: cmdQuit},
		{Name: "time", Arity: 1, Flags: flagFast, Group: "server", Summary: "Returns the server time.", Handler: cmdTime},
		{Name: "hello", Arity: -1, Flags: flagNoAuth | flagFast, Group: "connection", Summary: "Handshakes with the server.",
			Args: []ArgDoc{opt(ArgDoc{Name: "arguments", Type: "block", Args: []ArgDoc{{Name: "protover", Type: "integer"},
				opt(ArgDoc{Name: "username-password", Type: "block", Token: "AUTH", Args: []ArgDoc{{Name: "username", Type: "string"}, {Name: "password", Type: "string"}}}),
				opt(ArgDoc{Name: "clientname", Type: "string", Token: "SETNAME"})}})},
			Handler: cmdHello},
		{Name: "auth", Arity: -2, Flags: flagNoAuth | flagFast, Group: "connection", Summary: "Authenticates the connection.",
			Args: []ArgDoc{opt(ArgDoc{Name: "username", Type: "string"}), {Name: "password", Type: "string"}}, Handler: cmdAuth},
		{Name: "client", Arity: -2, Group: "connection", Summary: "CLIENT ID, GETNAME, SETNAME, SETINFO, INFO, LIST.",
			Args: []ArgDoc{{Name: "subcommand", Type: "string"}}, Handler: cmdClient},
		{Name: "select", Arity: 2, Flags: flagFast, Group: "connection", Summary: "Selects database 0, the only one.",
			Args: []ArgDoc{{Name: "index", Type: "integer"}}, Handler: cmdSelect},
		{Name: "command", Arity: -1, Group: "server", Summary: "COMMAND, COMMAND COUNT, COMMAND DOCS, COMMAND INFO, COMMAND LIST.",
			Handler: cmdCommand},
		{Name: "info", Arity: -1, Group: "server", Summary: "Returns information about the server.",
			Args: []ArgDoc{opt(ArgDoc{Name: "section", Type: "string"})}, Handler: cmdInfo},
		{Name: "dbsize", Arity: 1, Flags: flagReadonly | flagFast, Group: "server", Summary: "Returns the number of cells held.", Handler: cmdDBSize},
		{Name: "multi", Arity: 1, Flags: flagFast | flagTx, Group: "transactions", Summary: "Starts a transaction.", Handler: cmdMulti},
		{Name: "exec", Arity: 1, Flags: flagTx, Group: "transactions", Summary: "Executes all commands in a transaction.", Handler: cmdExecKV},
		{Name: "discard", Arity: 1, Flags: flagFast | flagTx, Group: "transactions", Summary: "Discards a transaction.", Handler: cmdDiscard},
		{Name: "watch", Arity: -2, Flags: flagFast | flagTx, FirstKey: 1, LastKey: -1, Group: "transactions",
			Summary: "Watches counter keys: EXEC answers null if one changed. Refused on an edge.",
			Args:    []ArgDoc{{Name: "key", Type: "key"}}, Handler: cmdWatch},
		{Name: "unwatch", Arity: 1, Flags: flagFast, Group: "transactions", Summary: "Forgets the watched keys.", Handler: cmdUnwatch},
		{Name: "config", Arity: -2, Group: "server", Summary: "CONFIG GET parameter [parameter ...].",
			Args: []ArgDoc{{Name: "subcommand", Type: "string"}}, Handler: cmdConfig},
	}
	rows = append(rows, overrideCommands()...) // RL.OVERRIDE: override.go

	rows = append(rows, scriptCommands()...) // EVAL, EVALSHA, SCRIPT: scripts.go
	rows = append(rows, pubsubCommands()...) // SUBSCRIBE, PUBLISH, PUBSUB: pubsub.go
	return append(rows, aclCommand())        // ACL: acl.go
}

func (c *Command) flagNames() []string {
	var out []string
	if c.Flags&flagWrite != 0 {
		out = append(out, "write")
	}
	if c.Flags&flagReadonly != 0 {
		out = append(out, "readonly")
	}
	if c.Flags&flagFast != 0 {
		out = append(out, "fast")
	}
	if c.Flags&flagNoAuth != 0 {
		out = append(out, "no-auth")
	}
	return out
}

// writeInfo writes one COMMAND INFO entry.
func (c *Command) writeInfo(w *resp.Writer) {
	w.Array(10)
	w.BulkString(c.Name)
	w.Int(int64(c.Arity))
	flags := c.flagNames()
	w.Array(len(flags))
	for _, f := range flags {
		w.Simple(f)
	}
	k, last := int64(c.FirstKey), int64(c.FirstKey)
	if c.LastKey != 0 {
		last = int64(c.LastKey)
	}
	w.Int(k)
	w.Int(last)
	if k > 0 {
		w.Int(int64(max(c.KeyStep, 1)))
	} else {
		w.Int(0)
	}
	cats := categoriesOf(c.Name)
	w.Array(len(cats))
	for _, cat := range cats {
		w.Simple("@" + cat)
	}
	w.Array(0) // tips
	w.Array(0) // key specs
	w.Array(0) // subcommands
}

// writeDocs writes one COMMAND DOCS value (the map after the name).
func (c *Command) writeDocs(w *resp.Writer) {
	w.Map(4)
	w.BulkString("summary")
	w.BulkString(c.Summary)
	w.BulkString("since")
	w.BulkString("1.0.0")
	w.BulkString("group")
	w.BulkString(c.Group)
	w.BulkString("arguments")
	writeArgDocs(w, c.Args)
}

func writeArgDocs(w *resp.Writer, args []ArgDoc) {
	w.Array(len(args))
	for _, a := range args {
		n := 2
		if a.Token != "" {
			n++
		}
		if a.Optional || a.Multiple {
			n++
		}
		if len(a.Args) > 0 {
			n++
		}
		w.Map(n)
		w.BulkString("name")
		w.BulkString(a.Name)
		w.BulkString("type")
		w.BulkString(a.Type)
		if a.Token != "" {
			w.BulkString("token")
			w.BulkString(a.Token)
		}
		if a.Optional || a.Multiple {
			w.BulkString("flags")
			w.Array(int(boolInt(a.Optional) + boolInt(a.Multiple)))
			if a.Optional {
				w.Simple("optional")
			}
			if a.Multiple {
				w.Simple("multiple")
			}
		}
		if len(a.Args) > 0 {
			w.BulkString("arguments")
			writeArgDocs(w, a.Args)
		}
	}
}
