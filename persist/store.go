// Package persist keeps an origin's live cells across restarts as a bbolt snapshot file.
//
// Save writes every record to a fresh file next to the snapshot and renames it over the old
// one only once it is complete and on disk, so a crash at any point leaves the last good
// snapshot in place. Load reads the snapshot back and reports a corrupt or foreign file as
// an error. Run saves periodically; the caller writes the final snapshot on shutdown.
//
// File layout (format version 4), two buckets:
//
//	cells: key = chunk index (4 bytes, big endian; 0, 1, 2, ... with none missing)
//	       value = consecutive records, about 64 KiB of them (a record is never split):
//	       uvarint len(key) | tuple key (engine.AppendKey) | varint seq |
//	       uvarint regional | uvarint imported | uvarint number of foreign regions |
//	       per foreign region: uvarint len(region) | region | uvarint count
//	meta:  "version" = 4, "saved_ms" = save time (unix ms), "count" = number of records
//	       (each 8 bytes, big endian); "crc32c" = CRC-32C of the chunk values in chunk
//	       order (4 bytes, big endian), so a damaged file is detected rather than half-loaded.
//
// Records are written in the order Save is given them, unsorted; Load sorts them and merges
// records of the same key and sequence. A chunk is one bbolt value, so a save costs a few
// bbolt operations per 64 KiB rather than one B+tree insert per cell.
//
// Version 3 had one bbolt key per cell, in key order: key = tuple key | seq (8 bytes, big
// endian), value = regional (8 bytes) | imported (8 bytes), then per foreign region
// len(region) (1 byte) | region | count (8 bytes), all big endian; its "crc32c" covered each
// cell's uvarint key length, key and value. Version 2 had version 3's layout with older,
// longer tuple keys (an 8-byte window and explicit "default" names). Load still reads both
// and converts version 2's keys. Other versions are refused as ErrCorrupt.
package persist

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/engine"
)

// Store saves and loads the snapshot of one data directory. It is safe for concurrent use:
// saves are serialised by a mutex, and a Load running during a Save sees the previous or
// the new snapshot, never a partial one.
type Store struct {
	dir string
	log *slog.Logger

	// saveMu is held for the whole of a Save: there is one temporary file per directory.
	saveMu sync.Mutex
	// buf and ends are the encoded chunks of the last save, reused by the next (saveMu).
	buf  []byte
	ends []int

	// Outcome of saves, written by Save and read by Stats without a lock.
	lastSuccessMs atomic.Uint64
	lastDuration  atomic.Int64
	lastCells     atomic.Uint64
	failures      atomic.Uint64
}

// Stats describes the outcome of saves so far. Its fields are read one by one, so a Stats
// taken during a Save may mix the previous and the new save.
type Stats struct {
	// LastSuccessMs is when the last successful save finished (unix ms); 0 before any.
	LastSuccessMs uint64
	// LastDuration is how long the last successful save took.
	LastDuration time.Duration
	// LastCells is the number of records the last successful save wrote (one per cell:
	// the engine's snapshot holds no duplicates).
	LastCells uint64
	// Failures counts failed saves since Open.
	Failures uint64
}

// Open returns a Store that keeps its snapshot in dir, creating dir (0o755) if it does not
// exist. A nil logger means slog.Default().
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
	return &Store{dir: dir, log: logger}, nil
}

// Dir returns the directory the Store keeps its snapshot in.
func (s *Store) Dir() string { return s.dir }

// Stats returns the outcome of saves so far.
func (s *Store) Stats() Stats {
	return Stats{
		LastSuccessMs: s.lastSuccessMs.Load(),
		LastDuration:  time.Duration(s.lastDuration.Load()),
		LastCells:     s.lastCells.Load(),
		Failures:      s.failures.Load(),
	}
}

// Run saves the records src yields (SaveSeq) every interval until ctx is done. A failed save is logged and counted in
// Stats, and the next tick tries again. When changed is not nil and reports that nothing
// changed since the last tick, the tick writes nothing (an idle origin does not rewrite the
// same snapshot every second) and counts as a success: the snapshot on disk is still
// current. Run does not save when ctx ends: the caller writes the final snapshot with Save
// once it has stopped taking writes. A non-positive interval disables periodic saves and
// Run returns at once.
func Run(ctx context.Context, s *Store, src iter.Seq[engine.CellRecord], changed func() bool, interval time.Duration) {
	if interval <= 0 {
		return
	}
	retry := false // the last save failed: save whatever changed() says
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return // both were ready and select chose the tick
		}
		if changed != nil && !retry && !changed() {
			s.lastSuccessMs.Store(uint64(time.Now().UnixMilli()))
			continue
		}
		err := s.SaveSeq(src)
		retry = err != nil
		if err != nil {
			s.log.Error("periodic snapshot failed, retrying next interval",
				"error", fmt.Errorf("periodic snapshot: %w", err),
				"interval", interval, "failures", s.failures.Load())
		}
	}
}
