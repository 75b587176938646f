package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ratchet/ratchet/engine"
	"github.com/ratchet/ratchet/keyspace"
	bolt "go.etcd.io/bbolt"
)

const (
	fileName = "snapshot.db"
	tmpName  = "snapshot.db.tmp"
	// formatVersion is the format Save writes and the only one Load reads: a file of
	// another version is refused as ErrCorrupt (LoadOrSetAside moves it aside). Six
	// buckets (resets optional):
	//
	//	cells: key = chunk index (4 bytes, big endian; 0, 1, 2, ... with none missing)
	//	       value = consecutive records, about 64 KiB of them (a record is never split):
	//	       uvarint len(key) | tuple key (engine.AppendKey) | varint seq |
	//	       uvarint regional | uvarint imported | uvarint number of foreign regions |
	//	       per foreign region: uvarint len(region) | region | uvarint count
	//	kv:    the keyspace, chunked as cells (its own chunk indexes from 0), a record
	//	       being: uvarint len(workspace) | workspace | uvarint len(key) | key |
	//	       varint expire_at_ms (unix ms; 0: no expiry) | uvarint kind (keyspace.Kind:
	//	       1 string, 2 hash, 3 list, 4 set, 5 sorted set) | uvarint len(value) | value
	//	       (a string's bytes, or a collection's elements as keyspace encodes them)
	//	runs:  the edge runs' replay marks, chunked as cells, a record being: uvarint len(run) |
	//	       run | uvarint last applied batch | varint heard_ms | varint replay_ms |
	//	       uvarint flags (1: superseded, 2: hands follows) [| uvarint hands]
	//	leases: the live lease grants, chunked as cells, a record being: uvarint cell (1 +
	//	       the index, in file order, of a cell record of the grant's tuple, whose key is
	//	       the grant's; 0: none, and uvarint len(key) | tuple key follow) | uvarint run
	//	       (1 + the index of its run among the run records; 0: none of them, and uvarint
	//	       len(run) | run follow) | uvarint g | uvarint spent | varint seq - previous seq
	//	       | varint until_ms - previous until_ms (the previous record's in the chunk, 0 for
	//	       its first; the differences wrap)
	//	resets: the tuples' reset records (engine.Resets), chunked as cells, a record being:
	//	       uvarint len(key) | tuple key | uvarint version | varint until_ms | uvarint
	//	       number of cancelled values | per value: varint seq | uvarint len(region) |
	//	       region | uvarint count. Optional: a file without it (written before resets)
	//	       loads as one with no resets.
	//	meta:  "version" = formatVersion, "saved_ms" = save time (unix ms), "count" = number
	//	       of cell records, "kv_count", "runs_count" and "leases_count" = numbers of kv,
	//	       run and lease records, "resets_count" (optional, as the bucket) and
	//	       "changes" = the origin's change version when saved (optional; each 8 bytes,
	//	       big endian); "crc32c", "kv_crc32c", "resets_crc32c",
	//	       "runs_crc32c" and "leases_crc32c" = CRC-32C of each bucket's chunk values in
	//	       chunk order (4 bytes, big endian), so a damaged file is detected rather than
	//	       half-loaded.
	//	       A snapshot of an engine's Tuples (and no Cells) also has "shard_seed" = the
	//	       store's hash seed (8 bytes, big endian), "parts" = where each load part's
	//	       records begin in the cells' chunks (parts.go), so that a process that adopts
	//	       the seed loads them part by part (Store.OpenOrSetAside), and "parts_crc32c" =
	//	       the CRC-32C of "parts". Its lease records spell out their keys (cell
	//	       reference 0). Its "keytags" bucket, with "keytags_count", "keytags_crc32c",
	//	       "keytags_parts" and "keytags_parts_crc32c" in meta, tags each tuple's key
	//	       and where its records begin in its part (keytags.go). Optional when loading,
	//	       and derived from the cells: damaged, the file loads without them (logged),
	//	       not set aside.
	//	overrides: RL.OVERRIDE's records, chunked as cells, with "overrides_count" and
	//	       "overrides_crc32c" in meta: see overrides.go. Optional when loading.
	//	       meta "gen" (8 bytes, big endian; optional, 0 without) is the file's
	//	       generation: the delta logs beside it named snapshot.db.log.<gen> with a gen
	//	       at least its own hold the changes since (log.go: incremental saves, their
	//	       frame format and their compaction), applied by every load.
	//
	// Records are written in the order Save is given them, unsorted; Load sorts the cells
	// and merges records of the same key and sequence. A chunk is one bbolt value, so a save
	// costs a few bbolt operations per 64 KiB rather than one B+tree insert per record.
	formatVersion = 9 // 9: kv records carry their type (hashes, lists, sets, sorted sets)

	cellsBucket    = "cells"
	kvBucket       = "kv"
	runsBucket     = "runs"
	leaseBucket    = "leases"
	metaBucket     = "meta"
	metaVersion    = "version"
	metaSavedMs    = "saved_ms"
	metaCount      = "count"
	metaCRC        = "crc32c"
	metaKVCount    = "kv_count"
	metaKVCRC      = "kv_crc32c"
	metaRunsCount  = "runs_count"
	metaRunsCRC    = "runs_crc32c"
	metaLeaseCount = "leases_count"
	metaLeaseCRC   = "leases_crc32c"
	metaShardSeed  = "shard_seed"
	metaParts      = "parts"
	metaPartsCRC   = "parts_crc32c"
	resetsBucket   = "resets"
	metaResetCount = "resets_count"
	metaResetCRC   = "resets_crc32c"
	metaChanges    = "changes"

	// chunkSize is the size past which a chunk is closed: the records of a chunk are never
	// split, so a chunk is up to chunkSize plus one record.
	chunkSize = 64 << 10
	// chunkKeyLen is the length of a chunk's key, its index as a big-endian uint32.
	chunkKeyLen = 4
	// batchBytes bounds the chunk bytes of one write transaction: bbolt holds a copy of
	// each dirty page until the commit, so this bounds that copy.
	batchBytes = 16 << 20
	// maxKeyLen is the longest tuple key Save accepts, far beyond what the engine makes.
	maxKeyLen = bolt.MaxKeySize - 8
	// lockTimeout bounds the wait for a bbolt file lock held by another process.
	lockTimeout = 2 * time.Second
)

// spillBytes is what a save of Tuples holds of encoded cells before it writes them to the
// file: the save's memory does not grow with the store (35 bytes a cell). A compaction's
// commit of them runs unpaced (pacer): 1 MB is about a millisecond. A variable for tests.
var spillBytes = 1 << 20

// castagnoli is the CRC-32C table (hardware accelerated where the CPU has it).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Source is what a save writes: the records each iterator yields (nil: none), encoded as
// they come. The engine's Records, KV().Records, Runs, Leases and Tuples lend each record
// only for the call, so a save makes no copy of the store. Tuples yields cells and lease
// grants together (an origin's snapshot uses it: one pass, and a grant's record refers to
// its tuple's cell record instead of repeating the key); its records are written after
// those of Cells and Leases.
type Source struct {
	Cells  iter.Seq[engine.CellRecord]
	KV     iter.Seq[keyspace.Record]
	Runs   iter.Seq[engine.RunRecord]
	Leases iter.Seq[engine.LeaseRecord]
	Tuples iter.Seq[engine.TupleRecord]
	// ShardSeed is the seed of the store's hash (engine.ShardSeed), recorded with the
	// parts of a snapshot of Tuples.
	ShardSeed uint64
	// Resets are an origin's reset records (engine.Resets), and Changes, when not nil,
	// reads its change version (engine.ChangeVersion) after every other record was
	// captured: a restarted run resyncs the edges that applied less.
	Resets  iter.Seq[engine.ResetRecord]
	Changes func() uint64
	// Overrides are RL.OVERRIDE's records, tombstones included (overrides.go), and
	// OverridesHorizon, when not nil, reads the table's horizon (engine.Overrides.Horizon)
	// after them.
	Overrides        iter.Seq[engine.OverrideRecord]
	OverridesHorizon func() engine.OverrideHorizon
	// Saved, when not nil, is called after a save of the records succeeded (the file is
	// on disk), before Write returns and before another save starts: an origin's
	// engine.RunsSaved, which tells its edges which replay batches are durable.
	Saved func()
	// Dirty, when not nil, yields the tuples changed since its last pass (engine.Dirty),
	// and makes saves incremental (log.go): a save appends them to the delta log beside
	// the file, with Runs, KV, Resets and Overrides whole, instead of writing the file;
	// the file is rewritten (from Tuples) in the background once the log holds a share
	// of it, with RunMarks (engine.RunMarks) for its runs: Runs tells the engine what
	// Saved makes durable. Tuples and RunMarks must be set with it.
	Dirty    iter.Seq[engine.TupleRecord]
	RunMarks iter.Seq[engine.RunRecord]
	// Served, when not nil, counts the requests served (an origin's: every command its
	// clients sent): a compaction runs at full speed while it stands still (pacer).
	Served func() uint64
	// DirtyCount, when not nil, says about how many tuples Dirty will yield
	// (engine.DirtyCount): a frame's buffer is sized from it at once (frameBuffer).
	DirtyCount func() int64
	// Loading, when not nil, reports whether the store is still loading a snapshot in the
	// background (engine.Loading): no compaction starts meanwhile, since its pass over
	// Tuples would wait for every part, loading them all at once, unpaced, beside the
	// requests; the frames go on, and the log is compacted once the load is over.
	Loading func() bool
}

// Save writes recs as the new snapshot, replacing the previous one only once the new file
// is complete and synced to disk. recs is not modified and is written in its order;
// records with the same key and sequence are written as they are and merged by Load,
// taking the larger counts. On error the failure is counted in Stats and the snapshot is
// the previous one (or, if only the final directory fsync failed, the new one): never a
// partial file. The snapshot holds no counter keys: SaveAll writes both.
func (s *Store) Save(recs []engine.CellRecord) error {
	return s.Write(Source{Cells: slices.Values(recs)})
}

// SaveSeq is Save of the records recs yields, encoded as they come (engine.Records lends
// each record only for the call): the snapshot makes no copy of the cells.
func (s *Store) SaveSeq(recs iter.Seq[engine.CellRecord]) error {
	return s.Write(Source{Cells: recs})
}

// SaveAll is SaveSeq of cells (nil: none) that also writes the counter keyspace's records
// kv yields (nil: none), as keyspace.KV.Records captures them: one shard at a time, live
// keys only. Records are written as they are given; the keys of kv are not checked for
// duplicates (Load returns them in file order, and keyspace.KV.Restore keeps the last).
func (s *Store) SaveAll(cells iter.Seq[engine.CellRecord], kv iter.Seq[keyspace.Record]) error {
	return s.Write(Source{Cells: cells, KV: kv})
}

// Write is Save of everything src yields: cells, counter keys, and the edge runs' replay
// marks and lease grants that an origin keeps across a clean restart. The runs and leases
// are written as they are given (engine.RestoreRuns and engine.RestoreLeases merge
// duplicates).
//
// With src.Dirty, a save after the first appends a frame to the delta log instead (log.go),
// and the file is rewritten in the background once the log holds a share of it.
func (s *Store) Write(src Source) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	start := time.Now()
	var n, nkv uint64
	var err error
	frame := src.Dirty != nil && s.incremental
	if frame {
		n, nkv, err = s.frame(src, start)
	} else {
		n, nkv, err = s.whole(src, start)
	}
	if err != nil {
		s.failures.Add(1)
		s.consecutive.Add(1)
		return fmt.Errorf("save snapshot %s: %w", filepath.Join(s.dir, fileName), err)
	}
	s.lastFull.Store(!frame)
	s.consecutive.Store(0)
	s.lastDuration.Store(int64(time.Since(start)))
	s.lastCells.Store(n)
	s.lastKV.Store(nkv)
	s.lastSuccessMs.Store(uint64(time.Now().UnixMilli()))
	if src.Dirty != nil {
		s.compact(src)
	}
	return nil
}

// frame appends the frame of src to the delta log (saveMu held). On failure the next save
// writes the whole file: the tuples Dirty yielded are no longer marked.
func (s *Store) frame(src Source, now time.Time) (n, nkv uint64, err error) {
	defer func() {
		if err != nil {
			s.incremental = false
		}
	}()
	buf := s.frameBuffer(src)
	var tupleLen int
	if s.fbuf, n, nkv, tupleLen, err = encodeFrame(buf, src, now.UnixMilli()); err != nil {
		return 0, 0, fmt.Errorf("frame: %w", err)
	}
	if cap(s.fbuf) != cap(buf) {
		s.frameRegrown++
	}
	s.frameRest = len(s.fbuf) - tupleLen
	if s.logw == nil {
		if s.logw, err = createLog(s.dir, s.logGen); err != nil {
			return 0, 0, err
		}
	}
	before := s.logw.size
	if err = s.logw.append(s.fbuf); err != nil {
		return 0, 0, err
	}
	s.logBytes += s.logw.size - before
	s.logSize.Store(s.logBytes)
	// A small frame counts for its share of minTupleSample (sampled): one tuple of a 1 KB
	// key does not size the next 500k (690 MB), nor one quiet frame (1 tuple marked, 4
	// read) the next 200k at four times; and frames that stay small are measured still.
	if s.frameMarked > 0 && n > 0 {
		last := s.frameGrowth
		if last == 0 {
			last = firstFrameGrowth
		}
		s.frameGrowth = sampled(last, min(max(int64(n)*100/s.frameMarked, 100), maxFrameGrowth), n)
	}
	if n > 0 {
		s.tupleBytes = max(int(sampled(int64(s.tupleBytes), int64(tupleLen)/int64(n), n)), minTupleBytes)
	}
	s.frameLast, s.frameCap = len(s.fbuf), cap(s.fbuf)
	if c := cap(s.fbuf); c > 2*len(s.fbuf)+1<<20 {
		s.fbuf = nil // the store's writes slowed down: give the memory back
		if c >= freeFrameMin && now.Sub(s.frameFreed) >= freeFrameEvery {
			// At once: the Go heap is small beside such a buffer (the store's slabs are
			// not in it), so no collection would come for a while, nor the scavenger
			// after it, and the process would keep the buffer's pages (at 2M tuples, a
			// first save after a restart of 400k changed tuples: a 17 MB frame, a 41 MB
			// buffer, 21 B a tuple more RSS than before the kill, until the next GC).
			s.frameFreed = now
			releaseMemory()
		}
	}
	if src.Saved != nil {
		src.Saved()
	}
	return n, nkv, nil
}

// freeFrameMin is the capacity from which a frame buffer given up (frame) is given back
// to the system at once, and freeFrameEvery how often at most: writes that come in bursts
// (a busy save, a quiet one, and again) would otherwise have a collection every other
// save, and the next burst fault the buffer's pages in again.
const (
	freeFrameMin   = 8 << 20
	freeFrameEvery = 10 * time.Second
)

// frameBuffer returns s.fbuf, or a buffer in its place large enough for the frame of
// src's changed tuples, so that encoding the frame allocates once: src.DirtyCount of
// them, times what the frames before grew by while they were read (frameGrowth: twice
// at first, four times at most, a small frame counting for its share), at the bytes a
// tuple took in the frames before, and a quarter more, beside the rest of the last frame
// (the sections written whole). Grown by append's doubling instead, a frame of 500k
// tuples (20 MB) grew from 3 to 48 MB in eight steps, each past the heap's goal (the Go
// heap is small: the store's slabs are not in it), so eight garbage collections back to
// back while the requests ran (gctrace). In six alternating restarts at 2M tuples,
// RL.LIMIT's p99 over the first 400k requests (bench/scale.sh's) was 4.5 to 12.9 ms
// (mean 7.9) before, 4.7 to 9.6 (mean 6.5) after.
func (s *Store) frameBuffer(src Source) []byte {
	s.frameMarked = 0 // not measured, unless sized below
	if src.DirtyCount == nil {
		return s.fbuf
	}
	n := src.DirtyCount()
	if n < 0 || n > maxFrameLen/minTupleBytes {
		return s.fbuf // more than a frame holds: the encoding fails, or grows as it goes
	}
	s.frameMarked = n
	growth := s.frameGrowth
	if growth == 0 {
		growth = firstFrameGrowth
	}
	want := int64(s.frameRest)*5/4 + n*growth/100*int64(s.tupleBytes)*5/4 + 64<<10
	// At most the sum of four times the last frame and 64 MiB: a guess past that grows by
	// doubling.
	want = min(want, 4*int64(s.frameLast)+64<<20)
	if want > maxFrameLen {
		return s.fbuf // the encoding fails, or grows as it goes
	}
	if want <= int64(cap(s.fbuf)) {
		return s.fbuf
	}
	return make([]byte, 0, want)
}

// firstFrameGrowth and maxFrameGrowth bound what frameBuffer takes a frame to grow, in
// percent, from the count of changed tuples when its buffer is sized to what the pass
// then reads, requests marking more meanwhile: the first frame's guess (none measured),
// and the most a measure counts for. After a 10M restart under a flood the first frame
// held 372k tuples where 243k were marked when it began (17.5 MB in a buffer of 14.6),
// and grew it in the middle of a shard's encoding: the save's goroutine ran 13.8 ms at a
// stretch in a runtime trace, an event loop waiting behind it.
const (
	firstFrameGrowth = 200
	maxFrameGrowth   = 400
)

// minTupleSample is the number of tuples a frame holds for what it measured to replace
// what the next frames are sized from (frameBuffer); a smaller frame's count for their
// share (sampled).
const minTupleSample = 64

// sampled is last moved towards measured, which a frame of n tuples measured, by n's
// share of minTupleSample (all the way from minTupleSample tuples on).
func sampled(last, measured int64, n uint64) int64 {
	w := int64(min(n, minTupleSample))
	return (last*(minTupleSample-w) + measured*w) / minTupleSample
}

// minTupleBytes is the least a changed tuple is taken to need in a frame, before a frame
// measured it: a key of 20 bytes, its namespace, window and one cell (bench/scale.sh's
// tuples took 40).
const minTupleBytes = 48

// whole writes the whole file from src, as the base of a new gen (saveMu held).
func (s *Store) whole(src Source, now time.Time) (n, nkv uint64, err error) {
	s.fullMu.Lock()
	defer s.fullMu.Unlock()
	gen := s.logGen + 1
	if src.Dirty != nil {
		// What is marked changed is in this file: the next frame need not repeat it. (A
		// change after this pass is marked again, and is in this file too, or not yet.)
		for range src.Dirty {
		}
	}
	if n, nkv, err = s.save(src, now, gen, nil); err != nil {
		return 0, 0, err
	}
	s.based(gen)
	s.release()
	s.incremental = src.Dirty != nil
	if src.Saved != nil {
		src.Saved()
	}
	return n, nkv, nil
}

// releaseAbove is the size of a whole file past which its save gives the memory it held
// back to the system (release); a variable for tests.
var releaseAbove int64 = 32 << 20

// releaseMemory returns the heap's free memory to the system (debug.FreeOSMemory: a
// collection, then every free page given back); a variable for tests.
var releaseMemory = debug.FreeOSMemory

// release gives back, after a whole file of releaseAbove bytes or more (saveMu held),
// what writing it held (most likely bbolt's: its transaction allocates the file's dirty
// pages on the heap when it commits, about the file's size of garbage; not profiled),
// which the runtime returns to the system only slowly. The resident set then stayed up to a file's size above the
// store's for a while after a save (2M tuples in bench/scale.sh: 106 to 130 B/tuple
// after the fill, the Go heap in use 11 to 35 B/tuple from one run to the next). Whole
// files are rare (the first save, then compactions), and a collection of a heap that
// holds no tuple (the store is off it) costs milliseconds.
func (s *Store) release() {
	if s.baseBytes >= releaseAbove {
		releaseMemory()
	}
}

// based records that the base of gen is on disk (saveMu held): the logs of lower gens are
// deleted, and frames go to the log of gen or a later one.
func (s *Store) based(gen uint64) {
	if s.logw != nil && s.logw.gen < gen {
		if err := s.logw.close(); err != nil {
			s.log.Warn("close snapshot log", "error", err)
		}
		s.logw = nil
	}
	s.logGen, s.baseGen, s.logBytes = max(s.logGen, gen), gen, 0
	if s.logw != nil {
		s.logBytes = s.logw.size
	}
	if fi, err := os.Stat(filepath.Join(s.dir, fileName)); err == nil {
		s.baseBytes = fi.Size()
	}
	s.logSize.Store(s.logBytes)
	s.baseSize.Store(s.baseBytes)
	gens, err := logGens(s.dir)
	if err != nil {
		s.log.Warn("cannot list the snapshot logs to delete those the new base holds", "error", err)
		return
	}
	for _, g := range gens {
		if g >= gen {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, logName(g))); err != nil {
			s.log.Warn("cannot delete a snapshot log the new base holds; it is ignored", "gen", g, "error", err)
		}
	}
}

// compact starts a compaction when the logs hold more than a share of the base and none
// runs (saveMu held): from now on frames go to the log of a new gen, and the base of that
// gen is written in the background from src (its Tuples and RunMarks), after which the
// logs before it are deleted (log.go gives the crash points).
func (s *Store) compact(src Source) {
	if s.compacting || s.closing.Load() || !compactDue(s.logBytes, s.baseBytes) || time.Now().Before(s.compactAfter) ||
		(src.Loading != nil && src.Loading()) {
		return
	}
	gen := s.logGen + 1
	if s.logw != nil {
		if err := s.logw.close(); err != nil {
			s.log.Warn("close snapshot log", "error", err)
		}
		s.logw = nil
	}
	s.logGen, s.compacting = gen, true
	whole := src
	whole.Dirty, whole.Saved, whole.Runs = nil, nil, src.RunMarks
	s.compactions.Add(1)
	go func() {
		defer s.compactions.Done()
		compactHook(compactStarts)
		start := time.Now()
		s.fullMu.Lock()
		_, _, err := s.save(whole, start, gen, &s.closing)
		s.fullMu.Unlock()
		if err == nil {
			compactHook(compactRenamed)
		}
		s.saveMu.Lock()
		defer s.saveMu.Unlock()
		defer compactHook(compactDone)
		s.compacting = false
		switch {
		case errors.Is(err, errClosed):
		case err != nil:
			s.compactFailed.Add(1)
			s.compactWait = min(max(2*s.compactWait, compactBackoff), time.Minute)
			s.compactAfter = time.Now().Add(s.compactWait)
			s.log.Error("snapshot compaction failed; the log keeps growing until the next one", "gen", gen, "error", err, "retry_in", s.compactWait)
		case s.baseGen < gen: // not overtaken by a whole save of Write
			s.compactWait = 0
			s.compacted.Add(1)
			s.based(gen)
			s.release()
			s.log.Debug("snapshot compacted", "gen", gen, "duration", time.Since(start), "bytes", s.baseBytes)
		}
	}()
}

// save encodes src, writes it to the temporary file, then renames it over the snapshot and
// syncs the directory. It returns the number of cells and of counter keys written.
func (s *Store) save(src Source, now time.Time, gen uint64, stop *atomic.Bool) (n, nkv uint64, err error) {
	if hint := s.sizeHint.Swap(0); hint > int64(cap(s.buf)) && hint < 1<<40 {
		// The file holds the chunks and some bbolt pages: room for the records it had.
		s.buf = make([]byte, 0, hint)
		s.ends = make([]int, 0, hint/chunkSize+1)
	}
	// One buffer holds the chunks of the runs, cells and counter keys, one section after
	// the other, and a second those of the leases (a pass over Tuples writes cells and
	// leases at once); ends and lends hold the end offset of every chunk in them.
	//
	// The sections are captured in this order: the runs' applied marks, then the leases
	// and the cells (each tuple's at one instant, with Tuples). A replay batch applied
	// after the marks were read is then in the cells but not in the marks (re-sent after a
	// restart from this file, it is applied again: counted twice, never lost); its cost
	// moved from its run's lease into the cells (or, read before Tuples came to its tuple,
	// is in neither), so the lease and the count together are what the edge may still
	// spend and has spent.
	sections := [6]section{
		{bucket: runsBucket, countName: metaRunsCount, crcName: metaRunsCRC},
		{bucket: leaseBucket, countName: metaLeaseCount, crcName: metaLeaseCRC},
		{bucket: cellsBucket, countName: metaCount, crcName: metaCRC},
		{bucket: kvBucket, countName: metaKVCount, crcName: metaKVCRC},
		{bucket: resetsBucket, countName: metaResetCount, crcName: metaResetCRC},
		overridesSection(),
	}
	runs, leases, cells, kv, resets := &sections[0], &sections[1], &sections[2], &sections[3], &sections[4]
	buf, ends := s.buf[:0], s.ends[:0]
	lbuf, lends := s.lbuf[:0], s.lends[:0]
	// The lease records name their run by its index among the run records.
	if s.runIndex == nil {
		s.runIndex = make(map[string]uint64)
	}
	clear(s.runIndex)
	enc := leaseEncoder{runs: s.runIndex}
	runs.base, runs.first = len(buf), len(ends)
	if buf, ends, runs.count, err = encodeRecords(buf, ends, src.Runs, enc.appendRun, nil); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", runsBucket, err)
	}
	if lbuf, lends, leases.count, err = encodeRecords(lbuf, lends, src.Leases, enc.appendKeyedLease, enc.newChunk); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", leaseBucket, err)
	}
	tmp := filepath.Join(s.dir, tmpName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, 0, fmt.Errorf("remove stale %s: %w", tmp, err)
	}
	// A save of Tuples alone (an origin's) writes the cells part by part, with a table of
	// the parts, and to the file as it encodes them: the file is created first.
	var db *bolt.DB
	defer func() {
		if db != nil { // failed
			_ = db.Close()
			_ = os.Remove(tmp) // best effort: the next Save removes it anyway
		}
	}()
	stream := src.Tuples != nil && src.Cells == nil
	if stream {
		hint := int64(1 << 20) // the last file's size, and an eighth more
		if fi, err := os.Stat(filepath.Join(s.dir, fileName)); err == nil {
			hint += min(fi.Size()+fi.Size()/8, 1<<40)
		}
		if db, err = createFile(tmp, int(hint)); err != nil {
			_ = os.Remove(tmp) // bbolt may have created it (a full disk)
			return 0, 0, err
		}
	}
	cells.base, cells.first = len(buf), len(ends)
	if buf, ends, cells.count, err = encodeRecords(buf, ends, src.Cells, appendCell, nil); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", cellsBucket, err)
	}
	var extra []metaValue
	var tags section // a save of Tuples alone's key tags (keytags.go)
	if src.Tuples != nil {
		t := tupleEncoder{lease: &enc, cbuf: buf, cends: ends, lbuf: lbuf, lends: lends, ncells: cells.count, nleases: leases.count, stop: stop}
		if stop != nil { // a compaction: in the background, it takes a share of a thread
			t.pace = newPacer(func() int { return behindLevel(s.logSize.Load(), s.baseSize.Load()) }, src.Served)
		}
		if stream { // the cells in a buffer of their own, written as they come
			t.cbuf, t.cends, t.db, t.parts = s.cbuf[:0], s.cends[:0], db, make([]uint64, engine.Parts+1)
			t.tags = &keyTagger{seed: src.ShardSeed, buf: s.tbuf[:0]}
		}
		err = t.encode(src.Tuples)
		if stream {
			table := appendParts(nil, t.parts)
			extra = []metaValue{{metaShardSeed, binary.BigEndian.AppendUint64(nil, src.ShardSeed)}, {metaParts, table},
				{metaPartsCRC, binary.BigEndian.AppendUint32(nil, crc32.Checksum(table, castagnoli))}}
			var tagMeta []metaValue
			tags, tagMeta = t.tags.section()
			extra = append(extra, tagMeta...)
			s.tbuf = t.tags.buf
			cells.buf, cells.base, cells.ends, cells.keyBase, cells.crc0 = t.cbuf, 0, t.cends, t.spilled, t.crc
			s.cbuf, s.cends = t.cbuf, t.cends
		} else {
			buf, ends = t.cbuf, t.cends
		}
		lbuf, lends, cells.count, leases.count = t.lbuf, t.lends, t.ncells, t.nleases
		if err != nil {
			return 0, 0, fmt.Errorf("%s and %s: %w", cellsBucket, leaseBucket, err)
		}
	}
	kv.base, kv.first = len(buf), len(ends)
	if buf, ends, kv.count, err = encodeRecords(buf, ends, src.KV, appendKV, nil); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", kvBucket, err)
	}
	resets.base, resets.first = len(buf), len(ends)
	if buf, ends, resets.count, err = encodeRecords(buf, ends, src.Resets, appendReset, nil); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", resetsBucket, err)
	}
	ovr := &sections[5]
	ovr.base, ovr.first = len(buf), len(ends)
	if buf, ends, ovr.count, err = encodeRecords(buf, ends, src.Overrides, appendOverride, nil); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", overridesBucket, err)
	}
	var horizon engine.OverrideHorizon
	if src.OverridesHorizon != nil {
		horizon = src.OverridesHorizon()
	}
	var changes uint64
	if src.Changes != nil {
		changes = src.Changes()
	}
	runs.buf, runs.ends = buf, ends[runs.first:cells.first]
	if !stream {
		cells.buf, cells.ends = buf, ends[cells.first:kv.first]
	}
	kv.buf, kv.ends = buf, ends[kv.first:resets.first]
	resets.buf, resets.ends = buf, ends[resets.first:ovr.first]
	ovr.buf, ovr.ends = buf, ends[ovr.first:]
	leases.buf, leases.ends = lbuf, lends
	// Keep the buffers for the next save, whose size is much the same, unless they are
	// mostly unused after the store shrank.
	if cap(buf) <= 2*len(buf)+1<<20 {
		s.buf, s.ends = buf, ends
	} else {
		s.buf, s.ends = nil, nil
	}
	if cap(lbuf) <= 2*len(lbuf)+1<<20 {
		s.lbuf, s.lends = lbuf, lends
	} else {
		s.lbuf, s.lends = nil, nil
	}
	if db == nil {
		mmap := 1 << 20
		for _, sec := range sections {
			mmap += sec.start(len(sec.ends)) - sec.base + len(sec.ends)*4096
		}
		if db, err = createFile(tmp, mmap); err != nil {
			_ = os.Remove(tmp) // bbolt may have created it (a full disk)
			return 0, 0, err
		}
	}
	extra = append(extra, metaValue{metaChanges, binary.BigEndian.AppendUint64(nil, changes)},
		metaValue{metaGen, binary.BigEndian.AppendUint64(nil, gen)})
	extra = append(extra, horizonMeta(horizon)...)
	all := sections[:]
	if stream {
		all = append(all, tags)
	}
	err = writeFile(db, tmp, all, now, extra)
	if cerr := db.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("close %s: %w", tmp, cerr)
	}
	db = nil
	if err != nil {
		_ = os.Remove(tmp) // best effort: the next Save removes it anyway
		return 0, 0, err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, fileName)); err != nil {
		_ = os.Remove(tmp)
		return 0, 0, fmt.Errorf("rename %s: %w", tmp, err)
	}
	return cells.count, kv.count, syncDir(s.dir)
}

// encodeRecords appends the records of recs (nil: none) to buf, in their order, each
// encoded by enc, and the end offset of each chunk to ends. A chunk is closed once it
// holds chunkSize bytes or more; a record is never split. newChunk (nil: none) is called
// whenever a chunk is closed, so that an encoder that refers to earlier records starts
// each chunk afresh. It returns the number of records, or enc's first error.
func encodeRecords[T any](buf []byte, ends []int, recs iter.Seq[T], enc func([]byte, T) ([]byte, error), newChunk func()) ([]byte, []int, uint64, error) {
	if recs == nil {
		return buf, ends, 0, nil
	}
	start := len(buf)
	var n uint64
	var err error
	for r := range recs {
		if buf, err = enc(buf, r); err != nil {
			return buf, ends, 0, fmt.Errorf("record %d: %w", n, err)
		}
		n++
		// No yielding here: the engine's iterators give way between shards themselves.
		if ends = closeChunk(buf, ends, &start, false); start == len(buf) && newChunk != nil {
			newChunk()
		}
	}
	return buf, closeChunk(buf, ends, &start, true), n, nil
}

// closeChunk appends to ends the end of buf's chunk that began at *start, and starts the
// next chunk there, once the chunk holds chunkSize bytes or more, or (final) any.
func closeChunk(buf []byte, ends []int, start *int, final bool) []int {
	if n := len(buf) - *start; n >= chunkSize || (final && n > 0) {
		ends = append(ends, len(buf))
		*start = len(buf)
	}
	return ends
}

// tupleEncoder encodes what engine.Tuples yields: the cells into cbuf (chunk ends in
// cends), the lease grants into lbuf (lends), each grant referring to its tuple's first
// cell record, when it has one, for the key. ncells and nleases count the records of each,
// those before the tuples included (a cell's index in the file is its count before it).
//
// With parts set (engine.Parts+1 entries), cbuf holds only cells, and parts[i] is set to
// where part i's records begin (chunk index << 32 | byte offset in the chunk;
// parts[engine.Parts]: where the last ends); the grants then spell out their keys, so that
// the leases load without the cells. With db set too, the complete chunks are written to db's cells bucket
// whenever they reach spillBytes (spill): spilled counts them, crc is their CRC-32C, and
// cbuf and cends hold the chunks after them.
type tupleEncoder struct {
	lease           *leaseEncoder
	cbuf, lbuf      []byte
	cends, lends    []int
	ncells, nleases uint64
	parts           []uint64
	db              *bolt.DB
	spilled, crc    uint32
	stop            *atomic.Bool // set: stop with errClosed (nil: never)
	pace            *pacer       // a compaction's (nil: none)
	// tags, with parts, builds the key tags of the tuples (keytags.go), written with the
	// cells; flushed counts the bytes of the cells written (spill).
	tags    *keyTagger
	flushed int64
}

// spill writes the complete chunks of cbuf to db, when they are spillBytes or more, and
// keeps only the chunk begun at *cstart, moved to cbuf's start.
func (t *tupleEncoder) spill(cstart *int) error {
	if t.db == nil || len(t.cends) == 0 || t.cends[len(t.cends)-1] < spillBytes {
		return nil
	}
	keys := make([]byte, chunkKeyLen*len(t.cends)) // bbolt refers to them until the commit
	err := t.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(cellsBucket))
		if err != nil {
			return fmt.Errorf("create bucket %s: %w", cellsBucket, err)
		}
		b.FillPercent = 1.0
		if t.tags != nil {
			tb, err := tx.CreateBucketIfNotExists([]byte(tagsBucket))
			if err != nil {
				return fmt.Errorf("create bucket %s: %w", tagsBucket, err)
			}
			tb.FillPercent = 1.0
			if err := t.tags.spill(tb); err != nil {
				return err
			}
		}
		start := 0
		for i, end := range t.cends {
			k := keys[i*chunkKeyLen : (i+1)*chunkKeyLen : (i+1)*chunkKeyLen]
			binary.BigEndian.PutUint32(k, t.spilled+uint32(i))
			v := t.cbuf[start:end]
			t.crc = crc32.Update(t.crc, castagnoli, v)
			if err := b.Put(k, v); err != nil {
				return fmt.Errorf("put %s chunk %d: %w", cellsBucket, t.spilled+uint32(i), err)
			}
			start = end
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write chunks %d..: %w", t.spilled, err)
	}
	if t.tags != nil {
		t.tags.spilled()
	}
	last := t.cends[len(t.cends)-1]
	t.flushed += int64(last)
	t.cbuf = t.cbuf[:copy(t.cbuf, t.cbuf[last:])]
	*cstart -= last
	t.spilled += uint32(len(t.cends))
	t.cends = t.cends[:0]
	return nil
}

// encode appends the records of tuples, closing every chunk it starts.
func (t *tupleEncoder) encode(tuples iter.Seq[engine.TupleRecord]) (err error) {
	cstart, lstart := len(t.cbuf), len(t.lbuf)
	t.lease.newChunk()
	part := -1
	// upTo starts part i (and those before it that have no tuple) here.
	upTo := func(i int) {
		for part < i {
			part++
			t.parts[part] = uint64(t.spilled+uint32(len(t.cends)))<<32 | uint64(len(t.cbuf)-cstart)
		}
	}
	for r := range tuples {
		if t.stop != nil && t.stop.Load() {
			return errClosed
		}
		t.pace.step()
		if t.parts != nil && r.Part != part {
			if r.Part < part || r.Part >= engine.Parts {
				return fmt.Errorf("tuple of part %d after part %d", r.Part, part)
			}
			upTo(r.Part)
			if t.tags != nil {
				t.tags.part(t.flushed + int64(len(t.cbuf)))
			}
		}
		if t.tags != nil && len(r.Cells) > 0 {
			t.tags.tuple(r.Key, t.flushed+int64(len(t.cbuf)))
		}
		var ref uint64 // 1 + the index of the tuple's first cell record; 0: none
		if len(r.Cells) > 0 && t.parts == nil {
			ref = t.ncells + 1
		}
		for _, c := range r.Cells {
			c.Key = r.Key
			if t.cbuf, err = appendCell(t.cbuf, c); err != nil {
				return fmt.Errorf("cell record %d: %w", t.ncells, err)
			}
			t.ncells++
			t.cends = closeChunk(t.cbuf, t.cends, &cstart, false)
		}
		if err := t.spill(&cstart); err != nil {
			return err
		}
		for _, l := range r.Leases {
			l.Key = r.Key
			if t.lbuf, err = t.lease.appendLease(t.lbuf, l, ref); err != nil {
				return fmt.Errorf("lease record %d: %w", t.nleases, err)
			}
			t.nleases++
			if t.lends = closeChunk(t.lbuf, t.lends, &lstart, false); lstart == len(t.lbuf) {
				t.lease.newChunk()
			}
		}
	}
	if t.parts != nil {
		upTo(engine.Parts)
	}
	t.cends = closeChunk(t.cbuf, t.cends, &cstart, true)
	t.lends = closeChunk(t.lbuf, t.lends, &lstart, true)
	return nil
}

// appendCell appends one cell record:
//
//	uvarint len(key) | key | varint seq | uvarint regional | uvarint imported |
//	uvarint len(foreign) | per foreign region: uvarint len(region) | region | uvarint count
func appendCell(buf []byte, r engine.CellRecord) ([]byte, error) {
	if len(r.Key) > maxKeyLen {
		return buf, fmt.Errorf("%d-byte key, the most is %d", len(r.Key), maxKeyLen)
	}
	buf = appendString(buf, r.Key)
	buf = binary.AppendVarint(buf, r.Seq)
	buf = binary.AppendUvarint(buf, r.Regional)
	buf = binary.AppendUvarint(buf, r.Imported)
	buf = binary.AppendUvarint(buf, uint64(len(r.Foreign)))
	for _, f := range r.Foreign {
		buf = appendString(buf, f.Region)
		buf = binary.AppendUvarint(buf, f.Count)
	}
	return buf, nil
}

// appendKV appends one keyspace record:
//
//	uvarint len(workspace) | workspace | uvarint len(key) | key | varint expire_at_ms |
//	uvarint kind | uvarint len(value) | value
//
// The keyspace bounds keys and values (keyspace.MaxKey, keyspace.MaxValue, and a
// collection's keyspace.MaxObjectBytes), so a record stays bounded; Load leaves their
// check to keyspace.KV.Restore.
func appendKV(buf []byte, r keyspace.Record) ([]byte, error) {
	buf = appendString(buf, r.Workspace)
	buf = appendString(buf, r.Key)
	buf = binary.AppendVarint(buf, r.ExpireAtMs)
	kind := r.Kind
	if kind == keyspace.KindNone {
		kind = keyspace.KindString
	}
	buf = binary.AppendUvarint(buf, uint64(kind))
	buf = binary.AppendUvarint(buf, uint64(len(r.Value)))
	return append(buf, r.Value...), nil
}

// appendReset appends one reset record (the resets bucket above).
func appendReset(buf []byte, r engine.ResetRecord) ([]byte, error) {
	if len(r.Key) > maxKeyLen {
		return buf, fmt.Errorf("%d-byte key", len(r.Key))
	}
	buf = appendString(buf, r.Key)
	buf = binary.AppendUvarint(buf, r.Version)
	buf = binary.AppendVarint(buf, r.UntilMs)
	buf = binary.AppendUvarint(buf, uint64(len(r.Cancels)))
	for _, c := range r.Cancels {
		buf = binary.AppendVarint(buf, c.Seq)
		buf = appendString(buf, c.Region)
		buf = binary.AppendUvarint(buf, c.Count)
	}
	return buf, nil
}

// runSuperseded is the flag of a run record whose run was superseded; runHands of one
// followed by the run's hand-off count (older saves lack it: 0).
const (
	runSuperseded = 1
	runHands      = 2
)

// appendRun appends one edge run's replay marks:
//
//	uvarint len(run) | run | uvarint applied | varint heard_ms | varint replay_ms |
//	uvarint flags (1: superseded, 2: hands follows) | uvarint hands
func appendRun(buf []byte, r engine.RunRecord) ([]byte, error) {
	if len(r.Run) > engine.MaxRunLen {
		return buf, fmt.Errorf("%d-byte run name, the most is %d", len(r.Run), engine.MaxRunLen)
	}
	buf = appendString(buf, r.Run)
	buf = binary.AppendUvarint(buf, r.Applied)
	buf = binary.AppendVarint(buf, r.HeardMs)
	buf = binary.AppendVarint(buf, r.ReplayMs)
	flags := uint64(runHands)
	if r.Superseded {
		flags |= runSuperseded
	}
	buf = binary.AppendUvarint(buf, flags)
	return binary.AppendUvarint(buf, r.Hands), nil
}

// leaseEncoder encodes the runs and the leases of one save. A lease record names its tuple
// by one of the tuple's cell records when it can (a save from engine.Tuples), its run by
// the run's position among the run records, and gives its sequence and end as the
// difference from the previous record of its chunk: grants made within a minute of each
// other differ little there. So a record is about 9 bytes, where format 6 spelled
// out the key, the run's name and both numbers (about 90 bytes for a 20-byte key).
type leaseEncoder struct {
	runs      map[string]uint64 // run name -> 1 + its index among the run records
	nruns     uint64
	prevSeq   uint64 // the previous lease record's, in this chunk (0 at its start)
	prevUntil int64
}

// appendRun is appendRun that also numbers the run for the lease records.
func (le *leaseEncoder) appendRun(buf []byte, r engine.RunRecord) ([]byte, error) {
	buf, err := appendRun(buf, r)
	if err == nil {
		le.nruns++
		if _, dup := le.runs[r.Run]; !dup {
			le.runs[r.Run] = le.nruns
		}
	}
	return buf, err
}

// newChunk starts a chunk: its first record's sequence and end are given in full.
func (le *leaseEncoder) newChunk() { le.prevSeq, le.prevUntil = 0, 0 }

// appendKeyedLease appends a lease record that spells out its key.
func (le *leaseEncoder) appendKeyedLease(buf []byte, r engine.LeaseRecord) ([]byte, error) {
	return le.appendLease(buf, r, 0)
}

// appendLease appends one lease grant, whose key is that of cell record cell-1 (0: none):
//
//	uvarint cell | [uvarint len(key) | key, when cell is 0] |
//	uvarint run | [uvarint len(run) | run, when run is 0] |
//	uvarint g | uvarint spent | varint seq - previous seq | varint until_ms - previous until_ms
//
// where run is 1 + the index of the grant's run among the run records, or 0 when it is not
// among them (its name follows), and the previous seq and until_ms are those of the
// chunk's previous record, 0 for its first (the differences wrap, as uint64 and int64).
func (le *leaseEncoder) appendLease(buf []byte, r engine.LeaseRecord, cell uint64) ([]byte, error) {
	if len(r.Key) > maxKeyLen || len(r.Run) > engine.MaxRunLen {
		return buf, fmt.Errorf("%d-byte key and %d-byte run name, the most is %d and %d", len(r.Key), len(r.Run), maxKeyLen, engine.MaxRunLen)
	}
	buf = binary.AppendUvarint(buf, cell)
	if cell == 0 {
		buf = appendString(buf, r.Key)
	}
	if ref, ok := le.runs[r.Run]; ok {
		buf = binary.AppendUvarint(buf, ref)
	} else {
		buf = append(buf, 0)
		buf = appendString(buf, r.Run)
	}
	buf = binary.AppendUvarint(buf, r.G)
	buf = binary.AppendUvarint(buf, r.Spent)
	buf = binary.AppendVarint(buf, int64(r.Seq-le.prevSeq))
	buf = binary.AppendVarint(buf, r.UntilMs-le.prevUntil)
	le.prevSeq, le.prevUntil = r.Seq, r.UntilMs
	return buf, nil
}

// appendString appends s with its length before it, as a uvarint.
func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// section is one bucket of chunks to write: chunk i of buf is buf[ends[i-1]:ends[i]], the
// first starting at base. count records; countName and crcName are its meta values. first
// is the index of its first chunk among every section's, while save encodes.
type section struct {
	bucket             string
	buf                []byte
	base               int
	ends               []int
	first              int
	count              uint64
	countName, crcName string
	// keyBase is the key of the first chunk, and crc0 the CRC-32C of the bucket's chunks
	// before it: a save of Tuples writes the cells' first chunks as it encodes them.
	keyBase, crc0 uint32
}

// start returns the offset where chunk i begins.
func (sec *section) start(i int) int {
	if i == 0 {
		return sec.base
	}
	return sec.ends[i-1]
}

// createFile creates the bbolt file at path for a save, mapping mmap bytes of it up front
// so that the writes do not remap as the file grows: the chunks, a page of slack for each
// (values take whole pages), plus room for the branch, meta and freelist pages.
func createFile(path string, mmap int) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o644, &bolt.Options{
		Timeout:         lockTimeout,
		NoSync:          true,
		NoGrowSync:      true,
		InitialMmapSize: mmap,
	})
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return db, nil
}

// writeFile writes the chunks of sections and the meta bucket (with extra) to db, the file
// at path, and syncs it. Writes are not synced one by one: the file is useless until
// renamed, so a single fsync at the end is enough. The caller closes db.
func writeFile(db *bolt.DB, path string, sections []section, now time.Time, extra []metaValue) error {
	nchunks := 0
	for _, sec := range sections {
		nchunks += len(sec.ends)
	}

	// bbolt keeps references to keys and values until the commit: the values are slices
	// of the sections' buffers, which do not change during writeFile, and the keys have
	// one array.
	keys := make([]byte, chunkKeyLen*nchunks)
	crcs, err := writeChunks(db, sections, keys)
	if err != nil {
		return err
	}

	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte(metaBucket))
		if err != nil {
			return fmt.Errorf("create bucket: %w", err)
		}
		put := func(name string, v []byte) {
			if err == nil {
				err = b.Put([]byte(name), v)
			}
		}
		put(metaVersion, binary.BigEndian.AppendUint64(nil, formatVersion))
		put(metaSavedMs, binary.BigEndian.AppendUint64(nil, uint64(now.UnixMilli())))
		for i, sec := range sections {
			put(sec.countName, binary.BigEndian.AppendUint64(nil, sec.count))
			put(sec.crcName, binary.BigEndian.AppendUint32(nil, crcs[i]))
		}
		for _, m := range extra {
			put(m.name, m.value)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("write meta: %w", err)
	}
	if err := db.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// writeChunks creates the sections' buckets in db and puts their chunks, keyed by their
// index, in transactions of at most batchBytes (a chunk more if it alone is larger): the
// sections one after the other, so a small snapshot is one transaction. keys is room for
// all the chunk keys. It returns each section's CRC-32C of its chunks in order.
func writeChunks(db *bolt.DB, sections []section, keys []byte) ([]uint32, error) {
	type ref struct{ sec, chunk int }
	var order []ref
	for si := range sections {
		for ci := range sections[si].ends {
			order = append(order, ref{si, ci})
		}
	}
	crcs := make([]uint32, len(sections))
	for si := range sections {
		crcs[si] = sections[si].crc0
	}
	// One transaction per batch; the first creates every bucket, even empty ones.
	for lo, first := 0, true; first || lo < len(order); first = false {
		hi := lo
		err := db.Update(func(tx *bolt.Tx) error {
			buckets := make([]*bolt.Bucket, len(sections))
			for si := range sections {
				b, err := tx.CreateBucketIfNotExists([]byte(sections[si].bucket))
				if err != nil {
					return fmt.Errorf("create bucket %s: %w", sections[si].bucket, err)
				}
				b.FillPercent = 1.0 // keys arrive in order: fill pages completely
				buckets[si] = b
			}
			for batch := 0; hi < len(order); hi++ {
				sec, ci := &sections[order[hi].sec], order[hi].chunk
				v := sec.buf[sec.start(ci):sec.ends[ci]]
				if hi > lo && batch+len(v) > batchBytes {
					break
				}
				batch += len(v)
				k := keys[hi*chunkKeyLen : (hi+1)*chunkKeyLen : (hi+1)*chunkKeyLen]
				binary.BigEndian.PutUint32(k, sec.keyBase+uint32(ci))
				crcs[order[hi].sec] = crc32.Update(crcs[order[hi].sec], castagnoli, v)
				if err := buckets[order[hi].sec].Put(k, v); err != nil {
					return fmt.Errorf("put %s chunk %d: %w", sec.bucket, ci, err)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("write chunks %d..%d: %w", lo, hi, err)
		}
		lo = hi
	}
	return crcs, nil
}

// syncDir fsyncs dir so that a rename inside it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory for sync: %w", err)
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("sync directory %s: %w", dir, serr)
	}
	if cerr != nil {
		return fmt.Errorf("close directory %s: %w", dir, cerr)
	}
	return nil
}
