// Package testmem measures in benchmarks the memory one live cell costs, in an origin's
// cell store or an edge's local memory: heap-B/cell is the growth of the Go heap
// (HeapAlloc after a GC) over the live cells; rss-B/cell the growth of the process's
// resident set after a GC and a return of freed memory to the OS (debug.FreeOSMemory), so
// what a steady process keeps; peak-rss-B/cell the resident growth before that return
// (what the fill itself needed, growth copies included).
package testmem

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// Key writes key i ("user:%08d") into buf and returns it.
func Key(buf []byte, i int) []byte {
	buf = append(buf[:0], "user:"...)
	n := strconv.AppendInt(nil, int64(i), 10)
	for j := len(n); j < 8; j++ {
		buf = append(buf, '0')
	}
	buf = append(buf, n...)
	return buf
}

// rssBytes reads the resident set size of this process (Linux), or 0.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

type memReading struct{ heap, inuse, rss int64 }

func readMem(release bool) memReading {
	runtime.GC()
	runtime.GC()
	if release {
		debug.FreeOSMemory()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memReading{heap: int64(ms.HeapAlloc), inuse: int64(ms.HeapInuse), rss: rssBytes()}
}

// MeasureCells calls setup (whose memory is not counted), then fill, and reports the
// memory growth per cell.
func MeasureCells(b *testing.B, cells int, setup func() (fill func(), keep any)) {
	b.ReportAllocs()
	var before, peak, after memReading
	for b.Loop() {
		fill, keep := setup()
		before = readMem(true)
		fill()
		peak = readMem(false)
		after = readMem(true)
		runtime.KeepAlive(keep)
	}
	per := func(d int64) float64 { return float64(d) / float64(cells) }
	b.ReportMetric(per(after.heap-before.heap), "heap-B/cell")
	b.ReportMetric(per(after.inuse-before.inuse), "heapinuse-B/cell")
	b.ReportMetric(per(after.rss-before.rss), "rss-B/cell")
	b.ReportMetric(per(peak.rss-before.rss), "peak-rss-B/cell")
}
