package persist

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// TestPartsRoundTrip: part tables of no records, a few parts, and every part, decode to
// the positions they were made from.
func TestPartsRoundTrip(t *testing.T) {
	fill := func(lens []uint64, nonEmpty func(i int) bool) []uint64 {
		parts := make([]uint64, engine.Parts+1)
		c, off := uint64(0), uint64(0)
		for i := range engine.Parts {
			parts[i] = c<<32 | off
			if nonEmpty(i) {
				if off += 10; off == lens[c] {
					c, off = c+1, 0
				}
			}
		}
		parts[engine.Parts] = c<<32 | off
		return parts
	}
	for _, tc := range []struct {
		name     string
		lens     []uint64
		nonEmpty func(int) bool
	}{
		{"empty", nil, func(int) bool { return false }},
		{"three parts", []uint64{30}, func(i int) bool { return i == 0 || i == 7 || i == engine.Parts-1 }},
		{"every part", slices.Repeat([]uint64{10 * 1024}, engine.Parts/1024), func(int) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := fill(tc.lens, tc.nonEmpty)
			got, err := decodeParts(appendParts(nil, want), tc.lens)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("round trip: %v (equal %v)", err, slices.Equal(got, want))
			}
		})
	}
}

// TestSmallSnapshotSmall: a snapshot of a few tuples stays a few pages (a table of every
// part's position was 2 MiB, more than a small disk holds).
func TestSmallSnapshotSmall(t *testing.T) {
	e, _ := lazyEngine(t, 3)
	s, dir := lazyStore(t)
	if err := s.Write(Source{Tuples: e.Tuples, ShardSeed: e.ShardSeed()}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, fileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 64<<10 {
		t.Fatalf("snapshot of 3 tuples: %d bytes", fi.Size())
	}
	if o, err := s.OpenOrSetAside(); err != nil || !o.Lazy() {
		t.Fatalf("OpenOrSetAside: %v, lazy %v", err, o.Lazy())
	} else {
		_ = o.Close()
	}
}
