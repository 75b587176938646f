package commands

import (
	"strings"

	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

func init() {
	for name, p := range map[string]func([][]byte) kvReq{
		"setnx": parseSetNX, "strlen": parseStrlen, "mget": parseMGet, "mset": parseMSet, "getset": parseGetSet,
		"getdel": parseGetDel, "getex": parseGetEx, "incrbyfloat": parseIncrByFloat, "append": parseAppend,
		"keys": parseKeys,
	} {
		kvParsers[name] = p
	}
}

func stringCommands() []*Command {
	const g = "string"
	w, r, f := flagWrite, flagReadonly, flagFast
	value := argDoc("value", "string")
	mset := typeRow(g, "mset", -3, w, -1, "Atomically creates or modifies the string values of one or more keys.", value)
	mset.KeyStep = 2
	keys := &Command{Name: "keys", Arity: 2, Flags: r, Group: "generic", Handler: kvHandler("keys"),
		Summary: "Returns the keys that match a pattern (at most 100000: use SCAN beyond).",
		Args:    []ArgDoc{argDoc("pattern", "pattern")}}
	return []*Command{
		typeRow(g, "setnx", 3, w|f, 0, "Set the string value of a key only when the key doesn't exist.", value),
		typeRow(g, "strlen", 2, r|f, 0, "Returns the length of a string value."),
		typeRow(g, "mget", -2, r|f, -1, "Atomically returns the string values of one or more keys."),
		mset,
		typeRow(g, "getset", 3, w|f, 0, "Returns the previous string value of a key after setting it to a new value.", value),
		typeRow(g, "getdel", 2, w|f, 0, "Returns the string value of a key after deleting the key."),
		typeRow(g, "getex", -2, w|f, 0, "Returns the string value of a key after setting its expiration time (EX, PX, EXAT, PXAT, PERSIST).",
			ArgDoc{Name: "expiration", Type: "oneof", Optional: true, Args: []ArgDoc{ // redis-cli needs a oneof's arguments
				{Name: "seconds", Type: "integer", Token: "EX"}, {Name: "milliseconds", Type: "integer", Token: "PX"},
				{Name: "unix-time-seconds", Type: "unix-time", Token: "EXAT"},
				{Name: "unix-time-milliseconds", Type: "unix-time", Token: "PXAT"}, {Name: "persist", Type: "pure-token", Token: "PERSIST"}}}),
		typeRow(g, "incrbyfloat", 3, w|f, 0, "Increment the floating point value of a key by a number.", argDoc("increment", "double")),
		typeRow(g, "append", 3, w|f, 0, "Appends a string to the value of a key.", value),
		keys,
	}
}

// oneValue checks a value's length, as SET does.
func oneValue(r kvReq, v []byte) kvReq {
	if r.err == "" && len(v) > keyspace.MaxValue {
		r.err = errReply(keyspace.ErrValueTooLarge)
	}
	return r
}

func parseSetNX(args [][]byte) kvReq {
	return oneValue(onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		if tx.Kind(base) != keyspace.KindNone {
			w.Int(0)
			return
		}
		writeErrOr(w, tx.Set(base, args[2], 0), func() { w.Int(1) })
	}), args[2])
}

func parseStrlen(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		if v, ok := tx.Get(base); ok {
			w.Int(int64(len(v)))
			return
		}
		if tx.Kind(base) != keyspace.KindNone {
			w.Error(errReply(keyspace.ErrWrongType))
			return
		}
		w.Int(0)
	})
}

// parseMGet parses MGET key [key ...]: a key holding another type answers null, as Redis.
func parseMGet(args [][]byte) kvReq {
	return kvReq{keys: args[1:], err: checkKVKeys(args[1:]), run: func(tx *keyspace.Tx, base int, w *resp.Writer) {
		w.Array(len(args) - 1)
		for i := range len(args) - 1 {
			if v, ok := tx.Get(base + i); ok {
				w.Bulk(v)
			} else {
				w.Null()
			}
		}
	}}
}

// parseMSet parses MSET key value [key value ...]. Its keys are every other argument. As
// Redis, it checks memory once, before: the whole command is refused or run.
func parseMSet(args [][]byte) kvReq {
	if len(args)%2 != 1 {
		return kvReq{err: errArity("mset")}
	}
	keys := make([][]byte, 0, len(args)/2)
	for j := 1; j < len(args); j += 2 {
		keys = append(keys, args[j])
		if len(args[j+1]) > keyspace.MaxValue {
			return fail(keyspace.ErrValueTooLarge)
		}
	}
	var n int64
	for _, a := range args[1:] {
		n += int64(len(a)) + 64 // the keys' and values' bytes, and some of an entry's
	}
	return kvReq{keys: keys, err: checkKVKeys(keys), run: func(tx *keyspace.Tx, base int, w *resp.Writer) {
		if err := tx.Room(n); err != nil {
			w.Error(errReply(err))
			return
		}
		for i := range keys {
			if err := tx.Set(base+i, args[2*i+2], 0); err != nil {
				w.Error(errReply(err))
				return
			}
		}
		w.OK()
	}}
}

// getString writes key base's string value and reports true, or writes null (no key) or
// WRONGTYPE and reports false.
func getString(tx *keyspace.Tx, base int, w *resp.Writer) bool {
	if v, ok := tx.Get(base); ok {
		w.Bulk(v)
		return true
	}
	writeNullOrWrongType(tx, base, w)
	return false
}

func parseGetSet(args [][]byte) kvReq {
	return oneValue(onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		if k := tx.Kind(base); k > keyspace.KindString {
			w.Error(errReply(keyspace.ErrWrongType))
			return
		}
		var rw resp.Writer // the old value, written once the new one is in
		rw.SetProto(w.Proto())
		getString(tx, base, &rw)
		if err := tx.Set(base, args[2], 0); err != nil {
			w.Error(errReply(err))
			return
		}
		w.Raw(rw.Bytes())
	}), args[2])
}

func parseGetDel(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		if getString(tx, base, w) {
			tx.Del(base)
		}
	})
}

// parseGetEx parses GETEX key [EX s|PX ms|EXAT ts|PXAT ms-ts|PERSIST] as Redis 7.0: the
// options first, then the key (null when missing, WRONGTYPE), then the expiry's value.
func parseGetEx(args [][]byte) kvReq {
	flags, persist := 0, false
	var expire []byte
	for j := 2; j < len(args); j++ {
		opt := strings.ToUpper(string(args[j]))
		timed := setTimed(opt)
		switch {
		case timed != 0 && j+1 < len(args) && flags == 0 && !persist:
			flags = timed
			j++
			expire = args[j]
		case opt == "PERSIST" && flags == 0 && !persist:
			persist = true
		default:
			return kvReq{err: errSyntaxMsg}
		}
	}
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		v, ok := tx.Get(base)
		if !ok {
			writeNullOrWrongType(tx, base, w)
			return
		}
		var at int64
		if expire != nil {
			ms, e := expireMs(expire, flags&(setEX|setEXAT) != 0, "getex")
			if e == "" {
				var fine bool
				if at, fine = absoluteMs(ms, flags&(setEX|setPX) != 0, tx.Now()); !fine {
					e = errExpireTime("getex")
				}
			}
			if e != "" {
				w.Error(e)
				return
			}
		}
		w.Bulk(v)
		switch {
		case expire != nil:
			tx.SetExpireAt(base, at) // at or before now: deleted
		case persist:
			tx.SetExpireAt(base, 0)
		}
	})
}

func parseIncrByFloat(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		v, err := tx.IncrByFloat(base, args[2])
		writeErrOr(w, err, func() { w.Bulk(v) })
	})
}

func parseAppend(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		old, ok := tx.Get(base)
		if !ok && tx.Kind(base) != keyspace.KindNone {
			w.Error(errReply(keyspace.ErrWrongType))
			return
		}
		if len(old)+len(args[2]) > keyspace.MaxValue {
			w.Error(errReply(keyspace.ErrValueTooLarge))
			return
		}
		v := append(append(make([]byte, 0, len(old)+len(args[2])), old...), args[2]...)
		writeErrOr(w, tx.SetKeepTTL(base, v), func() { w.Int(int64(len(v))) })
	})
}

// maxKeysReply bounds KEYS' reply: past it KEYS refuses, and SCAN walks any number.
const maxKeysReply = 100_000

// parseKeys parses KEYS pattern: every key of the workspace that matches, in no
// particular order, walking the keyspace as SCAN does; more than maxKeysReply is an error.
func parseKeys(args [][]byte) kvReq {
	pattern := args[1]
	return kvReq{run: func(tx *keyspace.Tx, _ int, w *resp.Writer) {
		match := func(k []byte, _ keyspace.Kind) bool { return globMatch(pattern, k) }
		var out [][]byte
		stalls := 0
		for cursor := uint64(0); ; {
			prev := cursor
			var keys [][]byte
			cursor, keys = tx.Scan(cursor, maxScanCount, match)
			// A step that holds keys (a script, EXEC) cannot wait for a shard another
			// step holds: Scan stops there, and after a few tries so does KEYS.
			if cursor == prev && len(keys) == 0 {
				if stalls++; stalls > 10 {
					w.Error("TRYAGAIN KEYS could not read every key while this script or transaction holds its own")
					return
				}
			}
			out = append(out, keys...)
			if len(out) > maxKeysReply {
				w.Error("ERR KEYS matches more than 100000 keys in Ratchet; use SCAN")
				return
			}
			if cursor == 0 {
				break
			}
		}
		w.Array(len(out))
		for _, k := range out {
			w.Bulk(k)
		}
	}}
}
