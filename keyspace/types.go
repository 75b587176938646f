package keyspace

import "errors"

// The data types beside strings: hashes (hash.go), lists (list.go), sets (set.go) and
// sorted sets (zset.go). A key holding one keeps it in its entry's obj; the entry's TTL,
// DEL, EXPIRE, WATCH and sweeping treat every type alike.
//
// Writes go through Tx methods that take the key's index, as strings do: writeObj checks
// the type (ErrWrongType), the per-key bounds (MaxElements, MaxObjectBytes) and the
// --max-memory budget for the bytes the write may add, creating the key when missing;
// settle charges what the write really changed to the gauge and deletes a collection
// left empty, as Redis does. Readers get the structure itself (Hash, List, Set, ZSet),
// valid only during the callback, whose methods never write.

// Kind is the type of a key's value, as TYPE names it.
type Kind uint8

// The kinds of value a key holds.
const (
	KindNone Kind = iota // no key
	KindString
	KindHash
	KindList
	KindSet
	KindZSet
)

// String returns the kind's name as Redis's TYPE answers it.
func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindHash:
		return "hash"
	case KindList:
		return "list"
	case KindSet:
		return "set"
	case KindZSet:
		return "zset"
	}
	return "none"
}

// ParseKind reads a type's name as TYPE answers it (case-insensitive), KindNone for
// anything else.
func ParseKind(name string) Kind {
	for k := KindString; k <= KindZSet; k++ {
		if len(name) == len(k.String()) && equalFold(name, k.String()) {
			return k
		}
	}
	return KindNone
}

func equalFold(a, b string) bool {
	for i := range len(a) {
		c := a[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != b[i] {
			return false
		}
	}
	return true
}

// Per-key bounds of the collections.
const (
	// MaxElements is the most elements (fields, members) one key holds.
	MaxElements = 1_000_000
	// MaxObjectBytes bounds the estimated bytes of one collection key.
	MaxObjectBytes = 64 << 20
)

// Errors of the data types, tested with errors.Is; commands writes their replies.
var (
	// ErrWrongType: an operation on a key holding another type of value.
	ErrWrongType = errors.New("operation against a key holding the wrong kind of value")
	// ErrTooManyElements: a write that would pass MaxElements in one key.
	ErrTooManyElements = errors.New("key would hold more than MaxElements elements")
	// ErrObjectTooLarge: a write that would pass MaxObjectBytes in one key.
	ErrObjectTooLarge = errors.New("key would hold more than MaxObjectBytes bytes")
	// ErrNoSuchKey: LSET on a key that does not exist.
	ErrNoSuchKey = errors.New("no such key")
	// ErrIndexRange: LSET at an index outside the list.
	ErrIndexRange = errors.New("index out of range")
	// ErrHashNotInteger: HINCRBY on a field whose value is not an integer.
	ErrHashNotInteger = errors.New("hash value is not an integer")
	// ErrHashNotFloat: HINCRBYFLOAT on a field whose value is not a float.
	ErrHashNotFloat = errors.New("hash value is not a float")
	// ErrNotFloat: INCRBYFLOAT on a value that is not a float.
	ErrNotFloat = errors.New("value is not a valid float")
	// ErrNaNOrInf: a float increment whose result is not finite.
	ErrNaNOrInf = errors.New("increment would produce NaN or Infinity")
	// ErrScoreNaN: ZADD INCR whose resulting score is not a number.
	ErrScoreNaN = errors.New("resulting score is not a number (NaN)")
)

// object is a collection key's value: one of its fields is set, as kind says.
type object struct {
	kind    Kind
	charged int64 // bytes of it added to the gauge (settle brings it to size)
	hash    *Hash
	list    *List
	set     *Set
	zset    *ZSet
}

func newObject(k Kind) *object {
	o := &object{kind: k}
	switch k {
	case KindHash:
		o.hash = newHash()
	case KindList:
		o.list = new(List)
	case KindSet:
		o.set = newSet()
	case KindZSet:
		o.zset = newZSet()
	}
	return o
}

// size returns the estimated bytes of the collection's elements.
func (o *object) size() int64 {
	switch o.kind {
	case KindHash:
		return o.hash.bytes
	case KindList:
		return o.list.bytes
	case KindSet:
		return o.set.bytes
	default:
		return o.zset.bytes
	}
}

// length returns the number of elements.
func (o *object) length() int {
	switch o.kind {
	case KindHash:
		return o.hash.Len()
	case KindList:
		return o.list.Len()
	case KindSet:
		return o.set.Len()
	default:
		return o.zset.Len()
	}
}

// kind returns the type of the entry's value.
func (en *kvEntry) kind() Kind {
	if en.obj == nil {
		return KindString
	}
	return en.obj.kind
}

// dropObject releases en's collection, if any, and its bytes (en is an entry of sh).
func (kv *KV) dropObject(sh *kvShard, en *kvEntry) {
	if en.obj != nil {
		kv.bytes.Add(-en.obj.charged)
		en.obj = nil
		sh.objs--
	}
}

// StringsOnly reports whether no key of the step holds a collection (no shard of them
// holds one at all, read without looking a key up): the keys are strings or absent.
// False says nothing: Kind tells.
func (tx *Tx) StringsOnly() bool {
	for i := range tx.keys {
		if tx.keys[i].sh.objs != 0 {
			return false
		}
	}
	return true
}

// readObj returns key i's collection of kind k: nil when the key does not exist,
// ErrWrongType when it holds another type.
func (tx *Tx) readObj(i int, k Kind) (*object, error) {
	en := tx.entry(i)
	switch {
	case en == nil:
		return nil, nil
	case en.obj == nil || en.obj.kind != k:
		return nil, ErrWrongType
	}
	return en.obj, nil
}

// elemBytes rounds a string's length as the allocator does (16-byte classes).
func elemBytes(n int) int64 { return int64(n+15) &^ 15 }

// writeObj prepares a write to key i's collection of kind k, creating the key when it
// does not exist: the write may add up to elems elements and bytes estimated bytes. It
// checks the type, the per-key bounds, longest (the longest element it writes) and the
// memory budget. The caller writes, then calls settle.
func (tx *Tx) writeObj(i int, k Kind, elems int, bytes int64, longest int) (*object, error) {
	en := tx.entry(i)
	if en != nil && (en.obj == nil || en.obj.kind != k) {
		return nil, ErrWrongType
	}
	if longest > MaxValue {
		return nil, ErrValueTooLarge
	}
	if en != nil {
		if en.obj.length()+elems > MaxElements {
			return nil, ErrTooManyElements
		}
		if en.obj.size()+bytes > MaxObjectBytes {
			return nil, ErrObjectTooLarge
		}
	} else if elems > MaxElements {
		return nil, ErrTooManyElements
	} else if bytes > MaxObjectBytes {
		return nil, ErrObjectTooLarge
	}
	if bytes > 0 && tx.kv.bytes.Load()+bytes > tx.kv.maxBytes {
		tx.full++
		return nil, ErrFull
	}
	if en == nil {
		var err error
		if en, err = tx.insert(i, 0, true); err != nil {
			return nil, err
		}
		en.obj = newObject(k)
		tx.keys[i].sh.objs++
	}
	return en.obj, nil
}

// Room checks, before a write of several keys (MSET), that about n more bytes of keys and
// values fit --max-memory, so that the write is refused whole (ErrFull) rather than part
// way.
func (tx *Tx) Room(n int64) error {
	if n > 0 && tx.kv.bytes.Load()+n > tx.kv.maxBytes {
		tx.full++
		return ErrFull
	}
	return nil
}

// settle charges the gauge with what a write did to key i's collection o, tells the
// key's watchers when it changed something, and deletes the key when the write left it
// empty (a key created by a write that added nothing included).
func (tx *Tx) settle(i int, o *object, changed bool) {
	if d := o.size() - o.charged; d != 0 {
		tx.kv.charge(d, false)
		o.charged += d
	}
	if changed {
		tx.changed(i)
	}
	if o.length() == 0 {
		tx.Del(i)
	}
}
