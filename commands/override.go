package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/wire"
)

// RL.OVERRIDE SET|GET|DEL|LIST: an operator's limit for a tuple, or for every key that
// starts with a prefix (written "prefix*"), that replaces the limit RL.LIMIT carries
// (engine/override.go holds the table). An origin answers from its own table. An edge
// has its origins answer: SET, GET and DEL of an exact key go to the origin of the tuple
// (rendezvous hashing, as the tuple's counts), SET and DEL of a prefix to every origin
// (each decides the tuples it holds), GET of a prefix to the origin of the prefix's
// tuple; LIST answers from the edge's copy of its origins' tables (within a second of
// them).

// OverrideLookup gives the limit a request for a tuple decides against: its override's
// (RL.OVERRIDE), else the request's. The origin's engine is one (through Local), an edge
// another (its copy of its origins' tables).
type OverrideLookup interface {
	OverrideLimit(t engine.Tuple, limit uint64) uint64
}

// OverrideRouter is an edge's way to its origins' overrides: ForwardTuple has the
// origin of a tuple key run a forwarded command (as Forward), ForwardEach every origin
// in turn; OverrideList lists the edge's copy of their overrides (as engine.Overrides.List).
type OverrideRouter interface {
	ForwardTuple(ctx context.Context, ws string, tupleKey []byte, proto int, payload [][]byte) ([]byte, error)
	ForwardEach(ctx context.Context, ws string, proto int, payload [][]byte) ([][]byte, error)
	OverrideList(ws, ns string, match func(key []byte) bool, count int) []engine.Override
}

// Errors of RL.OVERRIDE.
var (
	errOverrideSub = errors.New("ERR unknown RL.OVERRIDE subcommand: SET, GET, DEL or LIST")
	errOverrideCnt = fmt.Errorf("ERR COUNT must be an integer from 1 to %d", engine.DefaultMaxOverrides)
	errNoOverrides = errors.New("ERR RL.OVERRIDE needs an origin, or an edge that reaches its origins")
)

// errOverrideInMulti refuses RL.OVERRIDE in a transaction (EXEC then aborts): the
// transaction's decisions are made at one instant before its other commands run, and an
// override reaches edges and regions through the change feed and publication, so it cannot
// be one isolated step of a transaction.
const errOverrideInMulti = "ERR RL.OVERRIDE is not allowed inside MULTI: an override cannot be one isolated step of a transaction; send it on its own"

// overrideFullReply is the reply to a SET beyond the table's bound.
func overrideFullReply(max int) string {
	return fmt.Sprintf("ERR override table is full (%d overrides on this origin): RL.OVERRIDE DEL some first", max)
}

// defaultListCount is how many overrides LIST answers without COUNT.
const defaultListCount = 1000

func overrideCommands() []*Command {
	opt := func(a ArgDoc) ArgDoc { a.Optional = true; return a }
	return []*Command{{Name: "rl.override", Arity: -2, Group: "ratchet", NotInTx: errOverrideInMulti,
		Summary: "RL.OVERRIDE SET key window limit [NS ns] | GET key window [NS ns] | DEL key window [NS ns] | LIST [NS ns] [MATCH pattern] [COUNT n]: an operator's limit for a key or a prefix*, replacing RL.LIMIT's.",
		Args: []ArgDoc{{Name: "subcommand", Type: "oneof", Args: []ArgDoc{
			{Name: "set", Type: "block", Token: "SET", Args: []ArgDoc{{Name: "key", Type: "key"}, {Name: "window", Type: "string"},
				{Name: "limit", Type: "integer"}, opt(ArgDoc{Name: "namespace", Type: "string", Token: "NS"})}},
			{Name: "get", Type: "block", Token: "GET", Args: []ArgDoc{{Name: "key", Type: "key"}, {Name: "window", Type: "string"},
				opt(ArgDoc{Name: "namespace", Type: "string", Token: "NS"})}},
			{Name: "del", Type: "block", Token: "DEL", Args: []ArgDoc{{Name: "key", Type: "key"}, {Name: "window", Type: "string"},
				opt(ArgDoc{Name: "namespace", Type: "string", Token: "NS"})}},
			{Name: "list", Type: "block", Token: "LIST", Args: []ArgDoc{opt(ArgDoc{Name: "namespace", Type: "string", Token: "NS"}),
				opt(ArgDoc{Name: "pattern", Type: "pattern", Token: "MATCH"}), opt(ArgDoc{Name: "count", Type: "integer", Token: "COUNT"})}},
		}}},
		Handler: cmdOverride, Check: checkOverride}}
}

// OverrideArgs are the parsed arguments of RL.OVERRIDE.
type OverrideArgs struct {
	Sub       string // "set", "get", "del", "list"
	Key       []byte // without the '*' of a prefix
	Prefix    bool
	WindowMs  int64
	Limit     uint64 // SET
	Namespace []byte // nil: the default namespace (LIST: every namespace)
	Match     []byte // LIST; nil: every key
	Count     int    // LIST
}

// ParseOverride parses RL.OVERRIDE's arguments (after the command name).
func ParseOverride(args [][]byte) (OverrideArgs, error) {
	var a OverrideArgs
	if len(args) == 0 {
		return a, errSyntax
	}
	a.Sub = strings.ToLower(string(args[0]))
	rest := args[1:]
	switch a.Sub {
	case "set", "get", "del":
		need := 2
		if a.Sub == "set" {
			need = 3
		}
		if len(rest) < need {
			return a, fmt.Errorf("ERR wrong number of arguments for 'rl.override|%s' command", a.Sub)
		}
		if err := checkKey(rest[0]); err != nil {
			return a, err
		}
		a.Key = rest[0]
		if k := a.Key; k[len(k)-1] == '*' {
			a.Key, a.Prefix = k[:len(k)-1], true
		}
		var err error
		if a.WindowMs, err = ParseWindow(rest[1]); err != nil {
			return a, err
		}
		if a.Sub == "set" {
			limit, ok := parseUint(rest[2], engine.MaxLimit)
			if !ok || limit == 0 {
				return a, errLimit
			}
			a.Limit = limit
		}
		return a, a.options(rest[need:], false)
	case "list":
		a.Count = defaultListCount
		return a, a.options(rest, true)
	}
	return a, errOverrideSub
}

// options parses [NS ns], and with list [MATCH pattern] [COUNT n], in any order, each
// at most once.
func (a *OverrideArgs) options(rest [][]byte, list bool) error {
	var seenNS, seenMatch, seenCount bool
	for ; len(rest) > 0; rest = rest[2:] {
		if len(rest) < 2 {
			return errSyntax
		}
		switch opt := string(bytes.ToUpper(rest[0])); {
		case opt == "NS" && !seenNS:
			seenNS = true
			ns, err := checkNamespace(rest[1])
			if err != nil {
				return err
			}
			a.Namespace = ns
		case opt == "MATCH" && list && !seenMatch:
			seenMatch = true
			a.Match = rest[1]
		case opt == "COUNT" && list && !seenCount:
			seenCount = true
			n, ok := parseUint(rest[1], engine.DefaultMaxOverrides)
			if !ok || n == 0 {
				return errOverrideCnt
			}
			a.Count = int(n)
		default:
			return errSyntax
		}
	}
	return nil
}

func checkOverride(args [][]byte) error {
	_, err := ParseOverride(args)
	return err
}

// limitFor returns the limit a request of t decides against: its override's, else limit.
func (d *Dispatcher) limitFor(t engine.Tuple, limit uint64) uint64 {
	if d.overrides == nil {
		return limit
	}
	return d.overrides.OverrideLimit(t, limit)
}

// cmdOverride serves RL.OVERRIDE.
func cmdOverride(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	a, err := ParseOverride(args[1:])
	if err != nil {
		w.Error(err.Error())
		return
	}
	if d.opt.Origin != nil {
		d.overrideOrigin(s, w, &a)
		return
	}
	router, ok := d.opt.Limiter.(OverrideRouter)
	if !ok {
		w.Error(errNoOverrides.Error())
		return
	}
	if a.Sub == "list" {
		writeOverrides(w, router.OverrideList(s.Workspace, s.listNamespace(a.Namespace), a.matcher(), a.Count))
		return
	}
	if s.NoWait {
		s.WouldBlock = true // the origins answer
		return
	}
	payload := wire.AppendForwardCmd(nil, args)
	t := s.tuple(a.Key, a.Namespace, a.WindowMs)
	if !a.Prefix || a.Sub == "get" {
		raw, err := router.ForwardTuple(s.ctx(), s.Workspace, engine.AppendKey(nil, t), w.Proto(), payload)
		if err != nil {
			w.Error("TRYAGAIN the origin did not answer: " + err.Error())
			return
		}
		w.Raw(raw)
		return
	}
	// A prefix is every origin's: each holds it for the tuples it decides.
	raws, err := router.ForwardEach(s.ctx(), s.Workspace, w.Proto(), payload)
	if err != nil {
		w.Error("TRYAGAIN an origin did not answer (the prefix may be set on some origins only; repeat the command): " + err.Error())
		return
	}
	deleted := false
	for _, raw := range raws {
		if len(raw) > 0 && raw[0] == '-' {
			w.Raw(raw)
			return
		}
		deleted = deleted || bytes.Equal(raw, []byte(":1\r\n"))
	}
	if a.Sub == "set" {
		w.OK()
	} else {
		w.Int(boolInt(deleted))
	}
}

// overrideOrigin serves RL.OVERRIDE on an origin, from its engine's table.
func (d *Dispatcher) overrideOrigin(s *Session, w *resp.Writer, a *OverrideArgs) {
	o := d.opt.Origin.Overrides()
	t := s.tuple(a.Key, a.Namespace, a.WindowMs)
	switch a.Sub {
	case "set":
		if err := o.Set(t, a.Prefix, a.Limit); err != nil {
			if errors.Is(err, engine.ErrOverridesFull) {
				w.Error(overrideFullReply(o.Max()))
			} else {
				w.Error("ERR " + err.Error())
			}
			return
		}
		w.OK()
	case "get":
		if l, ok := o.Get(t, a.Prefix); ok {
			w.Int(int64(l))
		} else {
			w.Null()
		}
	case "del":
		w.Int(boolInt(o.Delete(t, a.Prefix)))
	case "list":
		writeOverrides(w, o.List(s.Workspace, s.listNamespace(a.Namespace), a.matcher(), a.Count))
	}
}

// listNamespace is LIST's namespace: "" (every one) without NS.
func (s *Session) listNamespace(ns []byte) string {
	if ns == nil {
		return ""
	}
	return s.namespace(ns)
}

// matcher is LIST's MATCH as a function of a key (a prefix's with its '*'); nil: none.
func (a *OverrideArgs) matcher() func([]byte) bool {
	if a.Match == nil {
		return nil
	}
	p := bytes.Clone(a.Match)
	return func(k []byte) bool { return globMatch(p, k) }
}

// writeOverrides writes LIST's reply: one array per override, [key, window_ms, limit,
// namespace], a prefix's key ending with '*'.
func writeOverrides(w *resp.Writer, list []engine.Override) {
	w.Array(len(list))
	for _, o := range list {
		w.Array(4)
		key := o.Tuple.Key
		if o.Prefix {
			key = append(key[:len(key):len(key)], '*')
		}
		w.Bulk(key)
		w.Int(o.Tuple.WindowMs)
		w.Int(int64(o.Limit))
		w.BulkString(o.Tuple.Namespace)
	}
}

// cmdInternalOverrides serves RL.INTERNAL.OVERRIDES key flags limit stamp region [...]:
// override records pushed by another region's origin (package replication), merged into
// this origin's table. The reply is [changed].
func cmdInternalOverrides(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	recs, err := wire.ParseOverrides(args)
	if err != nil {
		w.Error(internalError(err))
		return
	}
	if s.peerRegion == "" {
		w.Error("ERR internal: RL.INTERNAL.OVERRIDES is for other regions' origins")
		return
	}
	wire.WritePublishReply(w, d.opt.Origin.Overrides().Merge(recs))
}

// cmdInternalOverrideList serves RL.INTERNAL.OVERRIDELIST after: an edge reads this
// origin's overrides (engine.Engine.OverrideList), in the CHANGES reply's form.
func cmdInternalOverrideList(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	if !internalReady(d, s, w) {
		return
	}
	after, err := wire.ParseOverrideList(args)
	if err != nil {
		w.Error(internalError(err))
		return
	}
	wire.WriteChangesReply(w, d.opt.Origin.OverrideList(s.nodeRun, after))
}
