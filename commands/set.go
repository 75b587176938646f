package commands

import (
	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

func init() {
	for name, p := range map[string]func([][]byte) kvReq{
		"sadd": parseSAdd(true), "srem": parseSAdd(false), "scard": parseSCard, "sismember": parseSIsMember,
		"smembers": parseSMembers,
	} {
		kvParsers[name] = p
	}
}

func setCommands() []*Command {
	const g = "set"
	w, r, f := flagWrite, flagReadonly, flagFast
	member := argDoc("member", "string")
	return []*Command{
		typeRow(g, "sadd", -3, w|f, 0, "Adds one or more members to a set.", member),
		typeRow(g, "srem", -3, w|f, 0, "Removes one or more members from a set.", member),
		typeRow(g, "scard", 2, r|f, 0, "Returns the number of members in a set."),
		typeRow(g, "sismember", 3, r|f, 0, "Determines whether a member belongs to a set.", member),
		typeRow(g, "smembers", 2, r, 0, "Returns all members of a set (in byte order)."),
	}
}

// readSet runs fn on key base's set (nil when the key does not exist), or writes
// WRONGTYPE.
func readSet(tx *keyspace.Tx, base int, w *resp.Writer, fn func(s *keyspace.Set)) {
	s, err := tx.SetOf(base)
	writeErrOr(w, err, func() { fn(s) })
}

// parseSAdd parses SADD (add) and SREM key member [member ...].
func parseSAdd(add bool) func([][]byte) kvReq {
	return func(args [][]byte) kvReq {
		return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
			var n int
			var err error
			if add {
				n, err = tx.SAdd(base, args[2:])
			} else {
				n, err = tx.SRem(base, args[2:])
			}
			writeErrOr(w, err, func() { w.Int(int64(n)) })
		})
	}
}

func parseSCard(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readSet(tx, base, w, func(s *keyspace.Set) { w.Int(int64(s.Len())) })
	})
}

func parseSIsMember(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readSet(tx, base, w, func(s *keyspace.Set) { w.Int(boolInt(s != nil && s.Has(string(args[2])))) })
	})
}

func parseSMembers(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readSet(tx, base, w, func(s *keyspace.Set) {
			var m []string
			if s != nil {
				m = s.Members()
			}
			w.Set(len(m))
			for _, v := range m {
				w.BulkString(v)
			}
		})
	})
}
