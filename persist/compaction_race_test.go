package persist

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// TestCompactionRaceKeepsReset: a frame written to the new log G' while the
// compaction has not yet captured the store is older than the base G'. A crash once the
// base G' is renamed, before the next frame, loads the base's cells (newer, raw) with the
// older frame's reset records: counts a reset cancelled before the base's capture come
// back on top of what was counted after the reset, a state that never existed.
func TestCompactionRaceKeepsReset(t *testing.T) {
	stages := make(chan int)
	resume := make(chan struct{})
	defer func(due func(int64, int64) bool, hook func(int)) { compactDue, compactHook = due, hook }(compactDue, compactHook)
	compactDue = func(logBytes, _ int64) bool { return logBytes > 0 }
	compactHook = func(stage int) { stages <- stage; <-resume }

	e := logEngine(t, 10) // every tuple at 1
	dir := t.TempDir()
	s := quietStore(t, dir)
	save := func() {
		t.Helper()
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
	}
	save()               // the base G
	count(t, e, 3, 4, 7) // tuple 3: 8
	save()               // frame F1 in log G; the compaction starts (gen G')
	if st := <-stages; st != compactStarts {
		t.Fatalf("stage %d, want the start", st)
	}
	count(t, e, 5, 6, 1)
	save() // frame F2 in log G': tuple 3 at 8, no reset record
	if _, err := e.Reset([]engine.Tuple{logTuple(3)}); err != nil {
		t.Fatal(err)
	}
	count(t, e, 3, 4, 2) // tuple 3: 2 after its reset (raw 10, 8 cancelled)
	resume <- struct{}{}
	if st := <-stages; st != compactRenamed {
		t.Fatalf("stage %d, want the rename", st)
	}
	crashed := copyDir(t, dir) // kill -9 here: base G' renamed, F2 the last frame of log G'
	resume <- struct{}{}
	<-stages
	resume <- struct{}{}
	s.compactions.Wait()

	snap, err := quietStore(t, crashed).LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	e2 := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true})
	e2.RestoreResets(snap.Resets)
	if _, _, err := e2.Restore(snap.Cells); err != nil {
		t.Fatal(err)
	}
	// Real states of tuple 3: 8 (at F2, the last frame) or 2 (at the base's capture).
	if got := e2.Status(logTuple(3)).CurrentRegional; got != 8 && got != 2 {
		t.Fatalf("tuple 3 after a crash past the compaction's rename: %d, want 8 (F2) or 2 (the base); "+
			"reset records in the load: %d (the base had the reset, F2 did not)", got, len(snap.Resets))
	}
}

// TestReviewFrameMemory reports the size of a frame when every tuple changed since the last
// save: the frame is encoded whole in memory (fbuf) before it is written, unlike the base,
// whose cells are spilled to the file as they are encoded.
// TestCompactionRaceReplayCountedOnce: the same crash point as above (base G' renamed,
// the last frame of log G' written before the base's capture): the load takes the older
// frame's replay marks with the base's newer counts, so a batch the base counted but the
// frame's marks do not claim is applied again when the edge re-sends it (it kept it: the
// marks it was told durable, the frame's, do not cover it). A crash without a compaction
// counts it once.
func TestCompactionRaceReplayCountedOnce(t *testing.T) {
	stages := make(chan int)
	resume := make(chan struct{})
	defer func(due func(int64, int64) bool, hook func(int)) { compactDue, compactHook = due, hook }(compactDue, compactHook)
	compactDue = func(logBytes, _ int64) bool { return logBytes > 0 }
	compactHook = func(stage int) { stages <- stage; <-resume }

	e := logEngine(t, 10) // every tuple at 1
	key := engine.AppendKey(nil, logTuple(3))
	seq := int64(logT0 / 3_600_000)
	batch := func(id uint64) engine.ReplayBatch {
		return engine.ReplayBatch{Node: "e1/a", ID: id, Items: []engine.ReplayItem{{Key: key, Seq: seq, Cost: 5, Limit: 1 << 40}}}
	}
	dir := t.TempDir()
	s := quietStore(t, dir)
	save := func() {
		t.Helper()
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
	}
	save() // the base G
	e.ServeReplay(batch(1))
	save() // frame F1 in log G; the compaction starts (gen G')
	if st := <-stages; st != compactStarts {
		t.Fatalf("stage %d, want the start", st)
	}
	e.ServeReplay(batch(2))
	save()                  // frame F2 in log G': tuple 3 at 11, run e1/a at batch 2 (made durable)
	e.ServeReplay(batch(3)) // tuple 3 at 16; the edge keeps batch 3 until a save holds it
	resume <- struct{}{}
	if st := <-stages; st != compactRenamed {
		t.Fatalf("stage %d, want the rename", st)
	}
	crashed := copyDir(t, dir) // kill -9 here
	resume <- struct{}{}
	<-stages
	resume <- struct{}{}
	s.compactions.Wait()

	snap, err := quietStore(t, crashed).LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	e2 := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true})
	e2.RestoreRuns(snap.Runs)
	if _, _, err := e2.Restore(snap.Cells); err != nil {
		t.Fatal(err)
	}
	e2.ServeReplay(batch(3)) // the edge re-sends what no durable mark covers
	if got := e2.Status(logTuple(3)).CurrentRegional; got != 16 {
		t.Fatalf("tuple 3 after the crash and the edge's re-send: %d, want 16 (1 + 3 batches of 5)", got)
	}
}

// TestReplayCountedOnceWithoutCompaction: the control of the test above, without a
// compaction: the crash after F2 counts batch 3 once (passes).
func TestReplayCountedOnceWithoutCompaction(t *testing.T) {
	e := logEngine(t, 10)
	key := engine.AppendKey(nil, logTuple(3))
	seq := int64(logT0 / 3_600_000)
	batch := func(id uint64) engine.ReplayBatch {
		return engine.ReplayBatch{Node: "e1/a", ID: id, Items: []engine.ReplayItem{{Key: key, Seq: seq, Cost: 5, Limit: 1 << 40}}}
	}
	dir := t.TempDir()
	s := quietStore(t, dir)
	for _, id := range []uint64{0, 1, 2} {
		if id > 0 {
			e.ServeReplay(batch(id))
		}
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
	}
	e.ServeReplay(batch(3))
	snap, err := quietStore(t, copyDir(t, dir)).LoadAll()
	if err != nil {
		t.Fatal(err)
	}
	e2 := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true})
	e2.RestoreRuns(snap.Runs)
	if _, _, err := e2.Restore(snap.Cells); err != nil {
		t.Fatal(err)
	}
	e2.ServeReplay(batch(3))
	if got := e2.Status(logTuple(3)).CurrentRegional; got != 16 {
		t.Fatalf("tuple 3: %d, want 16", got)
	}
}

// TestCompactionFailureBacksOff: while compactions fail (a full disk; here the temporary
// file's path is taken by a directory), the saves after a failure start none until the
// back-off passes: not a full pass over the store and a new log file every interval.
func TestCompactionFailureBacksOff(t *testing.T) {
	defer func(due func(int64, int64) bool, wait time.Duration) { compactDue, compactBackoff = due, wait }(compactDue, compactBackoff)
	compactBackoff = time.Hour // however slow the saves below, none outlasts it
	e := logEngine(t, 100)
	dir := t.TempDir()
	s := quietStore(t, dir)
	if err := s.Write(incremental(e)); err != nil {
		t.Fatal(err)
	}
	compactDue = func(logBytes, _ int64) bool { return logBytes > 0 }
	if err := os.MkdirAll(filepath.Join(dir, tmpName, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	const saves = 8
	for i := range saves {
		count(t, e, i, i+1, 1)
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
		s.compactions.Wait()
	}
	// The first save starts a compaction (a new log); it fails, and the others wait.
	if n := len(logFiles(t, dir)); n > 2 {
		t.Fatalf("%d saves while compactions fail left %d log files %v; want at most 2", saves, n, logFiles(t, dir))
	}
	// Stats count it, and the logs the base is waiting for.
	if st := s.Stats(); st.CompactionFailures != 1 || st.Compactions != 0 || st.LogBytes <= 0 || st.BaseBytes <= 0 {
		t.Fatalf("stats after one failed compaction: %+v", st)
	}
	// Once the disk takes it again, the next due compaction after the back-off succeeds.
	if err := os.RemoveAll(filepath.Join(dir, tmpName)); err != nil {
		t.Fatal(err)
	}
	s.saveMu.Lock()
	s.compactAfter = time.Time{}
	s.saveMu.Unlock()
	count(t, e, 0, 1, 1)
	if err := s.Write(incremental(e)); err != nil {
		t.Fatal(err)
	}
	s.compactions.Wait()
	if st := s.Stats(); st.Compactions != 1 || st.CompactionFailures != 1 {
		t.Fatalf("stats after a compaction that succeeded: %+v", st)
	}
}

// TestWholeSavesReleaseMemory: a whole file (the first save, a compaction) gives back the
// memory its write held, past releaseAbove; a frame of the delta log does not.
func TestWholeSavesReleaseMemory(t *testing.T) {
	defer func(due func(int64, int64) bool, above int64, rel func()) {
		compactDue, releaseAbove, releaseMemory = due, above, rel
	}(compactDue, releaseAbove, releaseMemory)
	var released atomic.Int32
	releaseMemory = func() { released.Add(1) }
	releaseAbove = 0
	e := logEngine(t, 100)
	s := quietStore(t, t.TempDir())
	if err := s.Write(incremental(e)); err != nil {
		t.Fatal(err)
	}
	if n := released.Load(); n != 1 {
		t.Fatalf("the first save, a whole file: released %d times, want 1", n)
	}
	for i := range 3 {
		count(t, e, i, i+1, 1)
		if err := s.Write(incremental(e)); err != nil {
			t.Fatal(err)
		}
	}
	s.compactions.Wait()
	if n := released.Load(); n != 1 {
		t.Fatalf("after three frames: released %d times, want 1", n)
	}
	compactDue = func(logBytes, _ int64) bool { return logBytes > 0 }
	count(t, e, 0, 1, 1)
	if err := s.Write(incremental(e)); err != nil {
		t.Fatal(err)
	}
	s.compactions.Wait()
	if n := released.Load(); n != 2 {
		t.Fatalf("after a compaction: released %d times, want 2", n)
	}
	releaseAbove = 1 << 40 // a whole file below it: nothing to give back
	whole := incremental(e)
	whole.Dirty = nil // every save a whole file
	if err := s.Write(whole); err != nil {
		t.Fatal(err)
	}
	if n := released.Load(); n != 2 {
		t.Fatalf("a whole file below releaseAbove: released %d times, want 2", n)
	}
}

// TestNoCompactionWhileLoading: no compaction starts while the store is still loading a
// snapshot in the background (its pass over Tuples would load every part at once, beside
// the requests); the frames go on, and the first save once the load is over compacts.
func TestNoCompactionWhileLoading(t *testing.T) {
	defer func(due func(int64, int64) bool) { compactDue = due }(compactDue)
	e := logEngine(t, 100)
	s := quietStore(t, t.TempDir())
	loading := true
	src := incremental(e)
	src.Loading = func() bool { return loading }
	if err := s.Write(src); err != nil {
		t.Fatal(err)
	}
	compactDue = func(logBytes, _ int64) bool { return logBytes > 0 }
	for i := range 3 {
		count(t, e, i, i+1, 1)
		if err := s.Write(src); err != nil {
			t.Fatal(err)
		}
		s.compactions.Wait()
	}
	if st := s.Stats(); st.Compactions != 0 || st.LogBytes == 0 {
		t.Fatalf("while loading: %d compactions, %d bytes of log; want none, and the frames", st.Compactions, st.LogBytes)
	}
	loading = false
	count(t, e, 0, 1, 1)
	if err := s.Write(src); err != nil {
		t.Fatal(err)
	}
	s.compactions.Wait()
	if st := s.Stats(); st.Compactions != 1 {
		t.Fatalf("once loaded: %d compactions, want 1", st.Compactions)
	}
}
