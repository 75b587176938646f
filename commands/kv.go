package commands

import (
	"math"
	"strconv"
	"strings"

	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

// The counter commands (GET, SET, INCRBY, EXPIRE, TTL, DEL, EXISTS, SCAN, ...) over the
// counter keyspace (package keyspace), with Redis's replies and error texts.
//
// Each command is parsed into a kvReq: the keys it touches and a function that runs it on
// them. Alone, a request runs in one keyspace.KV.Do on its keys. In a transaction, EXEC
// (cmdExecKV) parses every queued counter command, locks all their keys in one KV.Do and
// runs the queue inside it, so a MULTI GET PTTL EXEC reads both at one instant and no
// other client's request falls between them. As in Redis, a syntax error of a queued
// command is that command's reply in EXEC's array (only unknown commands and wrong arity
// abort at queue time).
//
// The keyspace is regional: an origin holds it. An edge checks a command's arguments and
// has the origin run it (forward.go); without a way to (Options.Forward nil) it answers
// kvOnOrigin.

// kvReq is a parsed counter command.
type kvReq struct {
	keys [][]byte // the keys it touches, in the order run names them (base, base+1, ...)
	err  string   // a parse error: the reply, instead of running
	run  func(tx *keyspace.Tx, base int, w *resp.Writer)
	lua  *luaReq // a script for the interpreter, run unset: Dispatcher.parseKV binds it
	all  bool    // run needs every shard of the keyspace held (FLUSHALL: keyspace.KV.DoAll)
	// known is a known script (its native path in run), whose own text Dispatcher.parseKV
	// has the interpreter run instead when one of its keys holds a type other than a
	// string: the native paths read strings only.
	known    *knownScript
	argv     [][]byte // with known: its ARGV
	readOnly bool     // with known: EVAL_RO, EVALSHA_RO
}

// kvParsers are the parsers of the commands served through the keyspace, by command name.
var kvParsers = map[string]func(args [][]byte) kvReq{
	"get": parseGet, "set": parseSet, "setex": parseSetEx("setex", true), "psetex": parseSetEx("psetex", false),
	"incr": parseIncr(1, 1), "decr": parseIncr(-1, 1), "incrby": parseIncr(0, 1), "decrby": parseIncr(0, -1),
	"expire": parseExpire(true, false), "pexpire": parseExpire(false, false),
	"expireat": parseExpire(true, true), "pexpireat": parseExpire(false, true),
	"ttl": parseTTL(false), "pttl": parseTTL(true), "persist": parsePersist,
	"del": parseDel, "unlink": parseDel, "exists": parseExists, "type": parseType, "scan": parseScan,
	"cl.throttle": parseThrottleReq,
}

// kvHandler serves the counter command name: alone, one KV.Do on its keys.
func kvHandler(name string) func(*Dispatcher, *Session, *resp.Writer, [][]byte) {
	upper := strings.ToUpper(name)
	return func(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
		kv := d.kv()
		r := kvParsers[name](args)
		if r.lua != nil && kv != nil && s.NoWait { // a script runs off the event loop (lua.go): bound there
			s.WouldBlock = true
			return
		}
		r = d.bindKV(s, r)
		if kv == nil { // an edge: the origin decides (forward.go)
			d.forwardOne(s, w, upper, r, args)
			return
		}
		if r.err != "" {
			w.Error(r.err)
			return
		}
		if err := kv.DoMaybeAll(s.Workspace, r.keys, r.all, func(tx *keyspace.Tx) error {
			d.runKV(&r, s.user, tx, 0, w)
			d.tracked(s, name, r.keys, tx, 0) // CLIENT TRACKING (tracking.go)
			return nil
		}); err != nil {
			w.Error(errReply(err))
		}
	}
}

// kvCommands are the command table's rows of the counter commands and CL.THROTTLE.
func kvCommands() []*Command {
	key := ArgDoc{Name: "key", Type: "key"}
	opt := func(a ArgDoc) ArgDoc { a.Optional = true; return a }
	row := func(name string, arity int, flags cmdFlags, summary string, args ...ArgDoc) *Command {
		first := 0
		if len(args) > 0 && args[0].Type == "key" {
			first = 1
		}
		return &Command{Name: name, Arity: arity, Flags: flags, FirstKey: first, Group: "string", Summary: summary,
			Args: args, Handler: kvHandler(name)}
	}
	w, r, f := flagWrite, flagReadonly, flagFast
	n := func(name string) ArgDoc { return ArgDoc{Name: name, Type: "integer"} }
	expireOpts := opt(ArgDoc{Name: "condition", Type: "oneof", Args: []ArgDoc{{Name: "nx", Type: "pure-token", Token: "NX"},
		{Name: "xx", Type: "pure-token", Token: "XX"}, {Name: "gt", Type: "pure-token", Token: "GT"}, {Name: "lt", Type: "pure-token", Token: "LT"}}})
	rows := []*Command{
		row("get", 2, r|f, "Returns the string value of a key.", key),
		row("set", -3, w, "Sets the string value of a key, with NX, XX, GET, EX, PX, EXAT, PXAT or KEEPTTL.", key,
			ArgDoc{Name: "value", Type: "string"}, opt(ArgDoc{Name: "options", Type: "string"})),
		row("setex", 4, w, "Sets the string value and expiration time in seconds of a key.", key, n("seconds"), ArgDoc{Name: "value", Type: "string"}),
		row("psetex", 4, w, "Sets the string value and expiration time in milliseconds of a key.", key, n("milliseconds"), ArgDoc{Name: "value", Type: "string"}),
		row("incr", 2, w|f, "Increments the integer value of a key by one.", key),
		row("decr", 2, w|f, "Decrements the integer value of a key by one.", key),
		row("incrby", 3, w|f, "Increments the integer value of a key by a number.", key, n("increment")),
		row("decrby", 3, w|f, "Decrements the integer value of a key by a number.", key, n("decrement")),
		row("expire", -3, w|f, "Sets the expiration time of a key in seconds.", key, n("seconds"), expireOpts),
		row("pexpire", -3, w|f, "Sets the expiration time of a key in milliseconds.", key, n("milliseconds"), expireOpts),
		row("expireat", -3, w|f, "Sets the expiration time of a key to a Unix timestamp.", key, n("unix-time-seconds"), expireOpts),
		row("pexpireat", -3, w|f, "Sets the expiration time of a key to a Unix milliseconds timestamp.", key, n("unix-time-milliseconds"), expireOpts),
		row("persist", 2, w|f, "Removes the expiration time of a key.", key),
		row("ttl", 2, r|f, "Returns the expiration time in seconds of a key.", key),
		row("pttl", 2, r|f, "Returns the expiration time in milliseconds of a key.", key),
		row("del", -2, w, "Deletes one or more keys.", key),
		row("unlink", -2, w|f, "Deletes one or more keys.", key),
		row("exists", -2, r|f, "Determines whether one or more keys exist.", key),
		row("type", 2, r|f, "Determines the type of value stored at a key.", key),
		row("scan", -2, r, "Iterates over the counter keyspace.", ArgDoc{Name: "cursor", Type: "integer"},
			opt(ArgDoc{Name: "pattern", Type: "pattern", Token: "MATCH"}), opt(ArgDoc{Name: "count", Type: "integer", Token: "COUNT"}),
			opt(ArgDoc{Name: "type", Type: "string", Token: "TYPE"})),
	}
	throttle := row("cl.throttle", -1, w, "Decides a request with GCRA as redis-cell does.", key, n("max_burst"),
		n("count_per_period"), n("period"), opt(n("quantity")))
	throttle.Group, throttle.FirstKey = "ratchet", 1
	for _, r := range rows {
		if r.Name == "del" || r.Name == "unlink" || r.Name == "exists" {
			r.LastKey = -1 // every argument is a key
		}
	}
	return append(append(rows, throttle), typeCommands()...)
}

// kvOnOrigin is an edge's reply to a command that only an origin decides.
func kvOnOrigin(upperName string) string {
	return "ERR " + upperName + " is decided by the origin; connect to the origin"
}

// kv returns the counter keyspace: the origin's; nil on an edge.
func (d *Dispatcher) kv() *keyspace.KV {
	if d.opt.Origin == nil {
		return nil
	}
	return d.opt.Origin.KV()
}

// Redis's error replies, as strings.
var (
	errSyntaxMsg  = errSyntax.Error()
	errNotInteger = errNotInt.Error()
)

func errExpireTime(cmd string) string { return "ERR invalid expire time in '" + cmd + "' command" }

// checkKVKeys returns the error of the first key the keyspace cannot hold, or "".
func checkKVKeys(keys [][]byte) string {
	for _, k := range keys {
		if len(k) > keyspace.MaxKey {
			return errReply(keyspace.ErrKeyTooLarge)
		}
	}
	return ""
}

// redisInt reads a Redis integer argument (string2ll: strict decimal, no '+').
func redisInt(b []byte) (int64, bool) { return keyspace.ParseInt(b) }

func parseGet(args [][]byte) kvReq {
	return kvReq{keys: args[1:2], err: checkKVKeys(args[1:2]), run: func(tx *keyspace.Tx, base int, w *resp.Writer) {
		if v, ok := tx.Get(base); ok {
			w.Bulk(v)
			return
		}
		writeNullOrWrongType(tx, base, w)
	}}
}

// SET's option flags, as Redis's parseExtendedStringArgumentsOrReply names them.
const (
	setNX = 1 << iota
	setXX
	setGet
	setKeepTTL
	setEX
	setPX
	setEXAT
	setPXAT
)

// parseSet parses SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ms-ts|KEEPTTL].
// Options are accepted in any order and may repeat; conflicting ones are a syntax error.
func parseSet(args [][]byte) kvReq {
	const anyExpire = setEX | setPX | setEXAT | setPXAT
	flags := 0
	var expire []byte
	for j := 3; j < len(args); j++ {
		opt := strings.ToUpper(string(args[j]))
		hasNext := j+1 < len(args)
		timed := setTimed(opt)
		switch {
		case opt == "NX" && flags&setXX == 0:
			flags |= setNX
		case opt == "XX" && flags&setNX == 0:
			flags |= setXX
		case opt == "GET":
			flags |= setGet
		case opt == "KEEPTTL" && flags&anyExpire == 0:
			flags |= setKeepTTL
		case timed != 0 && hasNext && flags&(setKeepTTL|anyExpire&^timed) == 0:
			flags |= timed
			j++
			expire = args[j]
		default:
			return kvReq{err: errSyntaxMsg}
		}
	}
	r := kvReq{keys: args[1:2], err: checkKVKeys(args[1:2])}
	if r.err == "" && len(args[2]) > keyspace.MaxValue {
		r.err = errReply(keyspace.ErrValueTooLarge)
	}
	var ms int64
	relative := flags&(setEX|setPX) != 0
	if expire != nil && r.err == "" {
		ms, r.err = expireMs(expire, flags&(setEX|setEXAT) != 0, "set")
	}
	val := args[2]
	r.run = func(tx *keyspace.Tx, base int, w *resp.Writer) {
		kind := tx.Kind(base)
		if flags&setGet != 0 && kind > keyspace.KindString {
			w.Error(errReply(keyspace.ErrWrongType))
			return
		}
		old, _ := tx.Get(base)
		found := kind != keyspace.KindNone
		if flags&setGet != 0 && found {
			old = append([]byte(nil), old...) // the entry's buffer is reused by the write
		}
		var err error
		switch {
		case (flags&setNX != 0 && found) || (flags&setXX != 0 && !found):
			if flags&setGet == 0 {
				w.Null()
				return
			}
		case flags&setKeepTTL != 0:
			err = tx.SetKeepTTL(base, val)
		case expire == nil:
			err = tx.Set(base, val, 0)
		default:
			if at, ok := absoluteMs(ms, relative, tx.Now()); ok {
				err = tx.Set(base, val, at)
			} else {
				err = errString(errExpireTime("set"))
			}
		}
		switch {
		case err != nil:
			w.Error(errReply(err))
		case flags&setGet == 0:
			w.OK()
		case found:
			w.Bulk(old)
		default:
			w.Null()
		}
	}
	return r
}

// setTimed returns the flag of SET's expire option opt (upper case), or 0.
func setTimed(opt string) int {
	switch opt {
	case "EX":
		return setEX
	case "PX":
		return setPX
	case "EXAT":
		return setEXAT
	case "PXAT":
		return setPXAT
	}
	return 0
}

type errString string

func (e errString) Error() string { return string(e) }

// expireMs parses an expire argument as Redis's getExpireMillisecondsOrReply does, before
// the base time is added: an integer (else errNotInteger), positive and, in seconds, at
// most MaxInt64/1000 (else the command's invalid expire time), in ms.
func expireMs(b []byte, seconds bool, cmd string) (int64, string) {
	v, ok := redisInt(b)
	if !ok {
		return 0, errNotInteger
	}
	if v <= 0 || (seconds && v > math.MaxInt64/1000) {
		return 0, errExpireTime(cmd)
	}
	if seconds {
		v *= 1000
	}
	return v, ""
}

// absoluteMs returns ms as an absolute time: now+ms when relative. false when the sum
// overflows, as Redis answers the invalid expire time then.
func absoluteMs(ms int64, relative bool, now int64) (int64, bool) {
	if !relative {
		return ms, true
	}
	if ms > math.MaxInt64-now {
		return 0, false
	}
	return ms + now, true
}

// parseSetEx parses SETEX key seconds value (PSETEX: milliseconds).
func parseSetEx(cmd string, seconds bool) func(args [][]byte) kvReq {
	return func(args [][]byte) kvReq {
		r := kvReq{keys: args[1:2], err: checkKVKeys(args[1:2])}
		if r.err != "" {
			return r
		}
		ms, e := expireMs(args[2], seconds, cmd)
		if e != "" {
			return kvReq{err: e}
		}
		if len(args[3]) > keyspace.MaxValue {
			return kvReq{err: errReply(keyspace.ErrValueTooLarge)}
		}
		val := args[3]
		r.run = func(tx *keyspace.Tx, base int, w *resp.Writer) {
			at, ok := absoluteMs(ms, true, tx.Now())
			if !ok {
				w.Error(errExpireTime(cmd))
				return
			}
			if err := tx.Set(base, val, at); err != nil {
				w.Error(errReply(err))
				return
			}
			w.OK()
		}
		return r
	}
}

// parseIncr parses INCR/DECR key (by fixed ±1) and INCRBY/DECRBY key n (sign -1 for DECRBY).
func parseIncr(fixed int64, sign int64) func(args [][]byte) kvReq {
	return func(args [][]byte) kvReq {
		r := kvReq{keys: args[1:2], err: checkKVKeys(args[1:2])}
		if r.err != "" {
			return r
		}
		delta := fixed
		if fixed == 0 {
			v, ok := redisInt(args[2])
			if !ok {
				return kvReq{err: errNotInteger}
			}
			if sign < 0 {
				if v == math.MinInt64 {
					return kvReq{err: "ERR decrement would overflow"}
				}
				v = -v
			}
			delta = v
		}
		r.run = func(tx *keyspace.Tx, base int, w *resp.Writer) {
			n, err := tx.IncrBy(base, delta)
			if err != nil {
				w.Error(errReply(err))
				return
			}
			w.Int(n)
		}
		return r
	}
}

// EXPIRE's option flags.
const (
	expNX = 1 << iota
	expXX
	expGT
	expLT
)

// parseExpire parses EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT key n [NX|XX|GT|LT] as Redis's
// expireGenericCommand: options first, then the number; relative to now unless absolute.
func parseExpire(seconds, absolute bool) func(args [][]byte) kvReq {
	cmd := "expire"
	if !seconds {
		cmd = "p" + cmd
	}
	if absolute {
		cmd += "at"
	}
	return func(args [][]byte) kvReq {
		flags := 0
		for _, a := range args[3:] {
			switch strings.ToUpper(string(a)) {
			case "NX":
				flags |= expNX
			case "XX":
				flags |= expXX
			case "GT":
				flags |= expGT
			case "LT":
				flags |= expLT
			default:
				return kvReq{err: "ERR Unsupported option " + clip(a)}
			}
		}
		if flags&expNX != 0 && flags&(expXX|expGT|expLT) != 0 {
			return kvReq{err: "ERR NX and XX, GT or LT options at the same time are not compatible"}
		}
		if flags&expGT != 0 && flags&expLT != 0 {
			return kvReq{err: "ERR GT and LT options at the same time are not compatible"}
		}
		when, ok := redisInt(args[2])
		if !ok {
			return kvReq{err: errNotInteger}
		}
		if seconds {
			if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
				return kvReq{err: errExpireTime(cmd)}
			}
			when *= 1000
		}
		r := kvReq{keys: args[1:2], err: checkKVKeys(args[1:2])}
		r.run = func(tx *keyspace.Tx, base int, w *resp.Writer) {
			at := when
			if !absolute {
				if when > math.MaxInt64-tx.Now() {
					w.Error(errExpireTime(cmd))
					return
				}
				at += tx.Now()
			}
			cur, found := tx.ExpireAt(base)
			if !found {
				w.Int(0)
				return
			}
			none := cur == 0
			switch {
			case flags&expNX != 0 && !none,
				flags&expXX != 0 && none,
				flags&expGT != 0 && (none || at <= cur),
				flags&expLT != 0 && !none && at >= cur:
				w.Int(0)
				return
			}
			if at == 0 {
				tx.Del(base) // an absolute expiry at the epoch: long past
			} else {
				tx.SetExpireAt(base, at)
			}
			w.Int(1)
		}
		return r
	}
}

// parseTTL parses TTL/PTTL key. TTL rounds the milliseconds left to the nearest second.
func parseTTL(ms bool) func(args [][]byte) kvReq {
	return func(args [][]byte) kvReq {
		return kvReq{keys: args[1:2], err: checkKVKeys(args[1:2]), run: func(tx *keyspace.Tx, base int, w *resp.Writer) {
			t := tx.PTTL(base)
			if !ms && t >= 0 {
				t = (t + 500) / 1000
			}
			w.Int(t)
		}}
	}
}

func parsePersist(args [][]byte) kvReq {
	return kvReq{keys: args[1:2], err: checkKVKeys(args[1:2]), run: func(tx *keyspace.Tx, base int, w *resp.Writer) {
		if at, found := tx.ExpireAt(base); found && at != 0 {
			tx.SetExpireAt(base, 0)
			w.Int(1)
			return
		}
		w.Int(0)
	}}
}

// parseDel parses DEL/UNLINK key [key ...]: the number of keys deleted.
func parseDel(args [][]byte) kvReq {
	return kvReq{keys: args[1:], err: checkKVKeys(args[1:]), run: func(tx *keyspace.Tx, base int, w *resp.Writer) {
		n := 0
		for i := range len(args) - 1 {
			if tx.Del(base + i) {
				n++
			}
		}
		w.Int(int64(n))
	}}
}

// parseExists parses EXISTS key [key ...]: a key named twice counts twice, as in Redis.
func parseExists(args [][]byte) kvReq {
	return kvReq{keys: args[1:], err: checkKVKeys(args[1:]), run: func(tx *keyspace.Tx, base int, w *resp.Writer) {
		n := 0
		for i := range len(args) - 1 {
			if tx.Exists(base + i) {
				n++
			}
		}
		w.Int(int64(n))
	}}
}

func parseType(args [][]byte) kvReq {
	return kvReq{keys: args[1:2], err: checkKVKeys(args[1:2]), run: func(tx *keyspace.Tx, base int, w *resp.Writer) {
		w.Simple(tx.Kind(base).String())
	}}
}

// maxScanCount bounds the entries one SCAN call examines, whatever COUNT asks.
const maxScanCount = 100_000

// parseScan parses SCAN cursor [MATCH pattern] [COUNT n] [TYPE type] as Redis 7.0: the
// cursor (strtoul: "ERR invalid cursor"), then the options.
func parseScan(args [][]byte) kvReq {
	cursor, ok := parseCursor(args[1])
	if !ok {
		return kvReq{err: "ERR invalid cursor"}
	}
	count := int64(10)
	var pattern []byte
	typed, want := false, keyspace.KindNone
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			return kvReq{err: errSyntaxMsg}
		}
		switch strings.ToUpper(string(args[i])) {
		case "COUNT":
			n, ok := redisInt(args[i+1])
			if !ok {
				return kvReq{err: errNotInteger}
			}
			if n < 1 {
				return kvReq{err: errSyntaxMsg}
			}
			count = n
		case "MATCH":
			pattern = args[i+1]
			if len(pattern) == 1 && pattern[0] == '*' {
				pattern = nil
			}
		case "TYPE":
			typed, want = true, keyspace.ParseKind(string(args[i+1])) // an unknown type matches nothing
		default:
			return kvReq{err: errSyntaxMsg}
		}
	}
	return kvReq{run: func(tx *keyspace.Tx, _ int, w *resp.Writer) {
		var match func([]byte, keyspace.Kind) bool
		if typed || pattern != nil {
			match = func(k []byte, kind keyspace.Kind) bool {
				return (!typed || kind == want) && (pattern == nil || globMatch(pattern, k))
			}
		}
		next, keys := tx.Scan(cursor, int(min(count, maxScanCount)), match)
		w.Array(2)
		w.BulkString(strconv.FormatUint(next, 10))
		w.Array(len(keys))
		for _, k := range keys {
			w.Bulk(k)
		}
	}}
}

// parseCursor reads a SCAN cursor as C's strtoul: optional sign ('-' negates, wrapping),
// decimal digits, nothing else, within 64 bits.
func parseCursor(b []byte) (uint64, bool) {
	neg, v, ok := signedDigits(b)
	if neg {
		v = -v
	}
	return v, ok
}

// signedDigits reads an optional '+' or '-' and at least one decimal digit (leading zeros
// allowed), nothing else: the sign and the magnitude, false when it passes 64 bits.
func signedDigits(b []byte) (neg bool, v uint64, ok bool) {
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return false, 0, false
	}
	for _, c := range b {
		if c < '0' || c > '9' || v > (math.MaxUint64-uint64(c-'0'))/10 {
			return false, 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return neg, v, true
}

// globMatch reports whether s matches the glob pattern as Redis's stringmatchlen does: '*'
// any run, '?' any byte, '[...]' a set (with '^' negation, 'a-z' ranges either way round,
// '\' escapes), '\' escaping the next byte. It runs in O(len(p)*len(s)): a star remembers
// where to resume, as every other token matches exactly one byte.
func globMatch(p, s []byte) bool {
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if pi == len(p) {
					return true
				}
				starP, starS = pi, si
				continue
			default:
				if n, ok := globOne(p[pi:], s[si]); ok {
					pi += n
					si++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// globOne matches one pattern token (not '*') at the start of p against c: the token's
// length, and whether it matched.
func globOne(p []byte, c byte) (int, bool) {
	switch p[0] {
	case '?':
		return 1, true
	case '\\':
		if len(p) >= 2 {
			return 2, p[1] == c
		}
		return 1, c == '\\'
	case '[':
		i := 1
		not := i < len(p) && p[i] == '^'
		if not {
			i++
		}
		match := false
		for {
			switch {
			case i >= len(p):
				// An unterminated set ends with the pattern, as in Redis.
				return len(p), match != not
			case p[i] == '\\' && i+1 < len(p):
				if p[i+1] == c {
					match = true
				}
				i += 2
			case p[i] == ']':
				return i + 1, match != not
			case i+2 < len(p) && p[i+1] == '-':
				lo, hi := p[i], p[i+2]
				if lo > hi {
					lo, hi = hi, lo
				}
				if c >= lo && c <= hi {
					match = true
				}
				i += 3
			default:
				if p[i] == c {
					match = true
				}
				i++
			}
		}
	default:
		return 1, p[0] == c
	}
}

// cmdExecKV is EXEC: a queue holding counter commands runs inside one keyspace.KV.Do on all
// their keys (and, on an origin, the RL commands of the queue in one engine.Transact
// inside it: keyspace locks are always taken before cell-store locks). Inside the Do, each
// queued counter command is rebound to run on the Do's keys, and cmdExec runs the queue.
// Any other queue is cmdExec's alone. With watched keys (WATCH), a change to one of them
// makes EXEC answer a null array instead, checked inside that Do: a write to a watched key
// that the queue also touches cannot fall between the check and the queue.
func cmdExecKV(d *Dispatcher, s *Session, w *resp.Writer, args [][]byte) {
	tx := s.tx
	kv := d.kv()
	if kv == nil && d.forwardExec(s, w) { // an edge: the origin runs it (forward.go)
		return
	}
	if tx == nil || tx.dirty || kv == nil || (tx.hasRL && d.waitFree != nil && s.NoWait) {
		cmdExec(d, s, w, args)
		return
	}
	watched := s.watch != nil && s.watch.Len() > 0
	var reqs []kvReq // by queue position; nil while the queue has no counter command
	var keys [][]byte
	all := false // the queue holds FLUSHALL or FLUSHDB: every shard is held
	for i, q := range tx.cmds {
		if kvParsers[q.cmd.Name] == nil {
			continue
		}
		if reqs == nil {
			reqs = make([]kvReq, len(tx.cmds))
		}
		reqs[i] = d.parseKV(s, q.cmd.Name, q.args)
		if reqs[i].lua != nil && s.NoWait { // a script runs off the event loop (lua.go)
			s.WouldBlock = true
			return
		}
		if reqs[i].err != "" {
			reqs[i].keys = nil // answered with its error; it touches nothing
		} else if reqs[i].all {
			all = true
		}
		keys = append(keys, reqs[i].keys...)
	}
	if reqs == nil {
		if watched && kv.Changed(s.watch) {
			watchFailed(s, w)
			return
		}
		cmdExec(d, s, w, args)
		return
	}
	// The watched keys are forgotten once the Do has unlocked (Watch.Clear locks shards).
	wt := s.watch
	s.watch = nil
	defer func() { s.watch = wt; s.unwatch() }()
	_ = kv.DoMaybeAll(s.Workspace, keys, all, func(ktx *keyspace.Tx) error {
		if watched && ktx.Changed(wt) { // checked under the queue's keys' locks
			watchFailed(s, w)
			return nil
		}
		base := 0
		for i, q := range tx.cmds { // the queue is this EXEC's: cmdExec ends it
			if kvParsers[q.cmd.Name] == nil {
				continue
			}
			r, b := &reqs[i], base
			base += len(r.keys)
			tx.cmds[i].cmd = &Command{Name: q.cmd.Name, Handler: func(_ *Dispatcher, _ *Session, w *resp.Writer, _ [][]byte) {
				d.runKV(r, s.user, ktx, b, w)
				if r.err == "" {
					d.tracked(s, q.cmd.Name, r.keys, ktx, b)
				}
			}}
		}
		cmdExec(d, s, w, args)
		return nil
	})
}
