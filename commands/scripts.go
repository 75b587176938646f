package commands

import (
	"crypto/sha1"
	"encoding/hex"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

// The limiter scripts Ratchet knows (EVAL, EVALSHA, their _RO forms, SCRIPT LOAD, EXISTS,
// FLUSH, KILL). Each known script text (scripts_text.go) is recognised by
// its SHA1 and run by a native equivalent (scripts_<library>.go) on the counter keyspace,
// with the reply types the script gives on Redis 7 and the same state in the keys, so that
// the library's own GET, PTTL and DEL on those keys agree.
//
// Known SHA1s always exist: EVALSHA of one works without SCRIPT LOAD, SCRIPT EXISTS
// answers 1, SCRIPT FLUSH forgets nothing. Every library falls back from NOSCRIPT to EVAL
// or SCRIPT LOAD of the same text, so this changes no decision and saves the round trip
// after a restart or failover. Any other script runs on the Lua interpreter (lua.go): an
// unknown SHA1 answers NOSCRIPT unless SCRIPT LOAD or EVAL cached it.
//
// EVAL and EVALSHA are counter-keyspace requests (kvParsers): alone, one keyspace.KV.Do on
// their KEYS at one instant; in a transaction, inside EXEC's KV.Do with the other queued
// counter commands. On an edge they go, as the counter commands do, to the origin of their
// first key (forwardOne; kvOnOrigin's error when the edge has no origin to forward to).

// knownScript is one script text Ratchet runs natively.
type knownScript struct {
	sha  string // hex SHA1 of text, lower case
	body []byte // text, for the interpreter
	lib  string // the library and versions that send it
	name string // the script's name in the library
	text string
	// run is the native equivalent. It takes its scriptRun by value so that the run stays
	// on the caller's stack: a pointer passed to a function value escapes to the heap.
	run func(c scriptRun)
}

var (
	scriptsBySHA  = map[string]*knownScript{}
	scriptsByText = map[string]*knownScript{}
)

// ScriptInfo describes a limiter script Ratchet runs natively.
type ScriptInfo struct {
	SHA1    string // what EVALSHA names
	Library string // the library and versions that send it
	Name    string // the script's role in the library (allowN, increment, ...)
	Text    string // the Lua text, as the library sends it
}

// KnownScripts returns the scripts Ratchet knows, sorted by SHA1: for tools and tests that
// load them into a Redis to compare it with Ratchet.
func KnownScripts() []ScriptInfo {
	out := make([]ScriptInfo, 0, len(scriptsBySHA))
	for _, s := range scriptsBySHA {
		out = append(out, ScriptInfo{SHA1: s.sha, Library: s.lib, Name: s.name, Text: s.text})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SHA1 < out[j].SHA1 })
	return out
}

// registerScript adds a known script; its SHA1 is computed from text.
func registerScript(lib, name, text string, run func(c scriptRun)) {
	sum := sha1.Sum([]byte(text))
	s := &knownScript{sha: hex.EncodeToString(sum[:]), lib: lib, name: name, text: text, body: []byte(text), run: run}
	scriptsBySHA[s.sha] = s
	scriptsByText[text] = s
}

func init() {
	kvParsers["eval"] = parseEval(false, false)
	kvParsers["evalsha"] = parseEval(true, false)
	kvParsers["eval_ro"] = parseEval(false, true)
	kvParsers["evalsha_ro"] = parseEval(true, true)
}

// Replies of script lookups.
const (
	errNoScript      = "NOSCRIPT No matching script. Please use EVAL."
	errUnknownScript = "no native path" // lookupScript's answer for a text it does not know: the interpreter runs it
	errNumKeysMore   = "ERR Number of keys can't be greater than number of args"
	errNumKeysNeg    = "ERR Number of keys can't be negative"
	errScriptRO      = "ERR Write commands are not allowed from read-only scripts."
	// errKillOnEdge refuses SCRIPT KILL on an edge: scripts run on their origin, which one
	// of several the script's first key chose, so an edge has none to stop.
	errKillOnEdge = "ERR SCRIPT KILL on an edge: scripts run on their origin; send SCRIPT KILL to the origin that answers BUSY"
)

// scriptCommands are the command table's rows of EVAL, EVALSHA, their _RO forms and SCRIPT.
func scriptCommands() []*Command {
	args := []ArgDoc{{Name: "numkeys", Type: "integer"}, {Name: "key", Type: "key", Optional: true},
		{Name: "arg", Type: "string", Optional: true}}
	row := func(name, first, summary string, flags cmdFlags) *Command {
		return &Command{Name: name, Arity: -3, Flags: flags, Group: "scripting", Summary: summary,
			Args: append([]ArgDoc{{Name: first, Type: "string"}}, args...), Handler: kvHandler(name)}
	}
	return []*Command{
		row("eval", "script", "Runs a Lua script (a known limiter script natively).", flagWrite),
		row("evalsha", "sha1", "Runs a cached Lua script by its SHA1 (a known limiter script natively).", flagWrite),
		row("eval_ro", "script", "EVAL that refuses writes.", flagReadonly),
		row("evalsha_ro", "sha1", "EVALSHA that refuses writes.", flagReadonly),
		{Name: "script", Arity: -2, Group: "scripting", Summary: "SCRIPT LOAD, EXISTS, FLUSH, KILL.",
			Args: []ArgDoc{{Name: "subcommand", Type: "string"}}, Handler: cmdScript},
	}
}

// lookupScript finds the script EVAL (by text) or EVALSHA (by SHA1, any case) names, or
// returns the error reply.
func lookupScript(bySHA bool, b []byte) (*knownScript, string) {
	if !bySHA {
		if s := scriptsByText[string(b)]; s != nil {
			return s, ""
		}
		return nil, errUnknownScript
	}
	if len(b) != 40 {
		return nil, errNoScript
	}
	var lower [40]byte
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	if s := scriptsBySHA[string(lower[:])]; s != nil {
		return s, ""
	}
	return nil, errNoScript
}

// parseEval parses EVAL script numkeys key... arg... (EVALSHA: sha1 first) as Redis's
// evalGenericCommand: numkeys is checked before the script is looked up.
func parseEval(bySHA, readOnly bool) func(args [][]byte) kvReq {
	return func(args [][]byte) kvReq {
		n, ok := redisInt(args[2])
		switch {
		case !ok:
			return kvReq{err: errNotInteger}
		case n > int64(len(args)-3):
			return kvReq{err: errNumKeysMore}
		case n < 0:
			return kvReq{err: errNumKeysNeg}
		}
		s, e := lookupScript(bySHA, args[1])
		lua := e == errUnknownScript || e != "" && len(args[1]) == 40 // no native path: the interpreter
		if e != "" && !lua {
			return kvReq{err: e}
		}
		keys := args[3 : 3+n]
		if e := checkKVKeys(keys); e != "" {
			return kvReq{err: e}
		}
		argv := args[3+n:]
		switch {
		case lua && bySHA: // bound to the Dispatcher's engine by parseKV
			return kvReq{keys: keys, lua: &luaReq{sha: strings.ToLower(string(args[1])), keys: keys, argv: argv, readOnly: readOnly}}
		case lua:
			return kvReq{keys: keys, lua: &luaReq{body: args[1], keys: keys, argv: argv, readOnly: readOnly}}
		}
		return kvReq{keys: keys, run: func(tx *keyspace.Tx, base int, w *resp.Writer) {
			s.run(scriptRun{script: s, tx: tx, base: base, argv: argv, keyNames: keys, w: w, ro: readOnly})
		}, known: s, argv: argv, readOnly: readOnly}
	}
}

// cmdScript is SCRIPT LOAD text | EXISTS sha1... | FLUSH [ASYNC|SYNC] | HELP.
func cmdScript(d *Dispatcher, _ *Session, w *resp.Writer, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "load" && len(args) == 3:
		if s, e := lookupScript(false, args[2]); e == "" {
			w.BulkString(s.sha)
		} else if sha, msg := d.lua.Load(args[2]); msg != "" {
			w.Error(msg)
		} else {
			w.BulkString(sha)
		}
	case sub == "exists" && len(args) >= 3:
		w.Array(len(args) - 2)
		for _, sha := range args[2:] {
			_, e := lookupScript(true, sha)
			w.Int(boolInt(e == "" || d.lua.Exists(string(sha))))
		}
	case sub == "flush" && len(args) <= 3:
		if len(args) == 3 && !strings.EqualFold(string(args[2]), "async") && !strings.EqualFold(string(args[2]), "sync") {
			w.Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
			return
		}
		d.lua.Flush() // the known scripts cannot be forgotten; the interpreter's are
		w.OK()
	case sub == "help" && len(args) == 2:
		lines := []string{
			"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"EXISTS <sha1> [<sha1> ...]",
			"    Return information about the existence of the scripts in the script cache.",
			"FLUSH [ASYNC|SYNC]",
			"    Flush the Lua scripts cache (Ratchet's known scripts always stay).",
			"KILL",
			"    Kill the currently executing Lua script.",
			"LOAD <script>",
			"    Load a script into the scripts cache without executing it.",
			"HELP",
			"    Print this help.",
		}
		w.Array(len(lines))
		for _, l := range lines {
			w.Simple(l)
		}
	case sub == "kill" && len(args) == 2 && d.kv() == nil:
		w.Error(errKillOnEdge)
	case sub == "kill" && len(args) == 2:
		if e := d.lua.Kill(); e != "" {
			w.Error(e)
			return
		}
		w.OK()
	default:
		w.Error("ERR unknown subcommand or wrong number of arguments for '" + clip(args[1]) + "'. Try SCRIPT HELP.")
	}
}

// scriptRun is one run of a known script: its KEYS are the transaction's keys base,
// base+1, ...; its ARGV are argv. The native equivalent reads and writes through it and
// writes the reply (or the error Redis would give) to w.
type scriptRun struct {
	script *knownScript
	tx     *keyspace.Tx
	base   int
	argv   [][]byte
	// keyNames are the KEYS as the request named them: KEYS[i] is key index base+i-1.
	keyNames [][]byte
	w        *resp.Writer
	ro       bool // EVAL_RO, EVALSHA_RO: a write is an error
}

// arg returns ARGV[i] (1-based, as the script names it) and whether it was given.
func (c *scriptRun) arg(i int) ([]byte, bool) {
	if i < 1 || i > len(c.argv) {
		return nil, false
	}
	return c.argv[i-1], true
}

// num returns tonumber(ARGV[i]): false when absent or not a number.
func (c *scriptRun) num(i int) (float64, bool) {
	b, ok := c.arg(i)
	if !ok {
		return 0, false
	}
	return luaNumber(b)
}

// key returns the transaction's index of KEYS[i] (1-based), or false when the script was
// given fewer keys (KEYS[i] is then nil, which redis.call refuses).
func (c *scriptRun) key(i int) (int, bool) {
	if i < 1 || i > len(c.keyNames) {
		return 0, false
	}
	return c.base + i - 1, true
}

// keyAt is key(i) for a redis.call at the line of marker: when KEYS[i] is nil it writes
// the error redis.call gives and returns false.
func (c *scriptRun) keyAt(i int, marker string) (int, bool) {
	k, ok := c.key(i)
	if !ok {
		c.fail(marker, luaBadArgs)
	}
	return k, ok
}

// line returns the line of the script's text where marker first appears (1 if absent):
// error replies name it as Redis does.
func (c *scriptRun) line(marker string) int {
	i := strings.Index(c.script.text, marker)
	if i < 0 {
		return 1
	}
	return 1 + strings.Count(c.script.text[:i], "\n")
}

// fail writes the error reply of a redis.call that failed with msg at the line of marker:
// Redis 7's "<msg> script: <sha>, on @user_script:<line>.".
func (c *scriptRun) fail(marker, msg string) {
	c.w.Error(msg + " script: " + c.script.sha + ", on @user_script:" + strconv.Itoa(c.line(marker)) + ".")
}

// luaError writes the error reply of a Lua runtime error (msg as Lua words it) at the line
// of marker.
func (c *scriptRun) luaError(marker, msg string) {
	l := strconv.Itoa(c.line(marker))
	c.w.Error("ERR user_script:" + l + ": " + msg + " script: " + c.script.sha + ", on @user_script:" + l + ".")
}

// Errors of Lua values a native equivalent reports with luaError or fail.
const (
	luaArith   = "attempt to perform arithmetic on a nil value"
	luaCompare = "attempt to compare number with nil"
	luaBadArgs = "ERR Lua redis lib command arguments must be strings or integers"
	luaMaxNil  = "bad argument #1 to 'max' (number expected, got nil)"
)

// writable reports whether the script may write now; under EVAL_RO it writes the error
// Redis gives at the first write command (at the line of marker) and returns false.
func (c *scriptRun) writable(marker string) bool {
	if c.ro {
		c.fail(marker, errScriptRO)
		return false
	}
	return true
}

// setEx stores val in key index i with an expiry of the Redis argument expire (seconds,
// or ms when ms) as SET/SETEX/PSETEX do: a strict positive integer. It returns the error
// reply's message, or "".
func (c *scriptRun) setEx(i int, val []byte, expire []byte, ms bool, cmd string) string {
	v, e := expireMs(expire, !ms, cmd)
	if e != "" {
		return e
	}
	at, ok := absoluteMs(v, true, c.tx.Now())
	if !ok {
		return errExpireTime(cmd)
	}
	if err := c.tx.Set(i, val, at); err != nil {
		return errReply(err)
	}
	return ""
}

// pexpire sets key index i's expiry to expire from now (ms, or seconds unless ms) as
// PEXPIRE/EXPIRE without options do, and returns the error reply's message, or "".
func (c *scriptRun) pexpire(i int, expire []byte, ms bool, cmd string) string {
	v, ok := redisInt(expire)
	if !ok {
		return errNotInteger
	}
	if !ms {
		if v > math.MaxInt64/1000 || v < math.MinInt64/1000 {
			return errExpireTime(cmd)
		}
		v *= 1000
	}
	at, ok := absoluteMs(v, true, c.tx.Now())
	if !ok {
		return errExpireTime(cmd)
	}
	c.tx.SetExpireAt(i, at)
	return ""
}

// luaNumber reads b as Lua 5.1 converts a string to a number (luaO_str2d: C's strtod,
// hexadecimal integers, surrounding spaces): false when it is not a number.
func luaNumber(b []byte) (float64, bool) {
	s := strings.Trim(string(b), " \t\n\v\f\r")
	if s == "" {
		return 0, false
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil || isRangeErr(err) {
		if strings.ContainsRune(s, '_') {
			return 0, false // Go's digit separators; strtod has none
		}
		return f, true
	}
	h := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if len(h) > 2 && h[0] == '0' && (h[1] == 'x' || h[1] == 'X') && !strings.ContainsRune(h, '_') {
		if v, err := strconv.ParseUint(h[2:], 16, 64); err == nil {
			f := float64(v)
			if s[0] == '-' {
				f = -f
			}
			return f, true
		}
	}
	return 0, false
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// luaToString formats f as Lua 5.1's tostring does (C's "%.14g"). Its buffer is the
// caller's (on the stack when the result does not outlive the call).
func luaToString(f float64) []byte { return appendCFormatG(make([]byte, 0, 32), f, 14) }

// redisArg formats f as Redis 7.0 passes a Lua number to a command (C's "%.17g"): the
// text a script's SET stores. Its buffer is the caller's, as luaToString's.
func redisArg(f float64) []byte { return appendCFormatG(make([]byte, 0, 32), f, 17) }

// appendCFormatG appends f as C's printf "%.<prec>g" formats it (glibc's inf, nan and
// -nan) to dst.
func appendCFormatG(dst []byte, f float64, prec int) []byte {
	switch {
	case math.IsNaN(f):
		if math.Signbit(f) {
			return append(dst, "-nan"...)
		}
		return append(dst, "nan"...)
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	}
	return strconv.AppendFloat(dst, f, 'g', prec, 64)
}

// luaInt converts a Lua number to the integer reply Redis gives for it: C's (long long)
// cast, which truncates; NaN and values outside 64 bits give the x86-64 result, MinInt64.
func luaInt(f float64) int64 {
	if math.IsNaN(f) || f >= 1<<63 || f < -(1<<63) {
		return math.MinInt64
	}
	return int64(f)
}

// luaMax is Lua 5.1's math.max(a, b): a unless b is greater.
func luaMax(a, b float64) float64 {
	if b > a {
		return b
	}
	return a
}

// luaMin is Lua 5.1's math.min(a, b): a unless b is less.
func luaMin(a, b float64) float64 {
	if b < a {
		return b
	}
	return a
}

// incrBy runs INCRBY on key index i by the Redis integer argument delta: the result, or
// the error reply's message.
func (c *scriptRun) incrBy(i int, delta []byte) (int64, string) {
	d, ok := redisInt(delta)
	if !ok {
		return 0, errNotInteger
	}
	n, err := c.tx.IncrBy(i, d)
	if err != nil {
		return 0, errReply(err)
	}
	return n, ""
}

// incrByAt is the script's INCRBY at the line of marker: under EVAL_RO, or when INCRBY
// fails, it writes the error and returns false.
func (c *scriptRun) incrByAt(marker string, i int, delta []byte) (int64, bool) {
	if !c.writable(marker) {
		return 0, false
	}
	n, e := c.incrBy(i, delta)
	if e != "" {
		c.fail(marker, e)
		return 0, false
	}
	return n, true
}

// bulkOrFalse writes a GET's result as a script returns it: the value, or Lua false, a
// null.
func (c *scriptRun) bulkOrFalse(v []byte, found bool) {
	if found {
		c.w.Bulk(v)
		return
	}
	c.w.Null()
}
