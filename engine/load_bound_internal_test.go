package engine

import (
	"fmt"
	"strings"
	"testing"
)

// TestLoaderKeysBounded: the keys loader.keys keeps of tuples restored on their own (a
// reset of a tuple never used inserts nothing, yet its key is kept until its part loads)
// stay within maxKeptBytes over all parts: up to 5 KiB in each of Parts parts was 1.3 GiB
// outside --max-memory's count.
func TestLoaderKeysBounded(t *testing.T) {
	const now = 1_704_067_200_000
	e := New(NewManualClock(now), Config{Standalone: true})
	release := make(chan struct{})
	defer close(release)
	e.LoadLazily(func(from, _ int, _ func(string) bool, _ uint64) {
		if from == 0 {
			<-release // the background load stuck on its first batch
		}
	})
	l := e.store.loader.Load()
	pad := strings.Repeat("x", 1000) // commands cap a key at 1024 bytes
	parts := 0
	for i := 0; parts < 20_000; i++ {
		tp := Tuple{Key: fmt.Appendf(nil, "%s%d", pad, i), WindowMs: 60_000}
		k := AppendKey(nil, tp)
		p := partOf(hashKey(e.store.seed, k))
		if p < loadBatch {
			continue
		}
		if _, err := e.Reset([]Tuple{tp}); err != nil { // a tuple never used: nothing to reset
			t.Fatal(err)
		}
		parts++
	}
	sum := 0
	for p := loadBatch; p < Parts; p++ { // the first batch's locks: the stuck load's
		l.parts[p].mu.Lock()
		sum += len(l.parts[p].keys)
		l.parts[p].mu.Unlock()
	}
	if k := l.kept.Load(); k != int64(sum) || sum > maxKeptBytes+1100 {
		t.Fatalf("%d resets of tuples never used (1 KiB keys): the loader keeps %d bytes of keys (counted %d); want at most %d", parts, sum, k, maxKeptBytes+1100)
	}
}
