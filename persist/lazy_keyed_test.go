package persist

import (
	"slices"
	"strings"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// TestKeepCell: keepCell leaves a record it keeps (or cannot read) where it is, for
// decodeCell, and steps over one it does not keep, foreign components included.
func TestKeepCell(t *testing.T) {
	recs := []engine.CellRecord{
		{Key: "a", Seq: 7, Regional: 3},
		{Key: "bb", Seq: -2, Regional: 1 << 40, Imported: 9, Foreign: []engine.RegionCount{{Region: "eu", Count: 4}, {Region: "us-east", Count: 1 << 30}}},
		{Key: "c", Seq: 1 << 33},
	}
	var buf []byte
	var ends []int
	for _, r := range recs {
		var err error
		if buf, err = appendCell(buf, r); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, len(buf))
	}
	str := string(buf)
	for _, tc := range []struct {
		name string
		b    []byte
		keep string
		want []int // where d is after each call (its start when kept)
	}{
		{"none kept", buf, "", ends},
		{"the foreign one kept", buf, "bb", []int{ends[0], ends[0], ends[0]}},
		{"the first kept", buf, "a", []int{0, 0}},
		{"too many foreign components", slices.Concat(buf[:ends[0]], []byte{2, 'b', 'b', 1, 1, 1, 100}), "", []int{ends[0], ends[0]}},
		{"cut short", buf[:ends[1]-1], "", []int{ends[0], ends[0]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := str
			if len(tc.b) != len(buf) || string(tc.b) != str {
				s = string(tc.b)
			}
			d := decoder{b: tc.b}
			for i, want := range tc.want {
				keepCell(&d, s, func(k string) bool { return k == tc.keep })
				if d.p != want || d.err != nil {
					t.Fatalf("call %d: at %d (err %v), want %d", i, d.p, d.err, want)
				}
			}
		})
	}
}

// TestPartsKeyedAllocatesNothing: a keyed read of a part (what a request on a part not
// loaded yet waits for) neither opens a bbolt transaction nor decodes the records it does
// not keep: it allocates nothing, and reads the kept record whole.
func TestPartsKeyedAllocatesNothing(t *testing.T) {
	e, partOf := lazyEngine(t, 3000)
	s, _ := lazyStore(t)
	if err := s.Write(Source{Tuples: e.Tuples, ShardSeed: e.ShardSeed()}); err != nil {
		t.Fatal(err)
	}
	o, err := s.OpenOrSetAside()
	if err != nil || !o.Lazy() {
		t.Fatalf("OpenOrSetAside: %v, lazy %v", err, o.Lazy())
	}
	defer o.Close()
	var key string
	for r := range e.Records {
		key = strings.Clone(r.Key)
		break
	}
	p := partOf[key]
	recs := make([]engine.CellRecord, 0, 8)
	var got []string
	only := func(k string) bool { return k == key }
	use := func(rs []engine.CellRecord) {
		for _, r := range rs {
			got = append(got, strings.Clone(r.Key))
		}
	}
	if recs, err = o.Parts(p, p+1, recs, only, engine.KeyHash(o.Seed, key), use); err != nil || len(got) != 1 || got[0] != key {
		t.Fatalf("keyed read of part %d: %q, %v; want %q", p, got, err, key)
	}
	none := func(string) bool { return false }
	nop := func([]engine.CellRecord) {}
	if n := testing.AllocsPerRun(100, func() { recs, _ = o.Parts(p, p+1, recs, none, 0, nop) }); n != 0 {
		t.Fatalf("a keyed read of a part allocates %v times", n)
	}
	h := engine.KeyHash(o.Seed, key)
	if n := testing.AllocsPerRun(100, func() { recs, _ = o.Parts(p, p+1, recs, only, h, nop) }); n != 0 {
		t.Fatalf("a keyed read of a part by its key tags allocates %v times", n)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Parts(p, p+1, recs, only, h, nop); err == nil {
		t.Fatal("Parts after Close: no error")
	}
}
