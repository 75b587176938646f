package integration

// The real ulule/limiter (v3.11.2, from the Go module proxy; its Redis store loads its
// incr and peek scripts with SCRIPT LOAD and runs them with EVALSHA) against the binary
// and against redis-server running the Lua, decision by decision.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"
)

// TestUluleLimiter: the same calls (Get, Peek, Increment, Reset on a 5-per-minute rate)
// through ulule/limiter's Redis store on Ratchet and on redis-server give the same
// Limit, Remaining and Reached; Reset (the window end, whole seconds) within 2 s.
func TestUluleLimiter(t *testing.T) {
	ctx := context.Background()
	run := func(addr string) []string {
		c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		store, err := sredis.NewStoreWithOptions(c, limiter.StoreOptions{Prefix: "limiter", MaxRetry: 1})
		if err != nil {
			t.Fatalf("NewStore on %s (SCRIPT LOAD of its two scripts): %v", addr, err)
		}
		rate := limiter.Rate{Period: time.Minute, Limit: 5}
		l := limiter.New(store, rate)
		var out []string
		note := func(op string, lc limiter.Context, err error) {
			if err != nil {
				t.Fatalf("%s on %s: %v", op, addr, err)
			}
			out = append(out, fmt.Sprintf("%s limit=%d remaining=%d reached=%v reset=%d", op, lc.Limit, lc.Remaining, lc.Reached, lc.Reset))
		}
		for i := range 7 {
			lc, err := l.Get(ctx, "ip:1")
			note(fmt.Sprint("get", i), lc, err)
		}
		lc, err := l.Peek(ctx, "ip:1")
		note("peek", lc, err)
		lc, err = l.Peek(ctx, "ip:none")
		note("peek-missing", lc, err)
		lc, err = l.Increment(ctx, "ip:2", 3)
		note("increment3", lc, err)
		lc, err = l.Increment(ctx, "ip:2", 3)
		note("increment3-again", lc, err)
		lc, err = l.Reset(ctx, "ip:1")
		note("reset", lc, err)
		lc, err = l.Get(ctx, "ip:1")
		note("get-after-reset", lc, err)
		return out
	}
	redisLines := run(startRedisServer(t))
	ratchetLines := run(start(t).Addr)
	if len(redisLines) != len(ratchetLines) {
		t.Fatalf("%d calls on redis-server, %d on ratchet", len(redisLines), len(ratchetLines))
	}
	for i := range redisLines {
		var op, rOp string
		var lim, rem, rLim, rRem int64
		var reached, rReached bool
		var reset, rReset int64
		fmt.Sscanf(redisLines[i], "%s limit=%d remaining=%d reached=%t reset=%d", &op, &lim, &rem, &reached, &reset)
		fmt.Sscanf(ratchetLines[i], "%s limit=%d remaining=%d reached=%t reset=%d", &rOp, &rLim, &rRem, &rReached, &rReset)
		if op != rOp || lim != rLim || rem != rRem || reached != rReached || reset-rReset > 2 || rReset-reset > 2 {
			t.Errorf("call %d:\n redis-server: %s\n ratchet:      %s", i, redisLines[i], ratchetLines[i])
		}
	}
	t.Logf("%d calls equal; e.g. %s / %s", len(redisLines), ratchetLines[5], ratchetLines[6])
}
