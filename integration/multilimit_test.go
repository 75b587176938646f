package integration

// Several limits in one RL.LIMIT (README "Several limits in one call"), on real processes
// through go-redis: all or nothing on an origin and through edges.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratchet/ratchet/internal/testwait"
)

// currentCount returns the current cell's regional count of key in window, as RL.STATUS
// on c reads it.
func currentCount(t testing.TB, c *redis.Client, key, window string) int64 {
	t.Helper()
	st, _ := status(t, c, key, window)
	return statusInt(t, st, "current_regional")
}

// TestMultiLimit: a two-limit RL.LIMIT answers the binding limit's five integers, on an
// origin and through an edge, and a request one limit denies is counted in neither window.
func TestMultiLimit(t *testing.T) {
	t.Parallel()
	origin := startOrigin(t)
	edge := startEdge(t, []*proc{origin}, countsNotTimeouts...)
	oc, ec := origin.client(t, nil), edge.client(t, nil)
	long, _ := liveWindow(t, time.Minute, "1h", "2h", "3h")
	for _, c := range []struct {
		name string
		c    *redis.Client
	}{{"origin", oc}, {"edge", ec}} {
		t.Run(c.name, func(t *testing.T) {
			key := "multi-" + c.name
			short, _ := liveWindow(t, 10*time.Second, "1m", "2m", "3m")
			// 2 per short window, 3 per long one: the short limit binds first.
			for i, want := range [][2]int64{{1, 1}, {1, 0}} {
				if v := limitReply(t, c.c, key, 2, short, 3, long); v[0] != want[0] || v[1] != 2 || v[2] != want[1] || v[3] != 0 {
					t.Fatalf("request %d: %v; want allowed %d, limit 2, remaining %d", i, v, want[0], want[1])
				}
			}
			// The short window denies: nothing is counted in the long one.
			if v := limitReply(t, c.c, key, 2, short, 3, long); v[0] != 0 || v[1] != 2 || v[3] <= 0 {
				t.Fatalf("third request: %v; want denied by the short limit", v)
			}
			// A peek at the long limit alone: one unit left, so the denial was not counted.
			if v := limitReply(t, c.c, key, 3, long, "COST", 0); v[0] != 1 || v[2] != 1 {
				t.Fatalf("the long window after the denial: %v; want 1 remaining (2 counted)", v)
			}
			// Errors name the rule.
			ctx := context.Background()
			if err := c.c.Do(ctx, "RL.LIMIT", key, 2, short, 3).Err(); err == nil || err.Error() != "ERR limit without a window: limits and windows come in pairs" {
				t.Fatalf("odd pairs: %v", err)
			}
			if err := c.c.Do(ctx, "RL.LIMIT", key, 2, "60s", 3, "1m").Err(); err == nil || err.Error() != "ERR window 60000ms appears twice: each limit needs a window of its own" {
				t.Fatalf("a window twice: %v", err)
			}
		})
	}
	// The edge's counts reach the origin: 2 in the long window, none for the denial.
	testwait.Until(t, 10*time.Second, "the edge's requests to reach the origin", func() (bool, string) {
		n := currentCount(t, oc, "multi-edge", long)
		return n == 2, fmt.Sprintf("origin counts %d in %s, want 2", n, long)
	})
}

// TestMultiLimitFlood: a flood of two-limit requests over three edges admits no more than
// the tighter limit, and counts every admitted request in both windows and no refused one
// in either: the origin's two counts equal the admissions.
func TestMultiLimitFlood(t *testing.T) {
	t.Parallel()
	origin := startOrigin(t)
	edges := startEdges(t, 3, []*proc{origin}, countsNotTimeouts...)
	ec := clients(t, edges, &redis.Options{PoolSize: 8})
	oc := origin.client(t, nil)
	waitEdgesKnown(t, ec, 1, 3)
	const tight, loose, total = 300, 500, 1200

	heavy.Lock() // before the windows are chosen: the lock may be held for longer than their margin
	short, shortMs := liveWindow(t, 30*time.Second, "1h", "2h", "3h")
	long, _ := liveWindow(t, 30*time.Second, "1d", "2d", "3d")
	seq := time.Now().UnixMilli() / shortMs
	var admitted, errs atomic.Int64
	var wg sync.WaitGroup
	var left atomic.Int64
	left.Store(total)
	for _, c := range ec {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for left.Add(-1) >= 0 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					v, err := c.Do(ctx, "RL.LIMIT", "multi-flood", loose, short, tight, long).Int64Slice()
					cancel()
					switch {
					case err != nil || len(v) != 5:
						errs.Add(1)
					case v[0] == 1:
						admitted.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	heavy.Unlock()
	if n := errs.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed", n, total)
	}
	if end := time.Now().UnixMilli() / shortMs; end != seq {
		t.Fatalf("the flood crossed a window boundary; cannot judge it")
	}
	n := admitted.Load()
	t.Logf("%d two-limit requests over 3 edges: %d admitted (limits %d and %d)", total, n, loose, tight)
	if n > tight || n < tight*9/10 {
		t.Fatalf("admitted %d; want at most the tighter limit %d, and near it", n, tight)
	}
	drained(t, ec)
	testwait.Until(t, 10*time.Second, "the origin's counts to equal the admissions", func() (bool, string) {
		a, b := currentCount(t, oc, "multi-flood", short), currentCount(t, oc, "multi-flood", long)
		return a == n && b == n, fmt.Sprintf("origin counts %d in %s and %d in %s, admitted %d", a, short, b, long, n)
	})
}

// goRedisTwoLimits is the README's two-limit go-redis example: 10 a second and 1000 an
// hour for one API key, all or nothing.
func goRedisTwoLimits(ctx context.Context, rdb *redis.Client, apiKey string) (allowed bool, retryAfter time.Duration, err error) {
	// The binding limit's allowed, limit, remaining, retry_after_ms, reset_after_ms: a
	// request the second's limit refuses is not counted in the hour either.
	r, err := rdb.Do(ctx, "RL.LIMIT", "api:"+apiKey, 10, "1s", 1000, "1h").Int64Slice()
	if err != nil {
		return false, 0, err
	}
	return r[0] == 1, time.Duration(r[3]) * time.Millisecond, nil
}

// TestReadmeTwoLimits runs the README's go-redis two-limit example until the second's
// limit refuses a request, and checks that the hour counted exactly the admitted ones;
// and that the README quotes the function as it is here.
func TestReadmeTwoLimits(t *testing.T) {
	t.Parallel()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err1 := os.ReadFile(filepath.Join(root, "README.md"))
	src, err2 := os.ReadFile(filepath.Join(root, "integration", "multilimit_test.go"))
	if err1 != nil || err2 != nil {
		t.Fatalf("read: %v %v", err1, err2)
	}
	from := bytes.Index(src, []byte("// goRedisTwoLimits is"))
	if from < 0 {
		t.Fatal("goRedisTwoLimits not found")
	}
	to := from + bytes.Index(src[from:], []byte("\n}\n")) + 3
	if !bytes.Contains(readme, src[from:to]) {
		t.Fatalf("README.md does not quote goRedisTwoLimits as integration/multilimit_test.go has it")
	}

	origin := start(t)
	rdb := origin.client(t, &redis.Options{MaxRetries: -1})
	ctx := context.Background()
	// The refusal comes from the second's limit (10), with at most 10 admitted in the
	// current cell. Its retry_after can exceed the second: when those 10 are all in the
	// current cell, they weigh fully until it ends (up to 1000 ms away), then decay through
	// the next one, where the 11th passes once 10 x (1 - e/1000) + 1 <= 10, at e = 100 ms.
	const maxRetry = 1100 * time.Millisecond
	admitted, refused := 0, false
	for i := 0; i < 1000 && !refused; i++ {
		ok, retry, err := goRedisTwoLimits(ctx, rdb, "7")
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			admitted++
		} else if retry <= 0 || retry > maxRetry {
			t.Fatalf("refused with retry after %v; want at most %v", retry, maxRetry)
		} else {
			refused = true
		}
	}
	if !refused || admitted < 10 {
		t.Fatalf("%d admitted, refused: %v; want at least 10 admitted, then a refusal", admitted, refused)
	}
	if n := currentCount(t, rdb, "api:7", "1h"); n != int64(admitted) {
		t.Fatalf("the hour counted %d; %d were admitted", n, admitted)
	}
}
