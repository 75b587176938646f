// Package scripting runs Lua scripts as Redis 7.0 runs EVAL: KEYS and ARGV, redis.call and
// redis.pcall, the reply conversions both ways, the cjson, bit, struct and cmsgpack
// libraries, the read-only globals sandbox, and SCRIPT KILL of a script past the time
// limit. The interpreter is github.com/yuin/gopher-lua (Lua 5.1, as Redis; pure Go).
//
// Design. An Engine holds a cache of compiled scripts by SHA1 (bounded in count and bytes,
// least recently used dropped first) and a bounded pool of interpreter states. A state is
// built once (libraries opened, globals made read-only through proxy tables) and reused:
// each run sets KEYS, ARGV and the RESP version afresh (the PRNG, Redis's rand48, is seeded
// once: Redis 7.0 no longer reseeds it per script), and a state a script managed to dirty
// (a raw write into a read-only proxy), that was stopped or in which gopher-lua panicked is
// closed rather than pooled. A run's context is the state's own (made once, with the state):
// stopping it (Kill, or the caller's context ending) stops the script between two Lua
// instructions, and the state is then closed.
//
// The package knows no sockets and no commands: redis.call reaches the keyspace through a
// Caller. The commands layer plugs in with a thin adapter: its Caller looks the command up
// in the command table (answering the errors Redis's scripting gives for an unknown
// command, a wrong arity, a command scripts may not call, a write from EVAL_RO), runs the
// handler into a scratch resp.Writer of the script's protocol inside the EVAL's
// transaction, and turns the bytes into a Reply with ParseReply; EVAL writes the Reply
// that Run returns with Reply.Append in the client's protocol. The server answers BUSY to
// other clients while Busy() and SCRIPT KILL with Kill().
//
// Known differences from Redis 7.0: gopher-lua words runtime and
// syntax errors its own way (the error code and the "script: <sha1>, on
// @user_script:<line>." position are Redis's); ".." and string.format("%s") print
// non-integer numbers with Go's shortest form where Lua prints "%.14g" (tostring is
// Lua's); table iteration order, hence cjson objects (keys sorted here) and map or set
// replies, is not Lua's hash order. A script's memory is bounded by its time, not by a
// byte limit (string.rep is bounded by MaxString).
package scripting

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Caller runs the commands a script calls.
type Caller interface {
	// Call runs one command (args[0] is its name as the script wrote it) and returns its
	// reply in protocol proto (2, or 3 after redis.setresp(3)), and whether the command
	// changed the keyspace (a script that wrote cannot be killed). What Redis refuses
	// before running a command (unknown command, wrong number of arguments, a write from a
	// read-only script) is an error reply too. args are valid only during the call and
	// must not be modified (they may share memory with the script's strings).
	Call(args [][]byte, proto int) (reply Reply, wrote bool)
}

// Config bounds an Engine. DefaultConfig gives every default.
type Config struct {
	MaxScripts int           // compiled scripts cached; the least recently used go first
	MaxBytes   int           // bytes of script bodies cached
	MaxBody    int           // bytes of one script body; a longer one is refused
	MaxIdle    int           // interpreter states kept for reuse
	MaxString  int           // bytes of one string string.rep may build
	TimeLimit  time.Duration // after it a running script is Busy and may be killed (lua-time-limit)
	Version    string        // redis.REDIS_VERSION, "7.0.15" as the redis-server compared with
	Logger     *slog.Logger  // redis.log writes here
	Now        func() time.Time
}

// DefaultConfig returns the defaults: 10000 scripts, 64 MiB of bodies, 16 idle states, a
// 5 s time limit as Redis's lua-time-limit, strings up to 512 MiB (proto-max-bulk-len).
func DefaultConfig() Config {
	return Config{MaxScripts: 10000, MaxBytes: 64 << 20, MaxBody: 16 << 20, MaxIdle: 16, MaxString: 512 << 20,
		TimeLimit: 5 * time.Second, Version: "7.0.15", Logger: slog.Default(), Now: time.Now}
}

// The errors Redis gives for SCRIPT KILL and script lookups.
const (
	ErrNoScript   = "NOSCRIPT No matching script. Please use EVAL."
	ErrNotBusy    = "NOTBUSY No scripts in execution right now."
	ErrUnkillable = "UNKILLABLE Sorry the script already executed write commands against the dataset. " +
		"You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
	ErrBusy   = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	errKilled = "ERR Script killed by user with SCRIPT KILL..."
)

// Engine caches scripts and runs them. It is safe for concurrent use: runs on different
// goroutines use different interpreter states.
type Engine struct {
	cfg  Config
	idle chan *state // interpreter states ready for reuse, at most MaxIdle

	mu      sync.Mutex // guards the cache: scripts, bodies, lru, bytes
	scripts map[string]*list.Element
	// bodies holds the same elements by their text: EVAL of a cached script finds it without
	// hashing its body (SHA1 was a tenth of an EVAL's CPU for a 900-byte script).
	bodies map[string]*list.Element
	lru    *list.List // of *script, most recently used first
	bytes  int
	// gen moves whenever the cache drops scripts (eviction, Flush): a state drops the main
	// functions it kept (state.fns) when it sees it moved.
	gen atomic.Uint64

	runMu   sync.Mutex // guards running
	running map[*run]struct{}
	// oldest is the start (Unix ns) of the longest running script, noRun when none runs,
	// written under runMu: Busy is one atomic load while no script runs.
	oldest atomic.Int64
}

// script is one cached compiled script.
type script struct {
	sha   string
	body  string // the text: an edge forwards EVALSHA of it as EVAL (Body)
	size  int
	proto *lua.FunctionProto // read only: shared by every state
}

// New returns an Engine bounded by cfg; zero fields take DefaultConfig's values.
func New(cfg Config) *Engine {
	d := DefaultConfig()
	for _, f := range []struct{ v, def *int }{{&cfg.MaxScripts, &d.MaxScripts}, {&cfg.MaxBytes, &d.MaxBytes},
		{&cfg.MaxBody, &d.MaxBody}, {&cfg.MaxIdle, &d.MaxIdle}, {&cfg.MaxString, &d.MaxString}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	if cfg.TimeLimit <= 0 {
		cfg.TimeLimit = d.TimeLimit
	}
	if cfg.Version == "" {
		cfg.Version = d.Version
	}
	if cfg.Logger == nil {
		cfg.Logger = d.Logger
	}
	if cfg.Now == nil {
		cfg.Now = d.Now
	}
	e := &Engine{cfg: cfg, idle: make(chan *state, cfg.MaxIdle), scripts: map[string]*list.Element{},
		bodies: map[string]*list.Element{}, lru: list.New(), running: map[*run]struct{}{}}
	e.oldest.Store(noRun)
	return e
}

// noRun is oldest while no script runs: not 0, which is a start a clock may give (a
// test's clock at the Unix epoch), and then no script would ever be Busy.
const noRun = math.MaxInt64

// SHA1 returns the lower-case hex SHA1 of a script body: its name for EVALSHA.
func SHA1(body []byte) string {
	sum := sha1.Sum(body)
	return hex.EncodeToString(sum[:])
}

// Load compiles body and caches it (SCRIPT LOAD). It returns the script's SHA1, or an
// error reply ("ERR Error compiling script ...") when it does not compile.
func (e *Engine) Load(body []byte) (sha string, errReply string) {
	s, msg := e.compile(body)
	if s == nil {
		return "", msg
	}
	return s.sha, ""
}

// Exists reports whether a script is cached under sha (any case: SCRIPT EXISTS).
func (e *Engine) Exists(sha string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.scripts[strings.ToLower(sha)]
	return ok
}

// Body returns the text of the script cached under sha (any case), and whether one is.
func (e *Engine) Body(sha string) ([]byte, bool) {
	s := e.lookup(strings.ToLower(sha))
	if s == nil {
		return nil, false
	}
	return []byte(s.body), true
}

// Flush forgets every cached script (SCRIPT FLUSH), and the idle states forget them too.
func (e *Engine) Flush() {
	e.mu.Lock()
	e.scripts = map[string]*list.Element{}
	e.bodies = map[string]*list.Element{}
	e.lru.Init()
	e.bytes = 0
	gen := e.gen.Add(1)
	e.mu.Unlock()
	// A state running now forgets them when it is next used (its generation is old).
	for _, st := range e.drainIdle() {
		st.syncFns(gen)
		e.put(st)
	}
}

// lookup returns the cached script named sha, marking it recently used.
func (e *Engine) lookup(sha string) *script {
	e.mu.Lock()
	defer e.mu.Unlock()
	el := e.scripts[sha]
	if el == nil {
		return nil
	}
	e.lru.MoveToFront(el)
	return el.Value.(*script)
}

// compile returns the cached script of body, compiling and caching it when new.
func (e *Engine) compile(body []byte) (*script, string) {
	e.mu.Lock()
	if el := e.bodies[string(body)]; el != nil { // EVAL of a cached script: no hash, no allocation
		e.lru.MoveToFront(el)
		e.mu.Unlock()
		return el.Value.(*script), ""
	}
	e.mu.Unlock()
	sha := SHA1(body)
	if s := e.lookup(sha); s != nil { // cached by SCRIPT LOAD of the same text
		return s, ""
	}
	if len(body) > e.cfg.MaxBody {
		return nil, "ERR Error compiling script (new function): script too large"
	}
	chunk, err := parse.Parse(strings.NewReader(string(body)), chunkName)
	if err != nil {
		return nil, "ERR Error compiling script (new function): " + compileError(err, body)
	}
	proto, err := lua.Compile(chunk, chunkName)
	if err != nil {
		return nil, "ERR Error compiling script (new function): " + oneLine(err.Error())
	}
	// gopher-lua marks a main chunk as needing Lua 5.0's implicit `arg` table, and so builds
	// one (a table and a map) on every call, though no name in a main chunk can reach it;
	// Lua 5.1 marks a main chunk vararg only. Without the mark, half the bytes a call of the
	// NestJS throttler's script allocated are gone.
	proto.IsVarArg &^= lua.VarArgNeedsArg
	s := &script{sha: sha, body: string(body), size: len(body), proto: proto}
	e.mu.Lock()
	defer e.mu.Unlock()
	if el := e.scripts[sha]; el != nil { // compiled meanwhile by another run
		return el.Value.(*script), ""
	}
	el := e.lru.PushFront(s)
	e.scripts[sha] = el
	e.bodies[s.body] = el
	e.bytes += s.size
	for e.lru.Len() > e.cfg.MaxScripts || (e.bytes > e.cfg.MaxBytes && e.lru.Len() > 1) {
		old := e.lru.Remove(e.lru.Back()).(*script)
		delete(e.scripts, old.sha)
		delete(e.bodies, old.body)
		e.bytes -= old.size
		e.gen.Add(1)
	}
	return s, ""
}

// chunkName is the name Redis 7.0 gives every script: errors read "user_script:1: ...".
const chunkName = "user_script"

// compileError words a syntax error as Lua 5.1 places it: "user_script:<line>: <what>
// near '<token>'" (gopher-lua's <what> is its own: "syntax error", "parse error").
func compileError(err error, body []byte) string {
	var pe *parse.Error
	if !errors.As(err, &pe) {
		return oneLine(err.Error())
	}
	line, near := pe.Pos.Line, pe.Token
	if line == parse.EOF {
		line, near = 1+bytes.Count(body, []byte("\n")), "<eof>"
	}
	return oneLine(chunkName + ":" + strconv.Itoa(line) + ": " + strings.TrimSpace(pe.Message) + " near '" + near + "'")
}

func oneLine(s string) string { return strings.NewReplacer("\r", " ", "\n", " ").Replace(s) }

// Request is one EVAL or EVALSHA.
type Request struct {
	Body []byte // the script (EVAL); nil for EVALSHA
	SHA  string // the script's SHA1 (EVALSHA), any case
	Keys [][]byte
	Args [][]byte
}

// run is one script in execution: what Busy and Kill look at.
type run struct {
	start  time.Time
	cancel func()
	mu     sync.Mutex // guards wrote and killed
	wrote  bool
	killed bool
}

// Run runs one script as Redis's EVAL (Body set) or EVALSHA (SHA set) and returns the reply
// EVAL gives: the script's value converted, or an error reply. It returns when the script
// ends, is killed, or ctx is done (an error reply then).
func (e *Engine) Run(ctx context.Context, req Request, c Caller) Reply {
	var s *script
	if req.Body != nil {
		var msg string
		if s, msg = e.compile(req.Body); s == nil {
			return ErrorReply(msg)
		}
	} else if len(req.SHA) != 40 {
		return ErrorReply(ErrNoScript)
	} else if s = e.lookup(strings.ToLower(req.SHA)); s == nil {
		return ErrorReply(ErrNoScript)
	}
	st := e.get()
	st.syncFns(e.gen.Load())
	r := st.begin(e.cfg.Now())
	var stop func() bool
	if ctx.Done() != nil { // a caller's context that may end: it stops the script too
		stop = context.AfterFunc(ctx, st.stop)
	}
	e.runMu.Lock()
	e.running[r] = struct{}{}
	e.setOldest()
	e.runMu.Unlock()

	reply, reuse := st.exec(s, req, c, r)
	// Before the state may be pooled: a cancel that came after the script may be stopping
	// it still (stop reports false), and would stop the next run on it.
	if stop != nil && !stop() {
		reuse = false
	}
	e.runMu.Lock()
	delete(e.running, r)
	e.setOldest()
	e.runMu.Unlock()
	// Out of running, no Kill reaches the state any more: one that came meanwhile has
	// stopped its context, and it is not reused.
	if reuse && st.ctx.Err() == nil {
		e.put(st)
	} else {
		st.L.Close()
	}
	return reply
}

// Busy reports whether a script has been running longer than the time limit: the server
// then answers ErrBusy to other clients, as Redis does.
// It costs one atomic load while no script runs, and a clock read while one does.
func (e *Engine) Busy() bool {
	o := e.oldest.Load()
	return o != noRun && e.cfg.Now().UnixNano()-o >= int64(e.cfg.TimeLimit)
}

// setOldest sets oldest from running; runMu is held.
func (e *Engine) setOldest() {
	o := int64(noRun)
	for r := range e.running {
		if t := r.start.UnixNano(); t < o {
			o = t
		}
	}
	e.oldest.Store(o)
}

// Kill stops the scripts running past the time limit that have not written (SCRIPT KILL).
// It returns "" when it stopped one, else the error reply Redis gives: ErrNotBusy when no
// script is past the limit, ErrUnkillable when every such script has written.
func (e *Engine) Kill() string {
	now := e.cfg.Now()
	e.runMu.Lock()
	defer e.runMu.Unlock()
	busy, killed := false, false
	for r := range e.running {
		if now.Sub(r.start) < e.cfg.TimeLimit {
			continue
		}
		busy = true
		r.mu.Lock()
		if !r.wrote {
			r.killed = true
			r.cancel()
			killed = true
		}
		r.mu.Unlock()
	}
	switch {
	case killed:
		return ""
	case busy:
		return ErrUnkillable
	}
	return ErrNotBusy
}

// get returns an idle state or a new one.
func (e *Engine) get() *state {
	select {
	case st := <-e.idle:
		return st
	default:
		return newState(e.cfg)
	}
}

// drainIdle takes the idle states out of the pool (at most MaxIdle; states put meanwhile
// may stay): the caller owns them and puts them back.
func (e *Engine) drainIdle() []*state {
	var idle []*state
	for len(idle) < cap(e.idle) {
		select {
		case st := <-e.idle:
			idle = append(idle, st)
		default:
			return idle
		}
	}
	return idle
}

// put keeps st for reuse, or closes it when MaxIdle states are idle.
func (e *Engine) put(st *state) {
	select {
	case e.idle <- st:
	default:
		st.L.Close()
	}
}

var errKilledRun = errors.New("killed")
