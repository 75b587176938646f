package persist

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ratchet/ratchet/engine"
)

// BenchmarkSaveTuples: a whole save of an origin's tuples (its first save, or a
// compaction's, unpaced) of $RATCHET_SAVEBENCH_TUPLES tuples (1M unless set) of
// bench/scale.sh's keys (user:<12 digits>:api, an hour's window: one cell each), and the
// open of that file for a lazy load (what a restart does before it serves); the file's
// size in MB.
func BenchmarkSaveTuples(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("RATCHET_SAVEBENCH_TUPLES")); err == nil && v > 0 {
		n = v
	}
	e := engine.New(engine.NewManualClock(logT0), engine.Config{Standalone: true, Snapshots: true, MaxMemoryBytes: 1 << 40})
	var key []byte
	for i := range n {
		key = fmt.Appendf(key[:0], "user:%012d:api", i)
		if _, err := e.Limit(engine.Tuple{Workspace: "default", Namespace: "default", Key: key, WindowMs: 3_600_000}, 1<<40, 1); err != nil {
			b.Fatal(err)
		}
	}
	dir := b.TempDir()
	s, err := Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	src := Source{Tuples: e.Tuples, ShardSeed: e.ShardSeed()}
	size := func() float64 {
		fi, err := os.Stat(filepath.Join(dir, fileName))
		if err != nil {
			b.Fatal(err)
		}
		return float64(fi.Size()) / 1e6
	}
	b.Run("save", func(b *testing.B) {
		for b.Loop() {
			if err := s.Write(src); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/save")
		b.ReportMetric(size(), "MB")
	})
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			o, err := s.OpenOrSetAside()
			if err != nil || !o.Lazy() {
				b.Fatalf("OpenOrSetAside: %v, lazy %v", err, o.Lazy())
			}
			if err := o.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/open")
	})
}
