package keyspace

import "sort"

// setMemberBytes estimates one member beyond its bytes: its map entry and header.
const setMemberBytes = 48

// Set is a set key's members. Its methods read; Tx's S* methods write.
type Set struct {
	members map[string]struct{}
	bytes   int64
}

func newSet() *Set { return &Set{members: make(map[string]struct{})} }

// Len returns the number of members (0 for a nil Set: no key).
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.members)
}

// Has reports whether m is a member.
func (s *Set) Has(m string) bool { _, ok := s.members[m]; return ok }

// Members returns the members in byte order (Redis answers in no particular order).
func (s *Set) Members() []string {
	out := make([]string, 0, len(s.members))
	for m := range s.members {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// SetOf returns key i's set for reading: nil when the key does not exist, ErrWrongType
// when it holds another type.
func (tx *Tx) SetOf(i int) (*Set, error) {
	o, err := tx.readObj(i, KindSet)
	if o == nil {
		return nil, err
	}
	return o.set, nil
}

// SAdd adds members to key i's set, creating it when missing, and returns how many were
// new.
func (tx *Tx) SAdd(i int, members [][]byte) (int, error) {
	var n int64
	longest := 0
	for _, m := range members {
		n += setMemberBytes + elemBytes(len(m))
		longest = max(longest, len(m))
	}
	o, err := tx.writeObj(i, KindSet, len(members), n, longest)
	if err != nil {
		return 0, err
	}
	added := 0
	for _, m := range members {
		if _, ok := o.set.members[string(m)]; !ok {
			o.set.members[string(m)] = struct{}{}
			o.set.bytes += setMemberBytes + elemBytes(len(m))
			added++
		}
	}
	tx.settle(i, o, added > 0)
	return added, nil
}

// SRem removes members from key i's set and returns how many were there.
func (tx *Tx) SRem(i int, members [][]byte) (int, error) {
	o, err := tx.readObj(i, KindSet)
	if o == nil {
		return 0, err
	}
	n := 0
	for _, m := range members {
		if _, ok := o.set.members[string(m)]; ok {
			delete(o.set.members, string(m))
			o.set.bytes -= setMemberBytes + elemBytes(len(m))
			n++
		}
	}
	tx.settle(i, o, n > 0)
	return n, nil
}
