package scripting

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// state is one interpreter with Redis's libraries and sandbox. It is owned by one run at a
// time (Engine.get, Engine.put).
type state struct {
	L       *lua.LState
	cfg     Config
	globals *lua.LTable // the real globals: reached only through env
	env     *lua.LTable // the read-only view of globals every script runs in
	// proxies are the read-only views (globals, the libraries, the protected metatables):
	// tables that stay empty; one a script wrote into raw makes the state unusable.
	proxies  map[*lua.LTable]*lua.LTable // view -> the table it shows
	views    []*lua.LTable               // the keys of proxies: clean walks them after every run
	sealed   *lua.LTable                 // what getmetatable answers for a view: its own is nil
	handler  *lua.LFunction              // the error handler: Redis's __redis__err__handler
	callArgs [][]byte                    // redis.call's arguments, reused
	num      []byte                      // redis.call's number arguments, formatted, reused
	rand     rand48

	// ctx is the state's context, for every run: stop ends it, and the state with it.
	ctx  stopCtx
	r    run                                   // the run in execution, reused
	fns  map[*lua.FunctionProto]*lua.LFunction // the scripts' main functions, bound to env
	keys argTable                              // KEYS of the last run, reused when left as made
	argv argTable                              // ARGV likewise
	// fnsBytes is the bytes of the bodies of the scripts in fns; fnsGen the engine's
	// generation (Engine.gen) they were made in: when it moved, the cache dropped scripts.
	fnsBytes int
	fnsGen   uint64

	// Per run, set by exec.
	caller Caller
	run    *run
	sha    string
	proto  int // redis.setresp: 2 or 3
}

// stopCtx is a state's context: Done is closed once stop is called, and stays so.
type stopCtx struct {
	done    chan struct{}
	stopped atomic.Bool
}

func (c *stopCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *stopCtx) Done() <-chan struct{}       { return c.done }
func (c *stopCtx) Value(any) any               { return nil }

// Err returns context.Canceled once the context is stopped, else nil.
func (c *stopCtx) Err() error {
	if c.stopped.Load() {
		return context.Canceled
	}
	return nil
}

// stop ends the state's context: its script stops at the next instruction.
func (st *state) stop() {
	if st.ctx.stopped.CompareAndSwap(false, true) {
		close(st.ctx.done)
	}
}

// begin readies st.r for a run starting at now and returns it.
func (st *state) begin(now time.Time) *run {
	r := &st.r
	r.mu.Lock()
	r.start, r.wrote, r.killed = now, false, false
	r.mu.Unlock()
	return r
}

// The main functions a state keeps (each holds its compiled script alive): at most maxFns,
// of scripts whose bodies total at most maxFnsBytes; past either bound, they are all
// dropped. A script longer than maxFnBody is never kept.
const (
	maxFns      = 64
	maxFnsBytes = 1 << 20
	maxFnBody   = 64 << 10
)

// function returns the main function of s bound to the read-only globals, made once per
// state (a main chunk has no upvalues: the function holds nothing of a run).
func (st *state) function(s *script) *lua.LFunction {
	if fn := st.fns[s.proto]; fn != nil {
		return fn
	}
	fn := st.L.NewFunctionFromProto(s.proto)
	fn.Env = st.env
	if s.size > maxFnBody {
		return fn
	}
	if len(st.fns) >= maxFns || st.fnsBytes+s.size > maxFnsBytes {
		st.forgetFns()
	}
	st.fns[s.proto] = fn
	st.fnsBytes += s.size
	return fn
}

// syncFns drops the kept main functions when the engine's cache dropped scripts since they
// were made (its generation is no longer gen): they must not outlive the cache.
func (st *state) syncFns(gen uint64) {
	if st.fnsGen != gen {
		st.forgetFns()
		st.fnsGen = gen
	}
}

func (st *state) forgetFns() {
	clear(st.fns)
	st.fnsBytes = 0
}

// argTable is KEYS or ARGV as a state made it for the last run: the table and its values.
type argTable struct {
	t     *lua.LTable
	vals  []lua.LValue
	bytes int // of vals' strings
}

// maxKeptArgs bounds the bytes of KEYS or ARGV an idle state keeps for its next run.
const maxKeptArgs = 64 << 10

// drop forgets a's table and values when they hold more than maxKeptArgs bytes: an idle
// state does not keep a huge argument alive.
func (a *argTable) drop() {
	if a.bytes > maxKeptArgs {
		*a = argTable{}
	}
}

// set returns a Lua array of bs as strings (KEYS, ARGV): the last run's table refilled
// when the script left it exactly as made (the same values, nothing added, no metatable),
// else a new one; a value equal to the last run's at its place is the same Lua string.
func (a *argTable) set(L *lua.LState, bs [][]byte) *lua.LTable {
	reuse := a.t != nil && len(bs) == len(a.vals) && a.t.Metatable == lua.LNil && a.t.Len() == len(a.vals)
	for i := 0; reuse && i < len(a.vals); i++ {
		reuse = a.t.RawGetInt(i+1) == a.vals[i]
	}
	if reuse { // no key past the array
		var last lua.LValue = lua.LNil
		if len(a.vals) > 0 {
			last = lua.LNumber(len(a.vals))
		}
		k, _ := a.t.Next(last)
		reuse = k == lua.LNil
	}
	if len(bs) != len(a.vals) {
		a.vals = make([]lua.LValue, len(bs))
	}
	a.bytes = 0
	for i, b := range bs {
		if v, ok := a.vals[i].(lua.LString); !ok || string(v) != string(b) {
			a.vals[i] = lua.LString(b)
		}
		a.bytes += len(b)
	}
	if !reuse {
		a.t = L.CreateTable(len(bs), 0)
		for _, v := range a.vals {
			a.t.Append(v)
		}
		return a.t
	}
	for i, v := range a.vals {
		a.t.RawSetInt(i+1, v)
	}
	return a.t
}

const (
	errReadonly   = "Attempt to modify a readonly table"
	errArgType    = "Lua redis lib command arguments must be strings or integers"
	errNoArgs     = "Please specify at least one argument for this redis lib call"
	errWrongArgs  = "wrong number or type of arguments"
	maxReplyDepth = 1000    // nesting of a script's reply, as Lua's C stack bounds Redis
	maxReplyElems = 1 << 20 // values in a script's reply
)

// newState builds an interpreter: Lua 5.1's base, table, string, math and coroutine
// libraries less what Redis 7.0 removes, Redis's own libraries, read-only globals.
func newState(cfg Config) *state {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 1000, RegistrySize: 1024 * 4,
		RegistryMaxSize: 1 << 20, RegistryGrowStep: 1024})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath}, {lua.CoroutineLibName, lua.OpenCoroutine}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	st := &state{L: L, cfg: cfg, globals: L.G.Global, proxies: map[*lua.LTable]*lua.LTable{},
		fns: map[*lua.FunctionProto]*lua.LFunction{}}
	st.ctx.done = make(chan struct{})
	st.r.cancel = st.stop
	st.rand.seed(0) // Redis 7.0 seeds once and no more per script (effects replication)
	g := st.globals
	for _, name := range []string{"dofile", "loadfile", "print", "getfenv", "setfenv", "module", "require",
		"newproxy", "_printregs", "_GOPHER_LUA_VERSION"} {
		g.RawSetString(name, lua.LNil)
	}
	zero := L.NewFunction(func(L *lua.LState) int { L.Push(lua.LNumber(0)); return 1 })
	g.RawSetString("collectgarbage", zero) // gopher-lua's runs a Go GC: a script must not
	g.RawSetString("gcinfo", zero)
	g.RawSetString("error", L.NewFunction(st.luaError))
	g.RawSetString("tostring", L.NewFunction(luaToString))
	g.RawSetString("rawset", L.NewFunction(st.rawset))
	g.RawSetString("setmetatable", L.NewFunction(st.setmetatable))
	g.RawSetString("pcall", L.NewFunction(pcall))
	for _, name := range []string{"next", "pairs", "rawget"} { // they see through the read-only views
		orig := g.RawGetString(name).(*lua.LFunction)
		g.RawSetString(name, L.NewFunction(st.seeThrough(orig)))
	}
	tab := g.RawGetString("table").(*lua.LTable)
	tab.RawSetString("foreach", L.NewFunction(tableForeach(false)))
	tab.RawSetString("foreachi", L.NewFunction(tableForeach(true)))
	tab.RawSetString("setn", L.NewFunction(func(L *lua.LState) int { L.RaiseError("'setn' is obsolete"); return 0 }))
	g.RawSetString("loadstring", L.NewFunction(st.loadstring))
	g.RawSetString("load", L.NewFunction(st.load))
	str := g.RawGetString("string").(*lua.LTable)
	str.RawSetString("rep", L.NewFunction(st.strRep))
	str.RawSetString("__index", lua.LNil)
	math := g.RawGetString("math").(*lua.LTable)
	math.RawSetString("random", L.NewFunction(st.random))
	math.RawSetString("randomseed", L.NewFunction(st.randomseed))

	g.RawSetString("redis", st.redisLib())
	g.RawSetString("cjson", openCjson(L))
	g.RawSetString("bit", openBit(L))
	g.RawSetString("struct", openStruct(L))
	g.RawSetString("cmsgpack", openMsgpack(L))
	st.handler = L.NewFunction(st.onError)
	g.RawSetString("__redis__err__handler", st.handler)
	st.sandbox(str)
	return st
}

// sandbox makes the globals and the libraries read-only as Redis 7.0: the globals a
// script sees are a view that refuses new names and answers an error for unknown ones.
func (st *state) sandbox(str *lua.LTable) {
	L, g := st.L, st.globals
	ro := L.NewFunction(func(L *lua.LState) int { L.RaiseError(errReadonly); return 0 })
	sealed := st.proxy(L.NewTable(), ro, lua.LNil) // what getmetatable answers for a view
	st.sealed = sealed
	g.RawSetString("getmetatable", L.NewFunction(st.getmetatable))
	var libs []string
	g.ForEach(func(k, v lua.LValue) {
		if _, ok := v.(*lua.LTable); ok && k.Type() == lua.LTString && k.String() != "_G" {
			libs = append(libs, k.String())
		}
	})
	for _, name := range libs {
		g.RawSetString(name, st.proxy(g.RawGetString(name).(*lua.LTable), ro, sealed))
	}
	strMeta := L.NewTable()
	strMeta.RawSetString("__index", str)
	strMeta.RawSetString("__metatable", sealed)
	L.SetMetatable(lua.LString(""), strMeta)
	gm := L.NewTable()
	gm.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", L.ToString(2))
		return 0
	}))
	L.SetMetatable(g, gm)
	st.env = st.proxy(g, ro, sealed)
	g.RawSetString("_G", st.env)
}

// proxy returns an empty table reading through to t and refusing writes.
func (st *state) proxy(t *lua.LTable, ro *lua.LFunction, sealed lua.LValue) *lua.LTable {
	p, mt := st.L.NewTable(), st.L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", ro)
	if sealed != lua.LNil {
		mt.RawSetString("__metatable", sealed)
	}
	st.L.SetMetatable(p, mt)
	st.proxies[p] = t
	st.views = append(st.views, p)
	return p
}

// clean reports whether no script wrote into a read-only view.
func (st *state) clean() bool {
	for _, p := range st.views {
		if k, _ := p.Next(lua.LNil); k != lua.LNil {
			return false
		}
	}
	return true
}

// exec runs one script on st and returns its reply, and whether st may be reused.
func (st *state) exec(s *script, req Request, c Caller, r *run) (Reply, bool) {
	L := st.L
	st.caller, st.run, st.sha, st.proto = c, r, s.sha, 2
	st.globals.RawSetString("KEYS", st.keys.set(L, req.Keys))
	st.globals.RawSetString("ARGV", st.argv.set(L, req.Args))
	defer func() {
		st.caller, st.run = nil, nil
		st.globals.RawSetString("KEYS", lua.LNil)
		st.globals.RawSetString("ARGV", lua.LNil)
		st.keys.drop()
		st.argv.drop()
	}()
	ctx := &st.ctx
	L.SetContext(ctx)
	L.Push(st.function(s))
	err := L.PCall(0, 1, st.handler)
	L.RemoveContext()
	if err != nil {
		L.SetTop(0)
		// PCall unwound the state: it serves again unless the script was stopped from
		// outside or gopher-lua itself panicked.
		apiErr, ok := err.(*lua.ApiError)
		reuse := ok && apiErr.Type != lua.ApiErrorPanic && ctx.Err() == nil && st.clean()
		return st.failure(err, r), reuse
	}
	ret := L.Get(-1)
	L.SetTop(0)
	budget := maxReplyElems
	reply := toReply(ret, st.proto, 0, &budget)
	return reply, st.clean()
}

// failure is the reply EVAL gives for a script that raised an error.
func (st *state) failure(err error, r *run) Reply {
	r.mu.Lock()
	killed := r.killed
	r.mu.Unlock()
	apiErr, ok := err.(*lua.ApiError)
	t, isTable := lua.LValue(lua.LNil), false
	if ok {
		_, isTable = apiErr.Object.(*lua.LTable)
		t = apiErr.Object
	}
	if !ok || apiErr.Type == lua.ApiErrorPanic {
		return ErrorReply("ERR Error running script (call to f_" + st.sha + "): " + oneLine(err.Error()))
	}
	if !isTable { // the handler itself failed (a stack overflow): its position is in the message
		tab := st.L.NewTable()
		msg := luaString(t)
		tab.RawSetString("err", lua.LString("ERR "+msg))
		if rest, ok := strings.CutPrefix(msg, chunkName+":"); ok {
			if line, _, ok := strings.Cut(rest, ":"); ok {
				tab.RawSetString("source", lua.LString("@"+chunkName))
				tab.RawSetString("line", lua.LString(line))
			}
		}
		t = tab
	}
	tab := t.(*lua.LTable)
	msg := luaString(tab.RawGetString("err"))
	if killed {
		msg = errKilled
	}
	if msg == "" {
		msg = "ERR unknown error"
	}
	source, line := tab.RawGetString("source"), tab.RawGetString("line")
	if source != lua.LNil && line != lua.LNil {
		msg += " script: " + st.sha + ", on " + luaString(source) + ":" + luaString(line) + "."
	}
	return ErrorReply(strings.TrimRight(msg, "\r\n"))
}

// onError is Redis 7.0's error handler: a string error becomes {err="ERR " .. msg}, and
// the table gets the source and line of the Lua function that raised it.
func (st *state) onError(L *lua.LState) int {
	v := L.Get(1)
	t, ok := v.(*lua.LTable)
	if !ok {
		msg := "nil"
		if v != lua.LNil {
			msg = luaString(v)
		}
		t = L.NewTable()
		t.RawSetString("err", lua.LString("ERR "+msg))
	}
	for level := 0; level < 4; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			break
		}
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err != nil || dbg.What == "G" {
			continue
		}
		src := dbg.Source
		if src == chunkName {
			src = "@" + chunkName
		} else if s, ok := strings.CutPrefix(src, `[string "`); ok { // loadstring's chunk: its text
			src = strings.TrimSuffix(strings.TrimSuffix(s, `"]`), "...")
		}
		t.RawSetString("source", lua.LString(src))
		t.RawSetString("line", lua.LNumber(dbg.CurrentLine))
		break
	}
	L.Push(t)
	return 1
}

// luaError is Lua's error, where a number is a message as a string is (gets a position).
func (st *state) luaError(L *lua.LState) int {
	v := L.Get(1)
	if n, ok := v.(lua.LNumber); ok {
		v = lua.LString(formatNumber(float64(n)))
	}
	L.Error(v, L.OptInt(2, 1))
	return 0
}

// rawset is Lua's rawset, refusing the read-only views.
func (st *state) rawset(L *lua.LState) int {
	t := L.CheckTable(1)
	if st.proxies[t] != nil {
		L.Error(lua.LString(errReadonly), 0)
	}
	t.RawSet(L.CheckAny(2), L.CheckAny(3))
	L.Push(t)
	return 1
}

// getmetatable is Lua's getmetatable, answering nil for sealed as Redis 7 does for the
// metatable of a protected table: sealed's own metatable (a plain table shared by every
// run) stays out of reach, so no script can leave in it what a later run reads.
func (st *state) getmetatable(L *lua.LState) int {
	v := L.CheckAny(1)
	if t, ok := v.(*lua.LTable); ok && t == st.sealed {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(L.GetMetatable(v))
	return 1
}

// setmetatable is Lua's setmetatable, refusing the read-only views.
func (st *state) setmetatable(L *lua.LState) int {
	t := L.CheckTable(1)
	if st.proxies[t] != nil {
		L.Error(lua.LString(errReadonly), 0)
	}
	if L.GetMetaField(t, "__metatable") != lua.LNil {
		L.RaiseError("cannot change a protected metatable")
	}
	mt := L.Get(2)
	if mt != lua.LNil && mt.Type() != lua.LTTable {
		L.ArgError(2, "nil or table expected")
	}
	L.SetMetatable(t, mt)
	L.SetTop(1)
	return 1
}

// strRep is string.rep bounded by MaxString: a script cannot make the server run out of
// memory in one call.
func (st *state) strRep(L *lua.LState) int {
	s := L.CheckString(1)
	n := L.CheckInt(2)
	if n <= 0 || s == "" {
		L.Push(lua.LString(""))
		return 1
	}
	if len(s) > st.cfg.MaxString/n {
		L.RaiseError("not enough memory")
	}
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

// luaToString is tostring with Lua 5.1's number format ("%.14g") where gopher-lua uses Go's.
func luaToString(L *lua.LState) int {
	v := L.CheckAny(1)
	if n, ok := v.(lua.LNumber); ok {
		L.Push(lua.LString(formatNumber(float64(n))))
		return 1
	}
	if fn := L.GetMetaField(v, "__tostring"); fn != lua.LNil {
		L.Push(fn)
		L.Push(v)
		L.Call(1, 1)
		return 1
	}
	L.Push(lua.LString(v.String()))
	return 1
}

// formatNumber formats a number as Lua 5.1 does ("%.14g").
func formatNumber(f float64) string {
	if s, ok := nonFinite(f); ok {
		return s
	}
	switch {
	case f == math.Trunc(f) && math.Abs(f) < 1e14:
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 14, 64)
}

// luaString is lua_tostring: a string as is, a number formatted, anything else "".
func luaString(v lua.LValue) string {
	switch v := v.(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return formatNumber(float64(v))
	}
	return ""
}

// pcall is Redis 7.0's: an error table with an err field is caught as its message.
func pcall(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		L.ArgError(1, "value expected")
	}
	err := L.PCall(n-1, lua.MultRet, nil)
	if err == nil {
		L.Insert(lua.LTrue, 1)
		return L.GetTop()
	}
	obj := lua.LValue(lua.LString(err.Error()))
	if apiErr, ok := err.(*lua.ApiError); ok {
		obj = apiErr.Object
	}
	if t, ok := obj.(*lua.LTable); ok {
		if s, ok := t.RawGetString("err").(lua.LString); ok {
			obj = s
		}
	}
	L.SetTop(0)
	L.Push(lua.LFalse)
	L.Push(obj)
	return 2
}

// loadstring is Lua's, the chunk running in the scripts' read-only globals and named as
// Lua 5.1 names it ([string "..."]).
func (st *state) loadstring(L *lua.LState) int {
	s := L.CheckString(1)
	return st.loaded(L, L.OptString(2, s), func(name string) (*lua.LFunction, error) {
		return L.Load(strings.NewReader(s), name)
	})
}

// load is Lua's load of a chunk read from a function.
func (st *state) load(L *lua.LState) int {
	fn := L.CheckFunction(1)
	var b strings.Builder
	for {
		L.Push(fn)
		L.Call(0, 1)
		v := L.Get(-1)
		L.Pop(1)
		s, ok := v.(lua.LString)
		if !ok || s == "" {
			break
		}
		if b.Len()+len(s) > st.cfg.MaxBody {
			L.RaiseError("chunk too large")
		}
		b.WriteString(string(s))
	}
	return st.loaded(L, L.OptString(2, "=(load)"), func(name string) (*lua.LFunction, error) {
		return L.Load(strings.NewReader(b.String()), name)
	})
}

func (st *state) loaded(L *lua.LState, name string, load func(string) (*lua.LFunction, error)) int {
	if len(name) > st.cfg.MaxBody {
		name = name[:st.cfg.MaxBody]
	}
	fn, err := load(chunkID(name))
	if err != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(err.Error()))
		return 2
	}
	fn.Env = st.env
	L.Push(fn)
	return 1
}

// chunkID is Lua 5.1's luaO_chunkid of a loadstring chunk: [string "first line..."].
func chunkID(source string) string {
	if strings.HasPrefix(source, "=") || strings.HasPrefix(source, "@") {
		return source[1:]
	}
	const max = 60 - len(`[string "..."]`) - 1
	line, _, cut := strings.Cut(source, "\n")
	if len(line) > max {
		line, cut = line[:max], true
	}
	if cut {
		return `[string "` + line + `..."]`
	}
	return `[string "` + line + `"]`
}

// seeThrough wraps next, pairs or rawget so that a read-only view reads as the table it
// shows: pairs(redis) lists redis's functions as on Redis.
func (st *state) seeThrough(orig *lua.LFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		n := L.GetTop()
		if t, ok := L.Get(1).(*lua.LTable); ok && st.proxies[t] != nil {
			L.Replace(1, st.proxies[t])
		}
		L.Insert(orig, 1)
		L.Call(n, lua.MultRet)
		return L.GetTop()
	}
}

// tableForeach is Lua 5.0's table.foreach (array false) and table.foreachi, which Redis's
// Lua 5.1 keeps: f(k, v) for each pair until f returns non-nil, which is returned.
func tableForeach(array bool) lua.LGFunction {
	return func(L *lua.LState) int {
		t, f := L.CheckTable(1), L.CheckFunction(2)
		var ret lua.LValue = lua.LNil
		visit := func(k, v lua.LValue) bool {
			L.Push(f)
			L.Push(k)
			L.Push(v)
			L.Call(2, 1)
			ret = L.Get(-1)
			L.Pop(1)
			return ret == lua.LNil
		}
		if array {
			for i := 1; i <= t.Len(); i++ {
				if !visit(lua.LNumber(i), t.RawGetInt(i)) {
					break
				}
			}
		} else {
			for k, v := t.Next(lua.LNil); k != lua.LNil; k, v = t.Next(k) {
				if !visit(k, v) {
					break
				}
			}
		}
		if ret == lua.LNil {
			return 0
		}
		L.Push(ret)
		return 1
	}
}
