package keyspace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// A collection's elements as a Record's Value holds them (saved by package persist):
//
//	hash:  uvarint n | n × (uvarint len | field | uvarint len | value), in HGETALL's order
//	list:  uvarint n | n × (uvarint len | element), head first
//	set:   uvarint n | n × (uvarint len | member), in byte order
//	zset:  uvarint n | n × (8-byte big-endian IEEE 754 score | uvarint len | member), by rank
//
// decodeObject refuses what the keyspace could not hold: more than MaxElements, an
// element longer than MaxValue, a repeated field or member, a NaN score, trailing bytes.

var errBadObject = errors.New("malformed collection record")

func appendElem(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// encode appends the collection's elements to dst.
func (o *object) encode(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(o.length()))
	switch o.kind {
	case KindHash:
		o.hash.Each(func(f, v string) bool {
			dst = appendElem(appendElem(dst, f), v)
			return true
		})
	case KindList:
		o.list.Range(0, o.list.Len()-1, func(v string) { dst = appendElem(dst, v) })
	case KindSet:
		for _, m := range o.set.Members() { // in order: the same set saves the same bytes
			dst = appendElem(dst, m)
		}
	case KindZSet:
		if o.zset.Len() > 0 {
			o.zset.RangeByRank(0, o.zset.Len()-1, false, func(m string, s float64) {
				dst = appendElem(binary.BigEndian.AppendUint64(dst, math.Float64bits(s)), m)
			})
		}
	}
	return dst
}

// objDecoder reads the elements of a record.
type objDecoder struct {
	b   []byte
	err error
}

func (d *objDecoder) elem() string {
	n, used := binary.Uvarint(d.b)
	if used <= 0 || n > MaxValue || n > uint64(len(d.b)-used) {
		d.err = errBadObject
		d.b = nil
		return ""
	}
	s := string(d.b[used : used+int(n)])
	d.b = d.b[used+int(n):]
	return s
}

// decodeObject reads a record's Value of kind k (encode's format).
func decodeObject(k Kind, b []byte) (*object, error) {
	if k > KindZSet {
		return nil, fmt.Errorf("%w: kind %d", errBadObject, k)
	}
	n, used := binary.Uvarint(b)
	if used <= 0 || n == 0 || n > MaxElements {
		return nil, fmt.Errorf("%w: %d elements", errBadObject, n)
	}
	d := &objDecoder{b: b[used:]}
	o := newObject(k)
	for j := uint64(0); j < n && d.err == nil; j++ {
		before := o.length()
		switch k {
		case KindHash:
			f := d.elem()
			o.hash.set(f, d.elem())
		case KindList:
			o.list.push(d.elem(), false)
		case KindSet:
			m := d.elem()
			o.set.members[m] = struct{}{}
			o.set.bytes += setMemberBytes + elemBytes(len(m))
		case KindZSet:
			if len(d.b) < 8 {
				d.err = errBadObject
				break
			}
			score := math.Float64frombits(binary.BigEndian.Uint64(d.b))
			d.b = d.b[8:]
			m := d.elem()
			if math.IsNaN(score) {
				d.err = errBadObject
				break
			}
			if _, dup := o.zset.dict[m]; !dup {
				o.zset.set(m, score)
			}
		}
		if d.err == nil && o.length() == before {
			d.err = fmt.Errorf("%w: a repeated element", errBadObject)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", errBadObject, len(d.b))
	}
	if d.err == nil && o.size() > MaxObjectBytes {
		d.err = ErrObjectTooLarge
	}
	if d.err != nil {
		return nil, d.err
	}
	return o, nil
}
