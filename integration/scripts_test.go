package integration

// The real go-redis/redis_rate (v10.0.1, from the Go module proxy) against the binary and,
// when redis-server is installed, the same steps against redis-server running the Lua
// script, decision by decision (README "Scripts of other limiters").

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/ratchet/ratchet/internal/testwait"
)

// startRedisServer runs redis-server on a free loopback port without persistence and
// returns its address. It skips t (fails it under RATCHET_CI=1) when redis-server is not
// installed.
func startRedisServer(t *testing.T, extra ...string) string {
	t.Helper()
	server := requireTool(t, "redis-server", "apt-get install -y redis-server")
	addr := loopback(freePort(t))
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.Command(server, append([]string{"--bind", host, "--port", port, "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, extra...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testwait.UntilTrue(t, 10*time.Second, "redis-server to answer PING", func() bool { return pingOnce(addr, false) })
	return addr
}

// rateStep is one call of the scenario.
type rateStep struct {
	op    string // allow, allowN, atMost, reset, sleep (n ms)
	key   string
	limit redis_rate.Limit
	n     int
}

// rateScenario exercises allowN and allowAtMost: bursts to the limit and past it, costs
// above one, a cost-0 peek, a cost larger than the burst, resets, and a limit with a
// burst different from its rate. Minute and hour periods keep the decisions the same on
// both servers although each step runs on them a little apart.
var rateScenario = func() []rateStep {
	perMin := redis_rate.PerMinute(10)
	burst3 := redis_rate.Limit{Rate: 60, Period: time.Hour, Burst: 3}
	var s []rateStep
	for range 12 {
		s = append(s, rateStep{op: "allow", key: "a", limit: perMin})
	}
	s = append(s,
		rateStep{op: "allowN", key: "a", limit: perMin, n: 0},
		rateStep{op: "reset", key: "a"},
		rateStep{op: "allowN", key: "a", limit: perMin, n: 4},
		rateStep{op: "allowN", key: "a", limit: perMin, n: 7},
		rateStep{op: "allowN", key: "a", limit: perMin, n: 6},
		rateStep{op: "allowN", key: "a", limit: perMin, n: 11},
		rateStep{op: "atMost", key: "m", limit: perMin, n: 4},
		rateStep{op: "atMost", key: "m", limit: perMin, n: 100},
		rateStep{op: "atMost", key: "m", limit: perMin, n: 1},
		rateStep{op: "allowN", key: "p", limit: perMin, n: 0},
	)
	for range 5 {
		s = append(s, rateStep{op: "allow", key: "b", limit: burst3})
	}
	s = append(s, rateStep{op: "atMost", key: "b", limit: burst3, n: 2}, rateStep{op: "reset", key: "b"},
		rateStep{op: "atMost", key: "b", limit: burst3, n: 2}, rateStep{op: "allow", key: "b", limit: burst3})
	// One token per second: 1.5 s after two calls, remaining is 0.5 (0 by Redis's integer
	// conversion of the Lua number: v9.0 rounded it to 1), half a second from either edge.
	perSec := redis_rate.Limit{Rate: 2, Period: 2 * time.Second, Burst: 2}
	s = append(s, rateStep{op: "allow", key: "s", limit: perSec}, rateStep{op: "allow", key: "s", limit: perSec},
		rateStep{op: "sleep", n: 1500}, rateStep{op: "allow", key: "s", limit: perSec},
		rateStep{op: "allow", key: "s", limit: perSec})
	return s
}()

func (st rateStep) run(ctx context.Context, l *redis_rate.Limiter, prefix string) (*redis_rate.Result, error) {
	key := prefix + st.key
	switch st.op {
	case "allow":
		return l.Allow(ctx, key, st.limit)
	case "allowN":
		return l.AllowN(ctx, key, st.limit, st.n)
	case "atMost":
		return l.AllowAtMost(ctx, key, st.limit, st.n)
	case "sleep":
		time.Sleep(time.Duration(st.n) * time.Millisecond)
		return nil, nil
	default:
		return nil, l.Reset(ctx, key)
	}
}

func (st rateStep) String() string {
	return fmt.Sprintf("%s(%s, %v, %d)", st.op, st.key, st.limit, st.n)
}

// TestRedisRateLibrary runs rateScenario with the real redis_rate against ratchet, in RESP2
// and RESP3, and checks the decisions a GCRA of those limits must give; against
// redis-server (when installed) it compares every decision: Allowed and Remaining equal,
// RetryAfter and ResetAfter within 250 ms. The TAT key reads the same on both.
func TestRedisRateLibrary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := start(t, "--data-dir", "")
	var redisAddr string
	if _, err := exec.LookPath("redis-server"); err == nil {
		redisAddr = startRedisServer(t)
	} else {
		missingTool(t, "redis-server is not installed, so redis_rate's decisions are not compared with Redis's",
			"apt-get install -y redis-server")
	}
	for _, proto := range []int{2, 3} {
		prefix := "p" + strconv.Itoa(proto) + ":"
		rc := p.client(t, &redis.Options{Protocol: proto})
		lim := redis_rate.NewLimiter(rc)
		var ref *redis_rate.Limiter
		var refClient *redis.Client
		if redisAddr != "" {
			refClient = redis.NewClient(&redis.Options{Addr: redisAddr, Protocol: proto, MaxRetries: -1})
			t.Cleanup(func() { _ = refClient.Close() })
			ref = redis_rate.NewLimiter(refClient)
		}
		allowedA := 0
		var last []*redis_rate.Result
		for i, st := range rateScenario {
			got, err := st.run(ctx, lim, prefix)
			if err != nil {
				t.Fatalf("RESP%d step %d %v on ratchet: %v", proto, i, st, err)
			}
			if st.op == "allow" && st.key == "a" && got.Allowed == 1 {
				allowedA++
			}
			if st.key == "s" {
				last = append(last, got)
			}
			if ref == nil || st.op == "sleep" {
				continue
			}
			want, err := st.run(ctx, ref, prefix)
			if err != nil {
				t.Fatalf("RESP%d step %d %v on redis-server: %v", proto, i, st, err)
			}
			if got == nil || want == nil {
				continue // reset
			}
			if got.Allowed != want.Allowed || got.Remaining != want.Remaining ||
				!near(got.RetryAfter, want.RetryAfter) || !near(got.ResetAfter, want.ResetAfter) {
				t.Errorf("RESP%d step %d %v:\nratchet      %+v\nredis-server %+v", proto, i, st, *got, *want)
			}
		}
		// One token per second, 1.5 s on: allowed with 0 left (0.5 truncated), then refused.
		if len(last) != 4 || last[2].Allowed != 1 || last[2].Remaining != 0 || last[3].Allowed != 0 {
			t.Errorf("RESP%d: one token per second after 1.5 s: %+v", proto, last)
		}
		// PerMinute(10): ten of the twelve first calls pass, whatever server runs them.
		if allowedA != 10 {
			t.Errorf("RESP%d: %d of 12 calls allowed at 10/min; want 10", proto, allowedA)
		}
		tat, err := rc.Get(ctx, "rate:"+prefix+"a").Float64()
		if err != nil {
			t.Fatalf("RESP%d GET rate:%sa: %v", proto, prefix, err)
		}
		now := float64(time.Now().UnixMicro())/1e6 - 1483228800
		if tat < now || tat > now+61 {
			t.Errorf("RESP%d TAT %f is not within a minute after now %f (seconds since 2017)", proto, tat, now)
		}
		if refClient != nil {
			refTAT, err := refClient.Get(ctx, "rate:"+prefix+"a").Float64()
			if err != nil || refTAT-tat > 1 || tat-refTAT > 1 {
				t.Errorf("RESP%d TAT on redis-server %f (%v), on ratchet %f", proto, refTAT, err, tat)
			}
		}
	}
}

// near reports whether two durations of redis_rate's results agree: equal when either is
// -1 (none), else within 250 ms (the servers ran the step a little apart).
func near(a, b time.Duration) bool {
	if a == -1 || b == -1 {
		return a == b
	}
	d := a - b
	return d < 250*time.Millisecond && d > -250*time.Millisecond
}

// TestScriptsNoScript: the replies a client sees for scripts Ratchet has no native path
// for (the interpreter runs them), and EVALSHA of a known SHA1 without SCRIPT LOAD (what
// go-redis's Script.Run sends first).
func TestScriptsNoScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := start(t, "--data-dir", "")
	c := p.client(t, nil)
	err := c.EvalSha(ctx, "0000000000000000000000000000000000000000", nil).Err()
	if err == nil || err.Error() != "NOSCRIPT No matching script. Please use EVAL." {
		t.Errorf("EVALSHA unknown: %v", err)
	}
	if err := c.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{"k"}).Err(); err != redis.Nil {
		t.Errorf("EVAL of GET of a missing key: %v, want redis.Nil", err)
	}
	if sha, err := c.ScriptLoad(ctx, "return 1").Result(); err != nil || sha != "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" {
		t.Errorf("SCRIPT LOAD return 1: %q, %v", sha, err)
	}
	const allowN = "f52a5b566060d79fd321d695df55bc918339c4aa"
	v, err := c.EvalSha(ctx, allowN, []string{"rate:x"}, 5, 5, 1, 1).Slice()
	if err != nil || len(v) != 4 {
		t.Fatalf("EVALSHA allowN: %v %v", v, err)
	}
	if v[0] != int64(1) || v[1] != int64(4) || v[2] != "-1" {
		t.Errorf("EVALSHA allowN: %#v", v)
	}
	ex, err := c.ScriptExists(ctx, allowN, "0000000000000000000000000000000000000000").Result()
	if err != nil || len(ex) != 2 || !ex[0] || ex[1] {
		t.Errorf("SCRIPT EXISTS: %v %v", ex, err)
	}
	if err := c.Do(ctx, "SCRIPT", "FLUSH").Err(); err != nil {
		t.Errorf("SCRIPT FLUSH: %v", err)
	}
	if err := c.Del(ctx, "rate:x").Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Errorf("DEL: %v", err)
	}
}
