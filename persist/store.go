// Package persist keeps an origin's state across restarts in one bbolt snapshot file: its
// live cells, its counter keyspace, its edge runs' replay marks and its lease grants.
//
// Save writes a fresh file and renames it over the old one only once it is complete and
// on disk, so a crash leaves the last good snapshot in place; Run saves periodically. An
// origin's saves are incremental (log.go): after the first, each appends the tuples
// changed since the last one to a delta log beside the file, which a compaction folds
// into a new file in the background.
// Load reads the current format only (formatVersion, whose comment gives the layout);
// LoadOrSetAside moves a file that does not load aside, so no save overwrites it and the
// process starts empty. Open locks the directory (a flock on its LOCK file), so two
// processes never share it.
package persist

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Store saves and loads the snapshot of one data directory. It is safe for concurrent use:
// saves are serialised by a mutex, and a Load running during a Save sees the previous or
// the new snapshot, never a partial one.
type Store struct {
	dir  string
	log  *slog.Logger
	lock *os.File // holds the directory's flock until Close; nil where there is no flock

	// saveMu is held for the whole of a Save.
	saveMu sync.Mutex
	// fullMu is held by a save of the whole file (save), Write's or a compaction's: there
	// is one temporary file per directory. It guards the buffers below (to runIndex),
	// which no frame uses. Lock order: saveMu, then fullMu.
	fullMu sync.Mutex
	// buf and ends are the encoded chunks of the last save, reused by the next (fullMu).
	buf  []byte
	ends []int
	// lbuf and lends are the lease chunks of the last save, reused by the next (fullMu).
	lbuf  []byte
	lends []int
	// cbuf and cends are the cell chunks not yet written of a save of Tuples, which writes
	// them to the file as it goes (tupleEncoder.spill), reused by the next (fullMu).
	cbuf  []byte
	cends []int
	// tbuf is the key tags not yet written of a save of Tuples (keytags.go), reused by the
	// next (fullMu).
	tbuf []byte
	// runIndex numbers the runs of a save for its lease records, reused by the next
	// (fullMu).
	runIndex map[string]uint64

	// The delta log (log.go), guarded by saveMu. incremental says that a save of a Source
	// with Dirty may append a frame: the base and its logs on disk hold everything up to
	// the last pass of Dirty. logGen is the gen of the log frames go to (and that of the
	// last base written or loaded, or above), logw its writer once open, logBytes the
	// bytes of the logs a load would apply to the base (baseGen, of baseBytes).
	incremental bool
	logGen      uint64
	logw        *logWriter
	logBytes    int64
	baseGen     uint64
	baseBytes   int64
	fbuf        []byte    // the last frame, reused
	frameFreed  time.Time // when a frame buffer given up was last given back (frame)
	tupleBytes  int       // the bytes a tuple takes in a frame, as frames measured it (frameBuffer)
	frameRest   int       // the bytes of the last frame beside its tuples (frameBuffer)
	frameLast   int       // the bytes of the last frame (frameBuffer)
	frameCap    int       // and of its buffer (a test reads it)
	// frameMarked is the count of changed tuples when the last frame's buffer was sized
	// (0: it was not), and frameGrowth what the frames held against it, in percent, each
	// weighted as tupleBytes is (0: none measured): requests mark tuples while a pass
	// reads them (frameBuffer).
	frameMarked, frameGrowth int64
	// frameRegrown counts the frames that outgrew the buffer frameBuffer gave them.
	frameRegrown int
	compacting   bool // a compaction runs
	// compactAfter is when a compaction may start again after failures (a full disk):
	// each failure doubles compactWait (from a second, to a minute), so that a failing
	// disk does not get a full pass and a new log every interval.
	compactAfter time.Time
	compactWait  time.Duration
	compactions  sync.WaitGroup
	closing      atomic.Bool // Close stops a compaction
	lastFull     atomic.Bool // the last save wrote the whole file
	// logSize and baseSize are logBytes and baseBytes, for a compaction to read without
	// saveMu.
	logSize, baseSize atomic.Int64
	// sizeHint is the size of the last snapshot loaded: the first save after a restart
	// allocates its buffer once at that size rather than growing it by doubling (848 ms
	// instead of ~200 ms at 1M cells, most of it GC assists of the growing allocations).
	sizeHint atomic.Int64

	// Outcome of saves, written by Save and read by Stats without a lock.
	lastSuccessMs atomic.Uint64
	lastDuration  atomic.Int64
	lastCells     atomic.Uint64
	lastKV        atomic.Uint64
	failures      atomic.Uint64
	consecutive   atomic.Uint64 // failures since the last success
	compacted     atomic.Uint64 // compactions done
	compactFailed atomic.Uint64 // compactions failed
}

// ErrLocked is wrapped by Open's error when another process holds the directory.
var ErrLocked = errors.New("data directory in use")

// lockName is the lock file of a data directory.
const lockName = "LOCK"

// Stats describes the outcome of saves so far. Its fields are read one by one, so a Stats
// taken during a Save may mix the previous and the new save.
type Stats struct {
	// LastSuccessMs is when the last successful save finished (unix ms); 0 before any.
	LastSuccessMs uint64
	// LastDuration is how long the last successful save took.
	LastDuration time.Duration
	// LastCells is the number of records the last successful save wrote (one per cell:
	// the engine's snapshot holds no duplicates); for a frame of the delta log (log.go),
	// the number of tuples it holds.
	LastCells uint64
	// LastKV is the number of counter keys the last successful save wrote.
	LastKV uint64
	// Failures counts failed saves since Open.
	Failures uint64
	// ConsecutiveFailures counts the failed saves since the last success.
	ConsecutiveFailures uint64
	// BaseBytes is the size of the whole file the saves continue from (the base), and
	// LogBytes that of the delta logs beside it (log.go) that a restart reads with it.
	BaseBytes, LogBytes int64
	// Compactions counts the rewrites of the base from the logs (log.go) since Open, and
	// CompactionFailures those that failed (each backs the next one off).
	Compactions, CompactionFailures uint64
}

// Open returns a Store that keeps its snapshot in dir, creating dir (0o755) if it does not
// exist, and locks dir until Close: when another process holds it, Open fails with an
// error wrapping ErrLocked that names dir and the holder's pid. A temporary file left by a
// save that a crash interrupted is removed (and logged). A nil logger means
// slog.Default().
func Open(dir string, logger *slog.Logger) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("open snapshot store: empty directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	s := &Store{dir: dir, log: logger, lock: lock, tupleBytes: minTupleBytes}
	s.removeLeftover()
	gens, err := logGens(dir)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("open snapshot store: %w", err)
	}
	if len(gens) > 0 {
		s.logGen = gens[len(gens)-1] // a base written next is of a gen above every log's
	}
	return s, nil
}

// removeLeftover removes the temporary file of a save that did not finish. Save would
// remove it too; removing it at start says in the log that a save was interrupted.
func (s *Store) removeLeftover() {
	tmp := filepath.Join(s.dir, tmpName)
	info, err := os.Lstat(tmp)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		err = os.Remove(tmp)
	}
	if err != nil {
		s.log.Warn("cannot remove the temporary file of an interrupted snapshot; the next save tries again",
			"path", tmp, "error", err)
		return
	}
	s.log.Warn("removed the temporary file of an interrupted snapshot", "path", tmp, "bytes", info.Size())
}

// Close stops a compaction of the delta log (log.go) that runs, waiting for it, closes the
// log and releases the directory's lock. Saves after Close still work (each writes the
// whole file) but are no longer protected from another process.
func (s *Store) Close() error {
	s.closing.Store(true)
	s.compactions.Wait()
	s.saveMu.Lock()
	if s.logw != nil {
		if err := s.logw.close(); err != nil {
			s.log.Warn("close snapshot log", "error", err)
		}
		s.logw = nil
	}
	s.incremental = false // a save after Close writes the whole file
	s.saveMu.Unlock()
	if s.lock == nil {
		return nil
	}
	err := s.lock.Close()
	s.lock = nil
	if err != nil {
		return fmt.Errorf("release lock of %s: %w", s.dir, err)
	}
	return nil
}

// Dir returns the directory the Store keeps its snapshot in.
func (s *Store) Dir() string { return s.dir }

// Stats returns the outcome of saves so far.
func (s *Store) Stats() Stats {
	return Stats{
		LastSuccessMs: s.lastSuccessMs.Load(),
		LastDuration:  time.Duration(s.lastDuration.Load()),
		LastCells:     s.lastCells.Load(),
		LastKV:        s.lastKV.Load(),
		Failures:      s.failures.Load(),

		ConsecutiveFailures: s.consecutive.Load(),
		BaseBytes:           s.baseSize.Load(),
		LogBytes:            s.logSize.Load(),
		Compactions:         s.compacted.Load(),
		CompactionFailures:  s.compactFailed.Load(),
	}
}

// Run saves the records src yields (Write) until ctx is done, so that the snapshot on
// disk is never older than interval: a kill -9 loses at most interval of counts. A
// snapshot is as old as the moment its capture started, and is on disk only once its save
// ends, so captures start interval apart less the time a save takes (estimated at 1.5x the
// longest of the last 4 saves, at most 3/4 of interval): while saves take at most half of
// interval, the bound holds. The first capture starts half an interval after Run.
//
// A failed save is logged and counted in Stats, and the next capture tries again. When
// changed is not nil and reports that nothing changed since the last capture, nothing is
// written (an idle origin does not rewrite the same snapshot) and it counts as a success:
// the snapshot on disk is current. Run does not save when ctx ends: the caller writes the
// final snapshot with Write once it has stopped taking writes. A non-positive interval
// disables periodic saves and Run returns at once.
func Run(ctx context.Context, s *Store, src Source, changed func() bool, interval time.Duration) {
	if interval <= 0 {
		return
	}
	retry := false // the last save failed: save whatever changed() says
	var recent [4]time.Duration
	t := time.NewTimer(interval / 2)
	defer t.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return // both were ready and select chose the timer
		}
		start := time.Now()
		if changed != nil && !retry && !changed() {
			s.lastSuccessMs.Store(uint64(start.UnixMilli()))
		} else {
			err := s.Write(src)
			recent[n%len(recent)] = time.Since(start)
			retry = err != nil
			if err != nil {
				s.log.Error("periodic snapshot failed, retrying next interval",
					"error", fmt.Errorf("periodic snapshot: %w", err),
					"interval", interval, "failures", s.failures.Load())
			}
		}
		t.Reset(max(nextCapture(interval, slices.Max(recent[:]))-time.Since(start), 0))
	}
}

// nextCapture is the time from one capture's start to the next: interval less the lead a
// save of about longest needs, so that the next snapshot is on disk within interval of
// this capture. The lead is at most 3/4 of interval, so captures never come closer than
// interval/4.
func nextCapture(interval, longest time.Duration) time.Duration {
	lead := min(longest+longest/2, interval-interval/4)
	return interval - lead
}
