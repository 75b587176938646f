package keyspace

import (
	"math"
	"strconv"
)

// hashFieldBytes estimates one field beyond its name and value: its slot in fields, its
// entry in the index map, the strings' headers.
const hashFieldBytes = 96

// Hash is a hash key's fields, in the order they were first set (as Redis 7.0's listpack
// encoding answers HGETALL for the small hashes limiters keep). Its methods read; Tx's
// H* methods write.
type Hash struct {
	index  map[string]int32 // name -> position in fields
	fields []hashField      // in insertion order; deleted ones are holes
	holes  int
	bytes  int64
}

type hashField struct {
	name, val string
	dead      bool
}

func newHash() *Hash { return &Hash{index: make(map[string]int32)} }

// Len returns the number of fields (0 for a nil Hash: no key).
func (h *Hash) Len() int {
	if h == nil {
		return 0
	}
	return len(h.index)
}

// Get returns field's value and whether it exists.
func (h *Hash) Get(field string) (string, bool) {
	if p, ok := h.index[field]; ok {
		return h.fields[p].val, true
	}
	return "", false
}

// Each calls fn with every field and its value in order, until fn returns false.
func (h *Hash) Each(fn func(field, val string) bool) {
	for _, f := range h.fields {
		if !f.dead && !fn(f.name, f.val) {
			return
		}
	}
}

// set sets field to val and reports whether the field is new.
func (h *Hash) set(field, val string) bool {
	if p, ok := h.index[field]; ok {
		h.bytes += elemBytes(len(val)) - elemBytes(len(h.fields[p].val))
		h.fields[p].val = val
		return false
	}
	h.index[field] = int32(len(h.fields))
	h.fields = append(h.fields, hashField{name: field, val: val})
	h.bytes += hashFieldBytes + elemBytes(len(field)) + elemBytes(len(val))
	return true
}

// del deletes field and reports whether it existed.
func (h *Hash) del(field string) bool {
	p, ok := h.index[field]
	if !ok {
		return false
	}
	f := &h.fields[p]
	h.bytes -= hashFieldBytes + elemBytes(len(f.name)) + elemBytes(len(f.val))
	delete(h.index, field)
	*f = hashField{dead: true}
	h.holes++
	if h.holes > 16 && h.holes > len(h.fields)/2 {
		h.compact()
	}
	return true
}

// compact removes the holes, keeping the order.
func (h *Hash) compact() {
	live := make([]hashField, 0, len(h.index))
	for _, f := range h.fields {
		if !f.dead {
			h.index[f.name] = int32(len(live))
			live = append(live, f)
		}
	}
	h.fields, h.holes = live, 0
}

// hashWriteBytes is the most a write of the name/value pairs adds.
func hashWriteBytes(pairs [][]byte) (int64, int) {
	var n int64
	longest := 0
	for _, p := range pairs {
		n += elemBytes(len(p))
		longest = max(longest, len(p))
	}
	return n + int64(len(pairs)/2)*hashFieldBytes, longest
}

// Hash returns key i's hash for reading: nil when the key does not exist, ErrWrongType
// when it holds another type.
func (tx *Tx) Hash(i int) (*Hash, error) {
	o, err := tx.readObj(i, KindHash)
	if o == nil {
		return nil, err
	}
	return o.hash, nil
}

// HSet sets the fields of pairs (name, value, name, value, ...) in key i's hash, creating
// it when missing, and returns the number of fields that were new.
func (tx *Tx) HSet(i int, pairs [][]byte) (int, error) {
	n, longest := hashWriteBytes(pairs)
	o, err := tx.writeObj(i, KindHash, len(pairs)/2, n, longest)
	if err != nil {
		return 0, err
	}
	added := 0
	for j := 0; j+1 < len(pairs); j += 2 {
		if o.hash.set(string(pairs[j]), string(pairs[j+1])) {
			added++
		}
	}
	tx.settle(i, o, len(pairs) > 0)
	return added, nil
}

// HSetNX sets field to val in key i's hash unless the field exists, and reports whether
// it did.
func (tx *Tx) HSetNX(i int, field, val []byte) (bool, error) {
	if h, err := tx.Hash(i); err != nil {
		return false, err
	} else if h != nil {
		if _, ok := h.Get(string(field)); ok {
			return false, nil
		}
	}
	_, err := tx.HSet(i, [][]byte{field, val})
	return err == nil, err
}

// HDel deletes fields from key i's hash and returns how many existed.
func (tx *Tx) HDel(i int, fields [][]byte) (int, error) {
	o, err := tx.readObj(i, KindHash)
	if o == nil {
		return 0, err
	}
	n := 0
	for _, f := range fields {
		if o.hash.del(string(f)) {
			n++
		}
	}
	tx.settle(i, o, n > 0)
	return n, nil
}

// HIncrBy adds delta to the integer value of field in key i's hash (a new field counts
// from 0) and returns the result: ErrHashNotInteger when the value is not an integer,
// ErrOverflow when the sum does not fit 64 bits.
func (tx *Tx) HIncrBy(i int, field []byte, delta int64) (int64, error) {
	h, err := tx.Hash(i)
	if err != nil {
		return 0, err
	}
	var cur int64
	if h != nil {
		if v, ok := h.Get(string(field)); ok {
			if cur, ok = ParseInt([]byte(v)); !ok {
				return 0, ErrHashNotInteger
			}
		}
	}
	if (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta) {
		return 0, ErrOverflow
	}
	cur += delta
	_, err = tx.HSet(i, [][]byte{field, strconv.AppendInt(nil, cur, 10)})
	return cur, err
}

// HIncrByFloat adds delta (as Redis reads a long double) to the float value of field in
// key i's hash and returns the new value as it is stored (FormatFloat): ErrHashNotFloat
// when the value is not a float, ErrNaNOrInf when the result is not finite.
func (tx *Tx) HIncrByFloat(i int, field, delta []byte) ([]byte, error) {
	h, err := tx.Hash(i)
	if err != nil {
		return nil, err
	}
	cur := []byte("0")
	if h != nil {
		if v, ok := h.Get(string(field)); ok {
			cur = []byte(v)
		}
	}
	s, err := addFloats(cur, delta, ErrHashNotFloat)
	if err != nil {
		return nil, err
	}
	_, err = tx.HSet(i, [][]byte{field, s})
	return s, err
}
