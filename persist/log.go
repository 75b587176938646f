package persist

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ratchet/ratchet/engine"
)

// The delta log: incremental saves.
//
// A save of every cell costs a pass over the store (0.4 s at 1M cells, seconds at 10M), so
// an origin whose Source has Dirty (engine.Dirty: the tuples changed since the last save)
// writes the whole file only now and then (the base, snapshot.db) and, at every other
// save, appends one frame to a log beside it: the tuples changed since the previous save,
// each with its live cells and lease grants, and the sections that are small and must be
// current (the runs' replay marks, the counter keyspace, the reset records, the overrides
// and their horizon, the change version), written whole in every frame. A frame is synced
// before the save returns, so a kill -9 loses at most the saves' interval, as with whole
// files; the save's time follows the write rate, not the store's size.
//
// Files: the base records its generation G (meta "gen"); the logs are snapshot.db.log.<gen>.
// A load reads the base and then the frames of every log whose gen is at least G, in gen
// order: a tuple's cells merge with max (a cell's counts only grow, saved raw: reset
// records cancel, engine.Tuples), its lease grants are those of its last record, and the
// small sections are the last frame's. A log's frames end at the first frame that is torn
// (a crash while it was written) or damaged: what follows is ignored, logged. Before an
// origin serves, a load only checks the frames and indexes their tuple records by part
// (readLogs: the records are walked, not decoded); a record is decoded when its part, or
// its tuple, loads (Opened.Parts), and the grants are looked for in the parts of the
// tuples that have some (apply).
//
// Once the logs since the base hold more than a share of it (compactShare), a compaction
// rewrites the base in the background: the frames go to a new log of gen G' (G' greater
// than every gen in the directory) from then on, the base of gen G' is written as a save
// of the whole store (to the temporary file, renamed over snapshot.db, the directory
// synced) and then the logs of gen below G' are deleted. Crash points:
//
//   - before the rename: snapshot.db is the base G, the logs G.. and G' are all there and
//     all apply (the frames of G' follow those of G: no change is missed between them);
//   - after the rename: the base G' is every tuple at some instant after the frames moved
//     to log G', and log G' holds every change since; logs below G' are ignored, then
//     deleted (only once the rename is synced);
//   - during a frame's write: the torn frame is ignored; the frames before it hold every
//     save that returned.
//
// A frame that fails to be written (a full disk) makes the next save a whole one: the
// tuples it read are no longer marked. A process that starts from a base and its logs
// appends to a new log, of a gen above every one found, so it never writes after a torn
// frame. Without a base (none, or set aside) the first save writes one.
//
// A log file is:
//
//	"RCHTLOG1" | gen (8 bytes, big endian) | frames
//
// and a frame: uint32 length of its body | uint32 CRC-32C of its body (both big endian) |
// body:
//
//	varint saved_ms | runs | tuples | kv | resets | overrides | uvarint horizon stamp |
//	uvarint len(horizon region) | horizon region | uvarint change version
//
// where each of runs, tuples, kv, resets and overrides is uint32 count | uint32 bytes
// (big endian: written in place once the records are) | its records, encoded as in the base's buckets (save.go) but for a tuple:
//
//	uvarint part | uvarint len(key) | key | uvarint cells | per cell: a cell record
//	(appendCell) with an empty key | uvarint grants | per grant: uvarint len(run) | run |
//	uvarint g | uvarint spent | uvarint seq | varint until_ms
const (
	logPrefix      = fileName + ".log."
	logMagic       = "RCHTLOG1"
	logHeaderLen   = len(logMagic) + 8
	frameHeaderLen = 8
	maxFrameLen    = 1<<31 - 1
	metaGen        = "gen"
	// compactShare: a compaction starts once the logs since the base hold more than
	// 1/compactShare of its bytes (and at least minCompactBytes). The logs grow on while it
	// runs (pacer): a load reads them beside the base, and keeps them in memory until
	// loaded.
	compactShare    = 4
	minCompactBytes = 4 << 20
)

// compactDue says whether logs of logBytes make a base of baseBytes due for a compaction.
// A variable for tests.
var compactDue = func(logBytes, baseBytes int64) bool {
	return logBytes > max(baseBytes/compactShare, minCompactBytes)
}

// compactBackoff is the first wait after a failed compaction (doubling to a minute). A
// variable for tests, which must not depend on how fast a loaded machine saves.
var compactBackoff = time.Second

// compactHook is called by a compaction at each of its stages: before it writes the base,
// once the base is renamed in place, and once it is done (the old logs deleted). A
// variable for tests, which stop it there to see the crash points.
var compactHook = func(stage int) {}

const (
	compactStarts = iota
	compactRenamed
	compactDone
)

// logName returns the name of the log of gen.
func logName(gen uint64) string { return logPrefix + strconv.FormatUint(gen, 10) }

// logGens returns the gens of the logs in dir, in order.
func logGens(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list logs: %w", err)
	}
	var gens []uint64
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), logPrefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if g, err := strconv.ParseUint(rest, 10, 64); err == nil && logName(g) == e.Name() {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	return gens, nil
}

// logWriter appends frames to one log.
type logWriter struct {
	f    *os.File
	gen  uint64
	size int64
}

// createLog creates the log of gen in dir with its header, synced with the directory.
func createLog(dir string, gen uint64) (*logWriter, error) {
	path := filepath.Join(dir, logName(gen))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	hdr := binary.BigEndian.AppendUint64([]byte(logMagic), gen)
	if _, err = f.Write(hdr); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("create log %s: %w", path, err)
	}
	return &logWriter{f: f, gen: gen, size: int64(len(hdr))}, nil
}

// append writes frame (its header's 8 bytes reserved at its start, filled here) and syncs
// it. On error it cuts the file back to where the frame began, if it can.
func (w *logWriter) append(frame []byte) error {
	body := frame[frameHeaderLen:]
	if len(body) > maxFrameLen {
		return fmt.Errorf("frame of %d bytes, the most is %d", len(body), maxFrameLen)
	}
	binary.BigEndian.PutUint32(frame[0:4], uint32(len(body)))
	binary.BigEndian.PutUint32(frame[4:8], crc32.Checksum(body, castagnoli))
	_, err := w.f.Write(frame)
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		if terr := w.f.Truncate(w.size); terr == nil {
			_, _ = w.f.Seek(w.size, 0)
		}
		return fmt.Errorf("append to %s: %w", w.f.Name(), err)
	}
	w.size += int64(len(frame))
	return nil
}

// close closes the log.
func (w *logWriter) close() error {
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", w.f.Name(), err)
	}
	return nil
}

// frameEncoder encodes one frame's body after the frame header.
type frameEncoder struct {
	buf []byte
}

// frameSection appends a section of the records recs yields, each encoded by enc.
func frameSection[T any](f *frameEncoder, recs iter.Seq[T], enc func([]byte, T) ([]byte, error)) (uint64, error) {
	at := len(f.buf)
	f.buf = append(f.buf, make([]byte, 8)...)
	var n uint64
	if recs != nil {
		for r := range recs {
			var err error
			if f.buf, err = enc(f.buf, r); err != nil {
				return 0, fmt.Errorf("record %d: %w", n, err)
			}
			n++
		}
	}
	if n > math.MaxUint32 || len(f.buf)-at-8 > maxFrameLen {
		return 0, fmt.Errorf("%d records of %d bytes", n, len(f.buf)-at-8)
	}
	binary.BigEndian.PutUint32(f.buf[at:], uint32(n))
	binary.BigEndian.PutUint32(f.buf[at+4:], uint32(len(f.buf)-at-8))
	return n, nil
}

// appendTuple appends one tuple record of a frame.
func appendTuple(buf []byte, t engine.TupleRecord) ([]byte, error) {
	if len(t.Key) > maxKeyLen {
		return buf, fmt.Errorf("%d-byte key, the most is %d", len(t.Key), maxKeyLen)
	}
	buf = binary.AppendUvarint(buf, uint64(t.Part))
	buf = appendString(buf, t.Key)
	buf = binary.AppendUvarint(buf, uint64(len(t.Cells)))
	for _, c := range t.Cells {
		c.Key = ""
		buf, _ = appendCell(buf, c)
	}
	buf = binary.AppendUvarint(buf, uint64(len(t.Leases)))
	for _, l := range t.Leases {
		if len(l.Run) > engine.MaxRunLen {
			return buf, fmt.Errorf("%d-byte run name, the most is %d", len(l.Run), engine.MaxRunLen)
		}
		buf = appendString(buf, l.Run)
		buf = binary.AppendUvarint(buf, l.G)
		buf = binary.AppendUvarint(buf, l.Spent)
		buf = binary.AppendUvarint(buf, l.Seq)
		buf = binary.AppendVarint(buf, l.UntilMs)
	}
	return buf, nil
}

// encodeFrame encodes the frame of src into buf (reused) and returns it with the number
// of tuples it holds, of keyspace records, and the bytes of the tuples' section: the
// runs first, then the changed tuples, as a whole save captures them (save), and the
// change version last.
func encodeFrame(buf []byte, src Source, savedMs int64) (_ []byte, n, nkv uint64, tupleLen int, err error) {
	f := frameEncoder{buf: append(buf[:0], make([]byte, frameHeaderLen)...)}
	f.buf = binary.AppendVarint(f.buf, savedMs)
	if _, err = frameSection(&f, src.Runs, appendRun); err != nil {
		return f.buf, 0, 0, 0, fmt.Errorf("%s: %w", runsBucket, err)
	}
	at := len(f.buf)
	if n, err = frameSection(&f, src.Dirty, appendTuple); err != nil {
		return f.buf, 0, 0, 0, fmt.Errorf("tuples: %w", err)
	}
	tupleLen = len(f.buf) - at
	if nkv, err = frameSection(&f, src.KV, appendKV); err != nil {
		return f.buf, 0, 0, 0, fmt.Errorf("%s: %w", kvBucket, err)
	}
	if _, err = frameSection(&f, src.Resets, appendReset); err != nil {
		return f.buf, 0, 0, 0, fmt.Errorf("%s: %w", resetsBucket, err)
	}
	if _, err = frameSection(&f, src.Overrides, appendOverride); err != nil {
		return f.buf, 0, 0, 0, fmt.Errorf("%s: %w", overridesBucket, err)
	}
	var horizon engine.OverrideHorizon
	if src.OverridesHorizon != nil {
		horizon = src.OverridesHorizon()
	}
	f.buf = binary.AppendUvarint(f.buf, horizon.Stamp)
	f.buf = appendString(f.buf, horizon.Region)
	var changes uint64
	if src.Changes != nil {
		changes = src.Changes()
	}
	f.buf = binary.AppendUvarint(f.buf, changes)
	return f.buf, n, nkv, tupleLen, nil
}

// logSet is what a load found in the logs that apply to its base: the tuple records of
// every frame, by part, and the small sections of the last frame.
type logSet struct {
	frames int
	bytes  int64    // of the log files read
	maxGen uint64   // the highest gen of a log in the directory
	logs   [][]byte // the bytes of each log read, mapped (mapLog) or read; release them
	mapped []bool   // whether logs[i] is mapped
	offs   []int    // the records, in part order (log order within a part): i<<logAtBits | their offset in logs[i]
	partAt []int    // part p's records are offs[partAt[p]:partAt[p+1]]
	last   []byte   // the last frame's body (a copy)
	leased []int32  // the parts of the records with grants
	// misfiled is the number of records filed under another part than their key's (a
	// CRC-valid frame of a damaged writer), when readLogs checked them (a lazy load's).
	misfiled int
	// tags holds, beside each of offs (a lazy load's: readLogs given a seed; else nil),
	// its key's tag (keyTag): a keyed restore (appendRecords) reads only the records of its
	// key's tag, not every record of the part, each a cache miss in the mapped logs. 4 bytes
	// a record (28 MB for 7M records) while the load lasts, freed with offs (Opened.Close),
	// and as much again while readLogs sorts them.
	tags []uint32
}

// logAtBits is the number of bits of an offset in a log, in logSet.offs.
const logAtBits = 40

// keyTag returns the tag of a key of hash h (engine.KeyHash): its bits above the part's
// (engine.PartOfHash), so that two keys of a part share a tag once in 2^32.
func keyTag(h uint64) uint32 { return uint32(h >> 32) }

// record returns a decoder at the record at (logSet.offs's), and its log's bytes as a
// string.
func (ls *logSet) record(at int) (decoder, string) {
	b := ls.logs[at>>logAtBits]
	return decoder{b: b, p: at & (1<<logAtBits - 1)}, unsafe.String(unsafe.SliceData(b), len(b))
}

// release unmaps the logs. Nothing of them is read after.
func (ls *logSet) release() {
	if ls == nil {
		return
	}
	for i, b := range ls.logs {
		if ls.mapped[i] {
			_ = unmapLog(b)
		}
	}
	ls.logs, ls.mapped = nil, nil
}

// logFrame is a frame found in a log, as readLogs reads it.
type logFrame struct {
	file   int    // its log's index in logSet.logs
	body   [2]int // where its body lies in its log
	from   int    // its records are order[from:from+n] (readLogs's)
	n      int    // the number of tuple records its section header says (bounded)
	leased []int32
	why    string // why the frame is not to be applied, or ""
	// misfiled is the number of its records filed under another part than their key's.
	misfiled int
	fault    error // a fault reading it (checkFrame): errFault
}

// minTupleLen is the size of the shortest tuple record: four one-byte varints.
const minTupleLen = 4

// readLogs reads the logs of dir whose gen is at least base, logging what it ignores.
// Release the logSet once its records are read. With seed (a lazy load's: the base's hash
// seed) every record's part is checked against its key's (engine.PartOf): a record filed
// under another part (a CRC-valid frame of a damaged writer) makes apply look for the
// grants in every record, in log order, as a load that decodes them all does; and its
// key's tag is kept (logSet.tags), the key's hash computed there anyway.
//
// It runs before an origin serves, so it does no more than that needs: the logs are mapped
// (mapLog: the page cache's pages, not a copy), each frame is checked (its CRC, its small
// sections decoded, its tuple records walked without being decoded: skipTuple), the frames
// on every thread at once, and the records of the frames that apply are indexed by part,
// where Opened.Parts decodes them. (Decoding each record into cells, the logs copied twice
// and slices grown record by record took 1.3 to 2.6 s at 10M tuples with 87 to 239 MB of
// logs; a copy into fresh memory alone, its pages zeroed by the kernel, took half the time
// left.) A fault reading a mapped log (the file cut while it is read, an I/O error paging it
// in) makes it read the logs again, not mapped: it then finds what a read finds, a shorter
// file say, as a torn frame, rather than fail the load.
func readLogs(dir string, base uint64, seed *uint64, log *slog.Logger) (*logSet, error) {
	return readLogsAs(dir, base, seed, !readLogsOnly, log)
}

// readLogsAs is readLogs with the logs mapped where they can be if mapOK, else read.
func readLogsAs(dir string, base uint64, seed *uint64, mapOK bool, log *slog.Logger) (*logSet, error) {
	ls, warns, err := readLogsOnce(dir, base, seed, mapOK)
	if mapOK && errors.Is(err, errFault) {
		log.Warn("snapshot log: a fault reading a mapped log (cut while it was read, or an I/O error): the logs are read again, not mapped", "error", err)
		ls, warns, err = readLogsOnce(dir, base, seed, false)
	}
	if err != nil {
		return nil, err
	}
	for _, w := range warns {
		log.Warn(w.msg, w.args...)
	}
	return ls, nil
}

// logWarning is a warning of readLogsOnce, logged by readLogs once the logs are read.
type logWarning struct {
	msg  string
	args []any
}

// errFault is the error of a fault reading a mapped log (faultError).
var errFault = errors.New("fault reading a mapped log")

// faultError returns r, recovered from a panic where debug.SetPanicOnFault is set, as an
// error wrapping errFault if it is a fault reading memory (a runtime.Error with the fault's
// address), and panics again with r otherwise: a bug is not to be taken for a damaged file.
func faultError(r any) error {
	if e, ok := r.(interface {
		runtime.Error
		Addr() uintptr
	}); ok {
		return fmt.Errorf("%w at %#x: %v", errFault, e.Addr(), e)
	}
	panic(r)
}

// readLogsHook is called by readLogsOnce at each stage where it reads the logs' bytes
// (readLogsRead, readLogsWalked, readLogsChecked) and once it is done. A variable for
// tests, which cut a mapped log there.
var readLogsHook = func(stage int) {}

const (
	readLogsRead    = iota // a log was read or mapped (before its frames are found)
	readLogsWalked         // the frames were found (before they are checked)
	readLogsChecked        // the frames were checked (before the last one is copied)
	readLogsDone           // the logs were read (before they are applied)
)

// readLogsOnce is readLogs with the logs mapped where they can be if mapOK, else read,
// and what it ignores in warnings. A fault reading a mapped log is an error wrapping
// errFault.
func readLogsOnce(dir string, base uint64, seed *uint64, mapOK bool) (_ *logSet, warns []logWarning, err error) {
	gens, err := logGens(dir)
	if err != nil {
		return nil, nil, err
	}
	ls := &logSet{}
	defer func() {
		if err != nil {
			ls.release()
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = faultError(r)
		}
	}()
	var paths []string
	var frames []logFrame
	records := 0
	for _, g := range gens {
		ls.maxGen = max(ls.maxGen, g)
		if g < base {
			continue
		}
		path := filepath.Join(dir, logName(g))
		data, mapped, err := readLog(path, mapOK)
		if err == nil && len(data) >= 1<<logAtBits {
			err = fmt.Errorf("%d bytes", len(data))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read log %s: %w", path, err)
		}
		i := len(ls.logs)
		ls.logs, ls.mapped, paths = append(ls.logs, data), append(ls.mapped, mapped), append(paths, path)
		ls.bytes += int64(len(data))
		readLogsHook(readLogsRead)
		if len(data) < logHeaderLen || string(data[:len(logMagic)]) != logMagic || binary.BigEndian.Uint64(data[len(logMagic):logHeaderLen]) != g {
			warns = append(warns, logWarning{"snapshot log without a valid header ignored (a crash while it was created)", []any{"path", path, "bytes", len(data)}})
			continue
		}
		for p := logHeaderLen; p < len(data); {
			fr := logFrame{file: i, body: [2]int{p + frameHeaderLen, p + frameHeaderLen}, from: records} // where a whole frame's body would begin
			n, why := frameLen(data[p:])
			if fr.why = why; why == "" {
				fr.body = [2]int{p + frameHeaderLen, p + frameHeaderLen + n}
				fr.n = tupleCount(data[fr.body[0]:fr.body[1]])
				records += fr.n
			}
			frames = append(frames, fr)
			if why != "" {
				break
			}
			p += frameHeaderLen + n
		}
	}
	readLogsHook(readLogsWalked)
	order := make([]int, records) // the records (as in offs), frame by frame
	parts := make([]int32, records)
	var tags []uint32 // their keys' tags, with seed
	if seed != nil {
		tags = make([]uint32, records)
	}
	ls.checkFrames(frames, order, parts, tags, seed)
	for i := range frames {
		if frames[i].fault != nil {
			return nil, nil, frames[i].fault
		}
	}
	// The frames that apply: those of each log up to its first bad one; their records.
	k := 0
	var last *logFrame
	for i := 0; i < len(frames); i++ {
		fr := &frames[i]
		if fr.why == "" {
			k += copy(order[k:], order[fr.from:fr.from+fr.n])
			copy(parts[k-fr.n:], parts[fr.from:fr.from+fr.n])
			if tags != nil {
				copy(tags[k-fr.n:], tags[fr.from:fr.from+fr.n])
			}
			ls.leased = append(ls.leased, fr.leased...)
			ls.misfiled += fr.misfiled
			ls.frames++
			last = fr
			continue
		}
		at := fr.body[0] - frameHeaderLen
		warns = append(warns, logWarning{"snapshot log: frame ignored, and what follows it", []any{"path", paths[fr.file], "offset", at,
			"bytes_ignored", len(ls.logs[fr.file]) - at, "reason", fr.why}})
		for i+1 < len(frames) && frames[i+1].file == fr.file {
			i++
		}
	}
	if ls.misfiled > 0 {
		warns = append(warns, logWarning{"snapshot log: tuple records filed under another part than their key's (a damaged writer): their grants are looked for in every record", []any{"records", ls.misfiled}})
	}
	readLogsHook(readLogsChecked)
	if last != nil {
		ls.last = slices.Clone(ls.logs[last.file][last.body[0]:last.body[1]])
	}
	if tags != nil {
		tags = tags[:k]
	}
	ls.sortByPart(order[:k], parts[:k], tags)
	readLogsHook(readLogsDone)
	return ls, warns, nil
}

// readLogsOnly makes readLogs read every log, as where mapLog does not map. A variable for
// tests.
var readLogsOnly = false

// readLog returns the bytes of the log at path: mapped (mapLog) if mapOK and it can be,
// or else read.
func readLog(path string, mapOK bool) (data []byte, mapped bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if info.Size() >= int64(logHeaderLen) && info.Size() < 1<<logAtBits && mapOK {
		if data, err := mapLog(f, int(info.Size())); err == nil {
			return data, true, nil
		}
	}
	data, err = io.ReadAll(f)
	return data, false, err
}

// frameLen returns the length of the body of the frame at the start of data, or why there
// is no whole frame there.
func frameLen(data []byte) (int, string) {
	if len(data) < frameHeaderLen {
		return 0, "torn header"
	}
	n := binary.BigEndian.Uint32(data[0:4])
	if uint64(n) > uint64(len(data)-frameHeaderLen) {
		return 0, "torn frame"
	}
	return int(n), ""
}

// tupleCount returns the number of tuple records that the frame of body says it holds,
// bounded by its tuple section's bytes (the body is not checked yet: the count only sizes
// checkFrames's slices), or 0.
func tupleCount(body []byte) int {
	r := frameReader{d: decoder{b: body}}
	r.d.varint()
	r.section() // the runs
	n, sec := r.section()
	if r.d.err != nil {
		return 0
	}
	return int(min(n, uint64(len(sec)/minTupleLen)))
}

// checkFrames checks frames, on every thread: each frame's records go to
// order[from:from+n] and parts[from:from+n], and a bad frame gets its why; with seed,
// each record's part is checked against its key's, and its key's tag goes to
// tags[from:from+n].
func (ls *logSet) checkFrames(frames []logFrame, order []int, parts []int32, tags []uint32, seed *uint64) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(frames)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(frames); i = int(next.Add(1) - 1) {
				if fr := &frames[i]; fr.why == "" {
					var t []uint32
					if seed != nil {
						t = tags[fr.from : fr.from+fr.n]
					}
					fr.why = checkFrame(ls.logs[fr.file], fr, order[fr.from:fr.from+fr.n], parts[fr.from:fr.from+fr.n], t, seed)
				}
			}
		})
	}
	wg.Wait()
}

// checkFrame checks the frame fr of the log data (its header before its body): its
// CRC-32C, its sections, and its tuple records, which it puts in order (as in
// logSet.offs) and their parts in parts (as many as fr.n); with seed, it counts in
// fr.misfiled the records whose part is not their key's (engine.PartOf) and puts their
// keys' tags (keyTag) in tags. It returns why the frame is bad, or "". A fault reading a
// mapped log (the file cut meanwhile) is a bad frame, and fr.fault.
func checkFrame(data []byte, fr *logFrame, order []int, parts []int32, tags []uint32, seed *uint64) (why string) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			fr.fault = faultError(r)
			why = fr.fault.Error()
		}
	}()
	body := data[fr.body[0]:fr.body[1]]
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(data[fr.body[0]-4:fr.body[0]]) {
		return "checksum"
	}
	r := frameReader{d: decoder{b: body}}
	r.d.varint()
	if _, _, err := readSection(&r, runsBucket, decodeRun); err != nil {
		return err.Error()
	}
	n, sec := r.section()
	if r.d.err != nil {
		return fmt.Sprintf("tuples: %v", r.d.err)
	}
	tb := body[:r.d.p]
	k := 0
	for at := r.d.p - len(sec); at < len(tb); k++ {
		if k == len(order) {
			return fmt.Sprintf("more than %d tuples, the frame says %d", k, n)
		}
		next, part, grants, key, err := skipTuple(tb, at)
		if err != nil {
			return fmt.Sprintf("tuple %d: %v", k, err)
		}
		order[k], parts[k] = fr.file<<logAtBits|(fr.body[0]+at), part
		if seed != nil {
			h := engine.KeyHash(*seed, unsafe.String(unsafe.SliceData(key), len(key)))
			if engine.PartOfHash(h) != int(part) {
				fr.misfiled++
			}
			tags[k] = keyTag(h)
		}
		if grants {
			fr.leased = append(fr.leased, part)
		}
		at = next
	}
	if uint64(k) != n {
		return fmt.Sprintf("%d tuples, the frame says %d", k, n)
	}
	if _, _, err := readSection(&r, kvBucket, decodeKV); err != nil {
		return err.Error()
	}
	if _, _, err := readSection(&r, resetsBucket, decodeReset); err != nil {
		return err.Error()
	}
	if _, _, err := readSection(&r, overridesBucket, decodeOverride); err != nil {
		return err.Error()
	}
	r.d.uvarint()
	r.d.span("horizon region")
	r.d.uvarint()
	if r.d.err == nil && r.d.p != len(body) {
		r.d.err = fmt.Errorf("%d bytes after the frame", len(body)-r.d.p)
	}
	if r.d.err != nil {
		return r.d.err.Error()
	}
	return ""
}

// skipTuple checks the tuple record at b[p:] (appendTuple) as decodeTuple decodes it,
// without decoding it, and returns where it ends, its part, whether it has grants and its
// key: what it accepts, decodeTuple decodes without an error. Its varints are read inline
// (a restart walks every record of the logs before it serves: decodeTuple took four times
// as long).
func skipTuple(b []byte, p int) (int, int32, bool, []byte, error) {
	var part, n, nc uint64
	part, p = uvarintSlow(b, p)                            // mostly three bytes
	if p < len(b) && b[p] < 0x80 && int(b[p]) < len(b)-p { // the key, of less than 128 bytes
		n, p = uint64(b[p]), p+1+int(b[p])
	} else {
		n, p = spanAt(b, p)
	}
	if n > maxKeyLen {
		return p, 0, false, nil, fmt.Errorf("bad key length %d", n)
	}
	keyLen, keyEnd := int(n), p
	if part >= engine.Parts && p <= len(b) {
		return p, 0, false, nil, fmt.Errorf("part %d", part)
	}
	if p < len(b) && b[p] < 0x80 {
		nc, p = uint64(b[p]), p+1
	} else {
		nc, p = uvarintSlow(b, p)
	}
	if p > len(b) || nc > uint64(len(b)-p)/minRecordLen {
		return p, 0, false, nil, fmt.Errorf("%d cells, or a varint that does not decode", nc)
	}
	for range nc {
		// The cell's key (empty), seq, regional and imported counts and foreign count: all
		// but seq mostly one byte, read here, else by the calls (a call each costs as much
		// as the rest of the walk).
		if p < len(b) && b[p] == 0 {
			p++
		} else if n, p = spanAt(b, p); n > maxKeyLen {
			return p, 0, false, nil, fmt.Errorf("bad key length %d", n)
		}
		// seq, a zigzag varint of several bytes: skipped as binary.Uvarint reads it (its
		// tenth byte, if any, at most 1).
		q := p
		for q < len(b) && q-p < binary.MaxVarintLen64-1 && b[q] >= 0x80 {
			q++
		}
		if q < len(b) && b[q] < 0x80 && (q-p < binary.MaxVarintLen64-1 || b[q] <= 1) {
			p = q + 1
		} else {
			p = len(b) + 1
		}
		if p+1 < len(b) && b[p] < 0x80 && b[p+1] < 0x80 {
			p += 2
		} else {
			_, p = uvarintAt(b, p)
			_, p = uvarintAt(b, p)
		}
		if p < len(b) && b[p] == 0 {
			p++
		} else if n, p = uvarintAt(b, p); n > 0 && p <= len(b) {
			if n > uint64(len(b)-p)/2 {
				return p, 0, false, nil, fmt.Errorf("%d foreign regions", n)
			}
			for range n {
				_, p = spanAt(b, p)
				_, p = uvarintAt(b, p)
			}
		}
	}
	var nl uint64
	if p < len(b) && b[p] == 0 {
		p++
	} else if nl, p = uvarintAt(b, p); p > len(b) || nl > uint64(len(b)-p)/6 {
		return p, 0, false, nil, fmt.Errorf("%d grants, or a varint that does not decode", nl)
	}
	for range nl {
		if n, p = spanAt(b, p); n > engine.MaxRunLen {
			return p, 0, false, nil, fmt.Errorf("bad run name length %d", n)
		}
		_, p = uvarintAt(b, p)
		_, p = uvarintAt(b, p)
		_, p = uvarintAt(b, p)
		_, p = uvarintAt(b, p)
	}
	if p > len(b) {
		return p, 0, false, nil, errVarint
	}
	return p, int32(part), nl > 0, b[keyEnd-keyLen : keyEnd], nil
}

// uvarintAt reads the uvarint at b[p:] and returns it and where it ends: past len(b) when
// it does not decode (and then for every later read).
func uvarintAt(b []byte, p int) (uint64, int) {
	if p < len(b) && b[p] < 0x80 { // the common case: one byte, inlined
		return uint64(b[p]), p + 1
	}
	return uvarintSlow(b, p)
}

// uvarintSlow is uvarintAt's other cases.
func uvarintSlow(b []byte, p int) (uint64, int) {
	if p >= len(b) {
		return 0, len(b) + 1
	}
	x, n := binary.Uvarint(b[p:])
	if n <= 0 {
		return 0, len(b) + 1
	}
	return x, p + n
}

// spanAt skips the length-prefixed bytes at b[p:] and returns their length and where they
// end (past len(b) when they do not fit).
func spanAt(b []byte, p int) (uint64, int) {
	n, p := uvarintAt(b, p)
	if p > len(b) || n > uint64(len(b)-p) {
		return 0, len(b) + 1
	}
	return n, p + int(n)
}

// frameReader walks a frame's body.
type frameReader struct {
	d decoder
}

// section returns the next section's record count and bytes.
func (r *frameReader) section() (uint64, []byte) {
	d := &r.d
	if d.err != nil || len(d.b)-d.p < 8 {
		d.err = cmp.Or(d.err, errors.New("torn section header"))
		return 0, nil
	}
	n, size := binary.BigEndian.Uint32(d.b[d.p:]), int(binary.BigEndian.Uint32(d.b[d.p+4:]))
	d.p += 8
	if size > len(d.b)-d.p {
		d.err = fmt.Errorf("section of %d bytes, %d left", size, len(d.b)-d.p)
		return 0, nil
	}
	d.p += size
	return uint64(n), d.b[d.p-size : d.p]
}

// readSection decodes the next section of r with decode: its records, and their count.
func readSection[T any](r *frameReader, name string, decode func(d *decoder, str string, vals []byte) (T, error)) ([]T, uint64, error) {
	n, b := r.section()
	if r.d.err != nil {
		return nil, 0, fmt.Errorf("%s: %w", name, r.d.err)
	}
	if n > uint64(len(b)) {
		return nil, 0, fmt.Errorf("%s: %d records in %d bytes", name, n, len(b))
	}
	c := chunked[T]{decode: decode, byteValues: true}
	if len(b) == 0 {
		if n != 0 {
			return nil, 0, fmt.Errorf("%s: %d records in no bytes", name, n)
		}
		return nil, 0, nil
	}
	recs, err := c.decodeChunk(make([]T, 0, n), b, n)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", name, err)
	}
	if uint64(len(recs)) != n {
		return nil, 0, fmt.Errorf("%s: %d records, the frame says %d", name, len(recs), n)
	}
	return recs, n, nil
}

// decodeTuple reads one tuple record of a frame (appendTuple), its cells' keys set to its
// key; their foreign regions' names alias str.
func decodeTuple(d *decoder, str string, cells []engine.CellRecord) (engine.TupleRecord, error) {
	t := engine.TupleRecord{Part: int(d.uvarint())}
	lo, hi := d.span("key")
	if hi-lo > maxKeyLen {
		return t, fmt.Errorf("bad key length %d", hi-lo)
	}
	t.Key = str[lo:hi]
	if t.Part < 0 || t.Part >= engine.Parts {
		return t, fmt.Errorf("part %d", t.Part)
	}
	nc := d.uvarint()
	if nc > uint64(len(d.b)-d.p)/minRecordLen {
		return t, fmt.Errorf("%d cells", nc)
	}
	for range nc {
		c, err := decodeCell(d, str, nil)
		if err != nil {
			return t, err
		}
		c.Key = t.Key
		cells = append(cells, c)
	}
	t.Cells = cells
	nl := d.uvarint()
	if nl > uint64(len(d.b)-d.p)/6 {
		return t, fmt.Errorf("%d grants", nl)
	}
	for range nl {
		l := engine.LeaseRecord{Key: t.Key, Run: d.str("run", str), G: d.uvarint(), Spent: d.uvarint(), Seq: d.uvarint(), UntilMs: d.varint()}
		if err := checkLease(l); err != nil {
			return t, err
		}
		t.Leases = append(t.Leases, l)
	}
	return t, d.err
}

// sortShareMin is the number of records from which sortByPart shares the work out. A
// variable for tests.
var sortShareMin = 1 << 16

// sortByPart orders the records by part (a counting sort: log order within a part), the
// parts shared out between the threads, each of which places its parts' records, and
// their tags beside them unless tags is nil.
func (ls *logSet) sortByPart(order []int, parts []int32, tags []uint32) {
	ls.partAt = make([]int, engine.Parts+1)
	for _, p := range parts {
		ls.partAt[p+1]++
	}
	for p := 1; p <= engine.Parts; p++ {
		ls.partAt[p] += ls.partAt[p-1]
	}
	ls.offs = make([]int, len(order))
	if tags != nil {
		ls.tags = make([]uint32, len(order))
	}
	n := runtime.GOMAXPROCS(0)
	if len(order) < sortShareMin {
		n = 1
	}
	var wg sync.WaitGroup
	for w := range n {
		// The parts [lo, hi) with about a share of the records each.
		lo, _ := slices.BinarySearch(ls.partAt, len(order)*w/n)
		hi, _ := slices.BinarySearch(ls.partAt, len(order)*(w+1)/n)
		if w == n-1 {
			hi = engine.Parts
		}
		wg.Go(func() {
			next := slices.Clone(ls.partAt[:engine.Parts])
			for i, p := range parts {
				if int(p) >= lo && int(p) < hi {
					ls.offs[next[p]] = order[i]
					if tags != nil {
						ls.tags[next[p]] = tags[i]
					}
					next[p]++
				}
			}
		})
	}
	wg.Wait()
}

// each calls fn with every tuple record of the logs, in log order, or with those of the
// parts p where in[p], in log order within each part (a tuple's records are all in its
// part), when in is not nil. Its keys alias the logs' bytes.
func (ls *logSet) each(in []bool, fn func(engine.TupleRecord)) {
	var cells []engine.CellRecord
	decode := func(at int) {
		d, str := ls.record(at)
		t, _ := decodeTuple(&d, str, cells[:0]) // checked by checkFrame
		cells = t.Cells
		fn(t)
	}
	if in != nil {
		for p, ok := range in {
			if !ok {
				continue
			}
			for _, at := range ls.offs[ls.partAt[p]:ls.partAt[p+1]] {
				decode(at)
			}
		}
		return
	}
	offs := slices.Clone(ls.offs)
	slices.Sort(offs) // log order
	for _, at := range offs {
		decode(at)
	}
}

// appendRecords appends the cells of the logs' records offs[lo:hi] (those of a range of
// parts: Opened.logRecords) to recs, keys aliasing the logs' bytes and foreign regions'
// names copied; only the tuples whose key keep keeps, unless keep is nil; and with
// keyHash not 0 (Opened.Parts's), of those only the tuples whose key's tag is keyHash's,
// where the tags are kept (logSet.tags): the others are not read.
func (ls *logSet) appendRecords(lo, hi int, recs []engine.CellRecord, keep func(key string) bool, keyHash uint64) []engine.CellRecord {
	tagged := keep != nil && keyHash != 0 && ls.tags != nil
	tag := keyTag(keyHash)
	for i, at := range ls.offs[lo:hi] {
		if tagged && ls.tags[lo+i] != tag {
			continue
		}
		d, str := ls.record(at)
		if keep != nil { // the key alone first: a keyed load (engine.LoadLazily) skips most
			p := d.p
			d.uvarint()
			if lo, hi := d.span("key"); !keep(str[lo:hi]) {
				continue
			}
			d.p = p
		}
		n := len(recs)
		t, _ := decodeTuple(&d, str, recs) // checked by checkFrame
		recs = t.Cells
		for i := n; i < len(recs); i++ {
			for j := range recs[i].Foreign {
				recs[i].Foreign[j].Region = strings.Clone(recs[i].Foreign[j].Region)
			}
		}
	}
	return recs
}

// apply applies the logs to snap, a base's: the last frame's small sections replace the
// base's, each tuple's grants are those of its last record, and with cells set every
// tuple's cells are appended to snap.Cells (a base without a part table; with one, they
// are read by part, Opened.Parts, and seed is the base's: the grants are then looked for in
// the parts of the tuples that have some, in the logs or the base, only; in every record,
// in log order, if readLogs found records filed under another part than their key's). A
// fault reading a mapped log (cut since it was checked: a frame that failed, in this
// process) is an error.
func (ls *logSet) apply(snap *Snapshot, cells bool, seed uint64) (err error) {
	if ls.frames == 0 {
		return nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = faultError(r)
		}
	}()
	r := frameReader{d: decoder{b: ls.last}}
	r.d.varint()
	// The last frame's sections replace the base's, but for the runs' marks and the reset
	// records, which are kept beside the base's (restoring them merges each with max): a
	// compaction's base is captured while frames go on into its own log, so after a crash
	// between its rename and the next frame the last frame may be older than the base, and
	// its sections alone would take back a reset the base holds (its cells' counts, merged
	// with max, are the base's) or marks the base's counts already hold.
	baseRuns, baseResets := snap.Runs, snap.Resets
	baseChanges := snap.Changes
	if snap.Runs, _, err = readSection(&r, runsBucket, decodeRun); err != nil {
		return err
	}
	snap.Runs = append(snap.Runs, baseRuns...)
	r.section() // the tuples: below
	if snap.KV, _, err = readSection(&r, kvBucket, decodeKV); err != nil {
		return err
	}
	if snap.Resets, _, err = readSection(&r, resetsBucket, decodeReset); err != nil {
		return err
	}
	snap.Resets = append(snap.Resets, baseResets...)
	if snap.Overrides, _, err = readSection(&r, overridesBucket, decodeOverride); err != nil {
		return err
	}
	snap.OverridesHorizon.Stamp = r.d.uvarint()
	lo, hi := r.d.span("horizon region")
	snap.OverridesHorizon.Region = string(ls.last[lo:hi])
	snap.Changes = max(r.d.uvarint(), baseChanges)
	if r.d.err != nil {
		return r.d.err
	}
	// Grants: a tuple's last record has them all.
	leased := make(map[string]bool, len(snap.Leases))
	for _, l := range snap.Leases {
		leased[l.Key] = true
	}
	latest := make(map[string][]engine.LeaseRecord)
	// Every record when the cells are wanted; else those of the parts of the tuples with
	// grants, in a log record or the base (a record without grants drops its tuple's
	// earlier ones), if any: a tuple's records are all in its part, in log order there;
	// unless readLogs found records filed under another part than their key's, and then
	// every record, in log order.
	if !cells && len(snap.Leases) == 0 && len(ls.leased) == 0 {
		return nil
	}
	var in []bool
	if !cells && ls.misfiled == 0 {
		in = make([]bool, engine.Parts)
		for _, p := range ls.leased {
			in[p] = true
		}
		for k := range leased {
			in[engine.PartOf(seed, k)] = true
		}
	}
	ls.each(in, func(t engine.TupleRecord) {
		if cells {
			for _, c := range t.Cells {
				c.Key = strings.Clone(c.Key)
				c.Foreign = slices.Clone(c.Foreign)
				for j := range c.Foreign {
					c.Foreign[j].Region = strings.Clone(c.Foreign[j].Region)
				}
				snap.Cells = append(snap.Cells, c)
			}
		}
		if len(t.Leases) > 0 || leased[t.Key] || latest[t.Key] != nil {
			key := strings.Clone(t.Key)
			grants := make([]engine.LeaseRecord, 0, len(t.Leases))
			for _, l := range t.Leases {
				l.Key, l.Run = key, strings.Clone(l.Run)
				grants = append(grants, l)
			}
			latest[key] = grants
		}
	})
	kept := snap.Leases[:0]
	for _, l := range snap.Leases {
		if _, ok := latest[l.Key]; !ok {
			kept = append(kept, l)
		}
	}
	keys := make([]string, 0, len(latest))
	for k := range latest {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare[string]) // a stable order
	for _, k := range keys {
		kept = append(kept, latest[k]...)
	}
	snap.Leases = kept
	return nil
}

// errClosed stops a compaction when the Store closes.
var errClosed = errors.New("store closed")

// applyLogs applies the logs of the base snap (of size bytes; a lazy one's o, nil when
// its cells are all in snap) to it. With adopt, the Store's next saves continue from them:
// frames go to a new log, of a gen above every one found.
func (s *Store) applyLogs(snap *Snapshot, size int64, o *Opened, adopt bool) error {
	lazy := o != nil && o.Lazy()
	var seed uint64
	var bySeed *uint64 // a lazy load reads by part: the records' parts are checked
	if lazy {
		seed, bySeed = o.Seed, &o.Seed
	}
	ls, err := readLogs(s.dir, snap.gen, bySeed, s.log)
	if err != nil {
		return err
	}
	orig := *snap // apply replaces its slices, appends to its cells: this undoes it
	if err = ls.apply(snap, !lazy, seed); errors.Is(err, errFault) && slices.Contains(ls.mapped, true) {
		// A log cut since readLogs read it, or an I/O error paging it in: as readLogs does,
		// the logs are read again, not mapped, rather than the base set aside.
		s.log.Warn("snapshot log: a fault applying a mapped log (cut since it was read, or an I/O error): the logs are read again, not mapped", "error", err)
		ls.release()
		*snap = orig
		if ls, err = readLogsAs(s.dir, snap.gen, bySeed, false, s.log); err != nil {
			return err
		}
		err = ls.apply(snap, !lazy, seed)
	}
	if err != nil {
		ls.release()
		return fmt.Errorf("%w: delta log: %w", ErrCorrupt, err)
	}
	if lazy {
		o.log = ls // released by o.Close
		o.foldLog()
	} else {
		ls.release()
	}
	if ls.frames > 0 {
		s.log.Info("snapshot log applied", "frames", ls.frames, "tuples", len(ls.offs), "bytes", ls.bytes, "base_gen", snap.gen)
	}
	if adopt {
		s.saveMu.Lock()
		s.baseGen, s.baseBytes, s.logBytes = snap.gen, size, ls.bytes
		s.logSize.Store(s.logBytes)
		s.baseSize.Store(s.baseBytes)
		s.logGen = max(s.logGen, snap.gen, ls.maxGen) + 1
		s.incremental = true
		s.saveMu.Unlock()
	}
	return nil
}

// pacer keeps a compaction to a share of a thread while the process serves: it runs for
// compactSlice, then pauses (compactShareOf-1) times as long, so that the requests keep
// the CPU of a small machine; half a thread once the logs grew past half the base
// meanwhile, and full speed past the base (a write rate the paced compaction cannot
// follow; past what a compaction at full speed follows, the logs grow on), or when nothing
// was served over the last quietEvery (Source.Served stood still: a quiet process).
// The slices are of wall time: a compaction that waits for a thread counts the wait.
//
// Under redis-benchmark's random requests over 2M tuples (500k changed a second, the logs
// growing 20 MB a second beside an 81 MB base), a compaction ran at full speed (the logs
// past half the base) in slices of 4 ms, and its bbolt commits of 4 MB (spillBytes) ran
// unpaced between them: a request ready to run waited up to a slice for a thread, and the
// p99 of back-to-back runs of 400k requests reached 14-16 ms. A quarter of a thread in
// slices of 1 ms, commits of 1 MB and full speed only past the base: 7.9-9.9 ms (three
// restarts each, alternating; idle 5-6). Half a thread past half the base was added
// afterwards, so that the logs a restart reads are not left to reach the base's size.
type pacer struct {
	now   func() time.Time // time.Now; a test's clock
	start time.Time
	n     int
	// behind reports how far the logs have grown meanwhile: 0 within half the base, 1
	// past it (half a thread), 2 past the base (full speed).
	behind func() int
	// served, when not nil, is Source.Served; last is what it read at readAt, and
	// wasQuiet whether that was what it read before.
	served   func() uint64
	last     uint64
	readAt   time.Time
	wasQuiet bool
}

const (
	compactSlice   = time.Millisecond
	compactShareOf = 4 // a quarter of a thread
)

// step is called for each tuple written; every 256th it checks the time.
func (p *pacer) step() {
	if p == nil {
		return
	}
	if p.n++; p.n&255 != 0 {
		return
	}
	if busy := p.now().Sub(p.start); busy >= compactSlice {
		if b := p.behind(); b < 2 && !p.quiet() {
			share := time.Duration(compactShareOf)
			if b == 1 {
				share = 2
			}
			compactPause(busy * (share - 1))
		}
		p.start = p.now()
	}
}

// newPacer returns a pacer whose first slice starts now (served may be nil).
func newPacer(behind func() int, served func() uint64) *pacer {
	p := &pacer{now: time.Now, start: time.Now(), behind: behind, served: served}
	if served != nil {
		p.last, p.readAt = served(), p.start
	}
	return p
}

// behindLevel is how far logs of logBytes are behind a base of baseBytes, for the pacer:
// 0 within half the base, 1 past it, 2 past the base.
func behindLevel(logBytes, baseBytes int64) int {
	switch {
	case logBytes > baseBytes:
		return 2
	case logBytes > baseBytes/2:
		return 1
	}
	return 0
}

// compactPause is a paced compaction's pause (time.Sleep; a variable for tests).
var compactPause = time.Sleep

// quiet reports whether nothing was served since the last slice (served is nil: never).
func (p *pacer) quiet() bool {
	if p.served == nil {
		return false
	}
	// Read at most every quietEvery: the count sums thousands of counters, some of them
	// being written by the serving threads.
	if now := p.now(); now.Sub(p.readAt) >= quietEvery {
		n := p.served()
		p.wasQuiet, p.last, p.readAt = n == p.last, n, now
	}
	return p.wasQuiet
}

// quietEvery is how often a compaction's pacer reads the count of requests served.
const quietEvery = 20 * time.Millisecond
