package integration

// The real throttled/throttled (v2.15.0, from the Go module proxy) GCRA limiter over its
// go-redis store against the binary and against redis-server, decision by decision. The
// store reads the server's TIME and the key in one pipeline, creates a key with SETNX then
// EXPIRE, and updates it with EVAL of a compare-and-swap script (SHA1 ebd682e3..., no
// native path: the interpreter runs it) that answers redis.error_reply("key does not
// exist") when the key is gone. goredisstore.v9 is the package over go-redis v9, which this
// module already uses; goredisstore (go-redis v6) and goredisstore.v8 send the same
// commands.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
)

// throttledRun runs the scenario through throttled on addr and returns one line per call.
// Times (RetryAfter, ResetAfter) are whole seconds and TTLs ranges: each call runs on the
// two servers a little apart, and the quotas' emission intervals are 10 s and more.
func throttledRun(t *testing.T, addr string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	store, err := goredisstore.NewCtx(c, "throttled:")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	// Whole seconds, rounded up: a time read a moment later than on the other server is
	// the same up to a second.
	sec := func(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }
	limiter := func(q throttled.RateQuota) *throttled.GCRARateLimiterCtx {
		l, err := throttled.NewGCRARateLimiterCtx(store, q)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	rate := func(l *throttled.GCRARateLimiterCtx, key string, n int) {
		limited, r, err := l.RateLimitCtx(ctx, key, n)
		if err != nil {
			t.Fatalf("RateLimitCtx(%s, %d) on %s: %v", key, n, addr, err)
		}
		out = append(out, fmt.Sprintf("rate %s %d: limited=%v limit=%d remaining=%d retry=%ds reset=%ds",
			key, n, limited, r.Limit, r.Remaining, sec(r.RetryAfter), sec(r.ResetAfter)))
	}
	// ttl notes whether key's TTL is in (lo, hi]: the store set it from the limiter's
	// state, however long ago within a few seconds.
	ttl := func(key string, lo, hi time.Duration) {
		d, err := c.PTTL(ctx, "throttled:"+key).Result()
		if err != nil {
			t.Fatalf("PTTL %s on %s: %v", key, addr, err)
		}
		out = append(out, fmt.Sprintf("ttl %s in (%v, %v]: %v", key, lo, hi, d > lo && d <= hi))
	}

	// 6 a minute, burst 3: 4 at once, then one each 10 s.
	perMin := limiter(throttled.RateQuota{MaxRate: throttled.PerMin(6), MaxBurst: 3})
	for range 6 {
		rate(perMin, "a", 1)
	}
	ttl("a", 35*time.Second, 40*time.Second) // EXPIRE of the whole seconds to the arrival time
	rate(perMin, "b", 3)
	rate(perMin, "b", 2)
	rate(perMin, "b", 0) // a peek: RetryAfter without taking
	rate(perMin, "b", 1)
	rate(perMin, "c", 5) // more than the burst: never allowed
	ttl("b", 35*time.Second, 40*time.Second)

	// The store alone, as throttled calls it.
	note := func(op string, ok bool, err error) {
		if err != nil {
			t.Fatalf("%s on %s: %v", op, addr, err)
		}
		out = append(out, fmt.Sprintf("%s: %v", op, ok))
	}
	ok, err := store.SetIfNotExistsWithTTL(ctx, "s", 100, 10*time.Second)
	note("setnx s", ok, err)
	ok, err = store.SetIfNotExistsWithTTL(ctx, "s", 200, 10*time.Second)
	note("setnx s again", ok, err)
	ok, err = store.SetIfNotExistsWithTTL(ctx, "short", 1, 10*time.Millisecond) // at least 1 s
	note("setnx short", ok, err)
	ttl("short", 0, time.Second)
	ok, err = store.CompareAndSwapWithTTL(ctx, "s", 101, 300, 20*time.Second)
	note("cas s 101->300", ok, err)
	ok, err = store.CompareAndSwapWithTTL(ctx, "s", 100, 300, 20*time.Second)
	note("cas s 100->300", ok, err)
	ttl("s", 15*time.Second, 20*time.Second)
	// The script's error_reply: the store takes "key does not exist" for not swapped.
	ok, err = store.CompareAndSwapWithTTL(ctx, "missing", 1, 2, time.Second)
	note("cas missing", ok, err)
	v, at, err := store.GetWithTime(ctx, "s")
	if err != nil {
		t.Fatalf("GetWithTime on %s: %v", addr, err)
	}
	out = append(out, fmt.Sprintf("get s: %d, server time within a minute: %v", v, time.Since(at).Abs() < time.Minute))
	v, _, err = store.GetWithTime(ctx, "missing")
	out = append(out, fmt.Sprintf("get missing: %d %v", v, err))

	// Concurrent callers on one key: the compare-and-swap admits exactly the burst. Only an
	// allowed call writes, so none can lose the swap more than 7 times (maxCASAttempts 10).
	burst := limiter(throttled.RateQuota{MaxRate: throttled.PerHour(60), MaxBurst: 6})
	var mu sync.Mutex
	var wg sync.WaitGroup
	allowed, errs := 0, 0
	for range 4 {
		wg.Go(func() {
			for range 3 {
				limited, _, err := burst.RateLimitCtx(ctx, "shared", 1)
				mu.Lock()
				if err != nil {
					errs++
					t.Errorf("concurrent RateLimitCtx on %s: %v", addr, err)
				} else if !limited {
					allowed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	out = append(out, fmt.Sprintf("concurrent: %d of 12 allowed, %d errors", allowed, errs))
	return out
}

// TestThrottledGoRedisStore: the same calls through throttled's GCRA limiter and its
// go-redis store on redis-server and on ratchet give the same lines.
func TestThrottledGoRedisStore(t *testing.T) {
	t.Parallel()
	want := throttledRun(t, startRedisServer(t))
	got := throttledRun(t, start(t, "--data-dir", "").Addr)
	if len(want) != len(got) {
		t.Fatalf("%d lines on redis-server, %d on ratchet:\n%q\n%q", len(want), len(got), want, got)
	}
	for i := range want {
		if want[i] != got[i] {
			t.Errorf("line %d:\n redis-server: %s\n ratchet:      %s", i, want[i], got[i])
		}
	}
	t.Logf("%d lines equal:\n%s", len(want), strings.Join(want, "\n"))
}
