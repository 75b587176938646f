package persist

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// logBenchDir builds, once per process, a base of logBenchTuples tuples and delta logs of
// about logBenchBytes (random tuples changed between incremental saves, the real save
// path), or uses $RATCHET_LOGBENCH_DIR (an origin's data dir: bench/scale.sh's, say; built
// there and kept if it holds no snapshot). $RATCHET_LOGBENCH_TUPLES and
// $RATCHET_LOGBENCH_LOGMB set the tuples (1M) and the MB of logs (100) it builds.
var logBenchDir = sync.OnceValues(func() (string, error) {
	dir := os.Getenv("RATCHET_LOGBENCH_DIR")
	if _, err := os.Stat(filepath.Join(dir, fileName)); dir != "" && err == nil {
		return dir, nil
	}
	logBenchTuples, logBenchBytes, perFrame := 1_000_000, int64(100<<20), 300_000
	if n, err := strconv.Atoi(os.Getenv("RATCHET_LOGBENCH_TUPLES")); err == nil && n > 0 {
		logBenchTuples = n
	}
	if n, err := strconv.Atoi(os.Getenv("RATCHET_LOGBENCH_LOGMB")); err == nil && n >= 0 {
		logBenchBytes = int64(n) << 20
	}
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "ratchet-logbench-")
	} else {
		err = os.MkdirAll(dir, 0o755) // built there once, kept for the next runs
	}
	if err != nil {
		return "", err
	}
	e := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true, Snapshots: true, MaxMemoryBytes: 1 << 40})
	for i := range logBenchTuples {
		if _, err := e.Limit(logTuple(i), 1<<40, 1); err != nil {
			return "", err
		}
	}
	s, err := Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return "", err
	}
	defer s.Close()
	defer func(due func(int64, int64) bool) { compactDue = due }(compactDue)
	compactDue = func(int64, int64) bool { return false } // every frame kept
	if err := s.Write(incremental(e)); err != nil {
		return "", err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for s.logSize.Load() < logBenchBytes {
		for range perFrame {
			if _, err := e.Limit(logTuple(rng.IntN(logBenchTuples)), 1<<40, 1); err != nil {
				return "", err
			}
		}
		if err := s.Write(incremental(e)); err != nil {
			return "", err
		}
	}
	return dir, nil
})

// benchLogDir returns logBenchDir's, removed after b unless it is $RATCHET_LOGBENCH_DIR
// (which -count above 1 needs).
func benchLogDir(b *testing.B) string {
	dir, err := logBenchDir()
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("RATCHET_LOGBENCH_DIR") == "" {
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	return dir
}

// BenchmarkReadLogs: what a restart does with the delta logs before it serves (readLogs
// and apply), on logBenchDir's.
func BenchmarkReadLogs(b *testing.B) {
	dir := benchLogDir(b)
	info, err := os.Stat(filepath.Join(dir, fileName))
	if err != nil {
		b.Fatal(err)
	}
	o, err := openLazy(filepath.Join(dir, fileName), info.Size())
	if err != nil {
		b.Fatal(err)
	}
	defer o.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var bytes int64
	for b.Loop() {
		ls, err := readLogs(dir, o.gen, &o.Seed, log)
		if err != nil {
			b.Fatal(err)
		}
		snap := o.Snapshot
		if err := ls.apply(&snap, false, o.Seed); err != nil {
			b.Fatal(err)
		}
		bytes = ls.bytes
	}
	b.ReportMetric(float64(bytes)/1e6, "MB")
}

// BenchmarkKeyedRestore: what a request on a part not loaded yet waits for (engine's
// ensureKey): its own tuple's records of the part, the base's and the delta logs', on
// logBenchDir's (1M tuples, about 100 MB of logs), a random tuple each time; given its
// key's hash (the delta log's records of other tags not read) or not (each read).
func BenchmarkKeyedRestore(b *testing.B) {
	dir := benchLogDir(b)
	s, err := Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	o, err := s.OpenOrSetAside()
	if err != nil || !o.Lazy() {
		b.Fatalf("OpenOrSetAside: %v, lazy %v", err, o.Lazy())
	}
	defer o.Close()
	const n = 1 << 16
	keys := make([]string, n)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range keys {
		keys[i] = string(engine.AppendKey(nil, logTuple(rng.IntN(int(o.CellCount)))))
	}
	for _, hashed := range []bool{false, true} {
		b.Run(map[bool]string{false: "untagged", true: "tagged"}[hashed], func(b *testing.B) {
			var recs []engine.CellRecord
			found := 0
			use := func(rs []engine.CellRecord) { found += len(rs) }
			i := 0
			for b.Loop() {
				key := keys[i%n]
				i++
				only := func(k string) bool { return k == key }
				h := engine.KeyHash(o.Seed, key) // the engine's, at hand where it calls
				p := engine.PartOfHash(h)
				if !hashed {
					h = 0
				}
				if recs, err = o.Parts(p, p+1, recs, only, h, use); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(found)/float64(i), "cells/op")
		})
	}
}
