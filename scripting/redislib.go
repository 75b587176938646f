package scripting

import (
	"crypto/sha1"
	"encoding/hex"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// redisLib returns the redis table of Redis 7.0.
func (st *state) redisLib() *lua.LTable {
	L := st.L
	t := L.NewTable()
	fns := map[string]lua.LGFunction{
		"call":               func(L *lua.LState) int { return st.call(L, true) },
		"pcall":              func(L *lua.LState) int { return st.call(L, false) },
		"error_reply":        func(L *lua.LState) int { return singleField(L, "err") },
		"status_reply":       func(L *lua.LState) int { return singleField(L, "ok") },
		"sha1hex":            sha1hex,
		"log":                st.log,
		"setresp":            st.setresp,
		"set_repl":           setRepl,
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"breakpoint":         func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":              func(L *lua.LState) int { return 0 },
		"acl_check_cmd":      st.aclCheck,
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	for name, v := range map[string]int{"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3,
		"REPL_NONE": 0, "REPL_AOF": 1, "REPL_SLAVE": 2, "REPL_REPLICA": 2, "REPL_ALL": 3} {
		t.RawSetString(name, lua.LNumber(v))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(st.cfg.Version))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(versionNum(st.cfg.Version)))
	return t
}

// versionNum is REDIS_VERSION_NUM: 0x00MMmmpp of "M.m.p".
func versionNum(v string) int {
	n := 0
	for i, part := range strings.SplitN(v, ".", 3) {
		x, _ := strconv.Atoi(part)
		n |= (x & 0xff) << (16 - 8*i)
	}
	return n
}

// errTable returns Redis's error table {err=msg}.
func errTable(L *lua.LState, msg string) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(msg))
	return t
}

// fail raises msg as redis.call does (an error table) or, for pcall, returns it.
func fail(L *lua.LState, raise bool, msg string) int {
	t := errTable(L, "ERR "+msg)
	if raise {
		L.Error(t, 0)
	}
	L.Push(t)
	return 1
}

// call is redis.call (raise) and redis.pcall.
func (st *state) call(L *lua.LState, raise bool) int {
	n := L.GetTop()
	if n == 0 {
		return fail(L, raise, errNoArgs)
	}
	args, num := st.callArgs[:0], st.num[:0]
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			args = append(args, unsafe.Slice(unsafe.StringData(string(v)), len(v))) // read only: Caller's contract
		case lua.LNumber:
			// Formatted into the state's buffer: an argument formatted before keeps the
			// array it was formatted into if the buffer grows.
			start := len(num)
			num = strconv.AppendFloat(num, float64(v), 'g', 17, 64)
			args = append(args, num[start:len(num):len(num)])
		default:
			st.keepCallBuffers(args, num)
			return fail(L, raise, errArgType)
		}
	}
	reply, wrote := st.caller.Call(args, st.proto)
	st.keepCallBuffers(args, num)
	if wrote {
		st.run.mu.Lock()
		st.run.wrote = true
		st.run.mu.Unlock()
	}
	if reply.Kind == Error {
		t := errTable(L, strings.TrimRight(string(reply.Str), "\r\n"))
		if raise {
			L.Error(t, 0)
		}
		L.Push(t)
		return 1
	}
	L.Push(st.toLua(reply))
	return 1
}

// maxKeptCall bounds the bytes of each buffer redis.call reuses (callArgs, num) that an
// idle state keeps.
const maxKeptCall = 64 << 10

// keepCallBuffers keeps args and num for the next redis.call, args cleared so that an idle
// state pins none of a script's strings, each dropped past maxKeptCall bytes.
func (st *state) keepCallBuffers(args [][]byte, num []byte) {
	clear(args)
	st.callArgs, st.num = args[:0], num[:0]
	if cap(args)*int(unsafe.Sizeof(args[:0])) > maxKeptCall {
		st.callArgs = nil
	}
	if cap(num) > maxKeptCall {
		st.num = nil
	}
}

// singleField is redis.error_reply and redis.status_reply.
func singleField(L *lua.LState, field string) int {
	s, ok := L.Get(1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errTable(L, "ERR "+errWrongArgs))
		return 1
	}
	msg := string(s)
	if field == "err" {
		msg = errorCode(msg)
	}
	t := L.CreateTable(0, 1)
	t.RawSetString(field, lua.LString(msg))
	L.Push(t)
	return 1
}

// errorCode gives an error_reply message its code as Redis 7.0 does (a "-" is put in
// front unless there, then luaPushErrorBuff): the first word is the code, and a message of
// one word gets ERR; trailing CR and LF go.
func errorCode(s string) string {
	s = strings.TrimPrefix(s, "-")
	if !strings.Contains(s, " ") {
		s = "ERR " + s
	}
	return strings.TrimRight(s, "\r\n")
}

func sha1hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		L.Error(errTable(L, "ERR wrong number of arguments"), 0)
	}
	sum := sha1.Sum([]byte(luaString(L.Get(1))))
	L.Push(lua.LString(hex.EncodeToString(sum[:])))
	return 1
}

// log is redis.log(level, message...): the message goes to the configured slog logger.
func (st *state) log(L *lua.LState) int {
	n := L.GetTop()
	if n < 2 {
		L.Error(errTable(L, "ERR redis.log() requires two arguments or more."), 0)
	}
	lv, ok := L.Get(1).(lua.LNumber)
	if !ok {
		L.Error(errTable(L, "ERR First argument must be a number (log level)."), 0)
	}
	level := int(lv)
	if level < 0 || level > 3 {
		L.Error(errTable(L, "ERR Invalid debug level."), 0)
	}
	var b strings.Builder
	for i := 2; i <= n; i++ {
		v := L.Get(i)
		if v.Type() != lua.LTString && v.Type() != lua.LTNumber {
			continue
		}
		if i != 2 {
			b.WriteByte(' ')
		}
		b.WriteString(luaString(v))
	}
	levels := [...]slog.Level{slog.LevelDebug, slog.LevelDebug, slog.LevelInfo, slog.LevelWarn}
	st.cfg.Logger.Log(&st.ctx, levels[level], b.String(), "script", st.sha)
	return 0
}

func (st *state) setresp(L *lua.LState) int {
	if L.GetTop() != 1 {
		L.Error(errTable(L, "ERR redis.setresp() requires one argument."), 0)
	}
	n, _ := L.Get(1).(lua.LNumber)
	if n != 2 && n != 3 {
		L.Error(errTable(L, "ERR RESP version must be 2 or 3."), 0)
	}
	st.proto = int(n)
	return 0
}

func setRepl(L *lua.LState) int {
	if L.GetTop() != 1 {
		L.Error(errTable(L, "ERR redis.set_repl() requires one argument."), 0)
	}
	n, ok := L.Get(1).(lua.LNumber)
	if !ok || n < 0 || n > 3 {
		L.Error(errTable(L, "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."), 0)
	}
	return 0
}

// aclCheck is redis.acl_check_cmd: every command a script may call is allowed (Ratchet's
// users are all or nothing), so it answers true once its arguments are valid.
func (st *state) aclCheck(L *lua.LState) int {
	if L.GetTop() == 0 {
		L.Error(errTable(L, "ERR "+errNoArgs), 0)
	}
	for i := 1; i <= L.GetTop(); i++ {
		if t := L.Get(i).Type(); t != lua.LTString && t != lua.LTNumber {
			L.Error(errTable(L, "ERR "+errArgType), 0)
		}
	}
	L.Push(lua.LTrue)
	return 1
}

// smallInts are the Lua numbers -1 to 1023, made once: a command's small integer reply
// converts without an allocation.
var smallInts = func() (v [1025]lua.LValue) {
	for i := range v {
		v[i] = lua.LNumber(i - 1)
	}
	return v
}()

// luaInt returns n as a Lua number.
func luaInt(n int64) lua.LValue {
	if n >= -1 && n < int64(len(smallInts))-1 {
		return smallInts[n+1]
	}
	return lua.LNumber(n)
}

// toLua converts a command's reply to Lua as Redis 7.0's redisProtocolToLuaType.
func (st *state) toLua(r Reply) lua.LValue {
	L := st.L
	switch r.Kind {
	case Status:
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(r.Str))
		return t
	case Error:
		return errTable(L, string(r.Str))
	case Int:
		return luaInt(r.Int)
	case Bulk:
		return lua.LString(r.Str)
	case Array:
		t := L.CreateTable(len(r.Elems), 0)
		for _, e := range r.Elems {
			t.Append(st.toLua(e))
		}
		return t
	case Map:
		m := L.CreateTable(0, len(r.Elems)/2)
		for i := 0; i+1 < len(r.Elems); i += 2 {
			if k := st.toLua(r.Elems[i]); k != lua.LNil {
				m.RawSet(k, st.toLua(r.Elems[i+1]))
			}
		}
		return field(L, "map", m)
	case Set:
		m := L.CreateTable(0, len(r.Elems))
		for _, e := range r.Elems {
			if k := st.toLua(e); k != lua.LNil {
				m.RawSet(k, lua.LTrue)
			}
		}
		return field(L, "set", m)
	case Double:
		return field(L, "double", lua.LNumber(r.Float))
	case Bool:
		return lua.LBool(r.Int != 0)
	case BigNumber:
		return field(L, "big_number", lua.LString(r.Str))
	case Verbatim:
		v := L.CreateTable(0, 2)
		format, text := "txt", r.Str
		if len(text) >= 4 && text[3] == ':' {
			format, text = string(text[:3]), text[4:]
		}
		v.RawSetString("format", lua.LString(format))
		v.RawSetString("string", lua.LString(text))
		return field(L, "verbatim_string", v)
	}
	if st.proto == 3 {
		return lua.LNil
	}
	return lua.LFalse
}

func field(L *lua.LState, name string, v lua.LValue) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString(name, v)
	return t
}

// toReply converts a script's value to the reply EVAL gives, as Redis 7.0's
// luaReplyToRedisReply; proto is the script's (redis.setresp), which decides how a boolean
// is answered. depth and budget bound nesting and size (a table may hold itself).
func toReply(v lua.LValue, proto, depth int, budget *int) Reply {
	*budget--
	if depth > maxReplyDepth || *budget < 0 {
		return ErrorReply("ERR reached lua stack limit")
	}
	switch v := v.(type) {
	case lua.LString:
		return Reply{Kind: Bulk, Str: []byte(v)}
	case lua.LNumber:
		return IntReply(toInt(float64(v)))
	case lua.LBool:
		switch {
		case proto == 3 && bool(v):
			return Reply{Kind: Bool, Int: 1}
		case proto == 3:
			return Reply{Kind: Bool}
		case bool(v):
			return IntReply(1)
		}
		return Reply{}
	case *lua.LTable:
		return tableReply(v, proto, depth, budget)
	}
	return Reply{}
}

func tableReply(t *lua.LTable, proto, depth int, budget *int) Reply {
	if s, ok := t.RawGetString("err").(lua.LString); ok {
		return Reply{Kind: Error, Str: []byte(strings.TrimRight(string(s), "\r\n"))}
	}
	if s, ok := t.RawGetString("ok").(lua.LString); ok {
		return Reply{Kind: Status, Str: []byte(s)}
	}
	if n, ok := t.RawGetString("double").(lua.LNumber); ok {
		return Reply{Kind: Double, Float: float64(n)}
	}
	if s, ok := t.RawGetString("big_number").(lua.LString); ok {
		return Reply{Kind: BigNumber, Str: []byte(s)}
	}
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		r := Reply{Kind: Map}
		m.ForEach(func(k, v lua.LValue) {
			r.Elems = append(r.Elems, toReply(k, proto, depth+1, budget), toReply(v, proto, depth+1, budget))
		})
		return r
	}
	if m, ok := t.RawGetString("set").(*lua.LTable); ok {
		r := Reply{Kind: Set}
		m.ForEach(func(k, _ lua.LValue) { r.Elems = append(r.Elems, toReply(k, proto, depth+1, budget)) })
		return r
	}
	if vs, ok := t.RawGetString("verbatim_string").(*lua.LTable); ok {
		f, okf := vs.RawGetString("format").(lua.LString)
		s, oks := vs.RawGetString("string").(lua.LString)
		if okf && oks && len(f) == 3 {
			return Reply{Kind: Verbatim, Str: []byte(string(f) + ":" + string(s))}
		}
	}
	n := 0 // the reply's length: the elements before the first nil, counted first
	for n <= *budget && t.RawGetInt(n+1) != lua.LNil {
		n++
	}
	r := Reply{Kind: Array, Elems: make([]Reply, 0, n)}
	for i := 1; ; i++ {
		e := t.RawGetInt(i)
		if e == lua.LNil {
			break
		}
		r.Elems = append(r.Elems, toReply(e, proto, depth+1, budget))
		if *budget < 0 {
			break
		}
	}
	return r
}

// toInt converts a Lua number to a reply integer as Redis's (long long) cast does on amd64:
// truncated toward zero, and math.MinInt64 when out of range or NaN.
func toInt(f float64) int64 {
	if f != f || f >= 1<<63 || f < -(1<<63) {
		return math.MinInt64
	}
	return int64(f)
}
