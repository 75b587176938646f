package commands

import (
	"math"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

// The data types limiters' scripts use beside strings: hashes (hash.go), lists (list.go),
// sets (set.go) and sorted sets (zset.go), and the string and keyspace commands added
// with them (strings.go), over package keyspace, with Redis 7.0's replies and errors. They
// are counter-keyspace requests like GET and INCR (kvParsers): one KV.Do alone, inside
// EXEC's in a transaction, reachable from scripts' redis.call, forwarded by an edge to its
// origin. As in Redis, arguments are checked before the key is looked up, except where
// Redis looks first (LINDEX, LSET, GETEX's expiry, INCRBYFLOAT): those check in run.

// typeRun is a command's work on its key(s): tx's keys base, base+1, ...
type typeRun func(tx *keyspace.Tx, base int, w *resp.Writer)

// onKey is a request on the one key args[1].
func onKey(args [][]byte, run typeRun) kvReq {
	return kvReq{keys: args[1:2], err: checkKVKeys(args[1:2]), run: run}
}

// fail is a request answered with err's reply.
func fail(err error) kvReq { return kvReq{err: errReply(err)} }

// errArity is Redis's reply to a command with the wrong number of arguments.
func errArity(cmd string) string {
	return "ERR wrong number of arguments for '" + cmd + "' command"
}

// writeNullOrWrongType writes the reply of a read of key i that found no string: null
// when the key does not exist, WRONGTYPE when it holds another type.
func writeNullOrWrongType(tx *keyspace.Tx, i int, w *resp.Writer) {
	if tx.Kind(i) != keyspace.KindNone {
		w.Error(errReply(keyspace.ErrWrongType))
		return
	}
	w.Null()
}

// writeErrOr writes err's reply, or with no error calls ok.
func writeErrOr(w *resp.Writer, err error, ok func()) {
	if err != nil {
		w.Error(errReply(err))
		return
	}
	ok()
}

// redisRange turns Redis's start and stop indexes (negative from the end) into 0-based
// inclusive bounds within n elements; ok is false when the range is empty.
func redisRange(start, stop int64, n int) (int, int, bool) {
	l := int64(n)
	if start < 0 {
		start += l
	}
	if stop < 0 {
		stop += l
	}
	start = max(start, 0)
	if start > stop || start >= l {
		return 0, 0, false
	}
	return int(start), int(min(stop, l-1)), true
}

// twoInts reads two integer arguments.
func twoInts(a, b []byte) (int64, int64, bool) {
	x, ok1 := redisInt(a)
	y, ok2 := redisInt(b)
	return x, y, ok1 && ok2
}

// parseDouble reads a float argument as Redis's getDoubleFromObject (strtod): no spaces,
// no NaN, "inf" and "-inf" allowed, out of range refused.
func parseDouble(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 5*1024 {
		return 0, false
	}
	plain := true // digits, signs, dots and exponents only: neither inf nor nan nor Go's syntax
	for _, c := range b {
		if (c < '0' || c > '9') && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-' {
			plain = false
			break
		}
	}
	if plain { // the common case, without copying b: ParseFloat copies what its error keeps
		f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(b), len(b)), 64)
		return f, err == nil
	}
	s := string(b)
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case "inf", "infinity":
		if len(s)-len(strings.TrimLeft(s, "+-")) > 1 {
			return 0, false
		}
		if s[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "nan":
		return 0, false
	}
	if strings.ContainsAny(s, "_xXpPiInN") { // Go's syntax beyond strtod's decimal one
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && !math.IsNaN(f)
}

// typeRow is a command table row of a data-type command: its first key at 1, and with
// lastKey -1 every argument from there (step 2 with keyStep, MSET's pairs).
func typeRow(group, name string, arity int, flags cmdFlags, lastKey int, summary string, args ...ArgDoc) *Command {
	return &Command{Name: name, Arity: arity, Flags: flags, FirstKey: 1, LastKey: lastKey, Group: group,
		Summary: summary, Args: append([]ArgDoc{{Name: "key", Type: "key"}}, args...), Handler: kvHandler(name)}
}

func argDoc(name, typ string) ArgDoc { return ArgDoc{Name: name, Type: typ} }

func optDoc(name, typ, token string) ArgDoc {
	return ArgDoc{Name: name, Type: typ, Token: token, Optional: true}
}

// typeCommands are the command table's rows of the data-type commands.
func typeCommands() []*Command {
	var rows []*Command
	for _, t := range [][]*Command{hashCommands(), listCommands(), setCommands(), zsetCommands(), stringCommands(), flushCommands()} {
		rows = append(rows, t...)
	}
	return rows
}
