package keyspace

// listElemBytes estimates one element beyond its bytes: its slot in the ring (a string
// header, with the ring's growth slack).
const listElemBytes = 32

// List is a list key's elements, in a ring buffer: pushes and pops at either end are
// O(1), and so is reading by index. Its methods read; Tx's L* methods write.
type List struct {
	ring  []string
	head  int // position of element 0 in ring
	n     int
	bytes int64
}

// Len returns the number of elements (0 for a nil List: no key).
func (l *List) Len() int {
	if l == nil {
		return 0
	}
	return l.n
}

// Index returns element i, 0 <= i < Len.
func (l *List) Index(i int) string { return l.ring[(l.head+i)%len(l.ring)] }

// Range calls fn with elements start to stop (inclusive, 0 <= start <= stop < Len).
func (l *List) Range(start, stop int, fn func(v string)) {
	for i := start; i <= stop; i++ {
		fn(l.Index(i))
	}
}

func (l *List) grow() {
	if l.n < len(l.ring) {
		return
	}
	ring := make([]string, max(8, 2*len(l.ring)))
	for i := range l.n {
		ring[i] = l.Index(i)
	}
	l.ring, l.head = ring, 0
}

// shrink gives back the ring's room once a quarter of it is used.
func (l *List) shrink() {
	if len(l.ring) <= 64 || l.n > len(l.ring)/4 {
		return
	}
	ring := make([]string, max(8, 2*l.n))
	for i := range l.n {
		ring[i] = l.Index(i)
	}
	l.ring, l.head = ring, 0
}

func (l *List) push(v string, left bool) {
	l.grow()
	if left {
		l.head = (l.head - 1 + len(l.ring)) % len(l.ring)
		l.ring[l.head] = v
	} else {
		l.ring[(l.head+l.n)%len(l.ring)] = v
	}
	l.n++
	l.bytes += listElemBytes + elemBytes(len(v))
}

func (l *List) pop(left bool) string {
	p := (l.head + l.n - 1) % len(l.ring)
	if left {
		p = l.head
		l.head = (l.head + 1) % len(l.ring)
	}
	v := l.ring[p]
	l.ring[p] = ""
	l.n--
	l.bytes -= listElemBytes + elemBytes(len(v))
	return v
}

// List returns key i's list for reading: nil when the key does not exist, ErrWrongType
// when it holds another type.
func (tx *Tx) List(i int) (*List, error) {
	o, err := tx.readObj(i, KindList)
	if o == nil {
		return nil, err
	}
	return o.list, nil
}

// LPush pushes vals, in order, at the head (left) or the tail of key i's list, creating
// it when missing, and returns the list's new length.
func (tx *Tx) LPush(i int, left bool, vals [][]byte) (int, error) {
	var n int64
	longest := 0
	for _, v := range vals {
		n += listElemBytes + elemBytes(len(v))
		longest = max(longest, len(v))
	}
	o, err := tx.writeObj(i, KindList, len(vals), n, longest)
	if err != nil {
		return 0, err
	}
	for _, v := range vals {
		o.list.push(string(v), left)
	}
	tx.settle(i, o, len(vals) > 0)
	return o.list.n, nil
}

// LPop pops up to count elements from the head (left) or the tail of key i's list, in
// the order popped; nil when the key does not exist.
func (tx *Tx) LPop(i int, left bool, count int) ([]string, error) {
	o, err := tx.readObj(i, KindList)
	if o == nil {
		return nil, err
	}
	out := make([]string, 0, min(count, o.list.n))
	for len(out) < count && o.list.n > 0 {
		out = append(out, o.list.pop(left))
	}
	o.list.shrink()
	tx.settle(i, o, len(out) > 0)
	return out, nil
}

// LTrim keeps elements start to stop (inclusive) of key i's list; start > stop, or a
// range outside the list, empties it (and deletes the key).
func (tx *Tx) LTrim(i int, start, stop int) error {
	o, err := tx.readObj(i, KindList)
	if o == nil {
		return err
	}
	l := o.list
	before := l.n
	if start > stop || start >= l.n {
		start, stop = l.n, l.n-1
	}
	stop = min(stop, l.n-1)
	for range l.n - 1 - stop {
		l.pop(false)
	}
	for range start {
		l.pop(true)
	}
	l.shrink()
	tx.settle(i, o, l.n != before)
	return nil
}

// LSet sets element idx (0 <= idx < Len) of key i's list to v: ErrNoSuchKey when the key
// does not exist, ErrIndexRange when idx is outside the list.
func (tx *Tx) LSet(i int, idx int, v []byte) error {
	if len(v) > MaxValue {
		return ErrValueTooLarge
	}
	o, err := tx.readObj(i, KindList)
	switch {
	case err != nil:
		return err
	case o == nil:
		return ErrNoSuchKey
	}
	l := o.list
	if idx < 0 {
		idx += l.n
	}
	if idx < 0 || idx >= l.n {
		return ErrIndexRange
	}
	if tx.kv.bytes.Load()+elemBytes(len(v)) > tx.kv.maxBytes && len(v) > len(l.Index(idx)) {
		tx.full++
		return ErrFull
	}
	p := (l.head + idx) % len(l.ring)
	l.bytes += elemBytes(len(v)) - elemBytes(len(l.ring[p]))
	l.ring[p] = string(v)
	tx.settle(i, o, true)
	return nil
}

// LRem removes elements equal to v from key i's list: the first count from the head when
// count > 0, the last -count from the tail when count < 0, all when 0. It returns how
// many it removed.
func (tx *Tx) LRem(i int, count int, v []byte) (int, error) {
	o, err := tx.readObj(i, KindList)
	if o == nil {
		return 0, err
	}
	l := o.list
	limit := count
	if limit < 0 {
		limit = -limit
	}
	keep := make([]bool, l.n)
	removed := 0
	for j := range l.n {
		at := j
		if count < 0 {
			at = l.n - 1 - j
		}
		if (limit == 0 || removed < limit) && l.Index(at) == string(v) {
			removed++
			continue
		}
		keep[at] = true
	}
	if removed > 0 {
		ring := make([]string, max(8, l.n-removed))
		k := 0
		for j := range l.n {
			if keep[j] {
				ring[k] = l.Index(j)
				k++
			}
		}
		l.ring, l.head, l.n = ring, 0, k
		l.bytes -= int64(removed) * (listElemBytes + elemBytes(len(v)))
	}
	tx.settle(i, o, removed > 0)
	return removed, nil
}
