package commands

import (
	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

func init() {
	for name, p := range map[string]func([][]byte) kvReq{
		"hget": parseHGet, "hset": parseHSet("hset"), "hmset": parseHSet("hmset"), "hsetnx": parseHSetNX,
		"hmget": parseHMGet, "hincrby": parseHIncrBy, "hincrbyfloat": parseHIncrByFloat, "hdel": parseHDel,
		"hgetall": parseHGetAll(true, true), "hkeys": parseHGetAll(true, false), "hvals": parseHGetAll(false, true),
		"hexists": parseHExists, "hlen": parseHLen,
	} {
		kvParsers[name] = p
	}
}

func hashCommands() []*Command {
	const g = "hash"
	w, r, f := flagWrite, flagReadonly, flagFast
	field, value := argDoc("field", "string"), argDoc("value", "string")
	return []*Command{
		typeRow(g, "hget", 3, r|f, 0, "Returns the value of a field in a hash.", field),
		typeRow(g, "hset", -4, w|f, 0, "Creates or modifies the value of fields in a hash.", field, value),
		typeRow(g, "hmset", -4, w|f, 0, "Sets the values of multiple fields.", field, value),
		typeRow(g, "hsetnx", 4, w|f, 0, "Sets the value of a field in a hash only when the field doesn't exist.", field, value),
		typeRow(g, "hmget", -3, r|f, 0, "Returns the values of all fields in a hash.", field),
		typeRow(g, "hincrby", 4, w|f, 0, "Increments the integer value of a field in a hash by a number.", field, argDoc("increment", "integer")),
		typeRow(g, "hincrbyfloat", 4, w|f, 0, "Increments the floating point value of a field by a number.", field, argDoc("increment", "double")),
		typeRow(g, "hdel", -3, w|f, 0, "Deletes one or more fields and their values from a hash.", field),
		typeRow(g, "hgetall", 2, r, 0, "Returns all fields and values in a hash."),
		typeRow(g, "hkeys", 2, r, 0, "Returns all fields in a hash."),
		typeRow(g, "hvals", 2, r, 0, "Returns all values in a hash."),
		typeRow(g, "hexists", 3, r|f, 0, "Determines whether a field exists in a hash.", field),
		typeRow(g, "hlen", 2, r|f, 0, "Returns the number of fields in a hash."),
	}
}

// readHash runs fn on key base's hash (nil when the key does not exist), or writes
// WRONGTYPE.
func readHash(tx *keyspace.Tx, base int, w *resp.Writer, fn func(h *keyspace.Hash)) {
	h, err := tx.Hash(base)
	writeErrOr(w, err, func() { fn(h) })
}

func parseHGet(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readHash(tx, base, w, func(h *keyspace.Hash) {
			if h != nil {
				if v, ok := h.Get(string(args[2])); ok {
					w.BulkString(v)
					return
				}
			}
			w.Null()
		})
	})
}

// parseHSet parses HSET/HMSET key field value [field value ...]: HSET answers the fields
// added, HMSET OK.
func parseHSet(cmd string) func([][]byte) kvReq {
	return func(args [][]byte) kvReq {
		if len(args)%2 != 0 {
			return kvReq{err: errArity(cmd)}
		}
		return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
			n, err := tx.HSet(base, args[2:])
			writeErrOr(w, err, func() {
				if cmd == "hmset" {
					w.OK()
				} else {
					w.Int(int64(n))
				}
			})
		})
	}
}

func parseHSetNX(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		ok, err := tx.HSetNX(base, args[2], args[3])
		writeErrOr(w, err, func() { w.Int(boolInt(ok)) })
	})
}

func parseHMGet(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readHash(tx, base, w, func(h *keyspace.Hash) {
			w.Array(len(args) - 2)
			for _, f := range args[2:] {
				if h != nil {
					if v, ok := h.Get(string(f)); ok {
						w.BulkString(v)
						continue
					}
				}
				w.Null()
			}
		})
	})
}

func parseHIncrBy(args [][]byte) kvReq {
	delta, ok := redisInt(args[3])
	if !ok {
		return kvReq{err: errNotInteger}
	}
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		n, err := tx.HIncrBy(base, args[2], delta)
		writeErrOr(w, err, func() { w.Int(n) })
	})
}

func parseHIncrByFloat(args [][]byte) kvReq {
	f, ok := keyspace.ParseLongDouble(args[3])
	if !ok {
		return fail(keyspace.ErrNotFloat)
	}
	if f.IsInf() { // as hincrbyfloatCommand: before the key is looked at
		return kvReq{err: "ERR value is NaN or Infinity"}
	}
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		v, err := tx.HIncrByFloat(base, args[2], args[3])
		writeErrOr(w, err, func() { w.Bulk(v) })
	})
}

func parseHDel(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		n, err := tx.HDel(base, args[2:])
		writeErrOr(w, err, func() { w.Int(int64(n)) })
	})
}

// parseHGetAll parses HGETALL (a map of fields and values), HKEYS and HVALS (arrays).
func parseHGetAll(fields, vals bool) func([][]byte) kvReq {
	return func(args [][]byte) kvReq {
		return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
			readHash(tx, base, w, func(h *keyspace.Hash) {
				if fields && vals {
					w.Map(h.Len())
				} else {
					w.Array(h.Len())
				}
				if h == nil {
					return
				}
				h.Each(func(f, v string) bool {
					if fields {
						w.BulkString(f)
					}
					if vals {
						w.BulkString(v)
					}
					return true
				})
			})
		})
	}
}

func parseHExists(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readHash(tx, base, w, func(h *keyspace.Hash) {
			ok := false
			if h != nil {
				_, ok = h.Get(string(args[2]))
			}
			w.Int(boolInt(ok))
		})
	})
}

func parseHLen(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readHash(tx, base, w, func(h *keyspace.Hash) { w.Int(int64(h.Len())) })
	})
}
