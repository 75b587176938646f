package keyspace

import (
	"math"
	"math/rand/v2"
)

// A sorted set is Redis's: a map from member to score beside a skip list ordered by
// (score, member bytes), whose links carry spans so that ranks are O(log n).

// zMaxLevel bounds the skip list's levels (2^32 elements at p = 1/4: far beyond
// MaxElements).
const zMaxLevel = 32

// zMemberBytes estimates one member beyond its bytes: the node and its levels, the map
// entry. BenchmarkTypesMemory measures 137 heap bytes per 16-byte member (100,000 in one
// key), against 136 estimated; the other types' estimates are above their measures
// (hash 128 estimated / 112 measured, list 48 / 37, set 64 / 51).
const zMemberBytes = 120

type zNode struct {
	member string
	score  float64
	back   *zNode
	level  []zLevel
}

type zLevel struct {
	next *zNode
	span int
}

// ZSet is a sorted set key's members. Its methods read; Tx's Z* methods write.
type ZSet struct {
	dict   map[string]float64
	head   *zNode
	tail   *zNode
	levels int
	bytes  int64
}

func newZSet() *ZSet {
	// The head's levels grow with the list's (insert): most sorted sets of a sliding log are
	// small, and 32 levels were 512 bytes for each.
	return &ZSet{dict: make(map[string]float64), head: &zNode{level: make([]zLevel, 1, 4)}, levels: 1}
}

// ScoreBound is one end of a score range: V, excluded when Excl ("(1.5").
type ScoreBound struct {
	V    float64
	Excl bool
}

// aboveMin reports whether score is within a range's min end.
func (b ScoreBound) aboveMin(score float64) bool {
	if b.Excl {
		return score > b.V
	}
	return score >= b.V
}

// belowMax reports whether score is within a range's max end.
func (b ScoreBound) belowMax(score float64) bool {
	if b.Excl {
		return score < b.V
	}
	return score <= b.V
}

// zLess orders nodes by score, then member bytes.
func zLess(n *zNode, score float64, member string) bool {
	return n.score < score || (n.score == score && n.member < member)
}

// Len returns the number of members (0 for a nil ZSet: no key).
func (z *ZSet) Len() int {
	if z == nil {
		return 0
	}
	return len(z.dict)
}

// Score returns m's score and whether m is a member.
func (z *ZSet) Score(m string) (float64, bool) {
	s, ok := z.dict[m]
	return s, ok
}

func zRandomLevel() int {
	l := 1
	for l < zMaxLevel && rand.Uint32()&3 == 0 {
		l++
	}
	return l
}

// insert adds a member that is not in the list.
func (z *ZSet) insert(score float64, member string) {
	var update [zMaxLevel]*zNode
	var rank [zMaxLevel]int
	x := z.head
	for i := z.levels - 1; i >= 0; i-- {
		if i < z.levels-1 {
			rank[i] = rank[i+1]
		}
		for x.level[i].next != nil && zLess(x.level[i].next, score, member) {
			rank[i] += x.level[i].span
			x = x.level[i].next
		}
		update[i] = x
	}
	lvl := zRandomLevel()
	for len(z.head.level) < lvl {
		z.head.level = append(z.head.level, zLevel{})
	}
	if lvl > z.levels {
		for i := z.levels; i < lvl; i++ {
			rank[i] = 0
			update[i] = z.head
			update[i].level[i].span = len(z.dict)
		}
		z.levels = lvl
	}
	x = &zNode{member: member, score: score, level: make([]zLevel, lvl)}
	for i := range lvl {
		x.level[i].next = update[i].level[i].next
		update[i].level[i].next = x
		x.level[i].span = update[i].level[i].span - (rank[0] - rank[i])
		update[i].level[i].span = rank[0] - rank[i] + 1
	}
	for i := lvl; i < z.levels; i++ {
		update[i].level[i].span++
	}
	if update[0] != z.head {
		x.back = update[0]
	}
	if x.level[0].next != nil {
		x.level[0].next.back = x
	} else {
		z.tail = x
	}
}

// remove deletes a member of the list (score is its score).
func (z *ZSet) remove(score float64, member string) {
	var update [zMaxLevel]*zNode
	x := z.head
	for i := z.levels - 1; i >= 0; i-- {
		for x.level[i].next != nil && zLess(x.level[i].next, score, member) {
			x = x.level[i].next
		}
		update[i] = x
	}
	x = x.level[0].next
	if x == nil || x.score != score || x.member != member {
		return // not in the list: the dict and the list never disagree
	}
	z.unlink(x, &update)
}

func (z *ZSet) unlink(x *zNode, update *[zMaxLevel]*zNode) {
	for i := range z.levels {
		if update[i].level[i].next == x {
			update[i].level[i].span += x.level[i].span - 1
			update[i].level[i].next = x.level[i].next
		} else {
			update[i].level[i].span--
		}
	}
	if x.level[0].next != nil {
		x.level[0].next.back = x.back
	} else {
		z.tail = x.back
	}
	for z.levels > 1 && z.head.level[z.levels-1].next == nil {
		z.levels--
	}
}

// set gives member the score, adding it when new.
func (z *ZSet) set(member string, score float64) {
	if old, ok := z.dict[member]; ok {
		if old == score {
			return
		}
		z.remove(old, member)
		z.insert(score, member)
		z.dict[member] = score
		return
	}
	z.insert(score, member)
	z.dict[member] = score
	z.bytes += zMemberBytes + elemBytes(len(member))
}

// del removes member and reports whether it was one.
func (z *ZSet) del(member string) bool {
	score, ok := z.dict[member]
	if !ok {
		return false
	}
	z.remove(score, member)
	delete(z.dict, member)
	z.bytes -= zMemberBytes + elemBytes(len(member))
	return true
}

// Rank returns m's 0-based rank (by ascending score; with rev by descending score) and
// whether m is a member.
func (z *ZSet) Rank(m string, rev bool) (int, bool) {
	score, ok := z.dict[m]
	if !ok {
		return 0, false
	}
	rank := 0
	x := z.head
	for i := z.levels - 1; i >= 0; i-- {
		for x.level[i].next != nil && (zLess(x.level[i].next, score, m) || x.level[i].next.member == m) {
			rank += x.level[i].span
			x = x.level[i].next
		}
		if x != z.head && x.member == m {
			break
		}
	}
	if rev {
		return len(z.dict) - rank, true
	}
	return rank - 1, true
}

// byRank returns the node of 1-based rank r (1 <= r <= Len).
func (z *ZSet) byRank(r int) *zNode {
	x, traversed := z.head, 0
	for i := z.levels - 1; i >= 0; i-- {
		for x.level[i].next != nil && traversed+x.level[i].span <= r {
			traversed += x.level[i].span
			x = x.level[i].next
		}
		if traversed == r {
			return x
		}
	}
	return nil
}

// first returns the first node within min and its 1-based rank (nil when none is).
func (z *ZSet) first(min ScoreBound) (*zNode, int) {
	x, rank := z.head, 0
	for i := z.levels - 1; i >= 0; i-- {
		for x.level[i].next != nil && !min.aboveMin(x.level[i].next.score) {
			rank += x.level[i].span
			x = x.level[i].next
		}
	}
	return x.level[0].next, rank + 1
}

// last returns the last node within max and its 1-based rank (nil when none is).
func (z *ZSet) last(max ScoreBound) (*zNode, int) {
	x, rank := z.head, 0
	for i := z.levels - 1; i >= 0; i-- {
		for x.level[i].next != nil && max.belowMax(x.level[i].next.score) {
			rank += x.level[i].span
			x = x.level[i].next
		}
	}
	if x == z.head {
		return nil, 0
	}
	return x, rank
}

// rankRange returns the 1-based ranks of the first and last members within min and max
// (lo > hi when none is).
func (z *ZSet) rankRange(min, max ScoreBound) (lo, hi int) {
	f, lo := z.first(min)
	l, hi := z.last(max)
	if f == nil || l == nil || !max.belowMax(f.score) || !min.aboveMin(l.score) {
		return 1, 0
	}
	return lo, hi
}

// Count returns the number of members with scores within min and max.
func (z *ZSet) Count(min, max ScoreBound) int {
	lo, hi := z.rankRange(min, max)
	return hi - lo + 1
}

// RangeByRank calls fn with the members of 0-based ranks start to stop (inclusive,
// 0 <= start <= stop < Len), in ascending order, or descending with rev (ranks then count
// from the highest score).
func (z *ZSet) RangeByRank(start, stop int, rev bool, fn func(member string, score float64)) {
	if rev {
		x := z.byRank(len(z.dict) - start)
		for n := start; n <= stop && x != nil; n++ {
			fn(x.member, x.score)
			x = x.back
		}
		return
	}
	x := z.byRank(start + 1)
	for n := start; n <= stop && x != nil; n++ {
		fn(x.member, x.score)
		x = x.level[0].next
	}
}

// RangeByScore calls fn with the members whose scores are within min and max, ascending
// (descending with rev), skipping the first offset of them and stopping after count
// (count < 0: no limit).
func (z *ZSet) RangeByScore(lo, hi ScoreBound, rev bool, offset, count int, fn func(member string, score float64)) {
	first, last := z.rankRange(lo, hi)
	z.rangeRanks(first, last, rev, offset, count, fn)
}

// rangeRanks is RangeByScore over the 1-based ranks lo to hi.
func (z *ZSet) rangeRanks(lo, hi int, rev bool, offset, count int, fn func(member string, score float64)) {
	if lo > hi || offset < 0 || offset > hi-lo {
		return
	}
	n := hi - lo + 1 - offset
	if count >= 0 {
		n = min(n, count)
	}
	if n <= 0 {
		return
	}
	if rev {
		z.RangeByRank(len(z.dict)-hi+offset, len(z.dict)-hi+offset+n-1, true, fn)
	} else {
		z.RangeByRank(lo-1+offset, lo-1+offset+n-1, false, fn)
	}
}

// ZSet returns key i's sorted set for reading: nil when the key does not exist,
// ErrWrongType when it holds another type.
func (tx *Tx) ZSet(i int) (*ZSet, error) {
	o, err := tx.readObj(i, KindZSet)
	if o == nil {
		return nil, err
	}
	return o.zset, nil
}

// ZAdd flags, as ZADD's options.
const (
	ZAddNX   = 1 << iota // only add new members
	ZAddXX               // only update existing members
	ZAddGT               // only update when the new score is greater
	ZAddLT               // only update when the new score is less
	ZAddIncr             // add the score to the member's (one pair only)
)

// ZAddResult is what ZAdd did.
type ZAddResult struct {
	Added, Updated int     // members added; members whose score changed
	Score          float64 // with ZAddIncr: the member's new score
	Skipped        bool    // with ZAddIncr: the condition refused the update
}

// ZAdd adds or updates members (scores[j] for members[j]) of key i's sorted set as
// Redis's ZADD with flags (ZAdd*), creating the key when missing (not with ZAddXX). NaN
// scores are the caller's to refuse; a ZAddIncr that makes one gets ErrScoreNaN.
func (tx *Tx) ZAdd(i int, flags int, scores []float64, members [][]byte) (ZAddResult, error) {
	var res ZAddResult
	if flags&ZAddXX != 0 {
		if z, err := tx.ZSet(i); z == nil {
			return res, err
		}
	}
	var n int64
	longest := 0
	for _, m := range members {
		n += zMemberBytes + elemBytes(len(m))
		longest = max(longest, len(m))
	}
	o, err := tx.writeObj(i, KindZSet, len(members), n, longest)
	if err != nil {
		return res, err
	}
	z := o.zset
	for j, m := range members {
		score := scores[j]
		old, exists := z.dict[string(m)]
		switch {
		case exists && flags&ZAddNX != 0, !exists && flags&ZAddXX != 0:
			res.Skipped = true
			continue
		}
		if exists && flags&ZAddIncr != 0 {
			score += old
			if math.IsNaN(score) {
				tx.settle(i, o, false)
				return res, ErrScoreNaN
			}
		}
		res.Score = score
		if !exists {
			z.set(string(m), score)
			res.Added++
			continue
		}
		if (flags&ZAddGT != 0 && score <= old) || (flags&ZAddLT != 0 && score >= old) {
			res.Skipped = true
			res.Score = old
			continue
		}
		if score != old {
			z.set(string(m), score)
			res.Updated++
		}
	}
	tx.settle(i, o, res.Added+res.Updated > 0)
	return res, nil
}

// ZRem removes members from key i's sorted set and returns how many were there.
func (tx *Tx) ZRem(i int, members [][]byte) (int, error) {
	o, err := tx.readObj(i, KindZSet)
	if o == nil {
		return 0, err
	}
	n := 0
	for _, m := range members {
		if o.zset.del(string(m)) {
			n++
		}
	}
	tx.settle(i, o, n > 0)
	return n, nil
}

// ZRemRangeByScore removes the members of key i's sorted set with scores within min and
// max, and returns how many.
func (tx *Tx) ZRemRangeByScore(i int, min, max ScoreBound) (int, error) {
	o, err := tx.readObj(i, KindZSet)
	if o == nil {
		return 0, err
	}
	lo, hi := o.zset.rankRange(min, max)
	return tx.zRemRanks(i, o, lo, hi), nil
}

// ZRemRangeByRank removes the members of 0-based ranks start to stop (inclusive,
// 0 <= start <= stop < Len) of key i's sorted set, and returns how many.
func (tx *Tx) ZRemRangeByRank(i int, start, stop int) (int, error) {
	o, err := tx.readObj(i, KindZSet)
	if o == nil {
		return 0, err
	}
	return tx.zRemRanks(i, o, start+1, stop+1), nil
}

// zRemRanks removes 1-based ranks lo to hi (none when lo > hi).
func (tx *Tx) zRemRanks(i int, o *object, lo, hi int) int {
	z := o.zset
	n := 0
	if lo <= hi {
		x := z.byRank(lo)
		for ; n < hi-lo+1 && x != nil; n++ {
			next := x.level[0].next
			z.del(x.member)
			x = next
		}
	}
	tx.settle(i, o, n > 0)
	return n
}
