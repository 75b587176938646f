package persist

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/ratchet/ratchet/engine"
)

// refFrames is the logs of dir (of gens from base on) as readLogs read them before it
// walked the records without decoding them: each frame checked by decoding every record
// (decodeTuple), a log's frames up to its first bad one. It returns each valid frame's
// records (printed), by part in log order, the body of the last valid frame and the
// number of valid frames, and the parts of the records with grants.
func refFrames(t *testing.T, dir string, base uint64) (map[int][]string, []byte, int, []int32) {
	t.Helper()
	gens, err := logGens(dir)
	if err != nil {
		t.Fatal(err)
	}
	byPart := map[int][]string{}
	var last []byte
	var leased []int32
	frames := 0
	for _, g := range gens {
		if g < base {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, logName(g)))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) < logHeaderLen || string(data[:len(logMagic)]) != logMagic || binary.BigEndian.Uint64(data[len(logMagic):logHeaderLen]) != g {
			continue
		}
		for p := logHeaderLen; p+frameHeaderLen <= len(data); {
			n := int(binary.BigEndian.Uint32(data[p:]))
			if n > len(data)-p-frameHeaderLen {
				break
			}
			body := data[p+frameHeaderLen : p+frameHeaderLen+n]
			if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(data[p+4:]) {
				break
			}
			recs, ok := refFrame(body)
			if !ok {
				break
			}
			for _, r := range recs {
				byPart[r.Part] = append(byPart[r.Part], fmt.Sprint(r))
				if len(r.Leases) > 0 {
					leased = append(leased, int32(r.Part))
				}
			}
			last, frames = body, frames+1
			p += frameHeaderLen + n
		}
	}
	return byPart, last, frames, leased
}

// refFrame decodes a frame's body whole, as the load did before checkFrame.
func refFrame(body []byte) ([]engine.TupleRecord, bool) {
	r := frameReader{d: decoder{b: body}}
	r.d.varint()
	if _, _, err := readSection(&r, runsBucket, decodeRun); err != nil {
		return nil, false
	}
	n, sec := r.section()
	str := unsafe.String(unsafe.SliceData(sec), len(sec))
	var recs []engine.TupleRecord
	for d := (decoder{b: sec}); d.p < len(sec); {
		tr, err := decodeTuple(&d, str, nil)
		if err != nil || d.err != nil {
			return nil, false
		}
		recs = append(recs, tr)
	}
	if uint64(len(recs)) != n || r.d.err != nil {
		return nil, false
	}
	if _, _, err := readSection(&r, kvBucket, decodeKV); err != nil {
		return nil, false
	}
	if _, _, err := readSection(&r, resetsBucket, decodeReset); err != nil {
		return nil, false
	}
	if _, _, err := readSection(&r, overridesBucket, decodeOverride); err != nil {
		return nil, false
	}
	r.d.uvarint()
	r.d.span("horizon region")
	r.d.uvarint()
	return recs, r.d.err == nil && r.d.p == len(body)
}

// TestReadLogsIndex: over random logs written by the save path (several processes, so
// several logs, tuples with grants among them), damaged at random (cut, a byte changed,
// garbage appended), readLogs finds the frames the whole decode finds valid, and each
// part's records in log order, the last frame's body, and the parts of the records with
// grants.
func TestReadLogsIndex(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	written, valid, withGrants := 0, 0, 0
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		dir := t.TempDir()
		e := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true, Snapshots: true})
		n := 50 + rng.IntN(400)
		step := func(k int) {
			for range k {
				i := rng.IntN(n)
				key := engine.AppendKey(nil, logTuple(i))
				if rng.IntN(8) == 0 { // an edge's lease, and its replayed cost
					want := uint64(rng.IntN(3))
					e.ServeRead("e1/a", []engine.ReadItem{{Key: key, Seq: logT0 / 3_600_000, Limit: 1 << 40, Want: want}})
					continue
				}
				if _, err := e.Limit(logTuple(i), 1<<40, 1+uint64(rng.IntN(300))); err != nil {
					t.Fatal(err)
				}
			}
		}
		step(n)
		for proc := range 1 + rng.IntN(3) { // each process appends to a log of its own
			s, err := Open(dir, quiet)
			if err != nil {
				t.Fatal(err)
			}
			if proc > 0 {
				if _, err := s.OpenOrSetAside(); err != nil {
					t.Fatal(err)
				}
			}
			for range 1 + rng.IntN(5) {
				if err := s.Write(incremental(e)); err != nil {
					t.Fatal(err)
				}
				written++
				step(1 + rng.IntN(n))
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		gens, err := logGens(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gens { // damage
			path := filepath.Join(dir, logName(g))
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, damage(rng, data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		o, err := openLazy(filepath.Join(dir, fileName), fileSize(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		sortShareMin = int(seed%2) * 1 << 16 // shared out between the threads, or not
		readLogsOnly = seed%4 < 2            // read, or mapped
		ls, err := readLogs(dir, o.gen, &o.Seed, quiet)
		sortShareMin, readLogsOnly = 1<<16, false
		_ = o.Close()
		if err != nil {
			t.Fatal(err)
		}
		want, wantLast, wantFrames, leased := refFrames(t, dir, o.gen)
		got := map[int][]string{}
		all := slices.Repeat([]bool{true}, engine.Parts)
		ls.each(all, func(tr engine.TupleRecord) { got[tr.Part] = append(got[tr.Part], fmt.Sprint(tr)) })
		if !maps.EqualFunc(got, want, slices.Equal) || ls.frames != wantFrames || !bytes.Equal(ls.last, wantLast) {
			t.Fatalf("seed %d: %d frames, %d parts with records, last frame %d bytes; want %d, %d, %d",
				seed, ls.frames, len(got), len(ls.last), wantFrames, len(want), len(wantLast))
		}
		if slices.Sort(leased); !slices.Equal(slices.Sorted(slices.Values(ls.leased)), leased) {
			t.Fatalf("seed %d: parts of the records with grants %v, want %v", seed, ls.leased, leased)
		}
		valid += wantFrames
		withGrants += len(leased)
		ls.release()
	}
	if written -= 40; valid == written || valid < written/2 || withGrants == 0 { // the first save of each seed is the base
		t.Fatalf("%d frames written, %d valid, %d records with grants: the test does not test damage, or grants", written, valid, withGrants)
	}
}

// damage cuts b, changes a byte of it (a high bit set, say) or appends bytes to it, or
// leaves it, at random.
func damage(rng *rand.Rand, b []byte) []byte {
	switch rng.IntN(6) {
	case 0:
		return b[:rng.IntN(len(b)+1)]
	case 1:
		b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
	case 2:
		b[rng.IntN(len(b))] |= 0x80
	case 3:
		return append(b, bytes.Repeat([]byte{byte(rng.IntN(256))}, rng.IntN(20))...)
	}
	return b
}

// fileSize returns the size of dir's base.
func fileSize(t *testing.T, dir string) int64 {
	t.Helper()
	info, err := os.Stat(filepath.Join(dir, fileName))
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// TestSkipTuple: skipTuple accepts exactly the records decodeTuple decodes, and ends
// where decodeTuple ends, with its part and whether it has grants: over records written
// by appendTuple, cut and changed at random.
func TestSkipTuple(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	accepted, rejected := 0, 0
	for i := range 200_000 {
		tr := engine.TupleRecord{Part: rng.IntN(engine.Parts), Key: strings.Repeat("k", rng.IntN(40))}
		for range rng.IntN(4) {
			c := engine.CellRecord{Seq: rng.Int64N(1 << 40), Regional: rng.Uint64N(1 << uint(rng.IntN(40))), Imported: rng.Uint64N(300)}
			if rng.IntN(4) == 0 { // a varint of ten bytes
				c.Seq = math.MinInt64 + rng.Int64N(1<<40)
			}
			for range rng.IntN(3) {
				c.Foreign = append(c.Foreign, engine.RegionCount{Region: strings.Repeat("r", rng.IntN(5)), Count: rng.Uint64N(1000)})
			}
			tr.Cells = append(tr.Cells, c)
		}
		for range rng.IntN(3) {
			tr.Leases = append(tr.Leases, engine.LeaseRecord{Run: strings.Repeat("e", rng.IntN(10)), G: rng.Uint64N(1 << 20), Spent: 1, Seq: 2, UntilMs: -rng.Int64N(1 << 40)})
		}
		b, err := appendTuple(nil, tr)
		if err != nil {
			t.Fatal(err)
		}
		b = append(damage(rng, b), bytes.Repeat([]byte{0x80}, rng.IntN(3))...) // a next record's bytes
		str := unsafe.String(unsafe.SliceData(b), len(b))
		d := decoder{b: b}
		want, werr := decodeTuple(&d, str, nil)
		end, part, grants, key, gerr := skipTuple(b, 0)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("record %d %x: skipTuple's error %v, decodeTuple's %v", i, b, gerr, werr)
		}
		if werr != nil {
			rejected++
			continue
		}
		accepted++
		if end != d.p || int(part) != want.Part || grants != (len(want.Leases) > 0) || string(key) != want.Key {
			t.Fatalf("record %d %x: skipTuple ends at %d, part %d, grants %v, key %q; decodeTuple at %d, %d, %d grants, %q", i, b, end, part, grants, key, d.p, want.Part, len(want.Leases), want.Key)
		}
	}
	// Every length of a cell's seq varint, each last byte that matters, cut or not.
	for cont := range 12 {
		for _, last := range []byte{0, 1, 2, 0x7f, 0x80} {
			for _, cut := range []bool{false, true} {
				b := []byte{0x81, 0x01, 2, 'k', 'k', 1, 0} // part 129, key "kk", a cell, its empty key
				b = append(append(b, bytes.Repeat([]byte{0xff}, cont)...), last)
				if !cut {
					b = append(b, 0, 0, 0, 0) // regional, imported, foreign, grants
				}
				d := decoder{b: b}
				_, werr := decodeTuple(&d, unsafe.String(unsafe.SliceData(b), len(b)), nil)
				end, _, _, _, gerr := skipTuple(b, 0)
				if (werr == nil) != (gerr == nil) || werr == nil && end != d.p {
					t.Fatalf("seq of %d+1 bytes, the last %#x, cut %v: skipTuple ends at %d, %v; decodeTuple at %d, %v", cont, last, cut, end, gerr, d.p, werr)
				}
				if werr == nil {
					accepted++
				}
			}
		}
	}
	if accepted < 1000 || rejected < 1000 {
		t.Fatalf("%d records accepted and %d rejected: the test does not test both", accepted, rejected)
	}
}

// TestLogLeasesLazy: TestLogLeasesReplaced for a restart that reads the cells part by part
// (OpenOrSetAside): the grants are looked for in the parts of the tuples that have some
// only (the base's seed gives the part of a base lease's tuple), and found there.
func TestLogLeasesLazy(t *testing.T) {
	const seed = 0x5eed
	key := string(engine.AppendKey(nil, logTuple(1)))
	other := string(engine.AppendKey(nil, logTuple(2)))
	cell := []engine.CellRecord{{Seq: logT0 / 3_600_000, Regional: 3}}
	grant := func(g uint64) []engine.LeaseRecord {
		return []engine.LeaseRecord{{Run: "e1/a", G: g, Spent: 1, Seq: 5, UntilMs: logT0 + 60_000}}
	}
	rec := func(k string, cells []engine.CellRecord, leases []engine.LeaseRecord) engine.TupleRecord {
		return engine.TupleRecord{Part: engine.PartOf(seed, k), Key: k, Cells: cells, Leases: leases}
	}
	base := []engine.TupleRecord{rec(key, cell, grant(10)), rec(other, cell, grant(4))}
	var fillers []engine.TupleRecord // tuples without grants, in other parts
	for i := range 200 {
		fillers = append(fillers, rec(string(engine.AppendKey(nil, logTuple(100+i))), cell, nil))
	}
	base = append(base, fillers...)
	slices.SortFunc(base, func(a, b engine.TupleRecord) int { return a.Part - b.Part }) // as Tuples yields them
	var dirty []engine.TupleRecord
	src := Source{Tuples: slices.Values(base), ShardSeed: seed,
		Dirty: func(yield func(engine.TupleRecord) bool) { slices.Values(dirty)(yield) }}
	dir := t.TempDir()
	s := quietStore(t, dir)
	for i, step := range []struct {
		dirty []engine.TupleRecord
		want  map[string]uint64
	}{
		{nil, map[string]uint64{key: 10, other: 4}}, // the base
		{[]engine.TupleRecord{rec(key, cell, nil), fillers[5]}, map[string]uint64{other: 4}},
		{[]engine.TupleRecord{fillers[7], rec(key, cell, grant(20))}, map[string]uint64{key: 20, other: 4}},
		{[]engine.TupleRecord{rec(other, nil, nil)}, map[string]uint64{key: 20}},
		{[]engine.TupleRecord{rec(fillers[9].Key, cell, grant(7))}, map[string]uint64{key: 20, fillers[9].Key: 7}}, // grants of the log's only
		{[]engine.TupleRecord{fillers[3]}, map[string]uint64{key: 20, fillers[9].Key: 7}},
		{[]engine.TupleRecord{fillers[9]}, map[string]uint64{key: 20}},
	} {
		dirty = step.dirty
		if err := s.Write(src); err != nil {
			t.Fatal(err)
		}
		o, err := quietStore(t, copyDir(t, dir)).OpenOrSetAside()
		if err != nil || !o.Lazy() {
			t.Fatalf("save %d: lazy %v, %v", i, o.Lazy(), err)
		}
		got := map[string]uint64{}
		for _, l := range o.Leases {
			got[l.Key] += l.G
		}
		_ = o.Close()
		if !maps.Equal(got, step.want) {
			t.Fatalf("save %d: grants %v, want %v", i, got, step.want)
		}
	}
}

// TestSortByPart: the records ordered by part, in their order within a part, on one
// thread or shared out, with few parts or many.
func TestSortByPart(t *testing.T) {
	defer func(n int) { sortShareMin = n }(sortShareMin)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 40 {
		n := rng.IntN(100_000)
		spread := []int{3, 1000, engine.Parts}[i%3]
		order, parts, tags := make([]int, n), make([]int32, n), make([]uint32, n)
		for j := range n {
			order[j], parts[j] = rng.Int(), int32(rng.IntN(spread))
			tags[j] = uint32(order[j]) // each beside its record
		}
		idx := make([]int, n)
		for j := range idx {
			idx[j] = j
		}
		slices.SortStableFunc(idx, func(a, b int) int { return int(parts[a] - parts[b]) })
		want := make([]int, n)
		for j, k := range idx {
			want[j] = order[k]
		}
		sortShareMin = []int{0, 1 << 30}[i%2]
		var ls logSet
		ls.sortByPart(order, parts, tags)
		if !slices.Equal(ls.offs, want) {
			t.Fatalf("round %d (%d records in %d parts, shared out: %v): not in part order", i, n, spread, sortShareMin == 0)
		}
		for j, at := range ls.offs {
			if ls.tags[j] != uint32(at) {
				t.Fatalf("round %d: record %d's tag %x, want %x", i, j, ls.tags[j], uint32(at))
			}
		}
		counts := make([]int, engine.Parts)
		for _, p := range parts {
			counts[p]++
		}
		for p := range engine.Parts {
			if ls.partAt[p+1]-ls.partAt[p] != counts[p] {
				t.Fatalf("round %d: %d records in part %d, want %d", i, ls.partAt[p+1]-ls.partAt[p], p, counts[p])
			}
		}
	}
}

// TestLogMappedCut: a mapped log cut after it was checked (a frame that failed to be
// written, in this process: the writer cuts its log back) is an error where it is read
// (apply, Opened.Parts), not a crash.
func TestLogMappedCut(t *testing.T) {
	e := logEngine(t, 2000)
	dir := t.TempDir()
	s := quietStore(t, dir)
	for i := range 3 {
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
		count(t, e, 0, 2000, uint64(i+1))
	}
	o, err := openLazy(filepath.Join(dir, fileName), fileSize(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	ls, err := readLogs(dir, o.gen, &o.Seed, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	o.log = ls // released by o.Close
	if !slices.Contains(ls.mapped, true) {
		t.Skip("the logs are read, not mapped, here")
	}
	if len(ls.offs) < 2000 {
		t.Fatalf("%d records: want every tuple", len(ls.offs))
	}
	if err := os.Truncate(filepath.Join(dir, logFiles(t, dir)[0]), int64(logHeaderLen)); err != nil {
		t.Fatal(err)
	}
	snap := o.Snapshot
	if err := ls.apply(&snap, true, 0); err == nil || !strings.Contains(err.Error(), "fault") {
		t.Fatalf("apply of a cut log: %v, want a fault", err)
	}
	if _, err := o.Parts(0, engine.Parts, nil, nil, 0, func([]engine.CellRecord) {}); err == nil {
		t.Fatal("Parts of a cut log: no error")
	}
}

// TestLogIgnoredWarning: the warning for a frame ignored says where the frame begins in
// its log and how many bytes are ignored from there, for a frame cut short and for one
// damaged.
func TestLogIgnoredWarning(t *testing.T) {
	for _, c := range []struct {
		name, reason string
		damage       func(data []byte, at int) []byte
	}{
		{"cut", "torn frame", func(d []byte, _ int) []byte { return d[:len(d)-3] }},
		{"damaged", "checksum", func(d []byte, at int) []byte { d[at+frameHeaderLen+1] ^= 0x40; return d }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := logEngine(t, 50)
			dir := t.TempDir()
			s := quietStore(t, dir)
			var at int
			for i := range 3 {
				at = logHeaderLen
				if s.logw != nil {
					at = int(s.logw.size) // where the next frame begins
				}
				if err := s.Write(incremental(e)); err != nil {
					t.Fatal(err)
				}
				count(t, e, 0, 10*(i+1), 1)
			}
			path := filepath.Join(dir, logFiles(t, dir)[0])
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data = c.damage(data, at)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			ls, err := readLogs(dir, 0, nil, slog.New(slog.NewTextHandler(&out, nil)))
			if err != nil {
				t.Fatal(err)
			}
			ls.release()
			want := fmt.Sprintf("offset=%d bytes_ignored=%d reason=", at, len(data)-at)
			if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), c.reason) || ls.frames != 1 {
				t.Fatalf("%d frames, logged %q; want 1 frame and %q", ls.frames, out.String(), want)
			}
		})
	}
}

// TestLogLeasesMisfiled: a CRC-valid record filed under another part than its key's (a
// damaged writer), before its key's part or after it, leaves a lazy restart's grants as a
// load that decodes every record in log order finds them: the tuple's last record in log
// order has them all, wherever it is filed.
func TestLogLeasesMisfiled(t *testing.T) {
	const seed = 0x5eed
	key := string(engine.AppendKey(nil, logTuple(1)))
	p := engine.PartOf(seed, key)
	cell := []engine.CellRecord{{Seq: logT0 / 3_600_000, Regional: 3}}
	rec := func(part int, g uint64) engine.TupleRecord {
		r := engine.TupleRecord{Part: part, Key: key, Cells: cell}
		if g > 0 {
			r.Leases = []engine.LeaseRecord{{Run: "e1/a", G: g, Spent: 1, Seq: 5, UntilMs: logT0 + 60_000}}
		}
		return r
	}
	for _, q := range []int{0, engine.Parts - 1} { // the wrong part: before p, after it
		if q == p {
			t.Fatalf("the key's part is %d: the test wants a part before it and one after", p)
		}
		for _, c := range []struct {
			name   string
			base   uint64 // the base's grant, or none
			frames []engine.TupleRecord
			want   uint64 // the grant loaded, or none
		}{
			{"filed in its part", 10, []engine.TupleRecord{rec(p, 20), rec(p, 0)}, 0},
			{"grants misfiled, then in its part", 10, []engine.TupleRecord{rec(q, 20), rec(p, 30)}, 30},
			{"in its part, then grants misfiled", 10, []engine.TupleRecord{rec(p, 20), rec(q, 30)}, 30},
			{"grants dropped by a misfiled record", 10, []engine.TupleRecord{rec(p, 20), rec(q, 0)}, 0},
			{"misfiled grants dropped in its part", 0, []engine.TupleRecord{rec(q, 20), rec(p, 0)}, 0},
		} {
			t.Run(fmt.Sprintf("%s/part %d of %d", c.name, q, p), func(t *testing.T) {
				var dirty []engine.TupleRecord
				src := Source{Tuples: slices.Values([]engine.TupleRecord{rec(p, c.base)}), ShardSeed: seed,
					Dirty: func(yield func(engine.TupleRecord) bool) { slices.Values(dirty)(yield) }}
				dir := t.TempDir()
				s := quietStore(t, dir)
				if err := s.Write(src); err != nil { // the base
					t.Fatal(err)
				}
				for _, r := range c.frames {
					dirty = []engine.TupleRecord{r}
					if err := s.Write(src); err != nil {
						t.Fatal(err)
					}
				}
				o, err := quietStore(t, copyDir(t, dir)).OpenOrSetAside()
				if err != nil || !o.Lazy() {
					t.Fatalf("lazy %v, %v", o.Lazy(), err)
				}
				defer o.Close()
				var got []uint64
				for _, l := range o.Leases {
					got = append(got, l.G)
				}
				if (c.want == 0 && len(got) > 0) || (c.want > 0 && !slices.Equal(got, []uint64{c.want})) {
					t.Fatalf("grants %v, want %v (0: none)", got, c.want)
				}
			})
		}
	}
}

// TestReadLogsFault: a mapped log cut while readLogs reads it (an I/O error paging it in
// is alike: a fault) is read again, not mapped, and found as a read finds it (its frames up
// to the cut), not a crash (SIGBUS) nor a frame ignored for the fault; at each stage where
// readLogs reads the logs' bytes. In a child process: a fault not recovered is fatal.
func TestReadLogsFault(t *testing.T) {
	if env := os.Getenv("RATCHET_TEST_READLOGS_FAULT"); env != "" {
		dir, stage, _ := strings.Cut(env, ",")
		readLogsFaultChild(t, dir, stage)
		return
	}
	dir, _ := mappedLogs(t)
	for _, stage := range []string{"read", "walked", "checked"} {
		t.Run(stage, func(t *testing.T) {
			child := copyDir(t, dir)
			cmd := exec.Command(os.Args[0], "-test.run", "^TestReadLogsFault$", "-test.v")
			cmd.Env = append(os.Environ(), "RATCHET_TEST_READLOGS_FAULT="+child+","+stage)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
}

// mappedLogs returns a directory with a base and a log of three frames of 3000 records,
// and the log's path; it skips the test where the logs are read, not mapped.
func mappedLogs(t *testing.T) (dir, path string) {
	t.Helper()
	e := logEngine(t, 3000)
	dir = t.TempDir()
	s := quietStore(t, dir)
	for i := range 4 { // the base, then the frames
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
		count(t, e, 0, 3000, uint64(i+1))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, logFiles(t, dir)[0])
	data, mapped, err := readLog(path, true)
	if err != nil || !mapped {
		t.Skipf("the logs are read, not mapped, here (%v)", err)
	}
	_ = unmapLog(data)
	return dir, path
}

// cutAtStage makes readLogs cut the file at path to size at its stage at, once (the test's
// end restores readLogsHook); it returns whether it was cut.
func cutAtStage(t *testing.T, path string, size int64, at int) *bool {
	t.Cleanup(func() { readLogsHook = func(int) {} })
	cut := false
	readLogsHook = func(stage int) {
		if stage == at && !cut {
			cut = true
			if err := os.Truncate(path, size); err != nil {
				t.Error(err)
			}
		}
	}
	return &cut
}

// readLogsFaultChild is TestReadLogsFault's child: readLogs with the log of dir cut to
// half its size at stage.
func readLogsFaultChild(t *testing.T, dir, stage string) {
	path := filepath.Join(dir, logFiles(t, dir)[0])
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := cutAtStage(t, path, info.Size()/2, map[string]int{"read": readLogsRead, "walked": readLogsWalked, "checked": readLogsChecked}[stage])
	var out bytes.Buffer
	ls, err := readLogs(dir, 0, nil, slog.New(slog.NewTextHandler(&out, nil)))
	readLogsHook = func(int) {}
	if err != nil || !*cut {
		t.Fatalf("readLogs: %v (cut: %v)", err, *cut)
	}
	defer ls.release()
	readLogsOnly = true
	want, err := readLogs(dir, 0, nil, slog.New(slog.DiscardHandler))
	readLogsOnly = false
	if err != nil {
		t.Fatal(err)
	}
	defer want.release()
	if ls.frames != want.frames || ls.frames == 0 || ls.frames == 3 || !slices.Equal(ls.offs, want.offs) || !bytes.Equal(ls.last, want.last) || slices.Contains(ls.mapped, true) {
		t.Fatalf("%d frames, %d records, mapped %v; want %d frames, %d records, read", ls.frames, len(ls.offs), ls.mapped, want.frames, len(want.offs))
	}
	if logged := out.String(); !strings.Contains(logged, "read again, not mapped") || strings.Count(logged, "frame ignored") != 1 || !strings.Contains(logged, "torn frame") {
		t.Fatalf("logged %q: want the logs read again, then the torn frame ignored once", logged)
	}
}

// TestFaultErrorRepanics: a recover over a mapped log's bytes turns only a fault into an
// error; any other panic (a bug: an index out of range, say) goes on.
func TestFaultErrorRepanics(t *testing.T) {
	var b []byte
	i := 3
	for _, c := range []struct {
		name  string
		panic func()
	}{
		{"index out of range", func() { _ = b[i] }},
		{"an error", func() { panic(errors.New("a bug")) }},
		{"a string", func() { panic("a bug") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			again := func() (r any) {
				defer func() { r = recover() }()
				func() {
					defer func() {
						if r := recover(); r != nil {
							err = faultError(r)
						}
					}()
					c.panic()
				}()
				return nil
			}()
			if again == nil || err != nil {
				t.Fatalf("panicked again with %v, error %v; want the panic to go on", again, err)
			}
		})
	}
}

// TestApplyLogsFault: a mapped log cut once readLogs has read it, before it is applied
// (an I/O error paging it in is alike: a fault), is read again, not mapped, and the load
// holds what a load of the cut log holds, not an error (a base set aside).
func TestApplyLogsFault(t *testing.T) {
	dir, path := mappedLogs(t)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	cutDir := copyDir(t, dir)
	if err := os.Truncate(filepath.Join(cutDir, logFiles(t, cutDir)[0]), info.Size()/2); err != nil {
		t.Fatal(err)
	}
	want := loadedCounts(t, quietStore(t, cutDir))
	cut := cutAtStage(t, path, info.Size()/2, readLogsDone)
	snap, err := quietStore(t, dir).LoadAll()
	if err != nil || !*cut {
		t.Fatalf("load: %v (cut: %v)", err, *cut)
	}
	if got := cellCounts(slices.Values(snap.Cells)); !maps.Equal(got, want) || len(want) != 3000 {
		t.Fatalf("%d cells loaded, want the %d of the cut log's load, as they are", len(got), len(want))
	}
}
