package commands

import (
	"strings"

	"github.com/ratchet/ratchet/keyspace"
	"github.com/ratchet/ratchet/resp"
)

func init() {
	for name, p := range map[string]func([][]byte) kvReq{
		"zadd": parseZAdd, "zincrby": parseZIncrBy, "zrem": parseZRem, "zremrangebyscore": parseZRemRangeByScore,
		"zremrangebyrank": parseZRemRangeByRank, "zcard": parseZCard, "zcount": parseZCount, "zscore": parseZScore,
		"zrank": parseZRank(false), "zrevrank": parseZRank(true),
		"zrange":           parseZRange(zrangeAuto, false),
		"zrangebyscore":    parseZRange(zrangeScore, false),
		"zrevrangebyscore": parseZRange(zrangeScore, true),
		"zrevrange":        parseZRange(zrangeRank, true),
	} {
		kvParsers[name] = p
	}
}

func zsetCommands() []*Command {
	const g = "sorted-set"
	w, r, f := flagWrite, flagReadonly, flagFast
	member, score := argDoc("member", "string"), argDoc("score", "double")
	lo, hi := argDoc("min", "double"), argDoc("max", "double")
	withScores, limit := optDoc("withscores", "pure-token", "WITHSCORES"), optDoc("limit", "block", "LIMIT")
	limit.Args = []ArgDoc{argDoc("offset", "integer"), argDoc("count", "integer")} // redis-cli needs a block's arguments
	return []*Command{
		typeRow(g, "zadd", -4, w|f, 0, "Adds one or more members to a sorted set, or updates their scores (NX, XX, GT, LT, CH, INCR).", score, member),
		typeRow(g, "zincrby", 4, w|f, 0, "Increments the score of a member in a sorted set.", argDoc("increment", "integer"), member),
		typeRow(g, "zrem", -3, w|f, 0, "Removes one or more members from a sorted set.", member),
		typeRow(g, "zremrangebyscore", 4, w, 0, "Removes members in a sorted set within a range of scores.", lo, hi),
		typeRow(g, "zremrangebyrank", 4, w, 0, "Removes members in a sorted set within a range of indexes.", argDoc("start", "integer"), argDoc("stop", "integer")),
		typeRow(g, "zcard", 2, r|f, 0, "Returns the number of members in a sorted set."),
		typeRow(g, "zcount", 4, r|f, 0, "Returns the count of members in a sorted set that have scores within a range.", lo, hi),
		typeRow(g, "zscore", 3, r|f, 0, "Returns the score of a member in a sorted set.", member),
		typeRow(g, "zrank", 3, r|f, 0, "Returns the index of a member in a sorted set ordered by ascending scores.", member),
		typeRow(g, "zrevrank", 3, r|f, 0, "Returns the index of a member in a sorted set ordered by descending scores.", member),
		typeRow(g, "zrange", -4, r, 0, "Returns members in a sorted set within a range of indexes or scores (BYSCORE, REV, LIMIT, WITHSCORES).",
			argDoc("start", "string"), argDoc("stop", "string"), optDoc("byscore", "pure-token", "BYSCORE"), optDoc("rev", "pure-token", "REV"), limit, withScores),
		typeRow(g, "zrangebyscore", -4, r, 0, "Returns members in a sorted set within a range of scores.", lo, hi, withScores, limit),
		typeRow(g, "zrevrangebyscore", -4, r, 0, "Returns members in a sorted set within a range of scores in reverse order.", hi, lo, withScores, limit),
		typeRow(g, "zrevrange", -4, r, 0, "Returns members in a sorted set within a range of indexes in reverse order.", argDoc("start", "integer"), argDoc("stop", "integer"), withScores),
	}
}

// readZSet runs fn on key base's sorted set (nil when the key does not exist), or writes
// WRONGTYPE.
func readZSet(tx *keyspace.Tx, base int, w *resp.Writer, fn func(z *keyspace.ZSet)) {
	z, err := tx.ZSet(base)
	writeErrOr(w, err, func() { fn(z) })
}

const errNotFloat = "ERR value is not a valid float"

// parseZAdd parses ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
// as Redis's zaddGenericCommand: the options, the pairs, their conflicts, the scores.
func parseZAdd(args [][]byte) kvReq {
	flags, ch := 0, false
	j := 2
	for ; j < len(args); j++ {
		switch strings.ToLower(string(args[j])) {
		case "nx":
			flags |= keyspace.ZAddNX
		case "xx":
			flags |= keyspace.ZAddXX
		case "gt":
			flags |= keyspace.ZAddGT
		case "lt":
			flags |= keyspace.ZAddLT
		case "ch":
			ch = true
		case "incr":
			flags |= keyspace.ZAddIncr
		default:
			return zadd(args, j, flags, ch)
		}
	}
	return zadd(args, j, flags, ch)
}

func zadd(args [][]byte, j, flags int, ch bool) kvReq {
	pairs := args[j:]
	switch {
	case len(pairs)%2 != 0 || len(pairs) == 0:
		return kvReq{err: errSyntaxMsg}
	case flags&keyspace.ZAddNX != 0 && flags&keyspace.ZAddXX != 0:
		return kvReq{err: "ERR XX and NX options at the same time are not compatible"}
	case flags&keyspace.ZAddNX != 0 && flags&(keyspace.ZAddGT|keyspace.ZAddLT) != 0,
		flags&keyspace.ZAddGT != 0 && flags&keyspace.ZAddLT != 0:
		return kvReq{err: "ERR GT, LT, and/or NX options at the same time are not compatible"}
	case flags&keyspace.ZAddIncr != 0 && len(pairs) > 2:
		return kvReq{err: "ERR INCR option supports a single increment-element pair"}
	}
	scores := make([]float64, len(pairs)/2)
	members := make([][]byte, len(pairs)/2)
	for k := range scores {
		s, ok := parseDouble(pairs[2*k])
		if !ok {
			return kvReq{err: errNotFloat}
		}
		scores[k], members[k] = s, pairs[2*k+1]
	}
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		res, err := tx.ZAdd(base, flags, scores, members)
		writeErrOr(w, err, func() {
			switch {
			case flags&keyspace.ZAddIncr != 0 && res.Skipped:
				w.Null()
			case flags&keyspace.ZAddIncr != 0:
				w.Double(res.Score)
			case ch:
				w.Int(int64(res.Added + res.Updated))
			default:
				w.Int(int64(res.Added))
			}
		})
	})
}

// parseZIncrBy parses ZINCRBY key increment member: ZADD key INCR increment member.
func parseZIncrBy(args [][]byte) kvReq {
	return zadd(args, 2, keyspace.ZAddIncr, false)
}

func parseZRem(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		n, err := tx.ZRem(base, args[2:])
		writeErrOr(w, err, func() { w.Int(int64(n)) })
	})
}

// parseScoreRange reads a score range's ends as Redis's zslParseRange: a float, "(" in
// front to exclude it, inf and -inf; NaN refused.
func parseScoreRange(lo, hi []byte) (keyspace.ScoreBound, keyspace.ScoreBound, bool) {
	a, ok1 := parseScoreBound(lo)
	b, ok2 := parseScoreBound(hi)
	return a, b, ok1 && ok2
}

func parseScoreBound(b []byte) (keyspace.ScoreBound, bool) {
	var sb keyspace.ScoreBound
	if len(b) > 0 && b[0] == '(' {
		sb.Excl, b = true, b[1:]
	}
	var ok bool
	sb.V, ok = parseDouble(b)
	return sb, ok
}

const errMinMax = "ERR min or max is not a float"

func parseZRemRangeByScore(args [][]byte) kvReq {
	lo, hi, ok := parseScoreRange(args[2], args[3])
	if !ok {
		return kvReq{err: errMinMax}
	}
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		n, err := tx.ZRemRangeByScore(base, lo, hi)
		writeErrOr(w, err, func() { w.Int(int64(n)) })
	})
}

func parseZRemRangeByRank(args [][]byte) kvReq {
	start, stop, ok := twoInts(args[2], args[3])
	if !ok {
		return kvReq{err: errNotInteger}
	}
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		z, err := tx.ZSet(base)
		n := 0
		if err == nil && z != nil {
			if s, e, ok := redisRange(start, stop, z.Len()); ok {
				n, err = tx.ZRemRangeByRank(base, s, e)
			}
		}
		writeErrOr(w, err, func() { w.Int(int64(n)) })
	})
}

func parseZCard(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readZSet(tx, base, w, func(z *keyspace.ZSet) { w.Int(int64(z.Len())) })
	})
}

func parseZCount(args [][]byte) kvReq {
	lo, hi, ok := parseScoreRange(args[2], args[3])
	if !ok {
		return kvReq{err: errMinMax}
	}
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readZSet(tx, base, w, func(z *keyspace.ZSet) {
			if z == nil {
				w.Int(0)
				return
			}
			w.Int(int64(z.Count(lo, hi)))
		})
	})
}

func parseZScore(args [][]byte) kvReq {
	return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
		readZSet(tx, base, w, func(z *keyspace.ZSet) {
			if z != nil {
				if s, ok := z.Score(string(args[2])); ok {
					w.Double(s)
					return
				}
			}
			w.Null()
		})
	})
}

func parseZRank(rev bool) func([][]byte) kvReq {
	return func(args [][]byte) kvReq {
		return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
			readZSet(tx, base, w, func(z *keyspace.ZSet) {
				if z != nil {
					if r, ok := z.Rank(string(args[2]), rev); ok {
						w.Int(int64(r))
						return
					}
				}
				w.Null()
			})
		})
	}
}

// ZRANGE's kinds of range.
const (
	zrangeAuto = iota // ZRANGE: by rank unless BYSCORE or BYLEX
	zrangeRank
	zrangeScore
	zrangeLex
)

// parseZRange parses ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count]
// [WITHSCORES] as Redis 7.0's zrangeGenericCommand, and the older forms that fix the
// kind of range and the direction (ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZREVRANGE), for which
// BYSCORE and REV are syntax errors. BYLEX is refused: Ratchet does not hold it.
func parseZRange(fixedKind int, fixedRev bool) func([][]byte) kvReq {
	return func(args [][]byte) kvReq {
		kind, rev := fixedKind, fixedRev
		withScores, offset, limit := false, int64(0), int64(-1)
		fixedDir := rev || kind != zrangeAuto
		for j := 4; j < len(args); j++ {
			switch opt := strings.ToLower(string(args[j])); {
			case opt == "withscores":
				withScores = true
			case opt == "limit" && len(args)-j-1 >= 2:
				var ok bool
				if offset, limit, ok = twoInts(args[j+1], args[j+2]); !ok {
					return kvReq{err: errNotInteger}
				}
				j += 2
			case opt == "rev" && !fixedDir && !rev:
				rev = true
			case opt == "byscore" && kind == zrangeAuto:
				kind = zrangeScore
			case opt == "bylex" && kind == zrangeAuto:
				kind = zrangeLex
			default:
				return kvReq{err: errSyntaxMsg}
			}
		}
		if kind == zrangeAuto {
			kind = zrangeRank
		}
		switch {
		case limit != -1 && kind == zrangeRank:
			return kvReq{err: "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"}
		case withScores && kind == zrangeLex:
			return kvReq{err: "ERR syntax error, WITHSCORES not supported in combination with BYLEX"}
		case kind == zrangeLex:
			return kvReq{err: "ERR Ratchet does not support lexicographical ranges (BYLEX)"}
		}
		from, to := args[2], args[3]
		if rev && kind == zrangeScore {
			from, to = to, from // given as max, min
		}
		if kind == zrangeRank {
			start, stop, ok := twoInts(from, to)
			if !ok {
				return kvReq{err: errNotInteger}
			}
			return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
				readZSet(tx, base, w, func(z *keyspace.ZSet) {
					n := 0
					s, e, ok := 0, 0, false
					if z != nil {
						if s, e, ok = redisRange(start, stop, z.Len()); ok {
							n = e - s + 1
						}
					}
					zrangeHeader(w, n, withScores)
					if ok {
						z.RangeByRank(s, e, rev, zrangeEmit(w, withScores))
					}
				})
			})
		}
		lo, hi, ok := parseScoreRange(from, to)
		if !ok {
			return kvReq{err: errMinMax}
		}
		return onKey(args, func(tx *keyspace.Tx, base int, w *resp.Writer) {
			readZSet(tx, base, w, func(z *keyspace.ZSet) {
				if z == nil {
					zrangeHeader(w, 0, withScores)
					return
				}
				var found []string // member, score text pairs are written once counted
				var scores []float64
				z.RangeByScore(lo, hi, rev, int(max(min(offset, keyspace.MaxElements+1), -1)), int(max(min(limit, keyspace.MaxElements), -1)), func(m string, s float64) {
					found, scores = append(found, m), append(scores, s)
				})
				zrangeHeader(w, len(found), withScores)
				emit := zrangeEmit(w, withScores)
				for k, m := range found {
					emit(m, scores[k])
				}
			})
		})
	}
}

// zrangeHeader writes the header of a range of n members: with scores, n pairs in RESP3,
// 2n elements in RESP2.
func zrangeHeader(w *resp.Writer, n int, withScores bool) {
	if withScores && w.Proto() == 2 {
		n *= 2
	}
	w.Array(n)
}

// zrangeEmit returns the writer of one member of a range: with scores, a [member, score]
// pair in RESP3, the two flat in RESP2.
func zrangeEmit(w *resp.Writer, withScores bool) func(m string, s float64) {
	return func(m string, s float64) {
		if withScores && w.Proto() == 3 {
			w.Array(2)
		}
		w.BulkString(m)
		if withScores {
			w.Double(s)
		}
	}
}
