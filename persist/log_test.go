package persist

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
)

const logT0 = 1_704_067_200_000

// logTuple is tuple i of the delta log's tests.
func logTuple(i int) engine.Tuple {
	return engine.Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "k%d", i), WindowMs: 3_600_000}
}

// logEngine returns an engine that marks its changes (Config.Snapshots), tuples 0 to n-1
// counted once each.
func logEngine(t *testing.T, n int) *engine.Engine {
	t.Helper()
	e := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true, Snapshots: true})
	count(t, e, 0, n, 1)
	return e
}

// count adds cost to tuples from to to-1.
func count(t *testing.T, e *engine.Engine, from, to int, cost uint64) {
	t.Helper()
	for i := from; i < to; i++ {
		if _, err := e.Limit(logTuple(i), 1<<40, cost); err != nil {
			t.Fatal(err)
		}
	}
}

// incremental is an origin's Source (cmd/ratchet's snapshotSource).
func incremental(e *engine.Engine) Source {
	return Source{Tuples: e.Tuples, Runs: e.Runs, RunMarks: e.RunMarks, Dirty: e.Dirty, ShardSeed: e.ShardSeed(),
		Resets: e.Resets, Changes: e.ChangeVersion, KV: e.KV().Records, Saved: e.RunsSaved}
}

// cellCounts returns the regional count of every cell of recs, by key and sequence.
func cellCounts(recs func(func(engine.CellRecord) bool)) map[string]uint64 {
	out := map[string]uint64{}
	for r := range recs {
		out[fmt.Sprintf("%s/%d", r.Key, r.Seq)] = max(out[fmt.Sprintf("%s/%d", r.Key, r.Seq)], r.Regional)
	}
	return out
}

// loadedCounts is cellCounts of what s loads.
func loadedCounts(t *testing.T, s *Store) map[string]uint64 {
	t.Helper()
	snap, err := s.LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	return cellCounts(slices.Values(snap.Cells))
}

func quietStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// logFiles returns the names of the delta logs in dir.
func logFiles(t *testing.T, dir string) []string {
	t.Helper()
	gens, err := logGens(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range gens {
		out = append(out, logName(g))
	}
	return out
}

// TestLogIncrementalSaves: with Dirty, the first save writes the whole file and the next
// ones append only the tuples changed since (new ones included) to the log; a load holds
// every count.
func TestLogIncrementalSaves(t *testing.T) {
	e := logEngine(t, 1000)
	dir := t.TempDir()
	s := quietStore(t, dir)
	if err := s.Write(incremental(e)); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.LastCells != 1000 || !s.lastFull.Load() {
		t.Fatalf("first save: %d cells, whole %v; want 1000, whole", st.LastCells, s.lastFull.Load())
	}
	for round, c := range []struct{ from, to int }{{10, 20}, {995, 1005}, {0, 3}} {
		count(t, e, c.from, c.to, 2)
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.LastCells != uint64(c.to-c.from) || s.lastFull.Load() {
			t.Fatalf("save %d: %d cells, whole %v; want %d in a frame", round, st.LastCells, s.lastFull.Load(), c.to-c.from)
		}
		if got, want := loadedCounts(t, s), cellCounts(e.Records); !maps.Equal(got, want) {
			t.Fatalf("save %d: loaded %d cells, want %d (equal: %v)", round, len(got), len(want), maps.Equal(got, want))
		}
	}
	if logs := logFiles(t, dir); len(logs) != 1 {
		t.Fatalf("logs %v, want one", logs)
	}
}

// TestLogTornFrame: a frame cut short (a crash while it was written) or damaged is
// ignored, with what follows it in its log; the frames before it load.
func TestLogTornFrame(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(data []byte, frames []int) []byte // frames: where each frame begins
		loads  int                                    // the state after this many frames
	}{
		{"last frame cut", func(d []byte, _ []int) []byte { return d[:len(d)-3] }, 1},
		{"last frame's header cut", func(d []byte, f []int) []byte { return d[:f[1]+5] }, 1},
		{"garbage after the frames", func(d []byte, _ []int) []byte { return append(d, 0, 0, 0, 9, 1, 2) }, 2},
		{"first frame damaged", func(d []byte, f []int) []byte { d[f[0]+frameHeaderLen+2] ^= 0x10; return d }, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := logEngine(t, 100)
			dir := t.TempDir()
			s := quietStore(t, dir)
			if err := s.Write(incremental(e)); err != nil {
				t.Fatal(err)
			}
			states := []map[string]uint64{cellCounts(e.Records)}
			var frames []int
			for i := range 2 {
				count(t, e, 10*i, 10*i+15, 3)
				at := logHeaderLen
				if s.logw != nil {
					at = int(s.logw.size)
				}
				frames = append(frames, at)
				if err := s.Write(incremental(e)); err != nil {
					t.Fatal(err)
				}
				states = append(states, cellCounts(e.Records))
			}
			path := filepath.Join(dir, logFiles(t, dir)[0])
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, c.damage(data, frames), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := loadedCounts(t, s); !maps.Equal(got, states[c.loads]) {
				t.Fatalf("loaded %v\nwant the state after %d frames: %v", got, c.loads, states[c.loads])
			}
		})
	}
}

// TestLogLazyParts: a restart from a base with a part table and its log serves the frames'
// counts: a keyed access to a tuple of a part not loaded yet loads the part with the
// frames' cells of it, and the whole load holds every count.
func TestLogLazyParts(t *testing.T) {
	e := logEngine(t, 3000)
	dir := t.TempDir()
	s := quietStore(t, dir)
	if err := s.Write(incremental(e)); err != nil {
		t.Fatal(err)
	}
	count(t, e, 100, 200, 5)   // changed
	count(t, e, 3000, 3050, 7) // new
	if err := s.Write(incremental(e)); err != nil {
		t.Fatal(err)
	}
	count(t, e, 150, 160, 1)
	if err := s.Write(incremental(e)); err != nil {
		t.Fatal(err)
	}
	want := cellCounts(e.Records)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := quietStore(t, dir)
	o, err := s2.OpenOrSetAside()
	if err != nil || !o.Lazy() {
		t.Fatalf("OpenOrSetAside: %v, lazy %v", err, o.Lazy())
	}
	e2 := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true, Snapshots: true})
	if err := e2.AdoptShardSeed(o.Seed); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var loadErr error
	var started sync.WaitGroup
	started.Add(1)
	gate := make(chan struct{})
	first := true
	done := e2.LoadLazily(func(from, to int, keep func(string) bool, keyHash uint64) {
		mu.Lock()
		if first { // the background load waits, so that the keyed access below loads its part
			first = false
			mu.Unlock()
			started.Done()
			<-gate
		} else {
			mu.Unlock()
		}
		if _, err := o.Parts(from, to, nil, keep, keyHash, func(recs []engine.CellRecord) { _, _, _ = e2.Restore(recs) }); err != nil {
			mu.Lock()
			loadErr = err
			mu.Unlock()
		}
	})
	started.Wait()
	for _, i := range []int{155, 3020} {
		st := e2.Status(logTuple(i))
		if got, w := st.CurrentRegional, want[fmt.Sprintf("%s/%d", engine.AppendKey(nil, logTuple(i)), st.Sequence)]; got != w {
			t.Errorf("tuple %d before the background load: %d, want %d", i, got, w)
		}
	}
	close(gate)
	<-done
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	if got := cellCounts(e2.Records); !maps.Equal(got, want) {
		t.Fatalf("loaded %d cells, want %d", len(got), len(want))
	}
}

// TestLogResetAfterChange: a reset after a change saved in a frame is in the next frame
// (the reset records are written whole in each), so the load takes the counts it
// cancelled off, and what is counted after the reset comes back.
func TestLogResetAfterChange(t *testing.T) {
	e := logEngine(t, 10)
	dir := t.TempDir()
	s := quietStore(t, dir)
	save := func() {
		t.Helper()
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
	}
	save()
	count(t, e, 3, 4, 7) // tuple 3: 8
	save()
	if _, err := e.Reset([]engine.Tuple{logTuple(3)}); err != nil {
		t.Fatal(err)
	}
	save()
	restored := func() uint64 {
		t.Helper()
		snap, err := s.LoadAll()
		if err != nil {
			t.Fatal(err)
		}
		e2 := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true})
		e2.RestoreResets(snap.Resets)
		if _, _, err := e2.Restore(snap.Cells); err != nil {
			t.Fatal(err)
		}
		return e2.Status(logTuple(3)).CurrentRegional
	}
	if n := restored(); n != 0 {
		t.Fatalf("tuple 3 after its reset: %d, want 0", n)
	}
	count(t, e, 3, 4, 2)
	save()
	if n := restored(); n != 2 {
		t.Fatalf("tuple 3 counted 2 after its reset: %d, want 2", n)
	}
}

// TestLogLeasesReplaced: a tuple's grants are those of its last record: a grant that
// ended is not restored from the base once a frame has the tuple without it.
func TestLogLeasesReplaced(t *testing.T) {
	key := string(engine.AppendKey(nil, logTuple(1)))
	other := string(engine.AppendKey(nil, logTuple(2)))
	cell := []engine.CellRecord{{Seq: logT0 / 3_600_000, Regional: 3}}
	grant := func(g uint64) []engine.LeaseRecord {
		return []engine.LeaseRecord{{Run: "e1/a", G: g, Spent: 1, Seq: 5, UntilMs: logT0 + 60_000}}
	}
	var dirty []engine.TupleRecord
	src := Source{
		Tuples: slices.Values([]engine.TupleRecord{{Key: key, Cells: cell, Leases: grant(10)}, {Key: other, Cells: cell, Leases: grant(4)}}),
		Dirty:  func(yield func(engine.TupleRecord) bool) { slices.Values(dirty)(yield) },
	}
	s := quietStore(t, t.TempDir())
	grants := func() map[string]uint64 {
		t.Helper()
		snap, err := s.LoadAll()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint64{}
		for _, l := range snap.Leases {
			out[strings.TrimPrefix(l.Key, "")] += l.G
		}
		return out
	}
	for i, step := range []struct {
		dirty []engine.TupleRecord
		want  map[string]uint64
	}{
		{nil, map[string]uint64{key: 10, other: 4}}, // the base
		{[]engine.TupleRecord{{Key: key, Cells: cell}}, map[string]uint64{other: 4}},
		{[]engine.TupleRecord{{Key: key, Cells: cell, Leases: grant(20)}}, map[string]uint64{key: 20, other: 4}},
		{[]engine.TupleRecord{{Key: other}}, map[string]uint64{key: 20}},
	} {
		dirty = step.dirty
		if err := s.Write(src); err != nil {
			t.Fatal(err)
		}
		if got := grants(); !maps.Equal(got, step.want) {
			t.Fatalf("save %d: grants %v, want %v", i, got, step.want)
		}
	}
}

// TestLogFailedFrame: a frame that cannot be written makes the next save write the whole
// file, so the changes the failed frame held are not lost.
func TestLogFailedFrame(t *testing.T) {
	e := logEngine(t, 50)
	dir := t.TempDir()
	s := quietStore(t, dir)
	for range 2 {
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
	}
	count(t, e, 0, 5, 9)
	_ = s.logw.f.Close() // the next append fails
	if err := s.Write(incremental(e)); err == nil {
		t.Fatal("a frame to a closed log did not fail")
	}
	count(t, e, 40, 41, 1)
	if err := s.Write(incremental(e)); err != nil {
		t.Fatal(err)
	}
	if !s.lastFull.Load() {
		t.Fatal("the save after a failed frame did not write the whole file")
	}
	if got, want := loadedCounts(t, s), cellCounts(e.Records); !maps.Equal(got, want) {
		t.Fatalf("loaded %v\nwant %v", got, want)
	}
	if logs := logFiles(t, dir); len(logs) != 0 {
		t.Fatalf("logs %v after a whole save, want none", logs)
	}
}

// copyDir copies the regular files of dir to a new directory, as a crash would leave them.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if !ent.Type().IsRegular() || ent.Name() == lockName {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, ent.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestLogCompactionCrashPoints: a compaction rewrites the base while frames go to a new
// log; a crash at each of its stages (the directory copied there) loads every count saved
// until then, frames saved during the compaction included.
func TestLogCompactionCrashPoints(t *testing.T) {
	stages := make(chan int)
	resume := make(chan struct{})
	defer func(due func(int64, int64) bool, hook func(int)) { compactDue, compactHook = due, hook }(compactDue, compactHook)
	compactDue = func(logBytes, _ int64) bool { return logBytes > 0 }
	compactHook = func(stage int) { stages <- stage; <-resume }

	e := logEngine(t, 400)
	dir := t.TempDir()
	s := quietStore(t, dir)
	save := func() map[string]uint64 {
		t.Helper()
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
		return cellCounts(e.Records)
	}
	save() // the base
	count(t, e, 0, 100, 2)
	save() // a frame; the compaction starts
	if st := <-stages; st != compactStarts {
		t.Fatalf("stage %d, want the start", st)
	}
	count(t, e, 50, 150, 3)
	type crash struct {
		name string
		dir  string
		want map[string]uint64
	}
	var crashes []crash
	want := save() // a frame to the new log, before the base is written
	crashes = append(crashes, crash{"before the new base", copyDir(t, dir), want})
	resume <- struct{}{}
	if st := <-stages; st != compactRenamed {
		t.Fatalf("stage %d, want the rename", st)
	}
	count(t, e, 300, 420, 4)
	want = save() // a frame after the base's capture
	crashes = append(crashes, crash{"base renamed, old logs still there", copyDir(t, dir), want})
	if n := len(logFiles(t, dir)); n != 2 {
		t.Fatalf("%d logs before the old one is deleted, want 2", n)
	}
	resume <- struct{}{}
	if st := <-stages; st != compactDone {
		t.Fatalf("stage %d, want the end", st)
	}
	compactDue = func(int64, int64) bool { return false }
	resume <- struct{}{}
	s.compactions.Wait()
	if n := len(logFiles(t, dir)); n != 1 {
		t.Fatalf("%d logs after the compaction, want 1", n)
	}
	count(t, e, 390, 400, 5)
	want = save()
	crashes = append(crashes, crash{"after the compaction", copyDir(t, dir), want})
	for _, c := range crashes {
		if got := loadedCounts(t, quietStore(t, c.dir)); !maps.Equal(got, c.want) {
			t.Errorf("crash %s: loaded %d cells, want %d", c.name, len(got), len(c.want))
		}
	}
}

// limitUsers counts a request of each tuple user:<i>:api (an hour's window), i from from
// to to-1, in e.
func limitUsers(t *testing.T, e *engine.Engine, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		tu := engine.Tuple{Workspace: "default", Namespace: "default", Key: fmt.Appendf(nil, "user:%012d:api", i), WindowMs: 3_600_000}
		if _, err := e.Limit(tu, 1<<40, 1); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogFrameBufferGrowsWithTheMarks: requests mark tuples while a pass reads them, so a
// frame holds more than were marked when its buffer was sized; the buffer allows for the
// growth the last frame showed (twice at first), and no frame outgrows it. (A source
// whose count of marked tuples says half of them stands for the requests.)
func TestLogFrameBufferGrowsWithTheMarks(t *testing.T) {
	e := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true, Snapshots: true})
	user := func(n int) { limitUsers(t, e, 0, n) }
	user(1000)
	s := quietStore(t, t.TempDir())
	src := incremental(e)
	src.DirtyCount = func() int64 { return e.DirtyCount() / 2 }
	if err := s.Write(src); err != nil { // the whole file
		t.Fatal(err)
	}
	for i, n := range []int{20_000, 30_000, 40_000} {
		user(n)
		if err := s.Write(src); err != nil {
			t.Fatal(err)
		}
		if s.lastFull.Load() || s.Stats().LastCells != uint64(n) {
			t.Fatalf("a save of %d changed tuples: whole %v, %d cells", n, s.lastFull.Load(), s.Stats().LastCells)
		}
		if s.frameRegrown != 0 {
			t.Fatalf("frame %d, of %d tuples (%d bytes), outgrew its buffer (%d marked when it was sized)", i, n, len(s.fbuf), n/2)
		}
		if g := s.frameGrowth; g != 200 {
			t.Fatalf("frame %d: growth measured %d%%, want 200", i, g)
		}
	}
	// The count says every mark: a frame of them measures no growth (100%, at full
	// weight: 64 tuples or more).
	src.DirtyCount = e.DirtyCount
	user(40_000)
	if err := s.Write(src); err != nil {
		t.Fatal(err)
	}
	if g := s.frameGrowth; g != 100 || s.frameRegrown != 0 {
		t.Fatalf("a frame of every mark counted: growth %d%%, want 100; outgrown %d", g, s.frameRegrown)
	}
	// A quiet frame (1 marked, 4 read: 400%) counts for 4/64 of the next guess.
	src.DirtyCount = func() int64 { return e.DirtyCount() / 4 }
	user(4)
	if err := s.Write(src); err != nil {
		t.Fatal(err)
	}
	if g, want := s.frameGrowth, int64((100*60+400*4)/64); g != want {
		t.Fatalf("after a frame of 4 tuples, 1 marked: growth %d%%, want %d", g, want)
	}
	src.DirtyCount = e.DirtyCount
	user(40_000)
	if err := s.Write(src); err != nil {
		t.Fatal(err)
	}
	if s.frameRegrown != 0 || s.frameCap > 2*s.frameLast+1<<20 {
		t.Fatalf("a frame of 40,000 after the quiet one: %d bytes in a buffer of %d, outgrown %d", s.frameLast, s.frameCap, s.frameRegrown)
	}
}

// TestLogFrameBufferSizedOnce: a frame's buffer is sized from the count of changed tuples
// (Source.DirtyCount) and the last frame (the bytes of a tuple, and of the sections written
// whole), so that encoding it does not grow it: neither the first frame (none measured
// yet), nor one four times larger than the last, nor one beside a keyspace whose section
// dwarfs the tuples'; and the buffer of a small frame beside that keyspace stays within a
// few times the frame (a tuple's bytes measured from the tuples alone), as does that of a
// frame after one of a single long key (a tuple's bytes measured from enough tuples).
func TestLogFrameBufferSizedOnce(t *testing.T) {
	e := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true, Snapshots: true})
	user := func(from, to int) { limitUsers(t, e, from, to) }
	user(0, 40_000)
	s := quietStore(t, t.TempDir())
	src := incremental(e)
	src.DirtyCount = e.DirtyCount
	if err := s.Write(src); err != nil { // the whole file
		t.Fatal(err)
	}
	frame := func(n int) {
		t.Helper()
		if err := s.Write(src); err != nil {
			t.Fatal(err)
		}
		if s.lastFull.Load() || s.Stats().LastCells != uint64(n) {
			t.Fatalf("a save of %d changed tuples: whole %v, %d cells", n, s.lastFull.Load(), s.Stats().LastCells)
		}
		if s.frameRegrown != 0 {
			t.Fatalf("a frame of %d tuples (%d bytes) outgrew its buffer", n, len(s.fbuf))
		}
	}
	for _, n := range []int{10_000, 40_000} {
		user(0, n)
		if got := e.DirtyCount(); got != int64(n) {
			t.Fatalf("DirtyCount %d, want %d", got, n)
		}
		frame(n)
	}
	// A keyspace of 2 MB, in every frame whole.
	val := strings.Repeat("v", 1000)
	for i := range 2000 {
		if err := e.KV().Do("default", [][]byte{fmt.Appendf(nil, "kv%d", i)}, func(tx *keyspace.Tx) error {
			return tx.Set(0, []byte(val), 0)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{1, 100} {
		user(0, n)
		frame(n)
		if len(s.fbuf) < 2_000_000 || cap(s.fbuf) > 2*len(s.fbuf)+1<<20 {
			t.Fatalf("a frame of %d tuples beside the keyspace: %d bytes in a buffer of %d", n, len(s.fbuf), cap(s.fbuf))
		}
	}
	// One tuple of a long key does not size the next frame's tuples.
	long := engine.Tuple{Workspace: "default", Namespace: "default", Key: []byte(strings.Repeat("k", 1000)), WindowMs: 3_600_000}
	if _, err := e.Limit(long, 1<<40, 1); err != nil {
		t.Fatal(err)
	}
	frame(1)
	user(0, 40_000)
	frame(40_000)
	if s.frameCap > 2*s.frameLast+1<<20 {
		t.Fatalf("a frame of 40000 tuples after one of a long key: %d bytes in a buffer of %d", s.frameLast, s.frameCap)
	}
}

// TestLogFrameBufferGivenBack: a buffer given up after a frame much smaller than it (here
// the first frame's, sized for twice the tuples marked) is given back to the system at
// once when it is large, at most once every freeFrameEvery; a small one is kept for the
// next frame, and nothing is given back.
func TestLogFrameBufferGivenBack(t *testing.T) {
	freed := 0
	defer func(f func()) { releaseMemory = f }(releaseMemory)
	releaseMemory = func() { freed++ }
	e := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true, Snapshots: true})
	user := func(n int) { limitUsers(t, e, 0, n) }
	user(1000)
	s := quietStore(t, t.TempDir())
	src := incremental(e)
	src.DirtyCount = e.DirtyCount
	if err := s.Write(src); err != nil { // the whole file
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tuples  int
		freedAt time.Duration // when the last buffer was given back, from now (0: as it was)
		dropped bool
		freed   int
	}{
		{1000, 0, false, 0},                 // a small buffer, kept for the next frame
		{150_000, 0, true, 1},               // about 15 MB, given up and given back
		{150_000, time.Hour, true, 0},       // one given back just before (a time ahead: no wall clock here): given up only
		{150_000, -freeFrameEvery, true, 1}, // one given back freeFrameEvery ago: given back again
	} {
		user(tc.tuples)
		if tc.freedAt != 0 {
			s.frameFreed = time.Now().Add(tc.freedAt)
		}
		freed = 0
		if err := s.Write(src); err != nil {
			t.Fatal(err)
		}
		if s.lastFull.Load() || (s.fbuf == nil) != tc.dropped || freed != tc.freed {
			t.Fatalf("a frame of %d tuples (%d bytes, buffer %d): whole %v, buffer given up %v, given back %d times; want %v, %d",
				tc.tuples, s.frameLast, s.frameCap, s.lastFull.Load(), s.fbuf == nil, freed, tc.dropped, tc.freed)
		}
		s.frameGrowth = 0 // each sized as a first frame is: for twice its tuples
	}
}
