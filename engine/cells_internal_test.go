package engine

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The packed cells of an entry (store.go): sequences as a base and a delta, imported
// counts in the side struct, limits in 32 bits.

// TestEntrySeqs: every pair of sequences at most maxDelta apart, either or both not held,
// round-trips through setSeqs; a pair further apart is refused and changes nothing.
func TestEntrySeqs(t *testing.T) {
	const big = int64(1) << 52 // a 1 ms window's sequence today is about 2^41
	for _, tc := range []struct {
		s0, s1 int64
		ok     bool
	}{
		{emptySeq, emptySeq, true},
		{big, emptySeq, true},
		{emptySeq, big, true},
		{big, big - 1, true},
		{big - 1, big, true},
		{-5, -4, true},
		{0, maxDelta, true},
		{0, minDelta, true},
		{big, big + maxDelta, true},
		{big + maxDelta, big, true}, // -maxDelta
		{big, big + maxDelta + 1, false},
		{big, big + minDelta - 1, false},
		{0, math.MaxInt64, false},
		{math.MaxInt64, emptySeq, true},
		{emptySeq + 1, emptySeq + 2, true},
	} {
		var e entry
		e.meta = importsBit | importsBit<<1 // kept by setSeqs
		if !e.setSeqs(7, 8) {
			t.Fatal("7, 8 refused")
		}
		if got := e.setSeqs(tc.s0, tc.s1); got != tc.ok {
			t.Fatalf("setSeqs(%d, %d) = %v, want %v", tc.s0, tc.s1, got, tc.ok)
		}
		want0, want1 := tc.s0, tc.s1
		if !tc.ok {
			want0, want1 = 7, 8
		}
		if e.seqOf(0) != want0 || e.seqOf(1) != want1 {
			t.Fatalf("setSeqs(%d, %d): cells hold %d, %d", tc.s0, tc.s1, e.seqOf(0), e.seqOf(1))
		}
		if e.meta&(importsBit|importsBit<<1) != importsBit|importsBit<<1 {
			t.Fatalf("setSeqs(%d, %d) changed the imports bits: meta %#x", tc.s0, tc.s1, e.meta)
		}
		held := int64(0)
		for _, s := range []int64{want0, want1} {
			if s != emptySeq {
				held++
			}
		}
		if e.held() != held {
			t.Fatalf("setSeqs(%d, %d): held %d, want %d", tc.s0, tc.s1, e.held(), held)
		}
	}
}

// TestSlotFarApart: two cells more than maxDelta windows apart are never kept together: a
// dead one or one from the future gives way to the current sequence, a live one makes a
// far future sequence refused; the store's cell count follows.
func TestSlotFarApart(t *testing.T) {
	const now = int64(1) << 40
	for _, tc := range []struct {
		name        string
		other, seq  int64
		want        int   // slot, or -1
		keepOther   bool  // the other cell is still held
		cellsChange int64 // of the store's cell count
	}{
		{"dead far in the past, current arrives", now - maxDelta - 5, now, 1, false, 0},
		{"future far ahead, current arrives", now + maxDelta + 5, now, 1, false, 0},
		{"future far ahead, previous arrives", now + maxDelta + 5, now - 1, 1, false, 0},
		{"live current, far future refused", now, now + maxDelta + 5, -1, true, 0},
		{"live previous, far future refused", now - 1, now + maxDelta + 5, -1, true, 0},
		{"future near, current kept beside it", now + 3, now, 1, true, 1},
		{"dead near, current beside it", now - 7, now, 1, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(1 << 30)
			var e entry
			e.reset()
			e.setSeq(0, tc.other)
			e.regional[0] = 5
			s.shards[0].cells.Store(1)
			got := s.slot(&s.shards[0], &e, tc.seq, now, 1000)
			if got != tc.want {
				t.Fatalf("slot(%d) = %d, want %d", tc.seq, got, tc.want)
			}
			if held := e.seqOf(0) == tc.other; held != tc.keepOther {
				t.Fatalf("other cell held %v (cells %d, %d), want %v", held, e.seqOf(0), e.seqOf(1), tc.keepOther)
			}
			if !tc.keepOther && (e.regional[0] != 0 || e.seqOf(0) != emptySeq) {
				t.Fatalf("the dropped cell kept seq %d count %d", e.seqOf(0), e.regional[0])
			}
			if got >= 0 && e.seqOf(got) != tc.seq {
				t.Fatalf("slot %d holds %d, want %d", got, e.seqOf(got), tc.seq)
			}
			if d := s.cellCount() - 1; d != tc.cellsChange {
				t.Fatalf("cell count changed by %d, want %d", d, tc.cellsChange)
			}
		})
	}
}

// TestCountsOlderCellDead: a cell older than seq-1 counts in neither of counts' cells, in
// either cell slot, and a later slot call takes its place.
func TestCountsOlderCellDead(t *testing.T) {
	const seq = int64(1000)
	for _, older := range []int64{seq - 2, seq - 100, seq - maxDelta} {
		for oldAt := range entryCells {
			var e entry
			e.setSeq(oldAt, older)
			e.regional[oldAt] = 50
			e.setSeq(1-oldAt, seq)
			e.regional[1-oldAt] = 3
			var sh shard
			cur, prev := sh.counts(&e, seq)
			if cur.total() != 3 || prev.total() != 0 || prev.seq != seq-1 {
				t.Fatalf("older %d in cell %d: counts = %+v, %+v", older, oldAt, cur, prev)
			}
			s := newStore(1 << 30)
			if i := s.slot(&s.shards[0], &e, seq-1, seq, 1000); i != oldAt || e.regional[i] != 0 {
				t.Fatalf("older %d in cell %d: slot(seq-1) = %d holding %d", older, oldAt, i, e.regional[max(i, 0)])
			}
		}
	}
}

// TestImported: a cell's imported count is the sum of its foreign components, read from
// the side struct only when the cell has some; an entry with a side struct for its leases
// alone imports nothing, and clearing a cell drops its imports. Side structs are the
// shard's, their indexes reused once freed.
func TestImported(t *testing.T) {
	s := newStore(1 << 30)
	sh := &s.shards[0]
	var e entry
	e.reset()
	e.setSeqs(10, 11)
	if sh.imported(&e, 0) != 0 || sh.imported(&e, 1) != 0 || e.side != 0 {
		t.Fatal("a new entry imports")
	}
	s.sideOf(sh, &e).leases.grants = []leaseGrant{{g: 1}} // a side struct for a lease only
	if sh.imported(&e, 0) != 0 || sh.imported(&e, 1) != 0 || e.meta&(importsBit|importsBit<<1) != 0 {
		t.Fatalf("leases only: imported %d, %d (meta %#x)", sh.imported(&e, 0), sh.imported(&e, 1), e.meta)
	}
	s.raise(sh, &e, 1, 1, 40)
	s.raise(sh, &e, 1, 2, 2)
	s.raise(sh, &e, 1, 1, 30) // lower: ignored
	if sh.imported(&e, 0) != 0 || sh.imported(&e, 1) != 42 || sh.cell(&e, 1).total() != 42 {
		t.Fatalf("imported %d, %d, want 0, 42", sh.imported(&e, 0), sh.imported(&e, 1))
	}
	s.raise(sh, &e, 1, 3, MaxCount) // saturates
	if sh.imported(&e, 1) != MaxCount {
		t.Fatalf("imported %d, want MaxCount", sh.imported(&e, 1))
	}
	s.clearCell(sh, &e, 1)
	if sh.imported(&e, 1) != 0 || e.meta&(importsBit<<1) != 0 || e.side != 1 {
		t.Fatalf("after clearCell: imported %d meta %#x side %d", sh.imported(&e, 1), e.meta, e.side)
	}
	// Without a lease the side struct goes with the last imports.
	var f entry
	f.setSeq(0, 10)
	s.raise(sh, &f, 0, 1, 7)
	if f.side != 2 || sh.imported(&f, 0) != 7 {
		t.Fatalf("imported %d, side %d", sh.imported(&f, 0), f.side)
	}
	s.clearCell(sh, &f, 0)
	if f.side != 0 || sh.imported(&f, 0) != 0 || f.meta != 0 || sh.sides[1] != nil || len(sh.freeSides) != 1 {
		t.Fatalf("after clearCell: side %d, imported %d, meta %#x, sides %v free %v", f.side, sh.imported(&f, 0), f.meta, sh.sides, sh.freeSides)
	}
	s.raise(sh, &f, 0, 1, 7) // takes the free index
	if f.side != 2 || len(sh.freeSides) != 0 {
		t.Fatalf("side %d, free %v", f.side, sh.freeSides)
	}
	s.clearCell(sh, &f, 0)
	sh.side(&e).leases.grants = nil
	s.freeSideIfEmpty(sh, &e) // the last: the shard keeps no table
	if e.side != 0 || sh.sides != nil || sh.freeSides != nil || s.bytes.Load() != 0 {
		t.Fatalf("side %d, sides %v, free %v, bytes %d", e.side, sh.sides, sh.freeSides, s.bytes.Load())
	}
}

// TestPackLimit: a packed limit is never above the limit (the publication threshold is
// never raised), below it by less than 2^-25 of it, exact under 2^26, 0 only for 0, and
// packing keeps the order; limits up to 2^64-1.
func TestPackLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 24))
	limits := []uint64{0, 1, 2, 1<<26 - 1, 1 << 26, 1<<26 + 1, 1<<27 - 1, 1 << 27, 1<<27 + 1,
		1e12, 5<<40 + 3, MaxLimit - 1, MaxLimit, MaxLimit + 1, MaxCount, math.MaxUint64}
	for range 10_000 {
		limits = append(limits, rng.Uint64()>>rng.IntN(64))
	}
	for i, l := range limits {
		p := packLimit(l)
		u := unpackLimit(p)
		if u > l || l-u > l>>25 || (l < 1<<26 && u != l) || (l > 0) != (p > 0) {
			t.Fatalf("limit %d packs to %#x, unpacks to %d", l, p, u)
		}
		if i > 0 {
			if m := limits[i-1]; (m < l && packLimit(m) > p) || (m > l && packLimit(m) < p) {
				t.Fatalf("order: %d packs to %#x, %d to %#x", m, packLimit(m), l, p)
			}
		}
	}
}

// TestAddLarge: costs and limits up to 2^50 add up to MaxCount at most, and the lowest
// limit is kept (rounded down).
func TestAddLarge(t *testing.T) {
	var e entry
	var sh shard
	e.setSeq(0, 1)
	e.add(0, MaxLimit)
	e.seeLimit(0, MaxLimit)
	e.add(0, MaxLimit)
	e.seeLimit(0, 3)
	e.add(0, MaxLimit)
	e.seeLimit(0, 0) // no limit: keeps the lowest
	if e.regional[0] != 3*MaxLimit || sh.cell(&e, 0).minLimit != 3 {
		t.Fatalf("regional %d minLimit %d", e.regional[0], sh.cell(&e, 0).minLimit)
	}
	for range 1 << 13 {
		e.add(0, MaxLimit)
		e.seeLimit(0, MaxLimit)
	}
	if e.regional[0] != MaxCount || sh.cell(&e, 0).minLimit != 3 {
		t.Fatalf("regional %d, want MaxCount; minLimit %d, want 3", e.regional[0], sh.cell(&e, 0).minLimit)
	}
	e.add(1, 1)
	e.seeLimit(1, 5<<40+3)
	if c := sh.cell(&e, 1); c.minLimit > 5<<40+3 || c.minLimit < 5<<40 || c.regional != 1 {
		t.Fatalf("cell 1: %+v", c)
	}
}
