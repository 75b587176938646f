package commands

import (
	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

func init() {
	for name, p := range map[string]func([][]byte) kvReq{
		"lpush": parsePush(true), "rpush": parsePush(false), "lpop": parsePop("lpop", true), "rpop": parsePop("rpop", false),
		"lrange": parseLRange, "ltrim": parseLTrim, "llen": parseLLen, "lindex": parseLIndex, "lset": parseLSet,
		"lrem": parseLRem,
	} {
		kvParsers[name] = p
	}
}

func listCommands() []*Command {
	const g = "list"
	w, r, f := flagWrite, flagReadonly, flagFast
	elem, start, stop := argDoc("element", "string"), argDoc("start", "integer"), argDoc("stop", "integer")
	return []*Command{
		typeRow(g, "lpush", -3, w|f, 0, "Prepends one or more elements to a list.", elem),
		typeRow(g, "rpush", -3, w|f, 0, "Appends one or more elements to a list.", elem),
		typeRow(g, "lpop", -2, w|f, 0, "Returns the first elements in a list after removing it.", optDoc("count", "integer", "")),
		typeRow(g, "rpop", -2, w|f, 0, "Returns and removes the last elements of a list.", optDoc("count", "integer", "")),
		typeRow(g, "lrange", 4, r, 0, "Returns a range of elements from a list.", start, stop),
		typeRow(g, "ltrim", 4, w, 0, "Removes elements from both ends a list.", start, stop),
		typeRow(g, "llen", 2, r|f, 0, "Returns the length of a list."),
		typeRow(g, "lindex", 3, r, 0, "Returns an element from a list by its index.", argDoc("index", "integer")),
		typeRow(g, "lset", 4, w, 0, "Sets the value of an element in a list by its index.", argDoc("index", "integer"), elem),
		typeRow(g, "lrem", 4, w, 0, "Removes elements from a list.", argDoc("count", "integer"), elem),
	}
}

// readList runs fn on key base's list (nil when the key does not exist), or writes
// WRONGTYPE.
func readList(tx *keyspace.Tx, base int, w *resp.Writer, fn func(l *keyspace.List)) {
	l, err := tx.List(base)
	writeErrOr(w, err, func() { fn(l) })
}

func parsePush(left bool) func([][]byte) kvReq {
	return func(args [][]byte) kvReq {
		return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
			n, err := tx.LPush(base, left, args[2:])
			writeErrOr(w, err, func() { w.Int(int64(n)) })
		})
	}
}

// parsePop parses LPOP/RPOP key [count] as Redis 7.0: without a count one element (null
// when none), with one an array (a null array when the key does not exist).
func parsePop(cmd string, left bool) func([][]byte) kvReq {
	return func(args [][]byte) kvReq {
		if len(args) > 3 {
			return kvReq{err: errArity(cmd)}
		}
		count := int64(1)
		hasCount := len(args) == 3
		if hasCount {
			var ok bool
			if count, ok = redisInt(args[2]); !ok {
				return kvReq{err: errNotInteger}
			}
			if count < 0 {
				return kvReq{err: "ERR value is out of range, must be positive"}
			}
		}
		return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
			if l, err := tx.List(base); err != nil || l == nil {
				writeErrOr(w, err, func() {
					if hasCount {
						w.NullArray()
					} else {
						w.Null()
					}
				})
				return
			}
			vals, err := tx.LPop(base, left, int(min(count, keyspace.MaxElements)))
			writeErrOr(w, err, func() {
				if !hasCount {
					w.BulkString(vals[0])
					return
				}
				w.Array(len(vals))
				for _, v := range vals {
					w.BulkString(v)
				}
			})
		})
	}
}

func parseLRange(args [][]byte) kvReq {
	start, stop, ok := twoInts(args[2], args[3])
	if !ok {
		return kvReq{err: errNotInteger}
	}
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readList(tx, base, w, func(l *keyspace.List) {
			s, e, ok := redisRange(start, stop, l.Len())
			if !ok {
				w.Array(0)
				return
			}
			w.Array(e - s + 1)
			l.Range(s, e, func(v string) { w.BulkString(v) })
		})
	})
}

func parseLTrim(args [][]byte) kvReq {
	start, stop, ok := twoInts(args[2], args[3])
	if !ok {
		return kvReq{err: errNotInteger}
	}
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		l, err := tx.List(base)
		if err == nil && l != nil {
			s, e, ok := redisRange(start, stop, l.Len())
			if !ok {
				s, e = 1, 0 // empties the list
			}
			err = tx.LTrim(base, s, e)
		}
		writeErrOr(w, err, w.OK)
	})
}

func parseLLen(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readList(tx, base, w, func(l *keyspace.List) { w.Int(int64(l.Len())) })
	})
}

// parseLIndex parses LINDEX key index: as Redis, the key is looked up before the index
// is read.
func parseLIndex(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readList(tx, base, w, func(l *keyspace.List) {
			if l == nil {
				w.Null()
				return
			}
			i, ok := redisInt(args[2])
			if !ok {
				w.Error(errNotInteger)
				return
			}
			if i < 0 {
				i += int64(l.Len())
			}
			if i < 0 || i >= int64(l.Len()) {
				w.Null()
				return
			}
			w.BulkString(l.Index(int(i)))
		})
	})
}

// parseLSet parses LSET key index element: as Redis, the key is looked up before the
// index is read.
func parseLSet(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		l, err := tx.List(base)
		switch {
		case err != nil:
		case l == nil:
			err = keyspace.ErrNoSuchKey
		default:
			i, ok := redisInt(args[2])
			if !ok {
				w.Error(errNotInteger)
				return
			}
			if i < -int64(l.Len()) || i >= int64(l.Len()) {
				err = keyspace.ErrIndexRange
			} else {
				err = tx.LSet(base, int(i), args[3])
			}
		}
		writeErrOr(w, err, w.OK)
	})
}

func parseLRem(args [][]byte) kvReq {
	count, ok := redisInt(args[2])
	if !ok {
		return kvReq{err: errNotInteger}
	}
	count = max(min(count, keyspace.MaxElements), -keyspace.MaxElements)
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		n, err := tx.LRem(base, int(count), args[3])
		writeErrOr(w, err, func() { w.Int(int64(n)) })
	})
}
