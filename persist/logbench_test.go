package persist

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// logBenchDir builds, once per process, a base of logBenchTuples tuples and delta logs of
// about logBenchBytes (random tuples changed between incremental saves, the real save
// path), or uses $RATCHET_LOGBENCH_DIR (an origin's data dir: bench/scale.sh's, say).
var logBenchDir = sync.OnceValues(func() (string, error) {
	if dir := os.Getenv("RATCHET_LOGBENCH_DIR"); dir != "" {
		return dir, nil
	}
	const logBenchTuples, logBenchBytes, perFrame = 1_000_000, 100 << 20, 300_000
	dir, err := os.MkdirTemp("", "ratchet-logbench-")
	if err != nil {
		return "", err
	}
	e := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true, Snapshots: true})
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

// BenchmarkReadLogs: what a restart does with the delta logs before it serves (readLogs
// and apply), on logBenchDir's.
func BenchmarkReadLogs(b *testing.B) {
	dir, err := logBenchDir()
	if err != nil {
		b.Fatal(err)
	}
	if os.Getenv("RATCHET_LOGBENCH_DIR") == "" {
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
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
