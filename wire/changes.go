package wire

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/resp"
)

// RL.INTERNAL.CHANGES since: an edge asks for its origin's changes after version since
// (engine/changes.go). The reply is one bulk string, since a change carries a key:
//
//	uvarint version | byte resync | uvarint n | n x change
//	change = uvarint version | uvarint kind | uvarint len(key) | key | uvarint nfields | nfields x zigzag varint
//
// version is the one the edge is at once it applied the n changes (more remain when it
// is below the version of the next reply's meta); resync (0 or 1) tells it that it
// missed changes: it drops every view and lease it holds of the origin's tuples. A change
// of a kind the edge does not know is skipped.

// CmdChanges is RL.INTERNAL.CHANGES.
const CmdChanges = "RL.INTERNAL.CHANGES"

// maxChangeKey bounds a change's key in a reply: a tuple key (engine.MaxKeyBytes with
// the window and names) fits easily.
const maxChangeKey = 4096

// AppendChanges appends RL.INTERNAL.CHANGES since to dst.
func AppendChanges(dst []byte, since uint64) []byte {
	dst = resp.AppendArray(dst, 2)
	dst = resp.AppendBulkString(dst, CmdChanges)
	return resp.AppendBulkUint(dst, min(since, math.MaxInt64))
}

// ParseChanges decodes an RL.INTERNAL.CHANGES request.
func ParseChanges(args [][]byte) (since uint64, err error) {
	if len(args) != 2 {
		return 0, fmt.Errorf("%w: %d arguments to CHANGES", ErrSyntax, len(args))
	}
	v, ok := parseInt(args[1])
	if !ok {
		return 0, fmt.Errorf("%w: since", ErrSyntax)
	}
	return uint64(v), nil
}

// WriteChangesReply writes the reply to RL.INTERNAL.CHANGES. The caller keeps the
// changes within engine.MaxChangesPerReply, their keys within 4096 bytes and their fields
// within engine.MaxChangeFields.
func WriteChangesReply(w *resp.Writer, r engine.ChangesReply) {
	w.Bulk(AppendChangesPayload(nil, r))
}

// AppendChangesPayload appends the bulk string of a CHANGES reply to dst.
func AppendChangesPayload(dst []byte, r engine.ChangesReply) []byte {
	dst = binary.AppendUvarint(dst, r.Version)
	if r.Resync {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(r.Changes)))
	for _, c := range r.Changes {
		dst = binary.AppendUvarint(dst, c.Version)
		dst = binary.AppendUvarint(dst, uint64(c.Kind))
		dst = binary.AppendUvarint(dst, uint64(len(c.Key)))
		dst = append(dst, c.Key...)
		dst = binary.AppendUvarint(dst, uint64(len(c.Fields)))
		for _, f := range c.Fields {
			dst = binary.AppendVarint(dst, f)
		}
	}
	return dst
}

// ParseChangesReply decodes the bulk string of a reply to RL.INTERNAL.CHANGES. Keys are
// copied. Changes must come in ascending versions, none above version.
func ParseChangesReply(b []byte) (engine.ChangesReply, error) {
	var r engine.ChangesReply
	d := decoder{b: b}
	r.Version = d.uvarint(math.MaxInt64)
	switch d.byte() {
	case 0:
	case 1:
		r.Resync = true
	default:
		d.fail()
	}
	n := d.uvarint(engine.MaxChangesPerReply)
	if d.bad {
		return engine.ChangesReply{}, fmt.Errorf("%w: changes header", ErrReply)
	}
	if n > 0 {
		r.Changes = make([]engine.Change, 0, n)
	}
	var last uint64
	for range n {
		var c engine.Change
		c.Version = d.uvarint(r.Version)
		c.Kind = engine.ChangeKind(d.uvarint(math.MaxUint8))
		kb := d.bytes(d.uvarint(maxChangeKey))
		c.Key = append(make([]byte, 0, len(kb)), kb...)
		if nf := d.uvarint(engine.MaxChangeFields); nf > 0 {
			c.Fields = make([]int64, nf)
			for i := range c.Fields {
				c.Fields[i] = d.varint()
			}
		}
		if d.bad || c.Version <= last {
			return engine.ChangesReply{}, fmt.Errorf("%w: change %d", ErrReply, len(r.Changes))
		}
		last = c.Version
		r.Changes = append(r.Changes, c)
	}
	if len(d.b) != 0 {
		return engine.ChangesReply{}, fmt.Errorf("%w: %d bytes after the changes", ErrReply, len(d.b))
	}
	return r, nil
}

// decoder reads a CHANGES payload; after the first malformed field bad is set and every
// read returns zero.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) fail() { d.bad, d.b = true, nil }

func (d *decoder) uvarint(max uint64) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > max {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) bytes(n uint64) []byte {
	if uint64(len(d.b)) < n {
		d.fail()
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}
