package persist

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ratchet/ratchet/engine"
)

// The part table of a snapshot of Tuples (meta "parts"): where each load part's records
// begin in the cells' chunks, a position being chunk index << 32 | byte offset in the
// chunk. Only the parts that hold records are written, so that a small store's table is
// small (all 262,144 positions would be 2 MiB):
//
//	uvarint n | n times: uvarint part - previous part (the first: part + 1) |
//	uvarint chunk - previous chunk | uvarint offset
//	| then the end of the last record: uvarint chunk - previous chunk | uvarint offset
//
// A part not written holds nothing: its records begin and end where the next one's begin.

// appendParts encodes parts (engine.Parts+1 non-decreasing positions, the last the end).
func appendParts(buf []byte, parts []uint64) []byte {
	n := 0
	for i := 0; i < engine.Parts; i++ {
		if parts[i] != parts[i+1] {
			n++
		}
	}
	buf = binary.AppendUvarint(buf, uint64(n))
	prev, prevChunk := -1, uint64(0)
	at := func(pos uint64) {
		buf = binary.AppendUvarint(buf, pos>>32-prevChunk)
		buf = binary.AppendUvarint(buf, pos&0xffffffff)
		prevChunk = pos >> 32
	}
	for i := 0; i < engine.Parts; i++ {
		if parts[i] != parts[i+1] {
			buf = binary.AppendUvarint(buf, uint64(i-prev))
			at(parts[i])
			prev = i
		}
	}
	at(parts[engine.Parts])
	return buf
}

var errPartTable = errors.New("part table")

// decodeParts decodes a table of appendParts into its engine.Parts+1 positions, checking
// them against lens, the length of each chunk: the parts in order, each beginning after
// the one before, the first at the first record, the end at the end of the last.
func decodeParts(table []byte, lens []uint64) ([]uint64, error) {
	d := decoder{b: table}
	n := d.uvarint()
	if d.err != nil || n > engine.Parts {
		return nil, fmt.Errorf("%w: %d parts", errPartTable, n)
	}
	inChunks := func(pos uint64) bool {
		c, off := pos>>32, pos&0xffffffff
		return (c < uint64(len(lens)) && off <= lens[c]) || (c == uint64(len(lens)) && off == 0)
	}
	// Where each part listed starts (a slice, not a map: 262,144 inserts into a map were a
	// tenth of a restart's CPU before it served).
	starts, listed := make([]uint64, engine.Parts), make([]bool, engine.Parts)
	part, chunk, last := -1, uint64(0), uint64(0)
	pos := func() uint64 {
		chunk += d.uvarint()
		off := d.uvarint()
		if chunk > 1<<31 || off > 0xffffffff {
			d.err = errPartTable
		}
		return chunk<<32 | off
	}
	for k := uint64(0); k < n; k++ {
		step := d.uvarint()
		if step == 0 || step > engine.Parts {
			return nil, fmt.Errorf("%w: entry %d: part step %d", errPartTable, k, step)
		}
		part += int(step)
		p := pos()
		if d.err != nil || part >= engine.Parts || !inChunks(p) || (k == 0 && p != 0) || (k > 0 && p <= last) {
			return nil, fmt.Errorf("%w: entry %d: part %d at chunk %d offset %d", errPartTable, k, part, p>>32, p&0xffffffff)
		}
		starts[part], listed[part], last = p, true, p
	}
	end := pos()
	c, off := end>>32, end&0xffffffff
	whole := c == uint64(len(lens)) && off == 0 || c+1 == uint64(len(lens)) && off == lens[c]
	if len(lens) == 0 {
		whole = end == 0
	}
	if d.err != nil || d.p != len(table) || !inChunks(end) || !whole || (n > 0 && end <= last) {
		return nil, fmt.Errorf("%w: end at chunk %d offset %d of %d chunks (%d bytes left)", errPartTable, c, off, len(lens), len(table)-d.p)
	}
	parts := make([]uint64, engine.Parts+1)
	parts[engine.Parts] = end
	for i := engine.Parts - 1; i >= 0; i-- {
		if listed[i] {
			parts[i] = starts[i]
		} else {
			parts[i] = parts[i+1]
		}
	}
	if n == 0 && end != 0 {
		return nil, fmt.Errorf("%w: no part, and records", errPartTable)
	}
	return parts, nil
}
