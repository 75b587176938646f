// Package commands turns parsed requests into replies: it checks arity and
// authentication, parses arguments, calls the engine and writes RESP2 or RESP3.
//
// Each command is one row of a table (name, arity, flags, handler, docs); the same table
// answers COMMAND, COMMAND INFO and COMMAND DOCS. A request travels:
// server (socket, framing) -> Dispatcher.Serve (table lookup, auth) -> handler
// (argument parsing) -> Limiter.Limit/Status (the origin's engine, or an edge) ->
// resp.Writer.
package commands

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
	"github.com/ratchet/ratchet/scripting"
	"github.com/ratchet/ratchet/server"
)

// Host is what the commands need from the server around them.
type Host interface {
	// Sessions returns the open connections, for CLIENT LIST.
	Sessions() []server.Session
	// Stats returns the connection counters, for INFO.
	ConnStats() server.ConnStats
}

// AuthStats count failed authentication: AUTH, HELLO AUTH and the cluster secret of
// RL.INTERNAL.HELLO.
type AuthStats struct {
	Failures  uint64 // wrong passwords and secrets, within the throttle's budget
	Throttled uint64 // wrong ones over the budget, after repeated failures (their connection is closed)
}

// PeerInfo describes one peer region for INFO.
type PeerInfo struct {
	Region     string
	Addr       string
	Up         bool
	LastOKMs   int64
	LagMs      int64
	Published  uint64
	Imported   uint64
	ImportedMs int64
}

// SnapshotStats describe persistence, for INFO.
type SnapshotStats struct {
	Enabled       bool
	LastSuccessMs int64
	LastDuration  time.Duration
	LastCells     int
	Failures      uint64
	// BaseBytes and LogBytes are the sizes of the snapshot file and of the delta logs
	// beside it; Compactions and CompactionFailures count the rewrites of the file from
	// them.
	BaseBytes, LogBytes             int64
	Compactions, CompactionFailures uint64
}

// Limiter decides requests: the origin's *engine.Engine (through Local), or an edge's
// *edge.Edge. ctx is the request's: it bounds what the decision waits on (an edge's
// calls to its origin).
type Limiter interface {
	Limit(ctx context.Context, t engine.Tuple, limit, cost uint64) (engine.Decision, error)
	Status(ctx context.Context, t engine.Tuple) engine.Status
}

// Local is the Limiter of an origin's engine, which decides from its own memory and never
// waits: it has no use for the context. Its other methods (LimitAt, Transact, Stats) stay
// the engine's.
func Local(e *engine.Engine) Limiter { return localLimiter{e} }

type localLimiter struct{ *engine.Engine }

func (l localLimiter) Limit(_ context.Context, t engine.Tuple, limit, cost uint64) (engine.Decision, error) {
	return l.Engine.Limit(t, limit, cost)
}

func (l localLimiter) Status(_ context.Context, t engine.Tuple) engine.Status {
	return l.Engine.Status(t)
}

// WaitFreeLimiter is a Limiter whose requests may wait on the network (an edge), with a
// way to decide without waiting when local memory allows: TryLimit decides at nowMs, and
// reports ok false, changing nothing, when only Limit can decide. A Limiter without it
// never waits.
type WaitFreeLimiter interface {
	TryLimit(t engine.Tuple, limit, cost uint64, nowMs int64) (d engine.Decision, ok bool, err error)
	// Clock is the limiter's clock, for TryLimit without Options.BatchTime.
	Clock() engine.Clock
}

// BatchLimiter is a Limiter that can decide at a given instant (the origin's Engine). With
// Options.BatchTime, RL.LIMIT decides at the instant its request batch was read.
type BatchLimiter interface {
	LimitAt(t engine.Tuple, limit, cost uint64, nowMs int64) (engine.Decision, error)
}

// Options configure a Dispatcher.
type Options struct {
	// Limiter decides requests; nil: Local(Origin).
	Limiter Limiter
	// Origin serves RL.INTERNAL.* to edges; nil on an edge.
	Origin        *engine.Engine
	ClusterSecret string
	Host          Host
	RequirePass   string
	Role          string
	Region        string
	NodeID        string
	MaxClients    int
	Version       string
	// Snapshots reports persistence for INFO; nil when disabled.
	Snapshots func() SnapshotStats
	// Config answers CONFIG GET: parameter name to value.
	Config map[string]string
	// PeerRegions are the regions of --peer: RL.INTERNAL.PUBLISH takes components of
	// these and of Region only.
	PeerRegions map[string]bool
	// BatchTime makes RL.LIMIT decide at the instant the server read the request's batch
	// (Session.Touch) rather than read the clock per request, wherever the decision does
	// not wait: a BatchLimiter's, and a WaitFreeLimiter's TryLimit. The server must Touch
	// the session with the wall clock on every read.
	BatchTime bool
	// OnImport is told of every batch of components received from a peer region.
	OnImport func(region string, rows, changed int)
	// Peers reports the cross-region peers for INFO; nil without peers.
	Peers func() []PeerInfo
	// Forward has the origin run the regional commands of an edge's client (forward.go);
	// nil on an origin, and on an edge that cannot (they are then refused).
	Forward Forward
	// ClusterClientCert makes RL.INTERNAL.HELLO need a TLS client certificate that the
	// listener verified (Session.CertVerified; --cluster-client-ca): without one it is
	// refused with NOPERM before the secret is looked at.
	ClusterClientCert bool
	// ACLFile holds users in Redis's ACL syntax (acl.go); LoadACL reads it. "": the
	// default user only, with RequirePass.
	ACLFile string
	// Logger receives the rate-limited lines about failed authentication; nil:
	// slog.Default().
	Logger *slog.Logger
	// TrackingMaxKeys bounds CLIENT TRACKING's table of keys read (Redis's
	// tracking-table-max-keys); 0: DefaultTrackingMaxKeys.
	TrackingMaxKeys int
	// Scripting bounds the Lua interpreter of the scripts without a native path (its
	// script cache, states, time limit); zero fields: scripting.DefaultConfig's.
	Scripting scripting.Config
}

// Dispatcher routes requests to command handlers. It is safe for concurrent use by every
// connection's goroutine.
type Dispatcher struct {
	opt       Options
	waitFree  WaitFreeLimiter // opt.Limiter when it may wait (an edge); else nil
	atBatch   BatchLimiter    // opt.Limiter when BatchTime applies to it; else nil
	table     map[string]*Command
	ordered   []*Command
	startedMs int64
	cmds      *cmdStats

	authFailures  atomic.Uint64 // see AuthStats
	authThrottled atomic.Uint64

	transactor Transactor   // opt.Limiter when it runs transactions as one step; else nil
	txMu       sync.Mutex   // one sequential (edge) transaction at a time
	txBytes    atomic.Int64 // bytes queued by all open transactions (multi.go)
	txBudget   int64        // the bound on txBytes: maxTxBytesAll

	lua *scripting.Engine // this server's script cache and interpreter (lua.go)

	clientAuth  *authThrottle    // AUTH and HELLO AUTH failures by address (auth.go)
	clusterAuth *authThrottle    // RL.INTERNAL.HELLO failures by address
	now         func() time.Time // the throttle's clock; time.Now but in tests

	acl atomic.Pointer[aclState] // the users in force (acl.go)

	pubsub pubsub   // channels and their subscribers (pubsub.go)
	track  *tracker // CLIENT TRACKING's table, and every session by ID (tracking.go)

	// overrides is opt.Limiter when it holds overrides (RL.OVERRIDE, override.go); else nil.
	overrides OverrideLookup
}

// AuthStats returns the failed-authentication counters.
func (d *Dispatcher) AuthStats() AuthStats {
	return AuthStats{Failures: d.authFailures.Load(), Throttled: d.authThrottled.Load()}
}

// counterStripes is how many stripes the command statistics spread their counters over
// (cmdstats.go): each session adds to the stripe of its ID, so concurrent connections
// mostly touch cache lines of their own.
const counterStripes = 32

// New returns a Dispatcher over the command table.
func New(opt Options) *Dispatcher {
	d := &Dispatcher{opt: opt, table: make(map[string]*Command), startedMs: time.Now().UnixMilli(), txBudget: maxTxBytesAll,
		clientAuth: newAuthThrottle("password"), clusterAuth: newAuthThrottle("cluster secret"), now: time.Now,
		lua: scripting.New(opt.Scripting)}
	if d.opt.Limiter == nil && opt.Origin != nil {
		d.opt.Limiter = Local(opt.Origin)
	}
	opt = d.opt
	var clock engine.Clock // the keyspace's, which tracking reads expiries from
	if opt.Origin != nil {
		clock = opt.Origin.Clock()
	}
	d.track = newTracker(opt.TrackingMaxKeys, clock)
	d.pubsub.spaces = map[string]*psSpace{}
	d.waitFree, _ = opt.Limiter.(WaitFreeLimiter)
	d.transactor, _ = opt.Limiter.(Transactor)
	d.overrides, _ = opt.Limiter.(OverrideLookup)
	if bl, ok := opt.Limiter.(BatchLimiter); ok && opt.BatchTime {
		d.atBatch = bl
	}
	d.acl.Store(newACLState(map[string]*aclUser{"default": defaultUser(opt.RequirePass)}, false))
	for _, c := range append(append(commandTable(), kvCommands()...), internalCommands()...) {
		bindACL(c)
		d.table[c.Name] = c
		d.ordered = append(d.ordered, c)
	}
	d.cmds = newCmdStats(d.ordered)
	return d
}

// Processed returns the number of commands served.
func (d *Dispatcher) Processed() uint64 { return d.cmds.total() }

// Open returns the state of a new connection of the server (server.Handler).
func (d *Dispatcher) Open(c *server.Conn, nowMs int64) server.Session {
	s := newSession(c, nowMs)
	s.d = d
	d.track.open(s)
	return s
}

// Serve handles one request and appends its reply to w. args[0] is the command name.
func (d *Dispatcher) Serve(s *Session, w *resp.Writer, args [][]byte) {
	d.serve(s, w, args)
	if (s.caching || len(s.selfPush) > 0) && !s.WouldBlock { // tracking.go
		s.endCommand(w, args)
	}
}

func (d *Dispatcher) serve(s *Session, w *resp.Writer, args [][]byte) {
	if len(args) == 0 {
		return
	}
	if s.tx != nil {
		d.serveInMulti(s, w, args)
		return
	}
	cmd := d.lookup(s, args[0])
	if cmd == nil {
		d.cmds.reject(s, nil)
		d.unknown(w, args)
		return
	}
	// Redis's order: unknown command, then arity, then authentication.
	if (cmd.Arity > 0 && len(args) != cmd.Arity) || (cmd.Arity < 0 && len(args) < -cmd.Arity) {
		d.cmds.reject(s, cmd)
		w.Error("ERR wrong number of arguments for '" + cmd.Name + "' command")
		return
	}
	if !s.Authed && cmd.Flags&flagNoAuth == 0 && !d.autoAuth(s) {
		d.cmds.reject(s, cmd)
		w.Error("NOAUTH Authentication required.")
		return
	}
	if s.user != nil { // an ACL file is in force (acl.go)
		if msg := d.aclDenied(s, cmd, args); msg != "" {
			d.cmds.reject(s, cmd)
			w.Error(msg)
			return
		}
	}
	if subscribedRefused(s, w, cmd, args) { // RESP2 with subscriptions (pubsub.go)
		d.cmds.reject(s, cmd)
		return
	}
	if d.busyRefused(s, w, cmd, args) { // a script runs past the time limit (lua.go)
		return
	}
	if s.lastCmd.Load() != cmd { // clients repeat one command: skip the atomic swap
		s.lastCmd.Store(cmd)
	}
	mark := d.cmds.begin(s, w)
	cmd.Handler(d, s, w, args)
	if !s.WouldBlock { // else it is served again, and counted then, where it may wait
		d.cmds.done(s, cmd, w, mark)
	}
}

// lookup finds the command named name, in any ASCII case; nil when there is none.
// Clients mostly repeat one command, so the session's last command is tried before the
// table (every Dispatcher's table is built from the same rows, so a *Command found by
// another one would be equivalent).
func (d *Dispatcher) lookup(s *Session, name []byte) *Command {
	if c := s.lastCmd.Load(); c != nil && equalLower(name, c.Name) {
		return c
	}
	var lower [32]byte
	if len(name) > len(lower) {
		return nil
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return d.table[string(lower[:len(name)])]
}

// equalLower reports whether b, with A-Z lowered, is lower.
func equalLower(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// unknown answers as Redis does: the arguments are echoed until 128 bytes of them.
func (d *Dispatcher) unknown(w *resp.Writer, args [][]byte) {
	var b strings.Builder
	fmt.Fprintf(&b, "ERR unknown command '%s', with args beginning with: ", clip(args[0]))
	budget := 128
	for _, a := range args[1:] {
		if budget <= 0 {
			break
		}
		a = a[:min(len(a), budget)]
		budget -= len(a)
		fmt.Fprintf(&b, "'%s' ", a)
	}
	w.Error(b.String())
}

// clip shortens an argument echoed in an error, as Redis does.
func clip(b []byte) string {
	if len(b) > 128 {
		b = b[:128]
	}
	return string(b)
}
